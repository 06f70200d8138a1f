//! `loopward sandbox exec`: runs one command inside the kernel sandbox of one agent.
//!
//! The Claude Code hook wraps every `Bash` command in this (see docs/claude-code.md), so a
//! command, and every process it starts, can write only what that agent may write. The binary
//! runs it before starting any thread: the sandbox is set on this process, which then becomes
//! the command (`exec`). If the sandbox cannot be set up, the command does not run (exit 126).

use anyhow::{bail, Context, Result};
use loopward::config::Config;
use loopward_core::AgentId;
use loopward_runner::gates::ControlFiles;
use loopward_runner::sandbox::{confine_current_thread, Confinement, Protected};
use loopward_runner::Workspace;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Run a command in the sandbox of an agent (what the Claude Code hook wraps `Bash` in).
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Example:
  loopward sandbox exec --config loopward.toml --agent builder -- bash -c 'echo hi > src/a.txt'

The command may write only the agent's own territories and unclaimed paths (and $TMPDIR);
other agents' territories, loopward's control files and state are read-only to it and to
every process it starts. It may read only the workspace, the system folders and [read] allow;
loopward's state (every project's) and the --unreadable folders cannot be read at all. It
starts with PATH, LANG, TERM and the like, [env] pass, and a scratch HOME and TMPDIR: nothing
else of the caller's environment. Exit status 126 when the sandbox cannot be set up (nothing ran).")]
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

/// Runs the command; returns only when it could not be started.
pub fn run(args: &Args) -> ExitCode {
    let Action::Exec {
        config,
        agent,
        session,
        unreadable,
        command,
    } = &args.action;
    let err = match confine(config, agent, unreadable) {
        Ok((scratch, plan)) => {
            let mut cmd = std::process::Command::new(&command[0]);
            cmd.args(&command[1..]);
            // The environment is an allow-list: API keys and tokens of the caller stay out.
            plan.apply_env(&mut cmd);
            if let Some(s) = session {
                cmd.env("LOOPWARD_SESSION", s);
            }
            if let Some(dir) = scratch {
                cmd.env("TMPDIR", &dir);
                cmd.env("HOME", dir);
            }
            anyhow::Error::new(cmd.exec()).context(format!("could not run {:?}", command[0]))
        }
        Err(e) => e,
    };
    #[allow(clippy::print_stderr)]
    {
        eprintln!("loopward sandbox: not run: {}", crate::error_text(&err));
    }
    ExitCode::from(126)
}

/// Sets this process's sandbox; returns the scratch folder made for `$TMPDIR` and `$HOME`, and
/// the plan (whose environment the command starts with).
fn confine(
    config: &Path,
    agent: &str,
    unreadable: &[PathBuf],
) -> Result<(Option<PathBuf>, Confinement)> {
    let cfg = Config::load(config)?;
    let (plan, scratch) = plan_agent(&cfg, config, agent, unreadable)?;
    if cfg.policy().gates.shell.sandbox != loopward_runner::sandbox::SandboxMode::Kernel {
        bail!("the config says `sandbox = \"watch-only\"`; the hook does not wrap commands then, and this command will not run unconfined");
    }
    confine_current_thread(&plan)?;
    Ok((scratch, plan))
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
    }
    Ok((plan, scratch))
}

/// A fresh folder under the system's temporary folder, outside the workspace.
fn scratch_dir(root: &Path) -> Result<Option<PathBuf>> {
    let base = std::env::temp_dir();
    if base.starts_with(root) {
        return Ok(None);
    }
    let dir = base.join(format!("loopward-sh-{}", std::process::id()));
    match std::fs::create_dir(&dir) {
        Ok(()) => Ok(Some(dir)),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(Some(dir)),
        Err(e) => Err(e).with_context(|| format!("creating {}", dir.display())),
    }
}
