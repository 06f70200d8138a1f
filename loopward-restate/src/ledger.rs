//! The run's ledger as a replayed run sees it: one ledger, each record once.
//!
//! Restate re-runs a handler from the top after a worker dies, feeding journaled steps back.
//! Everything between steps is run again and records the same events again, so this sink
//! matches each event against the ledger already on disk, position by position: the same event
//! is the one already written (kept, with its original time and hash), a different one is a
//! fork and stops the run; past the end of the file, events are appended. Records made inside
//! a journaled step are not made again when the step is replayed: the journal holds the
//! position the ledger had reached after it, and the sink moves there ([`ReplayLedger::seek`]).

use loopward_core::{AuditError, AuditEvent, AuditSink, RunId, Scope};
use loopward_runner::audit::{Ledger, LedgerError, LedgerOptions, Record, EVENTS_FILE};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The audit sink of a run executed on Restate.
pub struct ReplayLedger {
    ledger: Arc<Ledger>,
    state: Mutex<State>,
}

struct State {
    /// The events on disk (and appended since), in order, without `ledger_recovered` records
    /// (a reopening adds those; they are not part of what the run re-derives).
    events: Vec<(Scope, AuditEvent)>,
    /// How many of them the run has accounted for so far.
    cursor: usize,
}

impl std::fmt::Debug for ReplayLedger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplayLedger")
            .field("path", &self.ledger.path())
            .finish_non_exhaustive()
    }
}

/// The ledger of a Restate run could not be opened.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// The ledger could not be created or reopened (another worker holds it, a torn file that is
    /// not just a torn last line, an IO error).
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    /// A record on disk could not be read back.
    #[error("record {seq} of {path} cannot be read back ({why}); run `loopward verify` on it")]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// The record's position.
        seq: usize,
        /// Why.
        why: String,
    },
}

impl ReplayLedger {
    /// Creates the run's ledger under `runs_dir`, or reopens it when an earlier attempt of the
    /// same invocation (on this worker or another) already started it.
    pub fn open(runs_dir: &Path, run: &RunId, opts: LedgerOptions) -> Result<Arc<Self>, OpenError> {
        let path = runs_dir.join(run.as_str()).join(EVENTS_FILE);
        let ledger = if path.exists() {
            Ledger::open_existing(runs_dir, run, opts)?.0
        } else {
            Ledger::create(runs_dir, run, opts)?
        };
        let events = read_events(&path)?;
        Ok(Arc::new(Self {
            ledger,
            state: Mutex::new(State { events, cursor: 0 }),
        }))
    }

    /// The ledger written to.
    pub fn ledger(&self) -> &Arc<Ledger> {
        &self.ledger
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The events the run has accounted for so far (replayed or appended), in order.
    pub(crate) fn accounted(&self) -> Vec<(Scope, AuditEvent)> {
        let st = self.state();
        st.events[..st.cursor].to_vec()
    }

    /// How many events the run has accounted for.
    pub(crate) fn cursor(&self) -> u64 {
        self.state().cursor as u64
    }

    /// Moves to `cursor`, where a replayed step left the ledger.
    pub(crate) fn seek(&self, cursor: u64) -> Result<(), AuditError> {
        let mut st = self.state();
        let to = usize::try_from(cursor).unwrap_or(usize::MAX);
        if to > st.events.len() {
            return Err(AuditError(format!(
                "the Restate journal says the ledger {} had {to} records after a step, but it has {}; \
                 the ledger lost records written before the worker stopped (is runs/ on storage every worker shares?)",
                self.ledger.path().display(),
                st.events.len()
            )));
        }
        st.cursor = to;
        Ok(())
    }
}

impl AuditSink for ReplayLedger {
    fn commit(&self) -> Result<(), AuditError> {
        self.ledger.commit()
    }

    fn record(&self, scope: &Scope, event: &AuditEvent) -> Result<(), AuditError> {
        let mut st = self.state();
        let at = st.cursor;
        if let Some((s, e)) = st.events.get(at) {
            if s == scope && e == event {
                st.cursor += 1;
                return Ok(());
            }
            return Err(AuditError(format!(
                "replaying run {} forked its ledger at record {}: the ledger holds {} but the replay made {}; \
                 the run stops rather than record a decision twice or two ways. A step that is not \
                 deterministic on replay (an override consumed before the worker stopped, a wall-clock cap) \
                 does this: start the work again as a new run",
                scope.run,
                at + 1,
                e.kind(),
                event.kind()
            )));
        }
        self.ledger.record(scope, event)?;
        st.events.push((scope.clone(), event.clone()));
        st.cursor += 1;
        Ok(())
    }
}

fn read_events(path: &Path) -> Result<Vec<(Scope, AuditEvent)>, OpenError> {
    let bytes = std::fs::read(path).map_err(|e| LedgerError::Io {
        path: path.to_path_buf(),
        source: e,
    })?;
    let mut events = Vec::new();
    for (i, line) in bytes
        .split_inclusive(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .enumerate()
    {
        let bad = |why: String| OpenError::Unreadable {
            path: path.to_path_buf(),
            seq: i + 1,
            why,
        };
        let (record, _) = Record::parse_line(line).map_err(|e| bad(e.0))?;
        let event = record.event().map_err(|e| bad(e.0))?;
        if matches!(event, AuditEvent::LedgerRecovered { .. }) {
            continue;
        }
        events.push((record.scope(), event));
    }
    Ok(events)
}

#[cfg(test)]
mod tests {
    use super::*;
    use loopward_core::AgentId;

    fn scope(run: &RunId) -> Scope {
        Scope {
            run: run.clone(),
            turn: None,
            agent: None,
        }
    }

    fn human(text: &str) -> AuditEvent {
        AuditEvent::HumanMessage {
            content: (&loopward_core::Person::at_the_keyboard().says(text)).into(),
        }
    }

    /// A fresh runs directory, and the run `r1` to open in it.
    fn fresh() -> (tempfile::TempDir, RunId) {
        (tempfile::tempdir().unwrap(), RunId::new("r1").unwrap())
    }

    /// `run`'s unkeyed ledger in `dir`, opened as a worker opens it.
    fn open(dir: &Path, run: &RunId) -> Result<Arc<ReplayLedger>, OpenError> {
        ReplayLedger::open(dir, run, LedgerOptions::default())
    }

    fn lines(dir: &Path, run: &RunId) -> usize {
        std::fs::read_to_string(dir.join(run.as_str()).join(EVENTS_FILE))
            .unwrap()
            .lines()
            .count()
    }

    #[test]
    fn a_replay_keeps_the_records_already_written_and_appends_the_rest() {
        let (dir, run) = fresh();
        let keys =
            loopward_runner::audit::KeyRing::load_or_create(&dir.path().join("keys")).unwrap();
        let opts = || LedgerOptions::keyed(keys.current().unwrap().clone());
        {
            let first = ReplayLedger::open(dir.path(), &run, opts()).unwrap();
            first.record(&scope(&run), &human("a")).unwrap();
            first.record(&scope(&run), &human("b")).unwrap();
        }
        let again = ReplayLedger::open(dir.path(), &run, opts()).unwrap();
        again.record(&scope(&run), &human("a")).unwrap();
        again.record(&scope(&run), &human("b")).unwrap();
        assert_eq!(
            lines(dir.path(), &run),
            2,
            "matched records are not written twice"
        );
        again.record(&scope(&run), &human("c")).unwrap();
        assert_eq!(lines(dir.path(), &run), 3);
        again.ledger().finish().unwrap();
        // Strictly: keyed, anchored.
        let ok = loopward_runner::audit::verify(
            &dir.path().join("r1"),
            &loopward_runner::audit::VerifyOptions::keyed(keys.clone()),
        )
        .unwrap();
        assert_eq!(ok.key.as_ref(), Some(keys.current().unwrap().id()));
        assert!(ok.anchored);
    }

    #[test]
    fn a_replay_that_makes_another_record_is_a_fork_and_is_refused() {
        let (dir, run) = fresh();
        {
            let first = open(dir.path(), &run).unwrap();
            first.record(&scope(&run), &human("a")).unwrap();
        }
        let again = open(dir.path(), &run).unwrap();
        let started = AuditEvent::RunStarted {
            task: "a".into(),
            agent: AgentId::new("x").unwrap(),
        };
        let err = again.record(&scope(&run), &started).unwrap_err();
        assert!(err.0.contains("forked its ledger at record 1"), "{}", err.0);
        assert_eq!(lines(dir.path(), &run), 1);
    }

    #[test]
    fn a_step_replayed_past_the_ledgers_end_is_refused() {
        let (dir, run) = fresh();
        let sink = open(dir.path(), &run).unwrap();
        sink.record(&scope(&run), &human("a")).unwrap();
        sink.seek(1).unwrap();
        sink.seek(0).unwrap();
        let err = sink.seek(2).unwrap_err();
        assert!(err.0.contains("lost records"), "{}", err.0);
    }

    #[test]
    fn a_second_worker_cannot_open_a_ledger_the_first_still_holds() {
        let (dir, run) = fresh();
        let first = open(dir.path(), &run).unwrap();
        first.record(&scope(&run), &human("a")).unwrap();
        let second = open(dir.path(), &run);
        assert!(matches!(
            second,
            Err(OpenError::Ledger(LedgerError::Locked(_)))
        ));
    }
}
