//! The ledger writer: `runs/<run-id>/events.jsonl`, append-only and hash-chained, one writer
//! per run.
//!
//! Records are whole lines written with one `write` call each time the file grows, so a killed
//! process leaves at most a torn last line. Events on the way to an action
//! ([`AuditEvent::may_wait_for_commit`]: the turn's start, verdicts that let it through, the
//! request) are held in memory until the next [`commit`](AuditSink::commit) — which the runner
//! makes just before the action runs — or the next event written at once, and go out in that
//! one `write`; everything else is written before `record` returns. Decision events are
//! `fsync`ed at the commit: one sync per action, however many decisions gate it (see
//! [`Durability`]). Any write or sync failure poisons the ledger: that `record` or `commit` and
//! every later one fail, so the action the event was to record or authorise does not run.
//!
//! ```
//! use loopward_core::{AuditEvent, AuditSink, RunId, Scope};
//! use loopward_runner::audit::{verify, Ledger, LedgerKey, LedgerOptions, VerifyOptions, KeyRing};
//! let runs = tempfile::tempdir().unwrap();
//! let run = RunId::new("r1").unwrap();
//! let key = LedgerKey::generate().unwrap();
//! let ledger = Ledger::create(runs.path(), &run, LedgerOptions::keyed(key.clone())).unwrap();
//! // One writer per run: a second one is refused.
//! assert!(Ledger::open_existing(runs.path(), &run, LedgerOptions::keyed(key.clone())).is_err());
//! let scope = Scope { run: run.clone(), turn: None, agent: None };
//! ledger.record(&scope, &AuditEvent::HumanMessage { content: (&loopward_core::Person::at_the_keyboard().says("hi")).into() }).unwrap();
//! let done = ledger.finish().unwrap();
//! assert_eq!(done.final_seq, 1);
//! assert!(runs.path().join("r1/audit.md").exists());
//! assert_eq!(done.key.as_ref(), Some(key.id()));
//! let ok = verify(&runs.path().join("r1"), &VerifyOptions::keyed(KeyRing::single(key))).unwrap();
//! assert!(ok.anchored);
//! ```

mod error;
mod finish;
mod options;

pub use error::{Finished, LedgerError, Recovery};
pub use finish::write_pages;
pub use options::{Durability, FaultHook, LedgerOp, LedgerOptions};

use super::record::{write_rfc3339, Chain, LedgerHeader, Record, GENESIS};
use super::verify::{scan, Breach, EVENTS_FILE};
use crate::runner::RunSpec;
use loopward_core::{AgentId, AuditError, AuditEvent, AuditSink, HumanWords, RunId, Scope};
use nix::fcntl::{Flock, FlockArg};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

mod head;

/// Held lines are written once they reach this many bytes, even before the commit.
const HOLD_BYTES: usize = 16 * 1024;

enum Phase {
    Open,
    Poisoned(String),
    Finished,
}

struct State {
    file: Option<Flock<File>>,
    next_seq: u64,
    prev: String,
    /// Sealed lines not yet written (records that may wait for the commit); reused.
    line: Vec<u8>,
    /// The first sequence number in `line`.
    held_from: u64,
    /// The clock's millisecond that `time` formats: records stamped within the same
    /// millisecond reuse it instead of formatting it again.
    time_millis: Option<u64>,
    /// `time_millis` as RFC 3339 (UTC, milliseconds).
    time: String,
    unsynced: u32,
    /// Decision events written since the last sync: the next commit syncs.
    decisions_unsynced: bool,
    /// The run's folder and the runs folder were not synced since this writer created (or
    /// reopened) the ledger: its first sync syncs them first, so a record made durable is never
    /// lost with its folder's entry.
    folders_unsynced: bool,
    phase: Phase,
}

/// The hash-chained ledger of one run. Implements [`AuditSink`]; share it as `Arc<Ledger>`.
pub struct Ledger {
    /// A schema 1 ledger reopened: records are appended without a header.
    legacy: bool,
    run: RunId,
    runs_dir: PathBuf,
    path: PathBuf,
    chain: Chain,
    opts: LedgerOptions,
    state: Mutex<State>,
}

impl std::fmt::Debug for Ledger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ledger")
            .field("run", &self.run)
            .field("path", &self.path)
            .field("opts", &self.opts)
            .finish_non_exhaustive()
    }
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> LedgerError + '_ {
    move |source| LedgerError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn lock(file: File, path: &Path) -> Result<Flock<File>, LedgerError> {
    Flock::lock(file, FlockArg::LockExclusiveNonblock).map_err(|(_, errno)| {
        if errno == nix::errno::Errno::EWOULDBLOCK {
            LedgerError::Locked(path.to_path_buf())
        } else {
            LedgerError::Io {
                path: path.to_path_buf(),
                source: std::io::Error::from_raw_os_error(errno as i32),
            }
        }
    })
}

impl Ledger {
    /// Creates `runs_dir/<run>/events.jsonl` for a new run and takes the writer's lock. Fails if
    /// the run already has a ledger.
    pub fn create(
        runs_dir: &Path,
        run: &RunId,
        opts: LedgerOptions,
    ) -> Result<Arc<Self>, LedgerError> {
        let fault = |op| opts.fault.as_ref().map_or(Ok(()), |h| h.before(op));
        let dir = runs_dir.join(run.as_str());
        fault(LedgerOp::Create { path: &dir })
            .and_then(|()| std::fs::create_dir_all(&dir))
            .map_err(io_err(&dir))?;
        let path = dir.join(EVENTS_FILE);
        let file = fault(LedgerOp::Create { path: &path })
            .and_then(|()| {
                std::fs::OpenOptions::new()
                    .append(true)
                    .create_new(true)
                    .open(&path)
            })
            .map_err(|e| {
                if e.kind() == std::io::ErrorKind::AlreadyExists {
                    LedgerError::AlreadyExists(path.clone())
                } else {
                    io_err(&path)(e)
                }
            })?;
        let file = lock(file, &path)?;
        // The new folder entries are synced with the ledger's first sync, not here: nothing is
        // durable before it, and a run without syncs (`NoSync`) makes none.
        let mut ledger = Self::new(run, runs_dir, path, opts, file, 1, GENESIS);
        ledger
            .state
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .folders_unsynced = true;
        Ok(Arc::new(ledger))
    }

    /// Reopens a run's ledger (after a crash, or to resume): checks the chain, cuts a torn last
    /// line and records [`AuditEvent::LedgerRecovered`] when it did. Damage anywhere but the
    /// last line is refused as [`LedgerError::Corrupt`].
    pub fn open_existing(
        runs_dir: &Path,
        run: &RunId,
        opts: LedgerOptions,
    ) -> Result<(Arc<Self>, Recovery), LedgerError> {
        let (path, file) = head::reopen(runs_dir, run)?;
        let bytes = std::fs::read(&path).map_err(io_err(&path))?;
        let chain = opts.key.clone().map_or(Chain::Sha256, Chain::Hmac);
        let header = expected_header(&bytes, &chain);
        let found = scan(&bytes, &chain, Some(run.as_str()), header.as_ref());
        // Only a torn write is cut: the last line, unparseable or without its newline. A whole
        // line whose hash is wrong is damage (or the wrong key), never cut.
        if let Some((seq, breach)) = found.bad {
            if !(found.bad_is_last_line && matches!(breach, Breach::Unparseable(_))) {
                return Err(LedgerError::Corrupt { path, seq, breach });
            }
        }
        let truncated = (bytes.len() - found.good_len) as u64;
        if truncated > 0 {
            file.set_len(found.good_len as u64).map_err(io_err(&path))?;
            file.sync_all().map_err(io_err(&path))?;
        }
        let kept = found.records.len() as u64;
        let prev = found
            .records
            .last()
            .map_or_else(|| GENESIS.to_string(), |r| r.hash.clone());
        let mut ledger = Self::new(run, runs_dir, path, opts, file, kept + 1, &prev);
        ledger.legacy = header.is_none() && kept > 0;
        // A writer killed before its first sync left its folders unsynced, and nothing here
        // says whether it was: a reopen after a crash (or to resume) syncs them again, once.
        ledger
            .state
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .folders_unsynced = true;
        let ledger = Arc::new(ledger);
        if truncated > 0 {
            let scope = Scope {
                run: run.clone(),
                turn: None,
                agent: None,
            };
            ledger
                .append(
                    &scope,
                    &AuditEvent::LedgerRecovered {
                        truncated_bytes: truncated,
                    },
                    true,
                )
                .map_err(|e| LedgerError::Poisoned {
                    path: ledger.path.clone(),
                    error: e.0,
                })?;
        }
        Ok((
            ledger,
            Recovery {
                kept,
                truncated_bytes: truncated,
            },
        ))
    }

    fn new(
        run: &RunId,
        runs_dir: &Path,
        path: PathBuf,
        opts: LedgerOptions,
        file: Flock<File>,
        next_seq: u64,
        prev: &str,
    ) -> Self {
        Self {
            legacy: false,
            run: run.clone(),
            runs_dir: runs_dir.to_path_buf(),
            path,
            chain: opts.key.clone().map_or(Chain::Sha256, Chain::Hmac),
            opts,
            state: Mutex::new(State {
                file: Some(file),
                next_seq,
                prev: prev.to_string(),
                line: Vec::with_capacity(1024),
                held_from: next_seq,
                time_millis: None,
                time: String::with_capacity(32),
                unsynced: 0,
                decisions_unsynced: false,
                folders_unsynced: false,
                phase: Phase::Open,
            }),
        }
    }

    /// The run.
    pub fn run(&self) -> &RunId {
        &self.run
    }

    /// The run's directory (`runs/<run-id>`): pass it as [`RunSpec::audit_location`].
    pub fn run_dir(&self) -> PathBuf {
        self.runs_dir.join(self.run.as_str())
    }

    /// The ledger file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A [`RunSpec`] whose events go to this ledger, for a task a person gave.
    pub fn run_spec(self: &Arc<Self>, task: HumanWords, first: AgentId) -> RunSpec {
        RunSpec::new(self.run.clone(), task, first, self.clone())
            .with_audit_location(self.run_dir())
    }

    fn append(
        &self,
        scope: &Scope,
        event: &AuditEvent,
        force_sync: bool,
    ) -> Result<(), AuditError> {
        let mut st = self.open_state()?;
        if scope.run != self.run {
            return Err(AuditError(format!(
                "event of run {} sent to the ledger of run {}",
                scope.run, self.run
            )));
        }
        let seq = st.next_seq;
        let kind = event.kind();
        let st = &mut *st;
        let now = self.opts.clock.now_millis();
        if st.time_millis != Some(now) {
            st.time.clear();
            write_rfc3339(&mut st.time, now);
            st.time_millis = Some(now);
        }
        if let Err(e) = self.fault(LedgerOp::Write { seq, kind }) {
            return Err(self.poison(st, format!("writing seq {seq} ({kind}): {e}")));
        }
        let start = st.line.len();
        let hash = match Record::seal_into(
            &self.chain,
            seq,
            &st.time,
            scope,
            event,
            &st.prev,
            &mut st.line,
        ) {
            Ok(hash) => hash,
            Err(e) => {
                st.line.truncate(start);
                return Err(AuditError(format!("cannot serialise {kind}: {e}")));
            }
        };
        if start == 0 {
            st.held_from = seq;
        }
        st.next_seq += 1;
        st.prev.clear();
        st.prev
            .push_str(std::str::from_utf8(&hash).unwrap_or_default());
        st.unsynced += 1;
        st.decisions_unsynced |= event.is_decision();
        let sync = force_sync
            || match self.opts.durability {
                // Decisions wait for the commit before the action they authorise.
                Durability::Decisions | Durability::NoSync => false,
                Durability::EveryEvent => true,
                Durability::GroupCommit(n) => st.unsynced >= n.get(),
            };
        if sync || !event.may_wait_for_commit() || st.line.len() >= HOLD_BYTES {
            self.write_held(st)?;
        }
        if sync {
            self.sync(st, seq, kind, || format!("syncing seq {seq} ({kind})"))?;
        }
        Ok(())
    }

    /// Writes the held lines with one `write`: a crash tears at most the last of them.
    fn write_held(&self, st: &mut State) -> Result<(), AuditError> {
        if st.line.is_empty() {
            return Ok(());
        }
        let written = match st.file.as_mut() {
            Some(f) => f.write_all(&st.line),
            None => Err(std::io::Error::other("the ledger file is closed")),
        };
        if let Err(e) = written {
            let (first, last) = (st.held_from, st.next_seq - 1);
            let seqs = if first == last {
                format!("seq {last}")
            } else {
                format!("seqs {first}–{last}")
            };
            return Err(self.poison(st, format!("writing {seqs}: {e}")));
        }
        st.line.clear();
        st.held_from = st.next_seq;
        Ok(())
    }

    /// The state, if records may still be appended.
    fn open_state(&self) -> Result<std::sync::MutexGuard<'_, State>, AuditError> {
        let st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        match &st.phase {
            Phase::Open => Ok(st),
            Phase::Poisoned(error) => Err(AuditError(format!(
                "ledger {} is unusable after an earlier failure: {error}",
                self.path.display()
            ))),
            Phase::Finished => Err(AuditError(format!(
                "ledger {} is finished; nothing more can be recorded",
                self.path.display()
            ))),
        }
    }

    /// Syncs the file (through the fault hook), and first its folders if this is the writer's
    /// first sync; a failure poisons the ledger.
    fn sync(
        &self,
        st: &mut State,
        seq: u64,
        kind: &str,
        what: impl FnOnce() -> String,
    ) -> Result<(), AuditError> {
        if st.folders_unsynced {
            if let Err(e) = self.sync_folders() {
                return Err(self.poison(st, format!("{}: {e}", what())));
            }
            st.folders_unsynced = false;
        }
        let synced = self
            .fault(LedgerOp::Sync { seq, kind })
            .and_then(|()| st.file.as_ref().map_or(Ok(()), |f| f.sync_data()));
        if let Err(e) = synced {
            return Err(self.poison(st, format!("{}: {e}", what())));
        }
        st.unsynced = 0;
        st.decisions_unsynced = false;
        Ok(())
    }

    /// Writes the held records and syncs the decisions written since the last sync, if any
    /// (see [`Durability::Decisions`]).
    fn commit_decisions(&self) -> Result<(), AuditError> {
        let mut st = self.open_state()?;
        self.write_held(&mut st)?;
        if !st.decisions_unsynced || self.opts.durability != Durability::Decisions {
            return Ok(());
        }
        let seq = st.next_seq - 1;
        self.sync(&mut st, seq, "commit", || {
            format!("syncing the decisions up to seq {seq} before the action they authorise")
        })
    }

    /// Syncs the run's folder and the runs folder, so that the ledger's name (and its folder's)
    /// survives a power loss as well as its records.
    fn sync_folders(&self) -> std::io::Result<()> {
        let dir = self.run_dir();
        for d in [&*dir, &*self.runs_dir] {
            self.fault(LedgerOp::SyncDir { path: d })
                .and_then(|()| sync_dir(d))
                .map_err(|e| {
                    std::io::Error::new(e.kind(), format!("syncing {}: {e}", d.display()))
                })?;
        }
        Ok(())
    }

    fn fault(&self, op: LedgerOp<'_>) -> std::io::Result<()> {
        self.opts.fault.as_ref().map_or(Ok(()), |h| h.before(op))
    }

    /// Stops the ledger after a failure. Held records are dropped, as a killed process would
    /// lose them: none of them was acted on.
    fn poison(&self, st: &mut State, error: String) -> AuditError {
        st.phase = Phase::Poisoned(error.clone());
        st.line.clear();
        AuditError(format!("ledger {}: {error}", self.path.display()))
    }
}

/// The header a reopened ledger's first record must carry: the chain's, or none for a schema 1
/// ledger (keyless, written before headers existed), which is continued as it is.
fn expected_header(bytes: &[u8], chain: &Chain) -> Option<LedgerHeader> {
    let first = bytes.split(|b| *b == b'\n').next().unwrap_or_default();
    let legacy = matches!(chain, Chain::Sha256)
        && Record::parse_line(first).is_ok_and(|(r, _)| r.ledger.is_none());
    (!legacy).then(|| chain.header())
}

impl AuditSink for Ledger {
    fn record(&self, scope: &Scope, event: &AuditEvent) -> Result<(), AuditError> {
        // Masked before it is hashed: a secret never enters the chain.
        match self.opts.masker.mask_event(event)? {
            Some(masked) => self.append(scope, &masked, false),
            None => self.append(scope, event, false),
        }
    }

    fn commit(&self) -> Result<(), AuditError> {
        self.commit_decisions()
    }
}

impl Drop for Ledger {
    /// Writes what is held, as a process that ends without a last commit would have (a dropped
    /// ledger that was never finished can still be reopened and resumed). A failure here is
    /// lost with the process: nothing was acted on after these records.
    fn drop(&mut self) {
        let st = self.state.get_mut().unwrap_or_else(|p| p.into_inner());
        if !matches!(st.phase, Phase::Open) {
            return;
        }
        if !st.line.is_empty() {
            if let Some(f) = st.file.as_mut() {
                let _ = f.write_all(&st.line);
            }
        }
        // A writer that made the ledger and ends without a sync (a hook call that only
        // denied) syncs its folders, as its successor, reopening at the head, will not.
        if st.folders_unsynced && self.opts.durability != Durability::NoSync {
            let _ = self.sync_folders();
        }
    }
}

fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}
