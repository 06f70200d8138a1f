//! # loopward-hooks: one policy at every agent host
//!
//! One thin adapter per agent host over `loopward-runner`'s public engine
//! ([`Policy`]) and shell watch
//! ([`ShellWatch`](loopward_runner::gates::ShellWatch)). An adapter owns only its host's
//! protocol — how it learns what an agent is about to touch, where it keeps turn state between
//! calls, how it answers — and decides nothing: every decision and every refusal text is the
//! engine's (`cargo xtask tidy` checks that none is written here).
//!
//! ## Claude Code
//!
//! The same `loopward.toml` territories, overrides and sprawl gate that bind a loopward run also
//! bind a Claude Code session, through Claude Code's hooks. [`handle`] takes one hook event (the
//! JSON Claude Code writes on the hook command's stdin) and returns what the command must print
//! and its exit status; the `loopward hook claude-code` command is a thin wrapper around it.
//!
//! | event | what loopward does |
//! |---|---|
//! | `PreToolUse` `Write`/`Edit`/`MultiEdit`/`NotebookEdit` | control files, territory (with one-shot overrides), sprawl → `allow` (the workspace recorded) or `deny` with what to do instead |
//! | `PreToolUse` `Bash` | wraps the command in `loopward sandbox exec` (`updatedInput`, with no permission decision: Claude Code's own permission mode and rules still decide whether it runs) and records the workspace (denied if it cannot be wrapped or recorded) |
//! | `PreToolUse` `Read`/`NotebookRead`/`LS`/`Grep`/`Glob` | denied when what it would read, every link followed, lies in an unreadable folder (loopward's state), or cannot be judged; else no answer (see [Reads](#reads)) |
//! | `PreToolUse` any other tool | the client's tools that change nothing judged ([`claude_code::QUIET_TOOLS`]) and loopward's own relayed tools (`mcp__loopward__*`; each host's name for them, [`Host::relayed_tool`](loopward_runner::gates::Host::relayed_tool)): no answer; one `[hooks] allow_tools` names: no answer, recorded as allowed with its line; any other: `deny`, naming the pinned client version and that remedy |
//! | `PostToolUse` file tool | records the effect (it counts toward the sprawl gate; a plan written clears it); compares with the record taken at `PreToolUse` and reverts a territory or control file changed through a link swapped in since |
//! | `PostToolUse`/`PostToolUseFailure` `Bash` | compares with the record; judges each changed path like a write (overrides honoured), reverts what the caller may not change, and tells the model |
//! | `UserPromptSubmit` | a person spoke: a new turn (the only event that starts one) |
//! | anything else | recorded, no answer |
//!
//! The caller is the event's `agent_type` (a subagent's name, lowercased, other characters
//! outside `[a-z0-9_-]` made `-`), or the main agent
//! (`root` unless [`HookContextBuilder::main_agent`] says otherwise). Turn state, `Bash`
//! snapshots and saved contents live under `<state dir>/sessions/<session>/` when the hook is
//! given loopward's state directory ([`HookContextBuilder::state_dir`]; the CLI always does),
//! else under `<project>/.loopward/sessions/<session>/` ([`session`]); every decision, allow and deny, goes
//! to the session's ledger `runs/claude-code-<session>/`. Anything that goes wrong — unreadable
//! input, a state or ledger failure — answers exit status 2 with the reason on stderr, which
//! Claude Code treats as blocking. So does a session lock another process holds for longer
//! than [`session::LOCK_WAIT`] ([`HookContextBuilder::lock_wait`]): the hook never waits until
//! Claude Code's hook timeout lets the call go ahead.
//!
//! ## Reads
//!
//! Claude Code's `Read`, `NotebookRead`, `LS`, `Grep` and `Glob` read files in the client's own
//! process, where loopward's sandbox does not reach. Given the folders no agent may read
//! ([`HookContextBuilder::unreadable`]; the CLI passes loopward's state directory), the hook
//! denies at `PreToolUse` a read whose target — relative to the event's `cwd`, every symbolic
//! link followed, a path that does not exist judged by its longest existing ancestor — lies at
//! or under one of them, a `Grep`/`Glob` that starts in or above one, and a read whose target
//! it cannot judge; each decision is a `gate_decision` of the `unreadable` gate. This is
//! observed at the hook, not contained: a link swapped between the check and the client's read
//! can race it, and only running the whole client inside the sandbox closes that.
//!
//! ```
//! use loopward_hooks::{handle, HookContext}; use loopward_runner::gates::PolicyConfig;
//! let dir = tempfile::tempdir().unwrap();
//! let policy = PolicyConfig::from_toml(r#"
//!     [[territory]]
//!     paths = ["plan.md"]
//!     owner = "planner"
//! "#).unwrap();
//! let ctx = HookContext::builder(&policy).root(dir.path()).build().unwrap();
//! let event = serde_json::json!({
//!     "session_id": "s1", "transcript_path": "/t.jsonl", "cwd": dir.path(),
//!     "hook_event_name": "PreToolUse", "tool_name": "Write", "tool_use_id": "toolu_1",
//!     "tool_input": {"file_path": "plan.md", "content": "mine now"},
//! });
//! let answer = handle(&event.to_string(), &ctx);
//! assert_eq!(answer.exit_code, 0);
//! assert!(answer.stdout.contains(r#""permissionDecision":"deny""#));
//! assert!(answer.stdout.contains("plan.md belongs to planner"));
//! // The decision is in the session's ledger.
//! assert!(dir.path().join("runs/claude-code-s1/events.jsonl").exists());
//! // Input that is not a hook event blocks, with the reason on stderr.
//! let bad = handle("{not json", &ctx);
//! assert_eq!((bad.exit_code, bad.stdout.as_str()), (2, ""));
//! ```

mod bash;
pub mod claude_code;
pub mod codex;
pub mod concurrent;
mod decide;
mod egress;
pub mod gemini;
mod ledger;
mod patch;
mod read;
pub mod session;
mod shell;
mod tool_call;
mod unchecked;
mod write_watch;

pub use ledger::{FileLedgers, LedgerOpener};
pub use shell::ShellWatchError;

use loopward_core::{AgentId, AuditError, AuditEvent, AuditSink};
use loopward_runner::gates::{
    ConfigError, ControlFiles, Host, OverrideStore, Policy, PolicyConfig,
};
use loopward_runner::Workspace;
use loopward_runner::{Clock, SystemClock};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

pub use loopward_runner::cli_agent::EXIT_BLOCK;

/// What the hook command prints and how it exits: the runner's [`HookReply`], one type whether
/// the hook judges in its own process or the loop's judge answers for its session.
/// [`HookReply::block`] is the fail-closed answer; [`HookReply::print`] writes it out.
///
/// [`HookReply`]: loopward_runner::cli_agent::HookReply
/// [`HookReply::block`]: loopward_runner::cli_agent::HookReply::block
/// [`HookReply::print`]: loopward_runner::cli_agent::HookReply::print
pub type HookAnswer = loopward_runner::cli_agent::HookReply;

/// Why a hook event could not be handled. Every one of these blocks the tool call.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HookError {
    /// The input is not a usable Claude Code hook event.
    #[error(transparent)]
    Protocol(#[from] claude_code::ProtocolError),
    /// The session's state could not be used.
    #[error(transparent)]
    Session(#[from] session::SessionError),
    /// The workspace could not be watched around a shell call.
    #[error(transparent)]
    Shell(#[from] ShellWatchError),
    /// The ledger could not record a decision.
    #[error(transparent)]
    Audit(#[from] AuditError),
    /// No project root: neither the config nor the event names one.
    #[error("no project root: the event has no absolute cwd and the config names no root")]
    NoRoot,
    /// The project root is unusable.
    #[error(transparent)]
    Root(#[from] loopward_runner::PathError),
    /// The policy could not be set up for this project.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The event's `agent_type` is not a usable agent name.
    #[error("agent_type {0:?} is not a usable agent name: {1}")]
    Caller(String, loopward_core::InvalidAgentId),
}

/// What the hook needs besides the event: the policy, the project root, the main agent's name,
/// the clock and where ledgers go.
#[derive(Clone)]
pub struct HookContext {
    policy: PolicyConfig,
    config_file: String,
    sandbox_exec: Option<SandboxExec>,
    root: Option<PathBuf>,
    main_agent: AgentId,
    clock: Arc<dyn Clock>,
    ledgers: Arc<dyn LedgerOpener>,
    runs_dir: String,
    defer_allows: bool,
    overrides: Option<OverrideStore>,
    sessions: Option<PathBuf>,
    team: Option<Vec<AgentId>>,
    unreadable: Vec<PathBuf>,
    lock_wait: Duration,
    host: Host,
    loop_session: Option<String>,
    /// Whether the session has loopward's `handoff` over MCP (what its refusals name).
    handoff: bool,
    /// Whether wrapped commands keep the host's network (`[net] isolate = false`).
    network_open: bool,
    /// The policy of the configured root, compiled once (each event derives a fresh copy).
    compiled: Option<Policy>,
    /// The policy's version ([`PolicyConfig::version`]).
    version: String,
}

impl std::fmt::Debug for HookContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HookContext")
            .field("root", &self.root)
            .field("main_agent", &self.main_agent)
            .field("runs_dir", &self.runs_dir)
            .field("unreadable", &self.unreadable)
            .field("lock_wait", &self.lock_wait)
            .field("host", &self.host)
            .finish_non_exhaustive()
    }
}

/// What a `Bash` command is wrapped with: `<exe> sandbox exec --config <config> --agent <agent>
/// --session <session> [--unreadable <dir>]… -- bash -c <command>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SandboxExec {
    /// The absolute path of the `loopward` binary.
    pub exe: PathBuf,
    /// The absolute path of `loopward.toml`.
    pub config: PathBuf,
    /// Folders the command may not even read (the state directory's ledger keys).
    pub unreadable: Vec<PathBuf>,
}

impl SandboxExec {
    /// The wrapped command line, each part quoted for a POSIX shell; `None` when a path is not
    /// valid UTF-8 (it cannot be written into a command faithfully).
    ///
    /// ```
    /// use loopward_hooks::SandboxExec;
    /// let x = SandboxExec {
    ///     exe: "/usr/bin/loopward".into(),
    ///     config: "/p/loopward.toml".into(),
    ///     unreadable: vec![],
    /// };
    /// assert_eq!(
    ///     x.wrap("s1", "builder", "echo 'hi'").unwrap(),
    ///     "'/usr/bin/loopward' sandbox exec --config '/p/loopward.toml' --agent 'builder' --session 's1' -- bash -c 'echo '\\''hi'\\'''"
    /// );
    /// ```
    pub fn wrap(&self, session: &str, agent: &str, command: &str) -> Option<String> {
        let mut hidden = String::new();
        for dir in &self.unreadable {
            hidden.push_str(" --unreadable ");
            hidden.push_str(&quote(dir.to_str()?));
        }
        Some(format!(
            "{} sandbox exec --config {} --agent {} --session {}{hidden} -- bash -c {}",
            quote(self.exe.to_str()?),
            quote(self.config.to_str()?),
            quote(agent),
            quote(session),
            quote(command)
        ))
    }
}

/// `s` in single quotes for a POSIX shell.
fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// Builds a [`HookContext`]: the context itself, with its defaults, until [`build`](Self::build)
/// checks the policy and compiles it.
pub struct HookContextBuilder {
    ctx: HookContext,
}

impl HookContext {
    /// Starts a context from the gate sections of a `loopward.toml` (territories, gates,
    /// overrides), as [`PolicyConfig`] holds them.
    pub fn builder(policy: &PolicyConfig) -> HookContextBuilder {
        HookContextBuilder {
            ctx: HookContext {
                policy: policy.clone(),
                sandbox_exec: None,
                config_file: "loopward.toml".into(),
                root: None,
                main_agent: AgentId::new("root").unwrap_or_else(|_| unreachable!("valid name")),
                clock: Arc::new(SystemClock),
                ledgers: Arc::new(FileLedgers::default()),
                runs_dir: "runs".into(),
                defer_allows: false,
                overrides: None,
                sessions: None,
                team: None,
                unreadable: Vec::new(),
                lock_wait: session::LOCK_WAIT,
                host: Host::ClaudeCode,
                loop_session: None,
                handoff: false,
                network_open: false,
                compiled: None,
                version: String::new(),
            },
        }
    }

    /// The agent host whose hook events this context reads.
    pub fn host(&self) -> Host {
        self.host
    }

    /// The host as people call it (`Claude Code`, `Codex`, `Gemini CLI`), in ledgers and texts.
    pub(crate) fn host_name(&self) -> &'static str {
        match self.host {
            Host::Codex => "Codex",
            Host::GeminiCli => "Gemini CLI",
            _ => "Claude Code",
        }
    }

    /// The prefix of a session's ledger run id: `claude-code`, `codex` or `gemini`.
    pub(crate) fn run_prefix(&self) -> &'static str {
        match self.host {
            Host::Codex => "codex",
            Host::GeminiCli => "gemini",
            _ => "claude-code",
        }
    }

    /// The folder that holds the sessions' state for the project at `root`: the state
    /// directory's `sessions/` when one was given, else `<root>/.loopward/sessions/`.
    pub fn sessions_dir(&self, root: &std::path::Path) -> PathBuf {
        match &self.sessions {
            Some(s) => s.clone(),
            None => root.join(".loopward").join("sessions"),
        }
    }

    /// The main agent's name.
    pub fn main_agent(&self) -> &AgentId {
        &self.main_agent
    }

    /// The policy engine for the project at `ws`, with the config file and runs directory as
    /// control files: derived from the one compiled at build for the configured root (the same
    /// gates, a fresh plan cache), else compiled now.
    fn policy(&self, ws: &Workspace) -> Result<Policy, ConfigError> {
        match &self.compiled {
            Some(p) if p.workspace().root() == ws.root() => Ok(p.clone().with_host(self.host)),
            _ => self.compile(ws),
        }
    }

    fn compile(&self, ws: &Workspace) -> Result<Policy, ConfigError> {
        let control = ControlFiles::new(&self.config_file, &self.runs_dir);
        let policy = Policy::with_control(&self.policy, ws.clone(), control)?
            .with_host(self.host)
            .with_handoff(self.handoff);
        // Without a state directory the sessions live in the workspace, changing while
        // commands run: no watch compares them.
        let policy = match &self.sessions {
            Some(_) => policy,
            None => policy.with_own_state(".loopward/sessions"),
        };
        let policy = match &self.overrides {
            Some(store) => policy.with_overrides(store.clone()),
            None => policy,
        };
        Ok(match &self.team {
            Some(team) => policy.with_team(team.clone()),
            None => policy,
        })
    }
}

impl HookContextBuilder {
    /// The project root (default: each event's `cwd`).
    pub fn root(mut self, root: impl Into<PathBuf>) -> Self {
        self.ctx.root = Some(root.into());
        self
    }

    /// The config file's path relative to the root (a control file; default `loopward.toml`).
    pub fn config_file(mut self, rel: impl Into<String>) -> Self {
        self.ctx.config_file = rel.into();
        self
    }

    /// The name the main agent goes by (default `root`).
    pub fn main_agent(mut self, name: AgentId) -> Self {
        self.ctx.main_agent = name;
        self
    }

    /// The clock (default: the system clock).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.ctx.clock = clock;
        self
    }

    /// Where ledgers are opened (default: [`FileLedgers`], the runs' own hash-chained format).
    pub fn ledgers(mut self, ledgers: Arc<dyn LedgerOpener>) -> Self {
        self.ctx.ledgers = ledgers;
        self
    }

    /// How `Bash` commands are wrapped in loopward's sandbox: the absolute path of the
    /// `loopward` binary and of the config. Without it (and unless the config says
    /// `sandbox = "watch-only"`), every `Bash` call is denied: it cannot be contained.
    pub fn sandbox_exec(mut self, exec: SandboxExec) -> Self {
        self.ctx.sandbox_exec = Some(exec);
        self
    }

    /// Keeps the sessions' turn state, `Bash` snapshots and saved contents in loopward's state
    /// directory (`<state>/sessions/<session>/`), outside the workspace, where neither the agent's
    /// tools nor its commands reach (default: `<root>/.loopward/sessions/`, a control folder the
    /// file tools may not write and commands see read-only).
    pub fn state_dir(mut self, state: &loopward_runner::StateDir) -> Self {
        self.ctx.sessions = Some(state.root().join("sessions"));
        self
    }

    /// The runs directory relative to the root (default `runs`).
    pub fn runs_dir(mut self, rel: impl Into<String>) -> Self {
        self.ctx.runs_dir = rel.into();
        self
    }

    /// When the gates allow a file write, answer nothing instead of `allow`, so Claude Code's own
    /// permission prompt still decides (default: answer `allow`, which skips that prompt).
    pub fn defer_allows(mut self, defer: bool) -> Self {
        self.ctx.defer_allows = defer;
        self
    }

    /// Where one-shot overrides are consumed from (default: the workspace's keyless
    /// `.loopward/overrides/`); `loopward` passes the sealed store in its state directory.
    pub fn overrides(mut self, store: OverrideStore) -> Self {
        self.ctx.overrides = Some(store);
        self
    }

    /// The config's `[[agent]]` names: a refusal tells any other caller (a subagent acting
    /// under its own name) to ask for an override with `--subagent`, as `loopward override
    /// grant` requires for a name outside the team (default: not known, never suggested).
    pub fn team(mut self, team: Vec<AgentId>) -> Self {
        self.ctx.team = Some(team);
        self
    }

    /// Folders no agent-driven read may reach: a `Read`, `NotebookRead`, `LS`, `Grep` or `Glob`
    /// call — tools that run in Claude Code's own process, outside loopward's sandbox — whose
    /// target resolves (every symbolic link followed) at or under one of them is denied, and so
    /// is one whose target cannot be judged (see [Reads](crate#reads)). `loopward` passes its
    /// state directory, the same folders it makes unreadable to `Bash` commands
    /// ([`SandboxExec::unreadable`]). Default: none, and reads are only recorded.
    pub fn unreadable(mut self, folders: Vec<PathBuf>) -> Self {
        self.ctx.unreadable = folders;
        self
    }

    /// The session a `loopward loop` started (its `LOOPWARD_SESSION`): that session's prompts are
    /// the loop's composition — the person's task with the verifier's output — so they are
    /// recorded as an observed notice that starts the session's turn, never as the person's
    /// words (the loop's own ledger holds the person's task). Default: none.
    pub fn loop_session(mut self, session: Option<String>) -> Self {
        self.ctx.loop_session = session;
        self
    }

    /// Says that the session has loopward's `handoff` tool, served over MCP by the loop that
    /// started it (its agent lists `handoff` in `tools`): a territory refusal then tells the
    /// agent to hand the change to the owner with that tool, by the host's name for it
    /// ([`Host::relayed_name`]), instead of the host's own way. Default: it has not.
    pub fn handoff(mut self, served: bool) -> Self {
        self.ctx.handoff = served;
        self
    }

    /// How long an event waits for its session's lock, held by another hook or process, before
    /// the hook gives up and blocks the call (default [`session::LOCK_WAIT`]; keep it well
    /// inside the hook `timeout` Claude Code is given).
    pub fn lock_wait(mut self, wait: Duration) -> Self {
        self.ctx.lock_wait = wait;
        self
    }

    /// Says that wrapped `Bash` commands keep the host's network (`[net] isolate = false`, an
    /// explicit opt-out): every such call then records the sandbox's warning in the session's
    /// ledger. Default: they run in a network namespace of their own, out only through the
    /// egress proxy `loopward sandbox exec` serves.
    pub fn network_open(mut self, open: bool) -> Self {
        self.ctx.network_open = open;
        self
    }

    /// The agent host whose hook events this context reads (default Claude Code): its tools,
    /// its answers and the remedies its refusals name.
    pub fn host(mut self, host: Host) -> Self {
        self.ctx.host = host;
        self
    }

    /// Builds the context; a policy that does not validate is refused here, before any event.
    pub fn build(self) -> Result<HookContext, ConfigError> {
        let mut ctx = self.ctx;
        // Compiling the gates is most of a hook call's own work: once, where the root is known
        // (a root that is not usable is reported by each event, as without one).
        match ctx.root.as_deref().map(Workspace::new) {
            Some(Ok(ws)) => {
                let compiled = ctx.compile(&ws)?;
                ctx.version = compiled.version().to_string();
                ctx.compiled = Some(compiled);
            }
            _ => {
                Policy::check(&ctx.policy)?;
                ctx.version = ctx.policy.version();
            }
        }
        Ok(ctx)
    }
}

/// Handles one Claude Code hook event (`input` is what the hook command read on stdin).
///
/// Never panics on any input and never answers a failure with an exit status Claude Code would
/// read as "go ahead": every error is exit status 2 with the reason on stderr.
pub fn handle(input: &str, ctx: &HookContext) -> HookAnswer {
    answer(decide::handle(input, ctx, None), ctx)
}

/// Handles one hook event as [`handle`] does — the same engine, session state and session
/// lock — but hands the decision's records back, in order, instead of writing them to the
/// session's own ledger, each with the agent it was recorded for (the caller: a subagent by
/// its name, the main agent; `None` for the session's own notes): for a caller that records
/// them in a ledger of its own (`loopward loop` records them in the run's ledger, under the
/// session's turn). The records hold no
/// `run_started` or `turn_started` of the session's own: the caller's run and turn are the
/// session's. The caller records them before the host reads the answer, and blocks the call
/// when it cannot. The records of an event that failed part-way are handed back too.
///
/// ```
/// use loopward_hooks::{handle_recorded, HookContext}; use loopward_runner::gates::PolicyConfig;
/// use loopward_core::AuditEvent;
/// let dir = tempfile::tempdir().unwrap();
/// let policy = PolicyConfig::from_toml("[[territory]]\npaths = [\"plan.md\"]\nowner = \"planner\"\n").unwrap();
/// let ctx = HookContext::builder(&policy).root(dir.path()).build().unwrap();
/// let event = serde_json::json!({
///     "session_id": "s1", "cwd": dir.path(), "hook_event_name": "PreToolUse",
///     "tool_name": "Write", "tool_use_id": "toolu_1",
///     "tool_input": {"file_path": "plan.md", "content": "mine now"},
/// });
/// let (answer, records) = handle_recorded(&event.to_string(), &ctx);
/// assert!(answer.stdout.contains("plan.md belongs to planner"));
/// assert!(records.iter().any(|(who, r)| matches!(r, AuditEvent::GateDecision { .. })
///     && who.as_ref().is_some_and(|a| a.as_str() == "root")));
/// assert!(!records.iter().any(|(_, r)| matches!(r, AuditEvent::RunStarted { .. })));
/// // No ledger of the session's own.
/// assert!(!dir.path().join("runs").exists());
/// ```
pub fn handle_recorded(
    input: &str,
    ctx: &HookContext,
) -> (HookAnswer, Vec<(Option<AgentId>, AuditEvent)>) {
    let kept = Arc::new(ledger::Kept::default());
    let reply = decide::handle(input, ctx, Some(kept.clone() as Arc<dyn AuditSink>));
    (answer(reply, ctx), kept.take())
}

/// What the host is told of the engine's reply.
fn answer(reply: Result<claude_code::Reply, HookError>, ctx: &HookContext) -> HookAnswer {
    match reply {
        Ok(claude_code::Reply::Allow { .. }) if ctx.defer_allows => HookAnswer {
            stdout: String::new(),
            stderr: String::new(),
            exit_code: 0,
        },
        Ok(reply) => HookAnswer {
            stdout: match ctx.host {
                Host::Codex => codex::render(&reply),
                Host::GeminiCli => gemini::render(&reply),
                _ => reply.render(),
            },
            stderr: String::new(),
            exit_code: 0,
        },
        Err(e) => HookAnswer::block(e),
    }
}
