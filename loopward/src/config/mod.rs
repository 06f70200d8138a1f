//! `loopward.toml`: the team, its tools, its backend, prices, territories, gates and limits.
//!
//! Loading is two steps, as in ripgrep: the file is parsed flag-for-flag into serde types that
//! refuse unknown keys, then checked as a whole (names that must exist, globs that must compile,
//! territories that must not overlap with different owners, caps that must be positive). Any
//! problem fails the load with the file, the key and what to do; nothing defaults to allow.
//!
//! ```
//! use loopward::config::Config;
//! let cfg = Config::parse("loopward.toml", r#"
//!     [run]
//!     first = "planner"
//!
//!     [[agent]]
//!     name = "planner"
//!     tools = ["write_file", "handoff"]
//!
//!     [[agent]]
//!     name = "builder"
//!     tools = ["read_file", "write_file"]
//!
//!     [[territory]]
//!     paths = ["plan.md"]
//!     owner = "planner"
//! "#).unwrap();
//! assert_eq!(cfg.agents.len(), 2);
//!
//! let err = Config::parse("loopward.toml", r#"
//!     [run]
//!     first = "planner"
//!     [[agent]]
//!     name = "planner"
//!     tools = ["teleport"]
//! "#).unwrap_err();
//! assert!(err.to_string().contains("agent[0].tools"));
//! assert!(err.to_string().contains("teleport"));
//! ```

mod backend;
mod contain;
mod error;
mod ledger;
mod policy;
mod validate;

pub use backend::{BackendConfig, BackendKind, PriceConfig, ToolChoice};
pub use contain::{EnvConfig, NetConfig, ReadConfig, SecretConfig};
pub use error::ConfigError;
pub use ledger::{ChainKind, LedgerConfig, StateConfig};
pub use policy::{
    BudgetConfig, CapsConfig, ClassJumpConfig, GatesConfig, HooksConfig, LayersConfig,
    OverridesConfig, PolicyConfig, RateConfig, RepeatConfig, ReviewConfig, ShellWatchConfig,
    SprawlConfig, StopGateConfig, TerritoryConfig, TimeoutConfig,
};

use loopward_core::{AgentId, ToolName};
use loopward_runner::gates::RuleSource;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The default config file name.
pub const CONFIG_FILE: &str = "loopward.toml";

/// The step toml's span of a rule adds to a key path (`territory[0].<it>.owner`).
const SPANNED_STEP: &str = ".$__serde_spanned_private_value";

/// The tools an agent may be given, by name.
pub const BUILTIN_TOOLS: &[&str] = &[
    "read_file",
    "write_file",
    "edit_file",
    "list_dir",
    "shell",
    "handoff",
    "report_attempt",
    "say",
];

/// The tools a coding-CLI agent (`claude-code`, `codex`, `gemini`) may list: loopward's own,
/// which its sessions call over MCP (`loopward mcp`); the others are the client's.
pub const LOOP_TOOLS: &[&str] = &["handoff", "report_attempt", "say"];

/// A whole `loopward.toml`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// `[run]`: where runs start and where their ledgers go.
    pub run: RunConfig,
    /// `[[agent]]`: the team, in order.
    #[serde(rename = "agent", default)]
    pub agents: Vec<AgentConfig>,
    /// `[backend]`: which model backend the team talks to.
    #[serde(default)]
    pub backend: BackendConfig,
    /// `[prices.<model>]`: prices per model name, for cost figures and budgets.
    #[serde(default)]
    pub prices: BTreeMap<String, PriceConfig>,
    /// `[[territory]]`: paths only their owners may write.
    #[serde(
        rename = "territory",
        default,
        deserialize_with = "loopward_runner::gates::located_territories"
    )]
    pub territories: Vec<TerritoryConfig>,
    /// `[gates]`: the sprawl gate, review gates and the shell watch.
    #[serde(default)]
    pub gates: GatesConfig,
    /// `[overrides]`: one-shot override settings (the longest TTL).
    #[serde(default)]
    pub overrides: OverridesConfig,
    /// `[limits]`: turns, hops, steps and wall time per run, and what happens at a cap.
    #[serde(default)]
    pub limits: CapsConfig,
    /// `[repeat]`: how often the same tool call may be made in one run.
    #[serde(default)]
    pub repeat: RepeatConfig,
    /// `[[stopgate]]`: points where a person approves (or the run waits).
    #[serde(rename = "stopgate", default)]
    pub stopgates: Vec<StopGateConfig>,
    /// `[rate]`: request and token quotas per backend and per agent.
    #[serde(default)]
    pub rate: RateConfig,
    /// `[budget]`: token and cost budgets per run.
    #[serde(default)]
    pub budget: Option<BudgetConfig>,
    /// `[timeout]`: per model call, tool call and turn.
    #[serde(default)]
    pub timeout: TimeoutConfig,
    /// `[class_jump]`: strategies for failing subtasks (gives agents `report_attempt`).
    #[serde(default)]
    pub class_jump: Option<ClassJumpConfig>,
    /// `[ledger]`: how ledgers are chained (keyed by default) and an optional external witness.
    #[serde(default)]
    pub ledger: LedgerConfig,
    /// `[state]`: where loopward keeps keys, approvals and overrides (outside the workspace).
    #[serde(default)]
    pub state: StateConfig,
    /// `[secrets.NAME]`: credentials masked in every record and never given to commands.
    #[serde(default)]
    pub secrets: BTreeMap<String, SecretConfig>,
    /// `[env]`: the variables sandboxed commands inherit besides the defaults.
    #[serde(default)]
    pub env: EnvConfig,
    /// `[read]`: what sandboxed commands may read besides the workspace and system folders.
    #[serde(default)]
    pub read: ReadConfig,
    /// `[net]`: whether sandboxed commands get a network of their own (the default).
    #[serde(default)]
    pub net: NetConfig,
    /// `[hooks]`: the tools agent hosts' hooks let run unjudged (`allow_tools`).
    #[serde(default, deserialize_with = "loopward_runner::gates::located_hooks")]
    pub hooks: HooksConfig,
}

/// `[run]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunConfig {
    /// The agent that takes the first turn.
    pub first: AgentId,
    /// The task when `loopward run` is given none.
    #[serde(default)]
    pub task: Option<String>,
    /// The workspace agents act in, relative to the config file (default: its folder).
    #[serde(default)]
    pub workspace: Option<PathBuf>,
    /// Where run ledgers go, relative to the workspace (default `runs`).
    #[serde(default = "default_runs_dir")]
    pub runs_dir: PathBuf,
}

fn default_runs_dir() -> PathBuf {
    PathBuf::from("runs")
}

/// `[[agent]]`: one member of the team.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentConfig {
    /// Its name (lowercase letters, digits, `-`, `_`).
    pub name: AgentId,
    /// What it is told about its role (its system prompt).
    #[serde(default)]
    pub role: String,
    /// The tools it may call (names from [`BUILTIN_TOOLS`]); for a coding-CLI agent, whose
    /// other tools are the client's, only [`LOOP_TOOLS`], served to its sessions over MCP.
    #[serde(default)]
    pub tools: Vec<ToolName>,
    /// The most tool calls in one of its turns (default 16).
    #[serde(default)]
    pub max_steps: Option<u32>,
    /// What takes its turns (default `model`).
    #[serde(default)]
    pub kind: AgentKind,
    /// For a coding-CLI agent (`claude-code`, `codex`, `gemini`): the command that says its
    /// work is done (run in the sandbox after each session; its turns go on until it passes).
    #[serde(default)]
    pub verify: Option<String>,
    /// For a coding-CLI agent: the API base its client talks to (Claude Code:
    /// `ANTHROPIC_BASE_URL`; Codex: an OpenAI Responses API, `…/v1`, as a custom provider whose
    /// key is `OPENAI_API_KEY`; Gemini CLI: `GOOGLE_GEMINI_BASE_URL`). Default: the client's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// For a coding-CLI agent: the model its client uses (default: the client's own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The hosts its shell commands may reach, through loopward's egress proxy (names or
    /// addresses; default none).
    #[serde(default)]
    pub net: Vec<String>,
}

/// What takes an agent's turns.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum AgentKind {
    /// The configured backend, calling loopward's tools.
    #[default]
    Model,
    /// One headless Claude Code session a turn, then its `verify` command
    /// (`loopward_runner::cli_agent::CliAgent`; see docs/loop.md).
    ClaudeCode,
    /// One headless Codex session (`codex exec`) a turn, then its `verify` command.
    Codex,
    /// One headless Gemini CLI session a turn, then its `verify` command.
    Gemini,
}

impl AgentKind {
    /// Whether a coding CLI takes its turns (`claude-code`, `codex`, `gemini`).
    pub fn is_cli(self) -> bool {
        !matches!(self, Self::Model)
    }

    /// Its name in `kind = "…"`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Model => "model",
            Self::ClaudeCode => "claude-code",
            Self::Codex => "codex",
            Self::Gemini => "gemini",
        }
    }
}

impl Config {
    /// Reads and checks a config file.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Read {
            file: path.to_path_buf(),
            why: e.to_string(),
        })?;
        Self::parse(path, &text)
    }

    /// Parses and checks config text; `file` is named in errors.
    pub fn parse(file: impl AsRef<Path>, text: &str) -> Result<Self, ConfigError> {
        let file = file.as_ref();
        // Read without the path tracker first (every hook call reads the config, and tracking
        // costs a third of the reading); only a config that fails is read again with it, to
        // name the key of a wrong-typed value (`agent[1].max_steps`), which toml's own message
        // leaves out.
        let mut cfg: Self = match toml::from_str(text) {
            Ok(cfg) => cfg,
            Err(_) => {
                let de = toml::Deserializer::parse(text)
                    .map_err(|e| ConfigError::parse(file, text, "", &e))?;
                serde_path_to_error::deserialize(de).map_err(|e| {
                    // A rule is read with where it is written: the span's own step is not a key.
                    let key = e.path().to_string().replace(SPANNED_STEP, "");
                    ConfigError::parse(file, text, &key, e.inner())
                })?
            }
        };
        // Each rule knows its line, and every decision it makes records `loopward.toml:<line>`.
        let name = file.file_name().map(|n| n.to_string_lossy());
        let rules = cfg
            .territories
            .iter_mut()
            .map(|t| &mut t.source)
            .chain(cfg.gates.sources_mut())
            .chain(std::iter::once(&mut cfg.hooks.source));
        RuleSource::resolve(rules, Some(name.as_deref().unwrap_or(CONFIG_FILE)), text);
        validate::check(&cfg)
            .map_err(|(key, problem, fix)| ConfigError::invalid(file, key, problem, fix))?;
        Ok(cfg)
    }

    /// The gate sections, as the gates module takes them.
    pub fn policy(&self) -> PolicyConfig {
        PolicyConfig {
            territory: self.territories.clone(),
            gates: self.gates.clone(),
            overrides: self.overrides.clone(),
            hooks: self.hooks.clone(),
        }
    }

    /// The layer sections, as the layers module takes them. Prices from `[prices]` fill the
    /// budget's when it has none.
    pub fn layers(&self) -> LayersConfig {
        let budget = self.budget.clone().map(|mut b| {
            if b.prices.is_empty() {
                b.prices = self
                    .prices
                    .iter()
                    .map(|(k, v)| (k.clone(), (*v).into()))
                    .collect();
            }
            b
        });
        LayersConfig {
            limits: self.limits.clone(),
            repeat: self.repeat.clone(),
            stopgate: self.stopgates.clone(),
            rate: self.rate.clone(),
            budget,
            timeout: self.timeout.clone(),
            class_jump: self.class_jump.clone(),
        }
    }

    /// The agent names, in configuration order.
    pub fn team(&self) -> Vec<AgentId> {
        self.agents.iter().map(|a| a.name.clone()).collect()
    }

    /// A path the config names, resolved against the folder of the config file at `config_path`.
    pub fn resolve(config_path: &Path, path: &Path) -> PathBuf {
        let base = config_path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        base.join(path)
    }

    /// The workspace, resolved against the folder of the config file at `config_path`.
    pub fn workspace_dir(&self, config_path: &Path) -> PathBuf {
        let base = config_path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        match &self.run.workspace {
            Some(w) => base.join(w),
            None => base.to_path_buf(),
        }
    }
}

#[cfg(test)]
mod tests;
