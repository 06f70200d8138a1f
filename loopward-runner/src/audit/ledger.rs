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

use super::html::{render_html, LedgerState};
use super::index::{append_anchor, Anchor, IndexError};
use super::key::{KeyId, LedgerKey};
use super::record::{rfc3339, write_rfc3339, Chain, LedgerHeader, Record, GENESIS};
use super::render::{render_json, render_markdown};
use super::verify::{scan, Breach, EVENTS_FILE};
use crate::clock::{Clock, SystemClock};
use crate::runner::RunSpec;
use loopward_core::{AgentId, AuditError, AuditEvent, AuditSink, HumanWords, RunId, Scope};
use nix::fcntl::{Flock, FlockArg};
use std::fs::File;
use std::io::Write;
use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

mod head;

/// Held lines are written once they reach this many bytes, even before the commit.
const HOLD_BYTES: usize = 16 * 1024;

/// When the ledger calls `fsync`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Durability {
    /// Every event is written when it is recorded (it survives a killed process), but those that
    /// [may wait for the commit](AuditEvent::may_wait_for_commit), which are written with the
    /// next one that may not or at the next [`commit`](AuditSink::commit); the file is
    /// synced at each commit that follows a decision event
    /// ([`AuditEvent::is_decision`]) — the runner commits just before the action the decisions
    /// authorise runs, so all the decisions gating one action share one sync — and at
    /// [`Ledger::finish`]. The default.
    #[default]
    Decisions,
    /// Every event is written and synced before `record` returns.
    EveryEvent,
    /// Benchmarks only: sync once every `n` events and at finish. A power loss may lose
    /// decisions that were already acted on.
    GroupCommit(NonZeroU32),
    /// Benchmarks only: never sync (a killed process still loses nothing; a power loss may).
    NoSync,
}

/// One low-level ledger operation, shown to a [`FaultHook`] before it runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LedgerOp<'a> {
    /// Adding the record `seq` of `kind` to the file. A record that may wait for the commit
    /// is shown here when it is recorded, and reaches the file with the next `write`; failing it
    /// is failing the process there: the records held before it are lost with it, as they are
    /// when a process is killed.
    Write {
        /// Its sequence number.
        seq: u64,
        /// Its kind.
        kind: &'a str,
    },
    /// Syncing the file after record `seq`.
    Sync {
        /// The last sequence number written.
        seq: u64,
        /// Its kind; `commit` for the sync of a [`commit`](AuditSink::commit), `finish` for
        /// [`Ledger::finish`]'s.
        kind: &'a str,
    },
}

/// Sees every write and sync before it happens and may fail it; for testing fail-closed paths
/// (a full disk, a failing fsync). Implemented for closures.
pub trait FaultHook: Send + Sync {
    /// Returns an error to make the operation fail as if the OS had failed it.
    fn before(&self, op: LedgerOp<'_>) -> std::io::Result<()>;
}

impl<F> FaultHook for F
where
    F: Fn(LedgerOp<'_>) -> std::io::Result<()> + Send + Sync,
{
    fn before(&self, op: LedgerOp<'_>) -> std::io::Result<()> {
        self(op)
    }
}

/// How a ledger is opened.
///
/// The default is a keyless chain, which `verify` refuses unless told to accept keyless chains:
/// applications pass the current key of the state directory's [`KeyRing`](super::KeyRing)
/// ([`LedgerOptions::keyed`]), as `loopward run` does.
#[derive(Clone)]
pub struct LedgerOptions {
    /// When to sync.
    pub durability: Durability,
    /// The key of the HMAC chain; `None`: a keyless SHA-256 chain (an explicit opt-out).
    pub key: Option<LedgerKey>,
    /// The file in the state directory that keeps the index's last line (see
    /// [`IndexHead`](super::IndexHead)); written at [`Ledger::finish`].
    pub index_head: Option<PathBuf>,
    /// An external witness: an append-only file outside the agents' reach that receives a copy
    /// of every anchor line.
    pub witness: Option<PathBuf>,
    /// The clock records are stamped with (use the runner's).
    pub clock: Arc<dyn Clock>,
    /// A fault injector for tests.
    pub fault: Option<Arc<dyn FaultHook>>,
    /// Secrets replaced in every event before it is sealed (`[secrets]`): a value printed by a
    /// tool never reaches the chain, where it could not be removed without breaking it.
    pub masker: crate::secrets::Masker,
}

impl Default for LedgerOptions {
    fn default() -> Self {
        Self {
            durability: Durability::default(),
            key: None,
            index_head: None,
            witness: None,
            clock: Arc::new(SystemClock),
            fault: None,
            masker: crate::secrets::Masker::default(),
        }
    }
}

impl LedgerOptions {
    /// Options for an HMAC chain under `key`.
    pub fn keyed(key: LedgerKey) -> Self {
        Self {
            key: Some(key),
            ..Self::default()
        }
    }
}

impl std::fmt::Debug for LedgerOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LedgerOptions")
            .field("durability", &self.durability)
            .field("key", &self.key.as_ref().map(LedgerKey::id))
            .field("index_head", &self.index_head)
            .field("witness", &self.witness)
            .field("fault", &self.fault.is_some())
            .field("masker", &self.masker)
            .finish_non_exhaustive()
    }
}

/// A ledger could not be opened, written or finished.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LedgerError {
    /// A file operation failed.
    #[error("ledger {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The run already has a ledger.
    #[error("{0} already exists: run ids are not reused; pick a new run id, or resume that run from its ledger (`loopward run --resume <run-id>`)")]
    AlreadyExists(PathBuf),
    /// Another writer holds the ledger.
    #[error("{0} is open in another writer (one writer per run); wait for it to finish or end that process")]
    Locked(PathBuf),
    /// The ledger is damaged before its last line (not a torn write; refuse to append).
    #[error(
        "{path}: seq {seq}: {breach}; run `loopward verify` and restore the ledger from a backup"
    )]
    Corrupt {
        /// The ledger file.
        path: PathBuf,
        /// The first bad sequence number.
        seq: u64,
        /// What is wrong.
        breach: Breach,
    },
    /// An earlier write or sync failed; nothing more is written.
    #[error("ledger {path} is unusable after an earlier failure: {error}")]
    Poisoned {
        /// The ledger file.
        path: PathBuf,
        /// The first failure.
        error: String,
    },
    /// The ledger was already finished.
    #[error("ledger {0} is finished; nothing more can be recorded")]
    Finished(PathBuf),
    /// At finish, the file does not hold the records this writer wrote: nothing is anchored.
    #[error("{path}: this writer wrote {wrote_seq} records ending in {wrote_hash}, but the file holds {file_seq} ending in {file_hash}; the ledger was changed behind the writer's back, so it is not anchored. Run `loopward verify` and restore it from a backup")]
    Disagrees {
        /// The ledger file.
        path: PathBuf,
        /// Records the writer accounts for.
        wrote_seq: u64,
        /// Its last record's hash.
        wrote_hash: String,
        /// Records in the file.
        file_seq: u64,
        /// The file's last record's hash.
        file_hash: String,
    },
    /// The anchor could not be appended to the index.
    #[error("cannot anchor the run: {0}")]
    Index(#[from] IndexError),
}

/// What [`Ledger::finish`] wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finished {
    /// The last sequence number.
    pub final_seq: u64,
    /// The last record's hash (anchored in `runs/index.jsonl`).
    pub final_hash: String,
    /// `runs/<run-id>/audit.json`.
    pub audit_json: PathBuf,
    /// `runs/<run-id>/audit.md`.
    pub audit_md: PathBuf,
    /// The key the ledger and its anchor are authenticated under (`None`: keyless).
    pub key: Option<KeyId>,
    /// The anchor's line in `runs/index.jsonl`.
    pub index_line: u64,
    /// `runs/<run-id>/audit.html`.
    pub audit_html: PathBuf,
}

/// What [`Ledger::open_existing`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Recovery {
    /// Records kept.
    pub kept: u64,
    /// Bytes of a torn last line that were cut (0: the ledger ended cleanly).
    pub truncated_bytes: u64,
}

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
        let dir = runs_dir.join(run.as_str());
        std::fs::create_dir_all(&dir).map_err(io_err(&dir))?;
        let path = dir.join(EVENTS_FILE);
        let file = std::fs::OpenOptions::new()
            .append(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| {
                if e.kind() == std::io::ErrorKind::AlreadyExists {
                    LedgerError::AlreadyExists(path.clone())
                } else {
                    io_err(&path)(e)
                }
            })?;
        let file = lock(file, &path)?;
        // The new directory entry must survive a power loss as well as the records.
        sync_dir(&dir).map_err(io_err(&dir))?;
        sync_dir(runs_dir).map_err(io_err(runs_dir))?;
        Ok(Arc::new(Self::new(
            run, runs_dir, path, opts, file, 1, GENESIS,
        )))
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
        RunSpec {
            id: self.run.clone(),
            task,
            first,
            audit: self.clone(),
            audit_location: Some(self.run_dir()),
        }
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

    /// Syncs the file (through the fault hook); a failure poisons the ledger.
    fn sync(
        &self,
        st: &mut State,
        seq: u64,
        kind: &str,
        what: impl FnOnce() -> String,
    ) -> Result<(), AuditError> {
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

    /// Ends the ledger: syncs it, reads `events.jsonl` back and verifies it, writes `audit.json`
    /// and `audit.md` from it, appends the final hash to `runs/index.jsonl`, and releases the
    /// writer's lock. Later `record`s fail.
    pub fn finish(&self) -> Result<Finished, LedgerError> {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        match &st.phase {
            Phase::Open => {}
            Phase::Poisoned(error) => {
                return Err(LedgerError::Poisoned {
                    path: self.path.clone(),
                    error: error.clone(),
                })
            }
            Phase::Finished => return Err(LedgerError::Finished(self.path.clone())),
        }
        let seq = st.next_seq - 1;
        if let Err(e) = self.write_held(&mut st) {
            // The failure as the ledger keeps it (without the path, which the error names).
            let error = match &st.phase {
                Phase::Poisoned(error) => error.clone(),
                _ => e.0,
            };
            return Err(LedgerError::Poisoned {
                path: self.path.clone(),
                error,
            });
        }
        let synced = self
            .fault(LedgerOp::Sync {
                seq,
                kind: "finish",
            })
            .and_then(|()| st.file.as_ref().map_or(Ok(()), |f| f.sync_data()));
        if let Err(e) = synced {
            let error = format!("syncing at finish: {e}");
            st.phase = Phase::Poisoned(error.clone());
            return Err(LedgerError::Poisoned {
                path: self.path.clone(),
                error,
            });
        }
        st.phase = Phase::Finished;
        let wrote_seq = st.next_seq - 1;
        let bytes = std::fs::read(&self.path).map_err(io_err(&self.path))?;
        let header = (!self.legacy).then(|| self.chain.header());
        let found = scan(
            &bytes,
            &self.chain,
            Some(self.run.as_str()),
            header.as_ref(),
        );
        let file_seq = found.records.len() as u64;
        let file_hash = found
            .records
            .last()
            .map_or_else(|| GENESIS.to_string(), |r| r.hash.clone());
        // Anchor what this writer wrote, and only if the file holds exactly that.
        if found.bad.is_some() || file_seq != wrote_seq || file_hash != st.prev {
            if let Some((seq, breach)) = found.bad {
                return Err(LedgerError::Corrupt {
                    path: self.path.clone(),
                    seq,
                    breach,
                });
            }
            return Err(LedgerError::Disagrees {
                path: self.path.clone(),
                wrote_seq,
                wrote_hash: st.prev.clone(),
                file_seq,
                file_hash,
            });
        }
        let dir = self.run_dir();
        let audit_json = dir.join("audit.json");
        let audit_md = dir.join("audit.md");
        let json = render_json(&found.records, self.chain.label());
        write_page(&audit_json, json.as_bytes()).map_err(io_err(&audit_json))?;
        write_page(&audit_md, render_markdown(&found.records).as_bytes())
            .map_err(io_err(&audit_md))?;
        let audit_html = dir.join("audit.html");
        let state = LedgerState {
            key_id: self.chain.key_id().map(ToString::to_string),
            ..LedgerState::verified(self.chain.label())
        };
        write_page(&audit_html, render_html(&found.records, &state).as_bytes())
            .map_err(io_err(&audit_html))?;
        let anchor = Anchor::new(
            self.run.as_str(),
            wrote_seq,
            st.prev.clone(),
            rfc3339(self.opts.clock.now_millis()),
        );
        let entry = append_anchor(
            &self.runs_dir,
            &anchor,
            &self.chain,
            self.opts.index_head.as_deref(),
            self.opts.witness.as_deref(),
        )?;
        let (final_seq, final_hash) = (wrote_seq, st.prev.clone());
        st.file = None; // releases the lock
        Ok(Finished {
            final_seq,
            final_hash,
            audit_json,
            audit_md,
            key: self.chain.key_id().cloned(),
            index_line: entry.seq,
            audit_html,
        })
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
        if matches!(st.phase, Phase::Open) && !st.line.is_empty() {
            if let Some(f) = st.file.as_mut() {
                let _ = f.write_all(&st.line);
            }
        }
    }
}

fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Writes a page or summary of the run (regenerable from the ledger, `loopward report --html`)
/// so readers see the old file or the new one, never half of one; unsynced: only the ledger and
/// its anchor are made durable.
fn write_page(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    crate::atomic_file::replace_unsynced(path, bytes, 0o644)
}
