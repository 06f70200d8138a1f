//! The gate sections of `loopward.toml`: `[[territory]]`, `[gates.sprawl]`, `[[gates.review]]`,
//! `[gates.shell]` and `[overrides]`, parsed strictly and validated before anything runs.
//!
//! ```
//! use loopward_runner::gates::PolicyConfig;
//! let cfg = PolicyConfig::from_toml(r#"
//!     [[territory]]
//!     paths = ["plan.md", "plans/**"]
//!     owner = "planner"
//!
//!     [[gates.review]]
//!     from = "builder"
//!     via = "auditor"
//!     when = ["src/**"]
//! "#).unwrap();
//! assert_eq!(cfg.territory.len(), 1);
//! // Unknown keys, bad globs and empty owners are refused with a precise message.
//! let err = PolicyConfig::from_toml("[[territory]]\npaths = [\"src/[\"]\nowner = \"builder\"")
//!     .unwrap_err();
//! assert!(err.to_string().contains("src/["), "{err}");
//! ```

mod globs;
mod sections;

pub(crate) use globs::{
    check_glob, check_territory_globs, glob, is_plain, territory_globs, territory_patterns,
};

use super::source::RuleSource;
use globset::GlobSet;
use loopward_core::{AgentId, GateMode};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The longest a one-shot override may ever live, whatever `[overrides] max_ttl` says.
pub const TTL_CEILING: Duration = Duration::from_secs(24 * 60 * 60);

/// The default `[overrides] max_ttl`.
pub const DEFAULT_MAX_TTL: Duration = Duration::from_secs(15 * 60);

/// The largest sprawl threshold accepted.
pub const MAX_SPRAWL_THRESHOLD: u32 = 100;

/// The gate sections of `loopward.toml`. Embed these fields in a larger config, or parse them
/// alone with [`PolicyConfig::from_toml`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyConfig {
    /// `[[territory]]`: deny-by-default write territories.
    #[serde(default, deserialize_with = "super::source::located_list")]
    pub territory: Vec<TerritoryConfig>,
    /// `[gates]`: the sprawl, review and shell gates.
    #[serde(default)]
    pub gates: GatesConfig,
    /// `[overrides]`: one-shot override settings.
    #[serde(default)]
    pub overrides: OverridesConfig,
    /// `[hooks]`: the tools agent hosts' hooks let run unjudged (left out of the version while
    /// empty, so a config without it keeps the version it had).
    #[serde(
        default,
        deserialize_with = "super::source::located_one",
        skip_serializing_if = "super::HooksConfig::is_empty"
    )]
    pub hooks: super::HooksConfig,
}

/// `[gates]`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GatesConfig {
    /// `[gates.sprawl]` (on by default).
    #[serde(default, deserialize_with = "super::source::located_one")]
    pub sprawl: SprawlConfig,
    /// `[[gates.review]]`.
    #[serde(default, deserialize_with = "super::source::located_list")]
    pub review: Vec<ReviewConfig>,
    /// `[gates.shell]`: how the workspace is watched around shell calls.
    #[serde(default)]
    pub shell: ShellWatchConfig,
}

/// One `[[territory]]`: paths only its owners may write.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TerritoryConfig {
    /// A name for the gate (default: `territory:<owners>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Workspace-relative globs; `*` never crosses `/`; each also covers what lies below it.
    pub paths: Vec<String>,
    /// The owning agent (or use `owners`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// The owning agents.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub owners: Vec<String>,
    /// `enforce` (default) or `advisory`.
    #[serde(default)]
    pub mode: GateMode,
    /// Where it is written (`loopward.toml:12`), when read from a file.
    #[serde(skip)]
    pub source: RuleSource,
}

/// `[gates.sprawl]`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SprawlConfig {
    /// Whether the gate is on (default: true).
    #[serde(default = "yes")]
    pub enabled: bool,
    /// `enforce` (default) or `advisory`.
    #[serde(default)]
    pub mode: GateMode,
    /// The unit of work that triggers the gate (default 3: the third distinct unit).
    #[serde(default = "default_threshold")]
    pub threshold: u32,
    /// Where the plan goes (workspace-relative, default `plan.md`).
    #[serde(default = "default_plan_path")]
    pub plan_path: String,
    /// What the plan's first line must start with (default `# Plan`).
    #[serde(default = "default_marker")]
    pub marker: String,
    /// Sibling rules: each is a list of templates with one `{stem}` in the file name; paths
    /// matching templates of one rule with the same stem are one unit of work.
    #[serde(default = "default_siblings")]
    pub siblings: Vec<Vec<String>>,
    /// Where it is written (`loopward.toml:12`), when read from a file.
    #[serde(skip)]
    pub source: RuleSource,
}

fn yes() -> bool {
    true
}
fn default_threshold() -> u32 {
    3
}
fn default_plan_path() -> String {
    "plan.md".into()
}
fn default_marker() -> String {
    "# Plan".into()
}
fn default_siblings() -> Vec<Vec<String>> {
    vec![vec![
        "src/**/{stem}.rs".into(),
        "tests/**/{stem}.rs".into(),
        "docs/**/{stem}.md".into(),
    ]]
}

impl Default for SprawlConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            mode: GateMode::Enforce,
            threshold: default_threshold(),
            plan_path: default_plan_path(),
            marker: default_marker(),
            siblings: default_siblings(),
            source: RuleSource::default(),
        }
    }
}

/// One `[[gates.review]]`: after `from` changes files matching `when`, it must hand off to `via`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReviewConfig {
    /// A name for the gate (default: `review:<from>-><via>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The agent whose work needs review.
    pub from: String,
    /// The reviewer it must hand off to.
    pub via: String,
    /// Globs of changes that arm the gate; empty arms it on every handoff.
    #[serde(default)]
    pub when: Vec<String>,
    /// `enforce` (default) or `advisory`.
    #[serde(default)]
    pub mode: GateMode,
    /// Only a handoff to this gate's own `via` satisfies it. By default (`false`), when several
    /// review gates on the same `from` are armed, a handoff to the `via` of any of them
    /// satisfies them all. Two exclusive enforcing gates on one `from` with different `via`s
    /// would refuse every handoff once both are armed, so such a config does not load.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub exclusive: bool,
    /// Where it is written (`loopward.toml:12`), when read from a file.
    #[serde(skip)]
    pub source: RuleSource,
}

impl GatesConfig {
    /// Where each of its rules is written: the sprawl gate's, then each review gate's.
    pub fn sources_mut(&mut self) -> impl Iterator<Item = &mut RuleSource> {
        std::iter::once(&mut self.sprawl.source)
            .chain(self.review.iter_mut().map(|r| &mut r.source))
    }
}

/// `[gates.shell]`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShellWatchConfig {
    /// Top-level directories not watched around shell calls (e.g. `target`). They may not
    /// overlap a territory or a control path.
    #[serde(default)]
    pub skip: Vec<String>,
    /// The most bytes of file content one snapshot reads (default 256 MiB): watched files
    /// (territories, control files) first and in full — one that does not fit makes shell calls
    /// fail closed, naming it — then other files while it lasts; the rest are compared by size,
    /// inode and times.
    #[serde(default = "default_snapshot_bytes")]
    pub max_snapshot_bytes: u64,
    /// `"kernel"` (default): every command runs in a kernel sandbox that lets it write only
    /// what its agent may write, and shell is refused where none can be set up. `"watch-only"`:
    /// commands are only watched (compared and reverted afterwards), an explicit opt-out shown
    /// in the banner, the ledger and the report.
    #[serde(default)]
    pub sandbox: crate::sandbox::SandboxMode,
}

fn default_snapshot_bytes() -> u64 {
    256 * 1024 * 1024
}

impl Default for ShellWatchConfig {
    fn default() -> Self {
        Self {
            skip: vec![],
            max_snapshot_bytes: default_snapshot_bytes(),
            sandbox: crate::sandbox::SandboxMode::default(),
        }
    }
}

/// `[overrides]`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OverridesConfig {
    /// The longest TTL a grant may have (`"15m"`, `"1h"`; at most 24h).
    #[serde(default = "default_max_ttl", with = "crate::duration::required")]
    pub max_ttl: Duration,
}

fn default_max_ttl() -> Duration {
    DEFAULT_MAX_TTL
}

impl Default for OverridesConfig {
    fn default() -> Self {
        Self {
            max_ttl: DEFAULT_MAX_TTL,
        }
    }
}

/// Why the gate configuration was refused. Each names the section and the value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The TOML did not parse (unknown keys included).
    #[error("loopward.toml: {0}")]
    Parse(String),
    /// A glob is invalid.
    #[error("{section}: invalid glob {glob:?}: {why}")]
    BadGlob {
        /// Where.
        section: String,
        /// The glob.
        glob: String,
        /// What is wrong.
        why: String,
    },
    /// A section has no owner, no path, a bad agent name, or another invalid value.
    #[error("{section}: {why}")]
    Invalid {
        /// Where.
        section: String,
        /// What is wrong.
        why: String,
    },
    /// Two territories with different owners cover the same path.
    #[error("territories {a} and {b} overlap at {path:?} but have different owners; give each path one set of owners")]
    Overlap {
        /// One territory.
        a: String,
        /// The other.
        b: String,
        /// A path both cover.
        path: String,
    },
}

impl PolicyConfig {
    /// The policy's version: the first 12 hex digits of the SHA-256 of the effective policy (its
    /// JSON, keys in declaration order), so a comment or a reordered key leaves it alone and a
    /// changed rule does not. Hooks record it in their ledgers; `loopward policy explain` shows it.
    ///
    /// ```
    /// use loopward_runner::gates::PolicyConfig;
    /// let a = PolicyConfig::from_toml("[[territory]]\npaths = [\"a/**\"]\nowner = \"x\"").unwrap();
    /// let b = PolicyConfig::from_toml("# note\n[[territory]]\nowner = \"x\"\npaths = [\"a/**\"]").unwrap();
    /// let c = PolicyConfig::from_toml("[[territory]]\npaths = [\"b/**\"]\nowner = \"x\"").unwrap();
    /// assert_eq!(a.version(), b.version());
    /// assert_ne!(a.version(), c.version());
    /// assert_eq!(a.version().len(), 12);
    /// ```
    pub fn version(&self) -> String {
        use sha2::Digest;
        // Serialising plain data cannot fail; an empty text would still hash to a version.
        let bytes = serde_json::to_vec(self).unwrap_or_default();
        hex::encode(&sha2::Sha256::digest(&bytes)[..6])
    }

    /// Parses and validates the gate sections from TOML text (of no file: its rules have no
    /// [`RuleSource`]).
    pub fn from_toml(text: &str) -> Result<Self, ConfigError> {
        Self::parse(None, text)
    }

    /// Like [`PolicyConfig::from_toml`], for the text of the file named `file`: each rule
    /// knows where it is written (`file:line`), and every decision it makes records it.
    pub fn from_toml_in(file: &str, text: &str) -> Result<Self, ConfigError> {
        Self::parse(Some(file), text)
    }

    fn parse(file: Option<&str>, text: &str) -> Result<Self, ConfigError> {
        let mut cfg: Self = toml::from_str(text).map_err(|e| ConfigError::Parse(e.to_string()))?;
        RuleSource::resolve(cfg.sources_mut(), file, text);
        cfg.validate()?;
        Ok(cfg)
    }

    /// Where each of its rules is written: each territory's, then the gates'.
    pub fn sources_mut(&mut self) -> impl Iterator<Item = &mut RuleSource> {
        self.territory
            .iter_mut()
            .map(|t| &mut t.source)
            .chain(self.gates.sources_mut())
            .chain(std::iter::once(&mut self.hooks.source))
    }

    /// Checks every section; the first problem is returned.
    pub fn validate(&self) -> Result<(), ConfigError> {
        // The same checks the policy makes when it compiles the gates, and the gates kept for
        // it: a config checked when it loads compiles its globs once.
        super::Policy::check(self)
    }

    /// Every check but the territories' overlaps, which the policy checks with the glob set it
    /// decides with.
    pub(super) fn validate_but_overlaps(&self) -> Result<(), ConfigError> {
        for (i, t) in self.territory.iter().enumerate() {
            t.validate(&format!("territory[{i}]"))?;
        }
        self.gates.sprawl.validate()?;
        for (i, r) in self.gates.review.iter().enumerate() {
            r.validate(&format!("gates.review[{i}]"))?;
        }
        super::review::check_deadlocks(&self.gates.review)?;
        let ttl = self.overrides.max_ttl;
        if ttl.is_zero() || ttl > TTL_CEILING {
            return Err(ConfigError::Invalid {
                section: "overrides.max_ttl".into(),
                why: format!(
                    "{} must be more than zero and at most \"24h\"",
                    humantime::format_duration(ttl)
                ),
            });
        }
        for (j, s) in self.gates.shell.skip.iter().enumerate() {
            if s.is_empty()
                || s == "."
                || s == ".."
                || s.contains('/')
                || s.contains(['*', '?', '[', '{'])
                || super::ControlFiles::default().covers(s)
            {
                return Err(ConfigError::Invalid {
                    section: format!("gates.shell.skip[{j}]"),
                    why: format!(
                        "{s:?} must be a plain top-level directory name, not a control path"
                    ),
                });
            }
            for (i, t) in self.territory.iter().enumerate() {
                let set = t.compile(&format!("territory[{i}]"))?;
                if set.is_match(s) || set.is_match(format!("{s}/x")) {
                    return Err(ConfigError::Invalid {
                        section: format!("gates.shell.skip[{j}]"),
                        why: format!("{s:?} overlaps territory[{i}]; a territory must be watched"),
                    });
                }
            }
        }
        if self.gates.shell.max_snapshot_bytes == 0 {
            return Err(ConfigError::Invalid {
                section: "gates.shell.max_snapshot_bytes".into(),
                why: "must be more than zero".into(),
            });
        }
        Ok(())
    }
}
