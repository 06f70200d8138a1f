//! Where runs are recorded, and the application's one seam to `loopward_runner::audit`: one
//! folder per run under the runs directory holding its hash-chained `events.jsonl`, and the
//! `audit.json` / `audit.md` (and `audit.html`, with [`Custody`](crate::state::Custody)'s options)
//! rendered from it when the run finishes.
//!
//! Everything the demo and the CLI show about a finished run is read back from these files.
//! Ledgers are chained under the key of loopward's state directory: pass the options of a
//! [`Custody`](crate::state::Custody) ([`Custody::ledger_options`](crate::state::Custody::ledger_options)).

use anyhow::{Context, Result};
use loopward_core::{AuditEvent, RunId, Scope};
use loopward_runner::audit::{Ledger, LedgerOptions, Record, VerifyOptions};
use loopward_runner::Clock;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use loopward_runner::audit::{Report, RunFigures, EVENTS_FILE};

/// The folder of `run` under `runs_dir`.
pub fn run_dir(runs_dir: &Path, run: &RunId) -> PathBuf {
    runs_dir.join(run.as_str())
}

/// Creates the ledger of a new run with `opts` (its key, index head, witness and clock).
pub fn create(runs_dir: &Path, run: &RunId, opts: LedgerOptions) -> Result<Arc<Ledger>> {
    Ledger::create(runs_dir, run, opts).with_context(|| {
        format!(
            "cannot create the ledger of run {run} in {}",
            runs_dir.display()
        )
    })
}

/// The ledger a run starts with: a new one, or — for a run stopped before its first record (an
/// empty ledger, or one holding only a torn line) — its existing one, reopened. A run that
/// began is not started again: resume it (`loopward run --resume <id>`).
pub fn start(runs_dir: &Path, run: &RunId, opts: LedgerOptions) -> Result<Arc<Ledger>> {
    let dir = run_dir(runs_dir, run);
    if !dir.join(EVENTS_FILE).exists() {
        return create(runs_dir, run, opts);
    }
    let ledger = reopen(runs_dir, run, opts)?;
    let began = events(&dir)?
        .iter()
        .any(|(_, e)| matches!(e, AuditEvent::RunStarted { .. }));
    if began {
        anyhow::bail!(
            "run {run} already began (its ledger is {}); run ids are not reused: resume it with `loopward run --resume {run}`, or pick another id",
            dir.join(EVENTS_FILE).display()
        );
    }
    Ok(ledger)
}

/// The journal of a run: its ledger's records read back as the steps it took (see
/// [`loopward_runner::journal`]).
pub fn journal(run_dir: &Path) -> Result<loopward_runner::journal::Journal> {
    loopward_runner::journal::Journal::from_records(&events(run_dir)?)
        .with_context(|| format!("cannot resume from {}", run_dir.display()))
}

/// Reads a run folder's records, in order. Reading is not verifying: use
/// [`verify`](loopward_runner::audit::verify) for that.
pub fn read(run_dir: &Path) -> Result<Vec<Record>> {
    let path = run_dir.join(EVENTS_FILE);
    let bytes = std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))?;
    parse(&path, &bytes)
}

fn parse(path: &Path, bytes: &[u8]) -> Result<Vec<Record>> {
    bytes
        .split(|b| *b == b'\n')
        .enumerate()
        .filter(|(_, l)| !l.is_empty())
        .map(|(i, l)| {
            Record::parse_line(l)
                .map(|(r, _)| r)
                .map_err(|e| anyhow::anyhow!("{}: line {}: {}", path.display(), i + 1, e.0))
        })
        .collect()
}

/// A run's events with their scopes, in order.
pub fn events(run_dir: &Path) -> Result<Vec<(Scope, AuditEvent)>> {
    read(run_dir)?
        .into_iter()
        .map(|r| {
            let event = r
                .event()
                .map_err(|e| anyhow::anyhow!("{}: record {}: {}", run_dir.display(), r.seq, e.0))?;
            Ok((r.scope(), event))
        })
        .collect()
}

/// One run's figures, folded from its ledger by the audit module. A torn last line (a write cut
/// short by a kill or a full disk, without its newline) recorded nothing and is left out.
pub fn run_figures(run_dir: &Path) -> Result<RunFigures> {
    let path = run_dir.join(EVENTS_FILE);
    let bytes = std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))?;
    let whole = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    Ok(RunFigures::from_records(&parse(&path, &bytes[..whole])?))
}

/// The governance report over every run under `runs_dir` (the code behind `loopward report`),
/// from the ledgers that verify under `opts`; the others are listed as not verified.
pub fn report(runs_dir: &Path, opts: &VerifyOptions) -> Result<Report> {
    loopward_runner::audit::report(runs_dir, opts)
        .with_context(|| format!("cannot report on {}", runs_dir.display()))
}

/// Writes `runs_dir/index.html` (every run at a glance; runs that do not verify are marked) and
/// returns its path. A run that verifies but lacks one of its pages (`audit.json`, `audit.md`,
/// `audit.html`: a crash or a full disk between its anchor and its pages) gets them written
/// again from its ledger.
pub fn write_index_html(runs_dir: &Path, opts: &VerifyOptions) -> Result<PathBuf> {
    for verdict in loopward_runner::audit::verify_all(runs_dir, opts).unwrap_or_default() {
        let dir = runs_dir.join(&verdict.run);
        let missing = ["audit.json", "audit.md", "audit.html"]
            .iter()
            .any(|page| !dir.join(page).is_file());
        if verdict.result.is_ok() && missing {
            loopward_pages::write_pages(&dir, opts)
                .with_context(|| format!("cannot write the pages of {}", dir.display()))?;
        }
    }
    let page = loopward_pages::render_index(runs_dir, opts)
        .with_context(|| format!("cannot render the index of {}", runs_dir.display()))?;
    let path = runs_dir.join("index.html");
    std::fs::write(&path, page).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(path)
}

/// Reopens the ledger of a paused run to append to it (after a crash, a torn last line is cut
/// and recorded), with `opts` (the key it was created under, and where to anchor).
pub fn reopen(runs_dir: &Path, run: &RunId, opts: LedgerOptions) -> Result<Arc<Ledger>> {
    Ledger::open_existing(runs_dir, run, opts)
        .map(|(l, _)| l)
        .with_context(|| {
            format!(
                "cannot reopen the ledger of run {run} in {}",
                runs_dir.display()
            )
        })
}

/// The task and first agent a run was started with, from its `run_started` record.
pub fn started(run_dir: &Path) -> Result<(String, loopward_core::AgentId)> {
    events(run_dir)?
        .into_iter()
        .find_map(|(_, e)| match e {
            AuditEvent::RunStarted { task, agent } => Some((task, agent)),
            _ => None,
        })
        .with_context(|| {
            format!(
                "{}: the ledger has no run_started record",
                run_dir.display()
            )
        })
}

/// A fresh run id from the clock: `run-<UTC stamp>-<millis>`.
pub fn new_run_id(clock: &dyn Clock) -> RunId {
    let ms = clock.now_millis();
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms);
    let stamp: String = humantime::format_rfc3339_seconds(t)
        .to_string()
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .collect();
    RunId::new(format!("run-{stamp}-{:03}", ms % 1000)).unwrap_or_else(|| {
        RunId::new("run").unwrap_or_else(|| unreachable!("\"run\" is a valid run id"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use loopward_runner::audit::{KeyRing, LedgerKey};

    #[test]
    fn the_index_page_writes_again_the_pages_a_verified_run_lacks() {
        let runs = tempfile::tempdir().unwrap();
        let key = LedgerKey::from_bytes(vec![9u8; 32]).unwrap();
        let run = RunId::new("r1").unwrap();
        let opts = LedgerOptions {
            pages: loopward_pages::pages(),
            ..LedgerOptions::keyed(key.clone())
        };
        let done = create(runs.path(), &run, opts).unwrap().finish().unwrap();
        let audit_html = &done.pages[0];
        // A crash between the anchor and the pages left one missing.
        std::fs::remove_file(audit_html).unwrap();
        let opts = VerifyOptions::keyed(KeyRing::single(key));
        write_index_html(runs.path(), &opts).unwrap();
        assert!(audit_html.is_file());
        assert!(runs.path().join("index.html").is_file());
        // Not for a run that does not verify: without the key, nothing is written.
        std::fs::remove_file(audit_html).unwrap();
        write_index_html(runs.path(), &VerifyOptions::default()).unwrap();
        assert!(!audit_html.is_file());
    }
}
