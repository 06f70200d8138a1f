//! Whole runs of the scripted team of part 4 (planner ⇄ builder, a `noop` call and a handoff
//! each turn, behind the part 2 stack): into a real ledger under a given durability, counting
//! its syncs and new files through the ledger's fault hook (parts 3 and 11), or into memory
//! (part 11's baseline).

use crate::support::{team_runner, TeamModel, TEAM_ROUNDS};
use anyhow::Result;
use loopward_core::{AgentId, AuditEvent, AuditSink, Person, RunStatus};
use loopward_runner::audit::{Durability, Ledger, LedgerKey, LedgerOp, LedgerOptions, MemorySink};
use loopward_runner::{RunSpec, Runner};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// One run's figures.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct TeamRun {
    /// Records written.
    pub records: u64,
    /// Decision records among them ([`AuditEvent::is_decision`]).
    pub decisions: u64,
    /// `fsync`s and `fdatasync`s the ledger made: its own file's, the one at finish included,
    /// the folders' and the index's (0 in memory).
    pub syncs: u64,
    /// Those of the ledger's own file alone: one per commit that follows decisions, one at
    /// finish.
    pub ledger_syncs: u64,
    /// New files and folders the run made: its folder, its ledger, its pages (0 in memory);
    /// the index and the index head's temporary too when the run makes or replaces them.
    pub files: u64,
    /// Seconds from the run's start to its ledger finished.
    pub seconds: f64,
}

/// Where a run on disk writes, as `loopward run` does.
#[derive(Clone, Debug)]
pub struct Disk {
    /// The runs folder (`runs/`).
    pub runs_dir: PathBuf,
    /// When the ledger syncs.
    pub durability: Durability,
    /// The ledger's key (`None`: a keyless chain).
    pub key: Option<LedgerKey>,
    /// The index head in the state folder, written at finish.
    pub index_head: Option<PathBuf>,
}

/// Runs the team (`TEAM_ROUNDS` rounds) once into a fresh keyless ledger under `runs_dir` with
/// `durability`.
pub async fn team_run(runs_dir: &Path, id: &str, durability: Durability) -> Result<TeamRun> {
    let disk = Disk {
        runs_dir: runs_dir.to_path_buf(),
        durability,
        key: None,
        index_head: None,
    };
    team_run_on_disk(&disk, id, TEAM_ROUNDS).await
}

/// The team's runner, for `rounds` rounds, in a fresh workspace (kept while the runner is).
fn team(rounds: usize) -> Result<(Runner, AgentId, tempfile::TempDir)> {
    let ws = tempfile::tempdir()?;
    let (runner, first) = team_runner(ws.path(), TeamModel::rounds(rounds))?;
    Ok((runner, first, ws))
}

/// Runs the team for `rounds` rounds once into a fresh ledger, as `disk` says; timed from the
/// ledger's creation to its finish (pages and anchor written).
pub async fn team_run_on_disk(disk: &Disk, id: &str, rounds: usize) -> Result<TeamRun> {
    let (runner, first, _ws) = team(rounds)?;
    let counters: [Arc<AtomicU64>; 3] = Default::default();
    let [syncs, ledger_syncs, files] = counters.clone();
    let opts = LedgerOptions {
        durability: disk.durability,
        key: disk.key.clone(),
        index_head: disk.index_head.clone(),
        fault: Some(Arc::new(move |op: LedgerOp<'_>| {
            let counts = [
                op.is_sync(),
                matches!(op, LedgerOp::Sync { .. }),
                matches!(op, LedgerOp::Create { .. }),
            ];
            for (counter, yes) in counters.iter().zip(counts) {
                counter.fetch_add(u64::from(yes), Ordering::Relaxed);
            }
            Ok(())
        })),
        pages: loopward_pages::pages(),
        ..LedgerOptions::default()
    };
    let start = Instant::now();
    let ledger = Ledger::create(&disk.runs_dir, &crate::support::run_id(id.into())?, opts)?;
    let report = runner
        .run(ledger.run_spec(Person::at_the_keyboard().says("build it"), first))
        .await;
    ensure_completed(report.status)?;
    let done = ledger.finish()?;
    let seconds = start.elapsed().as_secs_f64();
    let text = std::fs::read_to_string(ledger.run_dir().join("events.jsonl"))?;
    let mut decisions = 0;
    for line in text.lines() {
        let (record, _) = loopward_runner::audit::Record::parse_line(line.as_bytes())
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        let event: AuditEvent = record.event().map_err(|e| anyhow::anyhow!("{e}"))?;
        decisions += u64::from(event.is_decision());
    }
    Ok(TeamRun {
        records: done.final_seq,
        decisions,
        syncs: syncs.load(Ordering::Relaxed),
        ledger_syncs: ledger_syncs.load(Ordering::Relaxed),
        files: files.load(Ordering::Relaxed),
        seconds,
    })
}

/// Runs the team for `rounds` rounds once into a [`MemorySink`]; timed from the run's start to
/// its end.
pub async fn team_run_in_memory(id: &str, rounds: usize) -> Result<TeamRun> {
    let (runner, first, _ws) = team(rounds)?;
    let sink = Arc::new(MemorySink::default());
    let audit: Arc<dyn AuditSink> = sink.clone();
    let start = Instant::now();
    let report = runner
        .run(RunSpec::new(
            crate::support::run_id(id.into())?,
            Person::at_the_keyboard().says("build it"),
            first,
            audit,
        ))
        .await;
    let seconds = start.elapsed().as_secs_f64();
    ensure_completed(report.status)?;
    let events = sink.events();
    Ok(TeamRun {
        records: events.len() as u64,
        decisions: events.iter().filter(|(_, e)| e.is_decision()).count() as u64,
        syncs: 0,
        ledger_syncs: 0,
        files: 0,
        seconds,
    })
}

fn ensure_completed(status: RunStatus) -> Result<()> {
    anyhow::ensure!(
        status == RunStatus::Completed,
        "the team run ended {status:?}"
    );
    Ok(())
}
