//! Assembles a runnable team from a [`Config`]: each agent's tools, its tool stack (gates) and
//! its turn stack (layers), over one model service.
//!
//! ```
//! use loopward::{config::Config, team};
//! use loopward_runner::model::{fake::{FakeModel, Script}, BoxModelService};
//! let cfg = Config::parse("t.toml", r#"
//!     [run]
//!     first = "solo"
//!     [[agent]]
//!     name = "solo"
//!     tools = ["write_file"]
//! "#).unwrap();
//! let dir = tempfile::tempdir().unwrap();
//! let model = BoxModelService::new(FakeModel::new(Script::default()));
//! let runner = team::build(&cfg, dir.path(), model, team::Options::default()).unwrap();
//! assert_eq!(runner.team().len(), 1);
//! ```

use crate::config::Config;
use crate::state::Custody;
use anyhow::{Context, Result};
use loopward_core::{AgentId, ToolName};
use loopward_runner::gates::{ControlFiles, OverrideStore, Policy, PolicyLayer};
use loopward_runner::inbox::HumanInbox;
use loopward_runner::layers::classjump::ClassJump;
use loopward_runner::layers::stack::Stack;
use loopward_runner::layers::stopgate::{Approver, StopGates};
use loopward_runner::model::BoxModelService;
use loopward_runner::stop::StopRequests;
use loopward_runner::tool::{BoxToolService, ToolExecutor, ToolSet};
use loopward_runner::tools::{EditFile, HandoffTool, ListDir, ReadFile, Say, Shell, WriteFile};
use loopward_runner::{BoxTurnService, Clock, LlmAgent, Runner, SystemClock, Workspace};
use std::path::Path;
use std::sync::Arc;

/// What the caller decides beyond the config.
#[derive(Clone)]
pub struct Options {
    /// The clock events are stamped with.
    pub clock: Arc<dyn Clock>,
    /// The config file, workspace-relative (`""` when it lies outside the workspace); a control
    /// file no agent may write.
    pub config_file: String,
    /// Who answers `interactive` stop-gates (none: they deny).
    pub approver: Option<Arc<dyn Approver>>,
    /// The model's name, to find its `[prices.<model>]` (default `fake`).
    pub model_name: String,
    /// The innermost tool service (default: [`ToolExecutor`], which runs the tool). `replay`
    /// passes one that returns the recorded results and runs nothing.
    pub executor: Option<BoxToolService>,
    /// A durable-execution engine the runs execute on (none: runs execute in this process).
    pub durable: Option<Arc<dyn Durable>>,
    /// Where overrides and stop-gate approvals are kept, sealed under the ledger key (none: the
    /// workspace's keyless `.loopward/` stores, for embedding and tests).
    pub custody: Option<Custody>,
    /// Files on the host loopward reads or writes for the run (the fake script, a key file:
    /// [`crate::backend::host_files`]); those inside the workspace are control files no agent
    /// may write, with its tools or its commands.
    pub host_files: Vec<std::path::PathBuf>,
    /// Builds the coding-CLI agents (`kind = "claude-code"`, `"codex"`, `"gemini"`; the binary knows the client and its own
    /// path, for the hook; `replay` builds them over the recorded sessions). None: such an
    /// agent is refused when the team is built.
    pub cli_agents: Option<Arc<dyn CliAgents>>,
    /// Where people's messages to running runs wait (default: the workspace's
    /// `.loopward/inbox/`, which `loopward say` writes). `replay` passes the recorded ones.
    pub inbox: Option<HumanInbox>,
    /// Where a person's requests to stop runs wait (default: the custody's `stops/`, which
    /// `loopward serve` writes; none without custody). `replay` passes the recorded ones.
    pub stops: Option<StopRequests>,
    /// What shell commands may read and the environment they start with (none: the
    /// workspace and system folders, `PATH` only; see [`crate::contain::reach`]).
    pub reach: Option<loopward_runner::sandbox::Reach>,
}

/// Builds a coding-CLI agent (`kind = "claude-code"`, `"codex"`, `"gemini"`) of the config (see [`Options::cli_agents`]); the
/// team puts its class-jump tracker and its turn layers around it.
pub trait CliAgents: Send + Sync {
    /// The agent `agent` is, before its class-jump tracker and turn layers.
    fn agent(
        &self,
        agent: &crate::config::AgentConfig,
    ) -> Result<loopward_runner::cli_agent::CliAgentBuilder>;
}

/// Where a durable-execution engine (such as `loopward_restate::Restate`) hooks into a team: it
/// journals each model call and each tool call, and answers `interactive` stop-gates.
pub trait Durable: Send + Sync + 'static {
    /// Wraps the model stack between the budget meter and the rate limit
    /// ([`Stack::model_step`]).
    fn model_step(&self, model: BoxModelService) -> BoxModelService;
    /// Wraps each agent's whole tool stack, outside the policy gates.
    fn tool_step(&self, tools: BoxToolService) -> BoxToolService;
    /// [`Durable::tool_step`], knowing the team's stop-gates, so an engine can ask their
    /// `interactive` tool gates outside the tool's step (default: `tool_step`).
    fn gated_tool_step(&self, tools: BoxToolService, gates: &StopGates) -> BoxToolService {
        let _ = gates;
        self.tool_step(tools)
    }
    /// Who answers `interactive` stop-gates when the caller names no approver.
    fn approver(&self) -> Option<Arc<dyn Approver>>;
}

impl Default for Options {
    fn default() -> Self {
        Self {
            clock: Arc::new(SystemClock),
            config_file: crate::config::CONFIG_FILE.into(),
            approver: None,
            model_name: "fake".into(),
            executor: None,
            durable: None,
            custody: None,
            host_files: Vec::new(),
            inbox: None,
            stops: None,
            cli_agents: None,
            reach: None,
        }
    }
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options").finish_non_exhaustive()
    }
}

/// The named built-in tools, with `handoff` offering `team` (pass the agents other than the
/// caller), `report_attempt` reporting to the class-jump tracker and `say` speaking to the
/// people watching the run.
pub fn tool_set(names: &[ToolName], team: &[AgentId], class_jump: Option<&ClassJump>) -> ToolSet {
    let mut set = ToolSet::new();
    for n in names {
        set = match n.as_str() {
            "read_file" => set.with(ReadFile),
            "write_file" => set.with(WriteFile),
            "edit_file" => set.with(EditFile),
            "list_dir" => set.with(ListDir),
            "shell" => set.with(Shell::default()),
            "handoff" => set.with(HandoffTool::new(team.to_vec())),
            "say" => set.with(Say),
            "report_attempt" => match class_jump {
                Some(cj) => set.with(cj.tool()),
                None => set, // refused at load: report_attempt needs [class_jump]
            },
            _ => set, // unreachable: the config refuses unknown tools
        };
    }
    set
}

/// Builds the runner for `cfg` acting in `workspace`, every agent talking to `model`.
///
/// Each agent's stacks, outermost first: turn — the layers' turn stack (caps, stop-gates,
/// budget, class-jump, timeout) around the agent; tool — the policy gates (control files,
/// territories with overrides, sprawl, review, one handoff, shell watch), then the layers' tool
/// stack (repeat, stop-gates, timeout) around the executor; model — the layers' model stack
/// (budget meter, rate limits, timeout) around the backend. Territory decisions come first, so
/// nobody is asked to approve a call the policy denies.
pub fn build(
    cfg: &Config,
    workspace: &Path,
    model: BoxModelService,
    opts: Options,
) -> Result<Runner> {
    let ws = Workspace::new(workspace)
        .with_context(|| format!("cannot use {} as the workspace", workspace.display()))?;
    let team = cfg.team();
    let control = ControlFiles::new(&opts.config_file, &cfg.run.runs_dir.to_string_lossy())
        .with_host_files(&ws, &opts.host_files);
    let mut policy = Policy::with_control(&cfg.policy(), ws.clone(), control)?;
    let mut stack = Stack::new(&cfg.layers())?;
    if let Some(c) = &opts.custody {
        // loopward's state (keys, sealed stores) is neither writable nor readable to a
        // sandboxed command, this project's nor any other's: the kernel refuses both.
        policy = policy
            .with_overrides(c.overrides()?)
            .with_unreadable(c.unreadable().to_vec());
        stack = stack.with_approvals(c.approvals()?);
    }
    if let Some(reach) = &opts.reach {
        policy = policy.with_reach(reach.clone());
    }
    let durable = opts.durable.clone();
    if let Some(a) = opts
        .approver
        .clone()
        .or_else(|| durable.as_ref().and_then(|d| d.approver()))
    {
        stack = stack.with_approver(a);
    }
    let tool_stack = PolicyLayer::new(policy).wrap(
        stack.tools(
            opts.executor
                .clone()
                .unwrap_or_else(|| BoxToolService::new(ToolExecutor)),
        ),
    );
    let (model, tool_stack) = match &durable {
        Some(d) => (
            stack.model_step(model, |m| d.model_step(m)),
            d.gated_tool_step(tool_stack, stack.gates()),
        ),
        None => (stack.model(model), tool_stack),
    };
    // The caps layer ends runs at its own bound (plus a wrap-up turn); the runner's is a backstop.
    let inbox = match (&opts.inbox, &opts.custody) {
        (Some(inbox), _) => inbox.clone(),
        (None, Some(c)) => c.inbox(ws.root())?,
        (None, None) => HumanInbox::for_workspace(ws.root()),
    };
    let mut runner = Runner::builder(ws.clone())
        .clock(opts.clock.clone())
        .inbox(inbox)
        .max_turns(cfg.limits.turns_per_run.saturating_add(1));
    // A person's kill switch (`loopward serve`) reaches runs kept under custody only.
    let stops = match (&opts.stops, &opts.custody) {
        (Some(s), _) => Some(s.clone()),
        (None, Some(c)) => Some(c.stops()?),
        (None, None) => None,
    };
    if let Some(stops) = stops {
        runner = runner.stops(stops);
    }
    for a in &cfg.agents {
        if a.kind.is_cli() {
            let Some(cli) = &opts.cli_agents else {
                anyhow::bail!(
                    "agent {} is a {} agent, and nothing here builds one: run the team with the `loopward` binary, or pass team::Options::cli_agents",
                    a.name,
                    a.kind.name()
                );
            };
            let mut agent = cli.agent(a)?;
            if let Some(cj) = stack.class_jump() {
                agent = agent.class_jump(cj.clone());
            }
            if !a.tools.is_empty() {
                // loopward's own tools, which its sessions call over MCP, through the same
                // gates and tool layers as a model agent's calls.
                if !agent.has_mcp_server() {
                    anyhow::bail!(
                        "agent {} lists tools ({}) for its sessions, and nothing here serves them over MCP: run the team with the `loopward` binary, or give CliAgentBuilder::mcp_server",
                        a.name,
                        a.tools.join(", ")
                    );
                }
                let others: Vec<AgentId> = team.iter().filter(|n| **n != a.name).cloned().collect();
                agent = agent.loop_tools(
                    tool_set(&a.tools, &others, stack.class_jump()),
                    tool_stack.clone(),
                );
            }
            runner = runner.agent(
                a.name.clone(),
                stack.turn(BoxTurnService::new(agent.build())),
            )?;
            continue;
        }
        let steps = a
            .max_steps
            .map_or(stack.steps_per_turn(), |n| n.min(stack.steps_per_turn()));
        // The handoff tool offers everyone but the caller (handing off to oneself is refused).
        let others: Vec<AgentId> = team.iter().filter(|n| **n != a.name).cloned().collect();
        let mut agent = LlmAgent::builder(a.name.clone(), model.clone())
            .system(&a.role)
            .tools(tool_set(&a.tools, &others, stack.class_jump()))
            .tool_stack(tool_stack.clone())
            .max_steps(steps);
        if let Some(n) = cfg.backend.max_tokens {
            agent = agent.max_tokens(n);
        }
        if let Some(p) = price(cfg, &opts.model_name) {
            agent = agent.price(p);
        }
        runner = runner.agent(
            a.name.clone(),
            stack.turn(BoxTurnService::new(agent.build())),
        )?;
    }
    Ok(runner.build()?)
}

/// The price of `model`: its `[prices.<model>]`, or the only price the config has.
fn price(cfg: &Config, model: &str) -> Option<loopward_core::Price> {
    match cfg.prices.get(model) {
        Some(p) => Some((*p).into()),
        None if cfg.prices.len() == 1 => cfg.prices.values().next().map(|p| (*p).into()),
        None => None,
    }
}

/// Whether `agent` may be granted an override under the config at `config_path`: an
/// `[[agent]]` of the team, or (`subagent`) a Claude Code subagent acting under its own name.
/// `loopward override grant` and the console ask the same question.
pub fn check_grantee(cfg: &Config, config_path: &Path, agent: &str, subagent: bool) -> Result<()> {
    let team: Vec<&str> = cfg.agents.iter().map(|a| a.name.as_str()).collect();
    if !subagent && !team.contains(&agent) {
        anyhow::bail!(
            "{agent} is not an [[agent]] in {} (the team: {}); nothing was granted. For a Claude Code subagent, which acts under its own name, pass --subagent",
            config_path.display(),
            team.join(", ")
        );
    }
    Ok(())
}

/// Grants a one-shot override, sealed in `custody`'s store (none: the workspace's keyless
/// `.loopward/overrides/`), at most `max_ttl`; returns the sentinel's id.
#[allow(clippy::too_many_arguments)]
pub fn grant_override(
    workspace: &Path,
    custody: Option<&Custody>,
    agent: &str,
    path: &str,
    reason: &str,
    ttl: std::time::Duration,
    max_ttl: std::time::Duration,
    clock: &dyn Clock,
) -> Result<String> {
    let ws = Workspace::new(workspace)
        .with_context(|| format!("cannot use {} as the workspace", workspace.display()))?;
    let agent = AgentId::new(agent)?;
    let target = ws.resolve(path)?;
    let store = match custody {
        Some(c) => c.overrides()?,
        None => OverrideStore::for_workspace(&ws),
    }
    .max_ttl(max_ttl);
    Ok(store.grant(&agent, &target, reason, ttl, clock)?.id)
}

/// A governed team loaded from a `loopward.toml`: the config, its workspace and its backend,
/// ready to [`build`](Team::build) into a [`Runner`] with every configured concern on.
///
/// ```
/// # fn main() -> anyhow::Result<()> {
/// # let dir = tempfile::tempdir()?;
/// # std::fs::write(dir.path().join("loopward.toml"), r#"
/// #     [run]
/// #     first = "solo"
/// #     [backend]
/// #     script = "script.toml"
/// #     [[agent]]
/// #     name = "solo"
/// #     tools = ["write_file"]
/// # "#)?;
/// # std::fs::write(dir.path().join("script.toml"), "[[agents.solo]]\ntext = \"done\"\n")?;
/// let runner = loopward::Team::from_config(dir.path().join("loopward.toml"))?.build()?;
/// assert_eq!(runner.team().len(), 1);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Team {
    config: Config,
    config_path: std::path::PathBuf,
    choice: crate::backend::Choice,
    model: Option<BoxModelService>,
    options: Options,
}

impl Team {
    /// Loads and checks `path` (a `loopward.toml`); the workspace is the config's
    /// `run.workspace`, resolved against the config's folder.
    pub fn from_config(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let config = Config::load(path)?;
        let config_file = path
            .file_name()
            .map_or(crate::config::CONFIG_FILE.into(), |n| {
                n.to_string_lossy().into_owned()
            });
        Ok(Self {
            config,
            config_path: path.to_path_buf(),
            choice: crate::backend::Choice::default(),
            model: None,
            options: Options {
                config_file,
                ..Options::default()
            },
        })
    }

    /// The loaded config.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Talk to `model` instead of the backend the config names.
    pub fn model(mut self, model: BoxModelService) -> Self {
        self.model = Some(model);
        self
    }

    /// Where the backend finds API keys (`backend.api_key_env`); the library reads no
    /// environment itself, so pass `|name| std::env::var(name).ok()` to use the process's.
    pub fn env(mut self, lookup: crate::backend::EnvLookup) -> Self {
        self.choice.env = Some(lookup);
        self
    }

    /// Who answers `interactive` stop-gates (none: they deny).
    pub fn approver(mut self, approver: Arc<dyn Approver>) -> Self {
        self.options.approver = Some(approver);
        self
    }

    /// Runs execute on a durable-execution engine: one line moves a team to Restate,
    /// `.durable(Arc::new(loopward_restate::Restate))`.
    pub fn durable(mut self, engine: Arc<dyn Durable>) -> Self {
        self.options.durable = Some(engine);
        self
    }

    /// Where the evidence is kept: the state directory and the ledger key (default: the
    /// config's `[state] dir`, else the state directory under `$XDG_STATE_HOME` or
    /// `~/.local/state` as found through [`env`](Self::env)).
    pub fn custody(mut self, custody: Custody) -> Self {
        self.options.custody = Some(custody);
        self
    }

    /// The custody given, or the one the config and the environment lookup find (its first key
    /// created when there is none); `None` when there is no way to find a state directory. A
    /// Restate worker keys its runs' ledgers with it (`LoopwardRunService::keyed`).
    pub fn find_custody(&self) -> Result<Option<Custody>> {
        if let Some(c) = &self.options.custody {
            return Ok(Some(c.clone()));
        }
        let base = self.choice.env.and_then(crate::state::state_base);
        if base.is_none() && self.config.state.dir.is_none() {
            return Ok(None);
        }
        Custody::open(&self.config, &self.config_path, base.as_deref()).map(Some)
    }

    /// The clock events are stamped with (default: the system clock).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.options.clock = clock;
        self
    }

    /// Runs `task` to the end as a new run: its ledger in the config's runs folder (with a copy
    /// of the config, for `loopward replay`), started by the config's first agent, finished and
    /// anchored afterwards. The ledger is chained under the key of loopward's state directory
    /// (created on first use), so it needs one: see [`custody`](Self::custody).
    ///
    /// The task is a person's words ([`HumanWords`](loopward_core::HumanWords), made by
    /// [`Person::says`](loopward_core::Person::says)): the application that talks to the person
    /// makes them.
    pub async fn run(
        mut self,
        task: loopward_core::HumanWords,
    ) -> Result<loopward_runner::RunReport> {
        let custody = self.find_custody()?.with_context(|| {
            format!(
                "no state directory to keep the ledger key in: give the team an environment lookup (Team::env) so $XDG_STATE_HOME or $HOME is used, a Custody (Team::custody), or set [state] dir in {}",
                self.config_path.display()
            )
        })?;
        self.options.custody = Some(custody.clone());
        let workspace = self.config.workspace_dir(&self.config_path);
        let runs_dir = workspace.join(&self.config.run.runs_dir);
        let first = self.config.run.first.clone();
        let clock = self.options.clock.clone();
        let config_path = self.config_path.clone();
        // Secrets are masked in every record before it is hashed.
        let masker = crate::contain::masker(&self.config, &config_path, self.choice.env)?;
        let runner = self.build()?;
        let id = crate::ledger::new_run_id(&*clock);
        let mut opts = custody.ledger_options(&runs_dir, clock)?;
        opts.masker = masker;
        let ledger = crate::ledger::create(&runs_dir, &id, opts)?;
        let copy = ledger.run_dir().join(crate::config::CONFIG_FILE);
        std::fs::copy(&config_path, &copy)
            .with_context(|| format!("cannot copy the config into {}", copy.display()))?;
        let report = runner.run(ledger.run_spec(task, first)).await;
        ledger.finish()?;
        Ok(report)
    }

    /// Builds the [`Runner`]: the config's backend (or the model given), every agent with its
    /// tools, policy gates and layers (see [`build`]).
    pub fn build(self) -> Result<Runner> {
        let custody = self.find_custody()?;
        let dir = self
            .config_path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let workspace = self.config.workspace_dir(&self.config_path);
        let model = match self.model {
            Some(m) => m,
            None => crate::backend::model(&self.config, dir, &self.choice)?,
        };
        let options = Options {
            model_name: crate::backend::model_name(&self.config, &self.choice),
            host_files: crate::backend::host_files(&self.config, dir, &self.choice),
            custody,
            reach: self
                .options
                .reach
                .clone()
                .or_else(|| Some(crate::contain::reach(&self.config, self.choice.env))),
            ..self.options
        };
        build(&self.config, &workspace, model, options)
    }
}
