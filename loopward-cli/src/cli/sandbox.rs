//! `loopward sandbox exec`: runs one command inside the kernel sandbox of one agent.
//!
//! The Claude Code hook wraps every `Bash` command in this (see docs/claude-code.md), so a
//! command, and every process it starts, is held as the runner's `shell` holds it: writes,
//! reads and environment by allow-list, network and PID namespaces of its own, out only through
//! the egress proxy this process serves (decisions in the session's ledger). This process waits
//! outside the sandbox, removing the command's scratch `$TMPDIR` afterwards. If the sandbox
//! cannot be set up, the command does not run (exit 126); otherwise its exit status is passed on.

use anyhow::{bail, Context, Result};
use loopward::config::Config;
use loopward_core::AgentId;
use loopward_core::{AuditError, AuditEvent};
use loopward_runner::egress::{EgressPolicy, Record, Recorder};
use loopward_runner::gates::ControlFiles;
use loopward_runner::sandbox::{spawn_contained, Confinement, Protected};
use loopward_runner::Workspace;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

/// Run a command in the sandbox of an agent (what the Claude Code hook wraps `Bash` in).
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Example:
  loopward sandbox exec --config loopward.toml --agent builder -- bash -c 'echo hi > src/a.txt'

The command may write only the agent's own territories and unclaimed paths (and $TMPDIR);
other agents' territories, loopward's control files and state are read-only to it and to
every process it starts. It may read only the workspace, the system folders and [read] allow;
loopward's state (every project's) and the --unreadable folders cannot be read at all. It
starts with PATH, LANG, TERM and the like, [env] pass, and a scratch HOME (the user's config,
no credentials) and TMPDIR: nothing else of the caller's environment. It reaches only the
agent's `net` hosts, through loopward's egress proxy (decisions in the --session's ledger),
and what it leaves in the background ends with it. Exit status 126 when the sandbox cannot
be set up (nothing ran).")]
pub struct Args {
    /// What to do.
    #[command(subcommand)]
    pub action: Action,
}

/// `sandbox` sub-commands.
#[derive(Debug, clap::Subcommand)]
pub enum Action {
    /// Run a command in an agent's sandbox.
    #[command(
        after_help = "Example:\n  loopward sandbox exec --config loopward.toml --agent builder -- bash -c 'echo hi > src/a.txt'"
    )]
    Exec {
        /// The config file; its folder is the project root.
        #[arg(long, default_value = "loopward.toml")]
        config: PathBuf,
        /// The agent whose writes the command may make.
        #[arg(long)]
        agent: String,
        /// The Claude Code session (recorded in the command's environment as
        /// `LOOPWARD_SESSION`).
        #[arg(long)]
        session: Option<String>,
        /// A folder the command may not even read, besides loopward's state (every project's
        /// under `$XDG_STATE_HOME/loopward`, and the config's `[state] dir`), which is always
        /// unreadable; may be given more than once.
        #[arg(long, value_name = "DIR")]
        unreadable: Vec<PathBuf>,
        /// The command and its arguments.
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
}

/// Runs the command in the sandbox and exits with its status (126 when it could not start),
/// on a runtime of its own (the process does nothing else).
pub fn run(args: &Args) -> ExitCode {
    match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt.block_on(exec(args)),
        Err(e) => not_run(&anyhow::anyhow!("cannot start the async runtime: {e}")),
    }
}

/// Runs the command in the sandbox, as the runner's `shell` does: started from a thread that
/// set the sandbox on itself (Landlock binds that thread and everything it starts), in network
/// and PID namespaces of its own, its way out the egress proxy this process serves. This
/// process stays outside, records the proxy's decisions (see `Book`), waits, and removes
/// the command's scratch `$TMPDIR` (also its `$HOME`) afterwards, which a confined process
/// could not.
pub async fn exec(args: &Args) -> ExitCode {
    let Action::Exec {
        config,
        agent,
        session,
        unreadable,
        command,
    } = &args.action;
    let (plan, scratch) = match planned(config, agent, unreadable) {
        Ok(p) => p,
        Err(e) => return not_run(&e),
    };
    // This process stays beside the command with the caller's whole environment: made
    // non-dumpable, its `/proc/<pid>/environ` is unreadable to the command it starts.
    if let Err(e) = loopward_runner::sandbox::hide_this_process() {
        return not_run(&e.into());
    }
    let mut cmd = tokio::process::Command::new(&command[0]);
    cmd.args(&command[1..]);
    // The environment is an allow-list: API keys and tokens of the caller stay out.
    plan.apply_env(cmd.as_std_mut());
    if let Some(s) = session {
        cmd.env("LOOPWARD_SESSION", s);
    }
    if let Some(dir) = &scratch {
        cmd.env("TMPDIR", dir.path());
        cmd.env("HOME", dir.path());
    }
    let started = match spawn_contained(cmd, &plan).await {
        Ok(s) => s,
        Err(e) => return not_run(&anyhow::Error::new(e).context(format!("{:?}", command[0]))),
    };
    let agent_id = AgentId::new(agent.clone()).ok();
    let proxy = match (started.proxy, agent_id) {
        (Some(l), Some(agent_id)) => {
            let l = match tokio::net::TcpListener::from_std(l) {
                Ok(l) => l,
                Err(e) => return not_run(&anyhow::anyhow!("cannot serve the egress proxy: {e}")),
            };
            let policy = Arc::new(EgressPolicy::new(
                plan.reach().net_of(&agent_id).iter().cloned(),
            ));
            let (recorder, records) = Recorder::channel();
            let task = tokio::spawn(loopward_runner::egress::serve(l, policy, recorder, None));
            let book = Book::new(config, session.as_deref(), agent_id);
            Some((super::contain::AbortOnDrop(task), records, book))
        }
        _ => None,
    };
    let status = wait_recording(started.child, proxy).await;
    drop(scratch);
    let status = match status {
        Ok(s) => s,
        Err(e) => return not_run(&e),
    };
    use std::os::unix::process::ExitStatusExt;
    let code = status
        .code()
        .or_else(|| status.signal().map(|sig| 128 + sig))
        .unwrap_or(1);
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}

/// Waits for the command, recording what its proxy asks meanwhile; passes stop signals on to
/// it, and kills it when it has not ended in time.
async fn wait_recording(
    mut child: tokio::process::Child,
    proxy: Option<(
        super::contain::AbortOnDrop,
        tokio::sync::mpsc::Receiver<Record>,
        Book,
    )>,
) -> Result<std::process::ExitStatus> {
    let mut stop = super::ending::Stop::catch()?;
    let pid = child.id();
    let (_task, mut records, mut book) = match proxy {
        Some((t, r, b)) => (Some(t), Some(r), Some(b)),
        None => (None, None, None),
    };
    loop {
        tokio::select! {
            s = child.wait() => {
                // What the proxy asked before the command ended is still recorded.
                while let (Some(Ok(r)), Some(book)) = (records.as_mut().map(|r| r.try_recv()), &mut book) {
                    let _ = r.done.send(book.record(&r.event));
                }
                return s.context("waiting for the command");
            }
            Some(r) = next(&mut records) => {
                if let Some(book) = &mut book {
                    let _ = r.done.send(book.record(&r.event));
                }
            }
            () = stop.kill_due(pid) => {
                let _ = child.start_kill();
            }
        }
    }
}

/// The proxy's next request to record; never, without a proxy.
async fn next(records: &mut Option<tokio::sync::mpsc::Receiver<Record>>) -> Option<Record> {
    match records {
        Some(r) => r.recv().await,
        None => std::future::pending().await,
    }
}

/// Where a wrapped command's egress decisions go: in a `loopward loop` session, the run's
/// ledger, through the loop; else the ledger of the session whose hook wrapped
/// it (`--session`; its hook context is loaded on the first decision, so a command that never
/// connects out costs nothing), or, run by hand without a session, a line on stderr each. A
/// decision that cannot be recorded is refused (the proxy acts on none it was not told is
/// recorded).
struct Book {
    config: PathBuf,
    session: Option<String>,
    agent: AgentId,
    hooks: Option<loopward_hooks::HookContext>,
}

impl Book {
    fn new(config: &Path, session: Option<&str>, agent: AgentId) -> Self {
        Self {
            config: config.to_path_buf(),
            session: session.map(str::to_string),
            agent,
            hooks: None,
        }
    }

    fn record(&mut self, event: &AuditEvent) -> Result<(), AuditError> {
        let Some(session) = &self.session else {
            #[allow(clippy::print_stderr)]
            {
                eprintln!(
                    "loopward sandbox: {}",
                    loopward::pages::describe_event(event)
                );
            }
            return Ok(());
        };
        // A loop's session has no ledger of its own: the loop records it in the run's.
        if let Some(socket) = super::loop_hooks::loop_socket(|k| std::env::var_os(k)) {
            let token = std::env::var(loopward_runner::cli_agent::TOKEN_ENV).ok();
            return super::loop_hooks::record_egress(&socket, token.as_deref(), &self.agent, event);
        }
        if self.hooks.is_none() {
            let (ctx, _) = super::hook::context(
                &self.config,
                self.agent.as_str(),
                false,
                loopward_runner::gates::Host::ClaudeCode,
            )
            .map_err(|e| AuditError(crate::error_text(&e)))?;
            self.hooks = Some(ctx);
        }
        let Some(ctx) = &self.hooks else {
            return Err(AuditError("no hook context".into()));
        };
        ctx.record_for_session(session, &self.agent, event)
            .map_err(|e| AuditError(e.to_string()))
    }
}

fn not_run(err: &anyhow::Error) -> ExitCode {
    #[allow(clippy::print_stderr)]
    {
        eprintln!("loopward sandbox: not run: {}", crate::error_text(err));
    }
    ExitCode::from(126)
}

/// A command's scratch `$TMPDIR` and `$HOME`, removed when the command ends.
struct Scratch(PathBuf);

impl Scratch {
    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Plans the agent's sandbox (refused under `watch-only`); returns it and the scratch folder.
fn planned(
    config: &Path,
    agent: &str,
    unreadable: &[PathBuf],
) -> Result<(Confinement, Option<Scratch>)> {
    let cfg = Config::load(config)?;
    let (plan, scratch) = plan_agent(&cfg, config, agent, unreadable)?;
    let scratch = scratch.map(Scratch);
    if cfg.policy().gates.shell.sandbox != loopward_runner::sandbox::SandboxMode::Kernel {
        bail!("the config says `sandbox = \"watch-only\"`; the hook does not wrap commands then, and this command will not run unconfined");
    }
    Ok((plan, scratch))
}

/// The sandbox of `agent` under `cfg` (loaded from `config`): its writes, the reads and the
/// environment of `[read]` and `[env]`, loopward's state (every project's) and `unreadable`
/// hidden, and a fresh scratch folder (for `$TMPDIR` and `$HOME`) writable.
pub(super) fn plan_agent(
    cfg: &Config,
    config: &Path,
    agent: &str,
    unreadable: &[PathBuf],
) -> Result<(Confinement, Option<PathBuf>)> {
    let root = cfg
        .workspace_dir(config)
        .canonicalize()
        .with_context(|| format!("finding the workspace of {}", config.display()))?;
    let ws = Workspace::new(&root).context("opening the workspace")?;
    let agent = AgentId::new(agent.to_string()).context("--agent")?;
    let abs_config = config
        .canonicalize()
        .with_context(|| format!("resolving {}", config.display()))?;
    let config_dir = abs_config.parent().unwrap_or(&root);
    let host_files = loopward::backend::host_files(cfg, config_dir, &Default::default());
    let control = ControlFiles::in_workspace(&ws, &abs_config, &root.join(&cfg.run.runs_dir))
        .with_host_files(&ws, &host_files)
        .resolved(&ws);
    let protected = Protected::from_policy(control, &cfg.policy(), &agent)
        .with_context(|| format!("{}", config.display()))?;
    let reach = loopward::contain::reach(cfg, Some(|k| std::env::var(k).ok()));
    let mut plan = Confinement::plan(&ws, &protected)?.with_reach(reach);
    // loopward's state — every project's under the state base, and this one's wherever
    // `[state] dir` puts it — is unreadable whoever starts the command, flags or not.
    let state = cfg
        .state
        .dir
        .as_ref()
        .map(|d| Config::resolve(config, d))
        .or_else(|| super::state::base().map(|b| b.join("loopward")));
    let base = super::state::base();
    let defaults = state.map(|s| loopward::state::unreadable(&s, base.as_deref()));
    for dir in defaults
        .into_iter()
        .flatten()
        .chain(unreadable.iter().cloned())
    {
        plan = plan.with_unreadable(dir);
    }
    let scratch = scratch_dir(&root)?;
    if let Some(s) = &scratch {
        plan = plan.with_outside(s.clone());
        // It is the command's HOME: the user's config comes in, without credentials.
        if let Some(home) = std::env::var_os("HOME") {
            if let Err(e) = super::home::seed(Path::new(&home), s) {
                let _ = std::fs::remove_dir_all(s);
                return Err(e);
            }
        }
    }
    Ok((plan, scratch))
}

/// A fresh folder under the system's temporary folder, outside the workspace (private to
/// this user, never one that already existed).
fn scratch_dir(root: &Path) -> Result<Option<PathBuf>> {
    let base = std::env::temp_dir();
    if base.starts_with(root) {
        return Ok(None);
    }
    for n in 0..64u32 {
        let dir = base.join(format!("loopward-sh-{}-{n}", std::process::id()));
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => return Ok(Some(dir)),
            // Left by a process killed before it could clean up, whose pid came round again.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e).with_context(|| format!("creating {}", dir.display())),
        }
    }
    bail!(
        "cannot create a scratch folder in {}: 64 names taken; remove the stale loopward-sh-* folders there",
        base.display()
    )
}
