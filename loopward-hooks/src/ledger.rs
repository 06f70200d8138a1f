//! Where the hook's decisions are recorded: one hash-chained [`Ledger`] per Claude Code session,
//! `runs/claude-code-<session>/events.jsonl`, created by the session's first event and reopened
//! at its head by every later hook process (the last record checked and chained to; a torn last
//! line, or a head that does not verify, makes it check the whole chain, cut and record).

use loopward_core::{AgentId, AuditError, AuditEvent, AuditSink, RunId, Scope};
use loopward_runner::audit::{Ledger, LedgerKey, LedgerOptions};
use loopward_runner::Clock;
use std::path::Path;
use std::sync::Arc;

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

/// The runs' own ledger format ([`Ledger`]), so `loopward verify` and `loopward report` read
/// Claude Code sessions like runs. A session never finishes, so its ledger is not anchored.
#[derive(Clone, Debug, Default)]
pub struct FileLedgers {
    key: Option<LedgerKey>,
}

impl FileLedgers {
    /// Ledgers chained with an HMAC under `key` instead of plain SHA-256.
    pub fn keyed(key: LedgerKey) -> Self {
        Self { key: Some(key) }
    }
}

impl LedgerOpener for FileLedgers {
    fn open(
        &self,
        runs_dir: &Path,
        run: &RunId,
        clock: Arc<dyn Clock>,
    ) -> Result<Arc<dyn AuditSink>, AuditError> {
        let opts = LedgerOptions {
            key: self.key.clone(),
            clock,
            ..LedgerOptions::default()
        };
        let fail = |e: loopward_runner::audit::LedgerError| AuditError(e.to_string());
        let events = runs_dir.join(run.as_str()).join("events.jsonl");
        let ledger = if events.exists() {
            // At its head: a long session's chain is not read again on every call; the new
            // records chain to the head, whose keyed hash is checked (`verify` reads it whole).
            Ledger::open_at_head(runs_dir, run, opts).map_err(fail)?.0
        } else {
            Ledger::create(runs_dir, run, opts).map_err(fail)?
        };
        Ok(ledger)
    }
}

/// The records of one event, kept in order for a caller's own ledger
/// ([`handle_recorded`](crate::handle_recorded)) instead of written to the session's.
#[derive(Default)]
pub(crate) struct Kept(std::sync::Mutex<Vec<(Option<AgentId>, AuditEvent)>>);

impl Kept {
    /// The records kept so far, each with its scope's agent, taken.
    pub(crate) fn take(&self) -> Vec<(Option<AgentId>, AuditEvent)> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

impl AuditSink for Kept {
    fn record(&self, scope: &Scope, event: &AuditEvent) -> Result<(), AuditError> {
        self.record_owned(scope, event.clone())
    }

    fn record_owned(&self, scope: &Scope, event: AuditEvent) -> Result<(), AuditError> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((scope.agent.clone(), event));
        Ok(())
    }
}
