//! Starting or resuming a built run and reporting how it ended: what `loopward run` and
//! `loopward loop` share from the first record on (the timeline, `--json`, the summary, the exit
//! status).

use super::figures::Figures;
use super::started_with::StartedWith;
use super::{exit_code, new_run_id, parse_id, status_detail};
use anyhow::{bail, Context, Result};
use loopward::config::CONFIG_FILE;
use loopward::ledger;
use loopward_core::{Person, RunId, RunStatus};
use loopward_runner::journal::JournalError;
use loopward_runner::secrets::MaskingSink;
use loopward_runner::{Clock, RunSpec};
use loopward_term::json::JsonSink;
use loopward_term::render::{Printer, Tone};
use loopward_term::timeline::LiveSink;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

/// A built runner and how to start or resume its run: what `loopward run` and `loopward loop`
/// share from the first record on (the timeline, `--json`, the summary, the exit status).
pub(crate) struct Drive {
    /// The team.
    pub(crate) runner: loopward_runner::Runner,
    /// The runs folder.
    pub(crate) runs_dir: PathBuf,
    /// The key ring and sealed stores.
    pub(crate) custody: loopward::state::Custody,
    /// The clock.
    pub(crate) clock: Arc<dyn Clock>,
    /// The run to resume, if any.
    pub(crate) resume: Option<RunId>,
    /// `--id`.
    pub(crate) id: Option<String>,
    /// The task of a new run.
    pub(crate) task: Option<String>,
    /// The agent that takes the first turn of a new run.
    pub(crate) first: loopward_core::AgentId,
    /// The config file, copied into a new run's folder.
    pub(crate) config: PathBuf,
    /// `--script`, remembered for `--resume`.
    pub(crate) script: Option<PathBuf>,
    /// `--json`.
    pub(crate) json: bool,
    /// `--quiet`.
    pub(crate) quiet: bool,
    /// What the title line names (the backend, or the CLI agent).
    pub(crate) label: String,
    /// The secrets masked in every record and in everything printed.
    pub(crate) masker: loopward_runner::secrets::Masker,
}

/// Starts or resumes the run and reports how it ended.
pub(crate) async fn drive(d: Drive) -> Result<ExitCode> {
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
        Arc::new(LiveSink::new(ledger.clone(), out.clone()).in_workspace(runner.workspace().root()))
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
    // The CLI speaks for the person at the terminal: the task is what they passed (`--task`)
    // or wrote in their config (`run.task`); resumed, the runner takes the journal's.
    let task = Person::at_the_keyboard().says(task);
    let spec = RunSpec::new(id.clone(), task, first, sink).with_audit_location(run_dir.clone());
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

/// One JSON line on stdout, flushed (a script reads it as the run goes).
fn println_json(out: &Mutex<std::io::Stdout>, line: &str) {
    use std::io::Write as _;
    let mut out = out.lock().unwrap_or_else(|p| p.into_inner());
    let _ = writeln!(out, "{line}").and_then(|()| out.flush());
}
