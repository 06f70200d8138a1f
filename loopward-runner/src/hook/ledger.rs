//! Where the hook's decisions are recorded: one ledger per Claude Code session,
//! `runs/claude-code-<session>/events.jsonl`, reopened by every hook process.

use crate::clock::Clock;
use loopward_core::{AuditError, AuditEvent, AuditSink, RunId, Scope};
use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Opens the ledger of one session. The hook holds the session's lock while it records, so a
/// ledger has one writer at a time.
pub trait LedgerOpener: Send + Sync {
    /// Opens (creating or reopening) the ledger of `run` in `runs_dir/<run>/`.
    fn open(
        &self,
        runs_dir: &Path,
        run: &RunId,
        clock: Arc<dyn Clock>,
    ) -> Result<Arc<dyn AuditSink>, AuditError>;
}

/// INTERIM: an append-only JSON-lines ledger (one event a line, fsynced), until the
/// hash-chained ledger lands.
#[derive(Clone, Copy, Debug, Default)]
pub struct JsonlLedgers;

impl LedgerOpener for JsonlLedgers {
    fn open(
        &self,
        runs_dir: &Path,
        run: &RunId,
        clock: Arc<dyn Clock>,
    ) -> Result<Arc<dyn AuditSink>, AuditError> {
        let run_dir = runs_dir.join(run.as_str());
        let run_dir = run_dir.as_path();
        std::fs::create_dir_all(run_dir)
            .map_err(|e| AuditError(format!("{}: {e}", run_dir.display())))?;
        let path = run_dir.join("events.jsonl");
        let seq = std::fs::read_to_string(&path)
            .map(|s| s.lines().count() as u64)
            .unwrap_or(0);
        Ok(Arc::new(Jsonl {
            path,
            seq: Mutex::new(seq),
            clock,
        }))
    }
}

struct Jsonl {
    path: PathBuf,
    seq: Mutex<u64>,
    clock: Arc<dyn Clock>,
}

impl AuditSink for Jsonl {
    fn record(&self, scope: &Scope, event: &AuditEvent) -> Result<(), AuditError> {
        let mut seq = self.seq.lock().unwrap_or_else(|p| p.into_inner());
        let line = serde_json::json!({
            "seq": *seq, "time_ms": self.clock.now_millis(), "scope": scope, "kind": event.kind(),
            "event": event,
        });
        let fail = |e: std::io::Error| AuditError(format!("{}: {e}", self.path.display()));
        let mut f = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .map_err(fail)?;
        f.write_all(format!("{line}\n").as_bytes()).map_err(fail)?;
        f.sync_data().map_err(fail)?;
        *seq += 1;
        Ok(())
    }
}
