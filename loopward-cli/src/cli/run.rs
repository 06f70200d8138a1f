//! `loopward run`: runs the configured team on a task, printing the timeline as the ledger
//! records it; the exit status says how the run ended.

use anyhow::{bail, Context, Result};
use clap::builder::TypedValueParser as _;
use loopward::backend::{self, Choice};
use loopward::config::{BackendKind, Config, CONFIG_FILE};
use loopward::ledger;
use loopward::team;
use loopward_core::{Person, RunId, RunStatus};
use loopward_runner::journal::JournalError;
use loopward_runner::secrets::MaskingSink;
use loopward_runner::{Clock, RunSpec, SystemClock};
use loopward_term::json::JsonSink;
use loopward_term::render::{Printer, Tone};
use loopward_term::timeline::LiveSink;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

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
                    runs_dir: runs_dir.clone(),
                    custody: custody.clone(),
                    clock: clock.clone(),
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

/// A built runner and how to start or resume its run: what `loopward run` and `loopward loop`
/// share from the first record on (the timeline, `--json`, the summary, the exit status).
pub(super) struct Drive {
    /// The team.
    pub(super) runner: loopward_runner::Runner,
    /// The runs folder.
    pub(super) runs_dir: PathBuf,
    /// The key ring and sealed stores.
    pub(super) custody: loopward::state::Custody,
    /// The clock.
    pub(super) clock: Arc<dyn Clock>,
    /// The run to resume, if any.
    pub(super) resume: Option<RunId>,
    /// `--id`.
    pub(super) id: Option<String>,
    /// The task of a new run.
    pub(super) task: Option<String>,
    /// The agent that takes the first turn of a new run.
    pub(super) first: loopward_core::AgentId,
    /// The config file, copied into a new run's folder.
    pub(super) config: PathBuf,
    /// `--script`, remembered for `--resume`.
    pub(super) script: Option<PathBuf>,
    /// `--json`.
    pub(super) json: bool,
    /// `--quiet`.
    pub(super) quiet: bool,
    /// What the title line names (the backend, or the CLI agent).
    pub(super) label: String,
    /// The secrets masked in every record and in everything printed.
    pub(super) masker: loopward_runner::secrets::Masker,
}

/// Starts or resumes the run and reports how it ended.
pub(super) async fn drive(d: Drive) -> Result<ExitCode> {
    let Drive {
        runner,
        runs_dir,
        custody,
        clock,
        resume,
        id: id_arg,
        task: task_arg,
        first: first_arg,
        config,
        script,
        json,
        quiet,
        label,
        masker,
    } = d;
    let (id, task, first, ledger, journal) = match resume {
        Some(id) => {
            let dir = ledger::run_dir(&runs_dir, &id);
            if !dir.join(ledger::EVENTS_FILE).exists() {
                bail!(
                    "there is no run {id} in {}: nothing to resume; start it with `loopward run --id {id}`",
                    runs_dir.display()
                );
            }
            let mut opts = custody.reopen_options(&dir, clock.clone())?;
            opts.masker = masker.clone();
            let ledger = ledger::reopen(&runs_dir, &id, opts)?;
            let journal = match ledger::journal(&dir) {
                Ok(j) => j,
                Err(e) if e.downcast_ref::<JournalError>().is_some_and(|e| matches!(e, JournalError::NotStarted { .. })) => bail!(
                    "run {id} was stopped before its first record, so there is nothing to resume; start it again under its id: `loopward run --id {id}`"
                ),
                Err(e) => return Err(e),
            };
            if let Some(status) = journal.finished() {
                // Killed after its end was recorded but before the ledger was closed: close it
                // now (audit files, anchor), so the finished run verifies.
                let strict = custody.verify_options(&runs_dir)?;
                let anchored =
                    loopward_runner::audit::verify(&dir, &strict).is_ok_and(|ok| ok.anchored);
                if !anchored {
                    ledger
                        .finish()
                        .with_context(|| format!("cannot close the ledger of run {id}"))?;
                }
                bail!(
                    "run {id} finished ({}{}); a finished run is not resumed. Read it with `loopward report`, re-judge it with `loopward replay {}`, or start a new run",
                    status.label(),
                    status_detail(status),
                    dir.display()
                );
            }
            let (task, first) = (journal.task().to_string(), journal.first().clone());
            (id, task, first, ledger, Some(journal))
        }
        None => {
            let id = match &id_arg {
                Some(s) => parse_id("--id", s)?,
                None => new_run_id(&*clock),
            };
            let task = task_arg
                .clone()
                .context("no task: pass --task \"…\" or set run.task in the config")?;
            let mut opts = custody.ledger_options(&runs_dir, clock.clone())?;
            opts.masker = masker.clone();
            let ledger = ledger::start(&runs_dir, &id, opts)?;
            // Replay reads the config the run was made with from its folder.
            std::fs::copy(&config, ledger.run_dir().join(CONFIG_FILE)).with_context(|| {
                format!("cannot copy the config into {}", ledger.run_dir().display())
            })?;
            StartedWith { script }.keep(&ledger.run_dir())?;
            (id, task, first_arg.clone(), ledger, None)
        }
    };
    let run_dir = ledger.run_dir();
    let out = Arc::new(Mutex::new(Printer::stdout()));
    let backend_name = label.as_str();
    let json_out = Arc::new(Mutex::new(std::io::stdout()));
    let sink: Arc<dyn loopward_core::AuditSink> = if json {
        let start = loopward_term::json::line(
            "start",
            serde_json::json!({"run": id, "task": masker.mask_str(&task), "backend": backend_name, "resumed": journal.is_some()}),
        );
        println_json(&json_out, &start);
        Arc::new(JsonSink::new(ledger.clone(), json_out.clone()))
    } else if quiet {
        ledger.clone()
    } else {
        Arc::new(LiveSink::new(ledger.clone(), out.clone()))
    };
    if !json && !quiet {
        let mut o = out.lock().unwrap_or_else(|p| p.into_inner());
        o.line(Tone::Title, format!("run {id} · {backend_name}"));
        o.line(Tone::Dim, format!("task: {}", masker.mask_str(&task)));
        if let Some(j) = &journal {
            let interrupted = j.interrupted();
            o.line(
                Tone::Dim,
                format!(
                    "resumed from the ledger: {} turn(s) recorded{}",
                    j.turns(),
                    if interrupted.is_empty() {
                        String::new()
                    } else {
                        format!("; interrupted call(s): {}", interrupted.join(", "))
                    }
                ),
            );
        }
    }
    // Outermost: the terminal and --json show what the ledger hashes, masked.
    let sink: Arc<dyn loopward_core::AuditSink> = if masker.is_empty() {
        sink
    } else {
        Arc::new(MaskingSink::new(sink, masker.clone()))
    };
    let spec = RunSpec {
        id: id.clone(),
        // The CLI speaks for the person at the terminal: the task is what they passed (`--task`)
        // or wrote in their config (`run.task`); resumed, the runner takes the journal's.
        task: Person::at_the_keyboard().says(task),
        first,
        audit: sink,
        audit_location: Some(run_dir.clone()),
    };
    let report = match &journal {
        None => runner.run(spec).await,
        Some(j) => runner.resume(spec, j).await?,
    };
    let finished = ledger.finish();
    // The gate's name is in the pending record: the commands printed name it.
    let approve = match &report.status {
        RunStatus::AwaitingApproval { pending } => {
            let gate = custody
                .approvals()
                .ok()
                .and_then(|s| s.list_pending().into_iter().find(|p| p.id == *pending))
                .map_or_else(|| "<gate>".to_string(), |p| p.gate);
            Some((
                pending.clone(),
                format!("loopward approve {id} {gate}"),
                format!("loopward deny {id} {gate}"),
            ))
        }
        _ => None,
    };
    let code = exit_code(&report.status);
    if json {
        let figures = Figures::of(&run_dir, &report);
        let error = match (&report.status, &finished) {
            (RunStatus::Failed { error } | RunStatus::AuditFailed { error }, _) => {
                Some(error.clone())
            }
            (_, Err(e)) => Some(format!("the ledger could not be finished: {e}")),
            _ => None,
        };
        let end = loopward_term::json::line(
            "end",
            serde_json::json!({
                "run": id,
                "status": report.status,
                "exit_code": code,
                "turns": figures.turns,
                "handoffs": figures.handoffs,
                "tokens": figures.tokens,
                "tokens_incomplete": figures.short,
                "ledger": finished.as_ref().ok().map(|_| ledger.path().display().to_string()),
                "final_text": Some(masker.mask_str(&report.final_text)).filter(|t| !t.is_empty()),
                "approve": approve.as_ref().map(|(pending, yes, no)| serde_json::json!({
                    "pending": pending,
                    "approve": yes,
                    "deny": no,
                    "then": format!("loopward run --resume {id}"),
                })),
                "error": error.map(|e| masker.mask_str(&e).into_owned()),
            }),
        );
        println_json(&json_out, &end);
        return Ok(ExitCode::from(code));
    }
    let mut o = out.lock().unwrap_or_else(|p| p.into_inner());
    let tone = if report.status == RunStatus::Completed {
        Tone::Ok
    } else {
        Tone::Refusal
    };
    let figures = Figures::of(&run_dir, &report);
    o.line(
        tone,
        format!("{}: {}", report.status.label(), figures.text()),
    );
    if let (Some(agent), false) = (&report.last_agent, report.final_text.is_empty()) {
        if !quiet {
            o.line(
                Tone::Plain,
                format!("{agent}: {}", masker.mask_str(&report.final_text)),
            );
        }
    }
    if let Some((pending, yes, no)) = &approve {
        let dir = custody
            .approvals()
            .map_or_else(|_| String::new(), |s| format!(" in {}", s.dir().display()));
        o.line(
            Tone::Warn,
            format!("waiting for a person: pending approval {pending}{dir}; answer with `{yes}` or `{no}`, then `loopward run --resume {id}`"),
        );
    }
    if let RunStatus::Failed { error } | RunStatus::AuditFailed { error } = &report.status {
        o.line(Tone::Refusal, format!("error: {error}"));
    }
    match finished {
        Ok(_) if quiet => {}
        Ok(f) => {
            o.line(
                Tone::Dim,
                format!(
                    "ledger: {} ({} records)",
                    ledger.path().display(),
                    f.final_seq
                ),
            );
            o.line(Tone::Dim, format!("timeline: {}", f.audit_md.display()));
        }
        Err(e) => o.line(
            Tone::Refusal,
            format!("the ledger could not be finished: {e}"),
        ),
    }
    o.flush();
    Ok(ExitCode::from(code))
}

/// Turns, handoffs and tokens as `loopward report` shows them: folded from the ledger, not
/// from runner state (a stopped turn's tokens and handoffs are in the ledger either way).
#[derive(Debug)]
struct Figures {
    turns: u64,
    handoffs: usize,
    tokens: u64,
    /// Why `tokens` may be short, when it may be.
    short: Option<&'static str>,
}

impl Figures {
    fn of(run_dir: &Path, report: &loopward_runner::RunReport) -> Self {
        // A model call is paid before its record is written: once the ledger has failed, a
        // call whose record was lost is in no count.
        let stopped = matches!(report.status, RunStatus::AuditFailed { .. })
            .then_some("the ledger stopped recording");
        match ledger::run_figures(run_dir) {
            Ok(f) => Self {
                turns: f.turns,
                handoffs: f.handoffs.len(),
                tokens: f.usage.total(),
                short: stopped,
            },
            // The runner counts a turn's tokens only when the turn ends.
            Err(_) => Self {
                turns: u64::from(report.turns),
                handoffs: report.handoffs.len(),
                tokens: report.usage.total(),
                short: stopped.or(Some("the ledger could not be read")),
            },
        }
    }

    /// `2 turns, 1 handoff, 170 tokens`; a count that may be short says so.
    fn text(&self) -> String {
        let tokens = match (self.short, self.tokens) {
            (None, n) => format!("{n} tokens"),
            (Some(why), 0) => format!("tokens unknown ({why})"),
            (Some(why), n) => format!("at least {n} tokens ({why})"),
        };
        format!(
            "{} {}, {} {}, {tokens}",
            self.turns,
            plural(self.turns, "turn", "turns"),
            self.handoffs,
            plural(self.handoffs as u64, "handoff", "handoffs"),
        )
    }
}

/// What a run was started with beyond its config and its `run_started` record (task, first
/// agent), kept in its folder so that `--resume` goes on with the same backend.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct StartedWith {
    /// `--script`, absolute.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    script: Option<PathBuf>,
}

impl StartedWith {
    /// Its file in the run's folder.
    const FILE: &'static str = "started_with.json";

    /// What the run in `run_dir` was started with; nothing for a run started without flags to
    /// remember (or by a loopward that did not remember them).
    fn read(run_dir: &Path) -> Result<Self> {
        let path = run_dir.join(Self::FILE);
        match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).with_context(|| {
                format!(
                    "{} is not what `loopward run` wrote; restore it, or delete it to resume with the config's script",
                    path.display()
                )
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Self::default()),
            Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
        }
    }

    /// Kept in `run_dir` before the run's first record, so a run that can be resumed has it
    /// whole; nothing to remember removes what an earlier start under the same id left.
    fn keep(&self, run_dir: &Path) -> Result<()> {
        let path = run_dir.join(Self::FILE);
        if self.script.is_none() {
            return match std::fs::remove_file(&path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    Err(e).with_context(|| format!("cannot remove {}", path.display()))
                }
                _ => Ok(()),
            };
        }
        let json =
            serde_json::to_vec_pretty(self).context("cannot encode what the run started with")?;
        std::fs::write(&path, json).with_context(|| format!("cannot write {}", path.display()))
    }
}

/// One JSON line on stdout, flushed (a script reads it as the run goes).
fn println_json(out: &Mutex<std::io::Stdout>, line: &str) {
    use std::io::Write as _;
    let mut out = out.lock().unwrap_or_else(|p| p.into_inner());
    let _ = writeln!(out, "{line}").and_then(|()| out.flush());
}

fn plural<'a>(n: u64, one: &'a str, many: &'a str) -> &'a str {
    if n == 1 {
        one
    } else {
        many
    }
}

#[cfg(test)]
mod tests {
    use super::{exit_code, Figures};
    use loopward_core::RunStatus;

    #[test]
    fn a_token_count_the_ledger_may_have_missed_is_never_said_as_exact() {
        let figures = |tokens, short| Figures {
            turns: 1,
            handoffs: 0,
            tokens,
            short,
        };
        assert_eq!(figures(170, None).text(), "1 turn, 0 handoffs, 170 tokens");
        let why = Some("the ledger stopped recording");
        assert_eq!(
            figures(170, why).text(),
            "1 turn, 0 handoffs, at least 170 tokens (the ledger stopped recording)"
        );
        assert_eq!(
            figures(0, why).text(),
            "1 turn, 0 handoffs, tokens unknown (the ledger stopped recording)"
        );
    }

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
