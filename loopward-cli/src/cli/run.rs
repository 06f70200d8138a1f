//! `loopward run`: runs the configured team on a task, printing the timeline as the ledger
//! records it; the exit status says how the run ended.

mod drive;
mod figures;
mod started_with;

pub(super) use drive::{drive, Drive};
use started_with::StartedWith;

use anyhow::{bail, Context, Result};
use clap::builder::TypedValueParser as _;
use loopward::backend::{self, Choice};
use loopward::config::{BackendKind, Config, CONFIG_FILE};
use loopward::ledger;
use loopward::team;
use loopward_core::{RunId, RunStatus};
use loopward_runner::{Clock, SystemClock};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

/// Run the configured team on a task.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  loopward run --task \"Add a hello file\"
  loopward run --json | jq -c 'select(.type == \"event\") | .event.kind'   # one JSON object per event
  loopward run --quiet && echo done                                      # only the outcome

--json prints one JSON object per line: `start`, then an `event` per ledger record as it is
recorded, then `end` with the status and exit code (schema \"loopward.run/1\", documented in
docs/json-output.md). On a terminal a spinner on stderr shows each model call while it runs.

Exit status: 0 completed · 3 a cap was reached · 4 strategies exhausted (class-jump) · 5 budget
spent · 6 stopped by a stop-gate (a denied turn, tool call or handoff) · 7 waiting for `loopward
approve` · 8 the ledger could not be written · 9 failed (backend error, empty or cut-off answer,
script ran out) · 1 could not start (bad config, missing file, a config that cannot work).")]
pub struct Args {
    /// The config file.
    #[arg(long, default_value = CONFIG_FILE)]
    pub config: PathBuf,
    /// The model backend (default: the config's `backend.kind`).
    #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(["fake", "llama", "openai", "anthropic"]).map(|s| s.parse::<BackendKind>().expect("listed")))]
    pub backend: Option<BackendKind>,
    /// The fake backend's script (default: the config's `backend.script`). Remembered in the
    /// run's folder: a resumed run plays the script it was started with.
    #[arg(long)]
    pub script: Option<PathBuf>,
    /// The model: a GGUF file for llama, a model name for http backends.
    #[arg(long)]
    pub model: Option<String>,
    /// The task (default: the config's `run.task`).
    #[arg(long)]
    pub task: Option<String>,
    /// The run id (default: derived from the time); becomes the ledger folder's name.
    #[arg(long, conflicts_with = "resume")]
    pub id: Option<String>,
    /// Resume a run from its ledger: paused for `loopward approve|deny`, or killed. Recorded
    /// model replies and tool results are fed back (no model call, no effect repeated), then it
    /// goes on live; its task and first agent come from the ledger, its `--script` from its
    /// folder. A finished run is refused.
    #[arg(long, conflicts_with_all = ["task", "id", "script"])]
    pub resume: Option<String>,
    /// Print one JSON object per line instead of the timeline: `start`, an `event` per ledger
    /// record, then `end` (schema `loopward.run/1`, docs/json-output.md).
    #[arg(long, conflicts_with = "quiet")]
    pub json: bool,
    /// Print only the outcome: the status line, and what to do when the run waits or fails.
    #[arg(long, short)]
    pub quiet: bool,
}

/// The process exit code for a run status (see `loopward run --help`).
pub fn exit_code(status: &RunStatus) -> u8 {
    match status {
        RunStatus::Completed => 0,
        RunStatus::CapReached { .. } => 3,
        RunStatus::Exhausted => 4,
        RunStatus::BudgetExceeded { .. } => 5,
        RunStatus::Stopped { .. } => 6,
        RunStatus::AwaitingApproval { .. } => 7,
        RunStatus::AuditFailed { .. } => 8,
        _ => 9,
    }
}

/// What a status says beyond its label, for messages.
fn status_detail(status: &RunStatus) -> String {
    match status {
        RunStatus::CapReached { cap } => format!(": {cap}"),
        RunStatus::BudgetExceeded { budget } => format!(": {budget}"),
        RunStatus::Stopped { reason } => format!(": {reason}"),
        _ => String::new(),
    }
}

/// A run id from the clock: `run-YYYYMMDDTHHMMSS-mmm`.
pub(crate) fn new_run_id(clock: &dyn Clock) -> RunId {
    loopward::ledger::new_run_id(clock)
}

fn parse_id(flag: &str, s: &str) -> Result<RunId> {
    RunId::new(s).with_context(|| {
        format!("{flag} {s:?} is not a valid run id: use letters, digits, '-' and '_'")
    })
}

pub(super) fn config_dir(config: &Path) -> PathBuf {
    config
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

pub(super) async fn run(args: Args) -> Result<ExitCode> {
    // This process holds the API key and the ledger key: its environment and memory are not
    // for the commands it sandboxes to read.
    loopward_runner::sandbox::hide_this_process()?;
    let cfg = Config::load(&args.config)?;
    let dir = config_dir(&args.config);
    let workspace = cfg.workspace_dir(&args.config);
    let runs_dir = workspace.join(&cfg.run.runs_dir);
    let resume = args
        .resume
        .as_deref()
        .map(|r| parse_id("--resume", r))
        .transpose()?;
    if let Some(id) = &resume {
        if super::loop_cmd::recorded_loop(&ledger::run_dir(&runs_dir, id))?.is_some() {
            bail!("run {id} is a loop over a coding agent: resume it with `loopward loop --resume {id}`");
        }
    }
    let script = match &resume {
        Some(id) => StartedWith::read(&ledger::run_dir(&runs_dir, id))?.script,
        // Absolute: the run may be resumed from another folder.
        None => args
            .script
            .as_deref()
            .map(std::path::absolute)
            .transpose()
            .context("cannot resolve --script against the current folder")?,
    };
    let choice = Choice {
        kind: args.backend,
        script: script.clone(),
        model: args.model.clone(),
        env: Some(|name| std::env::var(name).ok()),
    };
    // Secrets are resolved before anything starts (a missing source fails here) and masked in
    // every record before it is hashed, and in everything printed.
    let masker = loopward::contain::masker(&cfg, &args.config, choice.env)?;
    let model = backend::model(&cfg, &dir, &choice)?;
    // A spinner while each model call runs: for a person at a terminal only.
    let spinner = !args.json
        && !args.quiet
        && std::io::IsTerminal::is_terminal(&std::io::stderr())
        && std::env::var_os("RUST_LOG").is_none();
    let model = crate::heartbeat::wrap(model, spinner);
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    // The ledger key, approvals and overrides live in the state directory, outside the workspace.
    let custody = super::state::open(&cfg, &args.config)?;
    let runner = team::build(
        &cfg,
        &workspace,
        model,
        team::Options {
            clock: clock.clone(),
            approver: Some(Arc::new(loopward_term::approver::TerminalApprover)),
            model_name: backend::model_name(&cfg, &choice),
            custody: Some(custody.clone()),
            host_files: backend::host_files(&cfg, &dir, &choice),
            // `kind = "claude-code"` agents: sessions of the client under the hook.
            cli_agents: Some(Arc::new(super::mcp::Serving(
                super::loop_cmd::TeamCliAgents {
                    config: std::path::absolute(&args.config)
                        .context("cannot resolve the config's path")?,
                    workspace: workspace
                        .canonicalize()
                        .with_context(|| format!("cannot find {}", workspace.display()))?,
                    custody: custody.clone(),
                    policy: cfg.policy(),
                    config_rel: String::from(loopward::config::CONFIG_FILE),
                    runs_rel: cfg.run.runs_dir.to_string_lossy().into_owned(),
                },
            ))),
            reach: Some(loopward::contain::reach(&cfg, choice.env)),
            ..team::Options::default()
        },
    )?;
    super::run::drive(Drive {
        runner,
        runs_dir,
        custody,
        clock,
        resume,
        id: args.id.clone(),
        task: args.task.clone().or_else(|| cfg.run.task.clone()),
        first: cfg.run.first.clone(),
        config: args.config.clone(),
        script,
        json: args.json,
        quiet: args.quiet,
        label: args
            .backend
            .unwrap_or(cfg.backend.kind)
            .as_str()
            .to_string(),
        masker,
    })
    .await
}
#[cfg(test)]
mod tests {
    use super::exit_code;
    use loopward_core::RunStatus;

    #[test]
    fn each_way_a_run_ends_has_its_own_exit_status() {
        let s = |x: &str| x.to_string();
        let codes = [
            (RunStatus::Completed, 0),
            (RunStatus::CapReached { cap: s("turns") }, 3),
            (RunStatus::Exhausted, 4),
            (
                RunStatus::BudgetExceeded {
                    budget: s("tokens"),
                },
                5,
            ),
            (
                RunStatus::Stopped {
                    reason: s("denied"),
                },
                6,
            ),
            (RunStatus::AwaitingApproval { pending: s("p1") }, 7),
            (
                RunStatus::AuditFailed {
                    error: s("disk full"),
                },
                8,
            ),
            (
                RunStatus::Failed {
                    error: s("empty answer"),
                },
                9,
            ),
        ];
        for (status, code) in codes {
            assert_eq!(exit_code(&status), code, "{status:?}");
        }
    }
}
