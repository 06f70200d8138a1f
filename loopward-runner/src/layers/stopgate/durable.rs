//! Durable approvals: pending records written by a `durable` gate, decided by a person with
//! [`ApprovalStore::approve`] / [`ApprovalStore::deny`] (the `loopward approve|deny` commands),
//! and consumed atomically (a rename) by the gate when the run is started again.
//!
//! Every record is sealed ([`Seal`]) under the current key of the store's [`KeyRing`]: the gate
//! seals the request, the person's decision is sealed with who decided and when. A record whose
//! seal does not verify (written or flipped by any other process) is refused with the reason,
//! moved to `rejected/`, and the gate records the refusal. Decisions are taken under a lock, so
//! of any number of racing `approve` and `deny` calls exactly one decides; the others are told
//! who decided and when. A malformed record is skipped and reported; it never blocks the others.
//!
//! Where the store lives is the application's choice: `loopward` keeps it in its state directory,
//! outside the agents' reach; [`ApprovalStore::for_workspace`] is the keyless in-workspace
//! default for embedding and tests.
//!
//! ```
//! use loopward_runner::audit::KeyRing;
//! use loopward_runner::layers::stopgate::{ApprovalStore, DurableError};
//! let dir = tempfile::tempdir().unwrap();
//! let store = ApprovalStore::new(dir.path()).keyed(KeyRing::single(loopward_runner::audit::LedgerKey::generate().unwrap()));
//! // Nothing waits yet; deciding an unknown id says so.
//! assert!(store.scan().records.is_empty());
//! assert!(matches!(store.approve("r1-0123", "ana", 0), Err(DurableError::NotFound { .. })));
//! ```

use super::action::GatedAction;
use crate::audit::{KeyRing, Seal, Sealed};
use loopward_core::{AgentId, RunId};
use nix::fcntl::{Flock, FlockArg};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::io::{ErrorKind, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Where pending approvals live by default, relative to the workspace root.
pub const PENDING_DIR: &str = ".loopward/pending";

/// Where a keyed store's pending records are, as a stop-gate's detail names it.
pub(crate) const KEYED_PENDING_DIR: &str = "<state>/pending";

/// The largest pending record read, in bytes; a bigger file is refused (the gate denies).
pub const MAX_RECORD_BYTES: u64 = 64 * 1024;

/// The longest name a decider may give, in bytes.
pub const MAX_DECIDER_BYTES: usize = 200;

/// The default pending-approval folder of the workspace at `root`.
pub fn pending_dir(root: &Path) -> PathBuf {
    root.join(PENDING_DIR)
}

/// Where a pending record stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PendingState {
    /// Waiting for a person.
    Pending,
    /// Approved; the next run that reaches the action consumes it and runs the action once.
    Approved,
    /// Denied; the next run that reaches the action consumes it and is refused.
    Denied,
}

impl PendingState {
    fn word(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Approved => "approved",
            Self::Denied => "denied",
        }
    }
}

/// Who decided a record, and when.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Decided {
    /// The person, as they named themselves (`loopward approve --by`, or the login name).
    pub by: String,
    /// When (ms since the epoch).
    pub at_ms: u64,
}

/// One pending-approval record (`<id>.json`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PendingApproval {
    /// The record's id (its file name without `.json`).
    pub id: String,
    /// The run that asked.
    pub run: RunId,
    /// The agent acting.
    pub agent: AgentId,
    /// The gate's name.
    pub gate: String,
    /// The exact action.
    pub action: GatedAction,
    /// What a person reads before deciding.
    pub summary: String,
    /// When it was asked, on the run's clock (ms since the epoch).
    pub requested_at_ms: u64,
    /// Where it stands.
    pub state: PendingState,
    /// Who decided, once decided.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided: Option<Decided>,
    /// The seal over everything above (absent in a keyless store).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seal: Option<Seal>,
}

impl Sealed for PendingApproval {
    const DOMAIN: &'static [u8] = b"loopward.approval.v1\0";
    fn seal_mut(&mut self) -> &mut Option<Seal> {
        &mut self.seal
    }
}

impl PendingApproval {
    /// `approved by ana at 2026-…` (or `pending`).
    pub fn decision_text(&self) -> String {
        match &self.decided {
            Some(d) => format!(
                "{} by {} at {}",
                self.state.word(),
                d.by,
                crate::audit::rfc3339(d.at_ms)
            ),
            None => self.state.word().into(),
        }
    }
}

/// A pending record could not be read, written or decided.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DurableError {
    /// No pending record has this id.
    #[error("no pending approval {id:?} in {dir}; list them with `loopward approve --list`")]
    NotFound {
        /// The id asked for.
        id: String,
        /// The folder looked in.
        dir: String,
    },
    /// The id is not a record id (ids are `[A-Za-z0-9_-]`, at most 200 bytes).
    #[error("{id:?} is not a pending-approval id (ids are letters, digits, '-' and '_')")]
    BadId {
        /// The id given.
        id: String,
    },
    /// The record was already decided.
    #[error("pending approval {id}: already decided: {decision}; a decision cannot be changed")]
    AlreadyDecided {
        /// The id.
        id: String,
        /// Its state.
        state: PendingState,
        /// `approved by … at …`.
        decision: String,
    },
    /// A file is not a plain, small, well-formed record.
    #[error("pending approval file {path} is unusable: {why}")]
    Malformed {
        /// The file.
        path: String,
        /// What is wrong.
        why: String,
    },
    /// A record's seal does not verify: it was not written by loopward, or was edited since.
    #[error("pending approval file {path} is refused: {why}; only the stop-gate and `loopward approve|deny` write these records")]
    Forged {
        /// The file.
        path: String,
        /// Why.
        why: String,
    },
    /// The decider's name is empty or too long.
    #[error(
        "the decider's name must be 1 to {MAX_DECIDER_BYTES} bytes of one line; got {len} bytes"
    )]
    BadDecider {
        /// Its length.
        len: usize,
    },
    /// Reading or writing failed.
    #[error("could not access {path}: {why}")]
    Io {
        /// The file or folder.
        path: String,
        /// The error.
        why: String,
    },
}

fn io(path: &Path, e: &std::io::Error) -> DurableError {
    DurableError::Io {
        path: path.display().to_string(),
        why: e.to_string(),
    }
}

/// The id of the record for `action` at `gate` in `run`: the same run reaching the same action
/// again (after a restart) finds the same record.
pub(super) fn record_id(run: &RunId, gate: &str, action: &GatedAction) -> String {
    let mut h = Sha256::new();
    for part in [run.as_str(), gate, &action.key()] {
        h.update(part.as_bytes());
        h.update([0u8]);
    }
    let digest = hex::encode(h.finalize());
    format!("{run}-{}", &digest[..16])
}

fn check_id(id: &str) -> Result<(), DurableError> {
    let ok = !id.is_empty()
        && id.len() <= 200
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(DurableError::BadId { id: id.into() })
    }
}

/// A record file that could not be used, found while listing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skipped {
    /// The file name.
    pub file: String,
    /// Why it was skipped.
    pub why: String,
}

/// Every record in a store, and the files that could not be used.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PendingScan {
    /// Records that read and verified, oldest first (any state).
    pub records: Vec<PendingApproval>,
    /// Files skipped, with the reason (malformed, forged, not a regular file …).
    pub skipped: Vec<Skipped>,
}

/// The pending approvals of one workspace: a folder, and the keys records are sealed under.
#[derive(Clone, Debug)]
pub struct ApprovalStore {
    dir: PathBuf,
    keys: Option<KeyRing>,
}

impl ApprovalStore {
    /// A keyless store at `dir` (records are not sealed; any well-formed file is honoured).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            keys: None,
        }
    }

    /// The keyless default store of the workspace at `root` (`<root>/.loopward/pending`).
    pub fn for_workspace(root: &Path) -> Self {
        Self::new(pending_dir(root))
    }

    /// Seals every record under the current key of `keys`, and honours only records whose seal
    /// verifies under one of them.
    pub fn keyed(mut self, keys: KeyRing) -> Self {
        self.keys = Some(keys);
        self
    }

    /// The folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Whether records are sealed and checked.
    pub fn is_keyed(&self) -> bool {
        self.keys.is_some()
    }

    fn path(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.json"))
    }

    /// Reads the record `id`, if there is one. Links, folders, huge, malformed and (in a keyed
    /// store) unsealed or badly sealed files are errors.
    pub fn read(&self, id: &str) -> Result<Option<PendingApproval>, DurableError> {
        check_id(id)?;
        let path = self.path(id);
        let malformed = |why: &str| DurableError::Malformed {
            path: path.display().to_string(),
            why: why.into(),
        };
        let flags = nix::fcntl::OFlag::O_NOFOLLOW | nix::fcntl::OFlag::O_NONBLOCK;
        let file = match std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(flags.bits())
            .open(&path)
        {
            Ok(f) => f,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
            Err(e) if e.raw_os_error() == Some(nix::libc::ELOOP) => {
                return Err(malformed("a symbolic link, not a regular file"))
            }
            Err(e) => return Err(io(&path, &e)),
        };
        let meta = file.metadata().map_err(|e| io(&path, &e))?;
        if !meta.file_type().is_file() {
            return Err(malformed("not a regular file"));
        }
        let mut text = Vec::new();
        file.take(MAX_RECORD_BYTES + 1)
            .read_to_end(&mut text)
            .map_err(|e| io(&path, &e))?;
        if text.len() as u64 > MAX_RECORD_BYTES {
            return Err(malformed("larger than 64 KiB"));
        }
        let record: PendingApproval =
            serde_json::from_slice(&text).map_err(|e| malformed(&e.to_string()))?;
        if record.id != id {
            return Err(malformed("its id does not match its file name"));
        }
        if let Some(keys) = &self.keys {
            keys.check_record(&record)
                .map_err(|why| DurableError::Forged {
                    path: path.display().to_string(),
                    why,
                })?;
        }
        Ok(Some(record))
    }

    fn seal(&self, record: &mut PendingApproval) {
        record.seal = None;
        if let Some(keys) = &self.keys {
            record.seal = keys.seal_record(record);
        }
    }

    /// Writes `record` (sealed) through a temporary file of its own, renamed into place.
    fn put(&self, record: &mut PendingApproval, replace: bool) -> Result<bool, DurableError> {
        check_id(&record.id)?;
        std::fs::create_dir_all(&self.dir).map_err(|e| io(&self.dir, &e))?;
        if self.keys.as_ref().is_some_and(|k| k.current().is_none()) {
            return Err(DurableError::Io {
                path: self.dir.display().to_string(),
                why: "the key ring has no current key to seal with; run `loopward init`".into(),
            });
        }
        self.seal(record);
        let path = self.path(&record.id);
        let text = serde_json::to_vec_pretty(record).map_err(|e| DurableError::Malformed {
            path: path.display().to_string(),
            why: e.to_string(),
        })?;
        let done = if replace {
            crate::atomic_file::write_atomic(&path, &text, 0o600).map(|()| true)
        } else {
            // No-replace: a record already there (another process's request) stands.
            crate::atomic_file::publish_new(&path, &text, 0o600)
        };
        done.map_err(|e| io(&path, &e))
    }

    /// Writes a new pending record unless one with its id is already there (then `Ok(false)`).
    pub(super) fn request(&self, record: &mut PendingApproval) -> Result<bool, DurableError> {
        self.put(record, false)
    }

    /// Moves record `id` to `consumed/`: exactly one caller wins the rename. `Ok(false)`:
    /// someone else consumed it first.
    pub(super) fn consume(&self, id: &str, now_ms: u64) -> Result<bool, DurableError> {
        self.move_to("consumed", id, now_ms)
    }

    /// Moves a refused record `id` to `rejected/`, so the gate can ask again; the refusal is
    /// recorded by the caller.
    pub(super) fn reject(&self, id: &str, now_ms: u64) -> Result<(), DurableError> {
        self.move_to("rejected", id, now_ms).map(drop)
    }

    /// Moves record `id` into the sub-folder `folder` (as `<id>.<now_ms>.json`). `Ok(false)`:
    /// it was not there (someone else moved it first).
    fn move_to(&self, folder: &str, id: &str, now_ms: u64) -> Result<bool, DurableError> {
        check_id(id)?;
        let dir = self.dir.join(folder);
        std::fs::create_dir_all(&dir).map_err(|e| io(&dir, &e))?;
        let from = self.path(id);
        let to = dir.join(format!("{id}.{now_ms}.json"));
        match std::fs::rename(&from, &to) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(false),
            Err(e) => Err(io(&from, &e)),
        }
    }

    /// Every record, oldest first, and every file skipped with the reason. One bad file never
    /// hides the others.
    pub fn scan(&self) -> PendingScan {
        let mut out = PendingScan::default();
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(e) => e,
            Err(e) if e.kind() == ErrorKind::NotFound => return out,
            Err(e) => {
                out.skipped.push(Skipped {
                    file: self.dir.display().to_string(),
                    why: e.to_string(),
                });
                return out;
            }
        };
        for entry in entries.filter_map(Result::ok) {
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(id) = name.strip_suffix(".json") else {
                continue;
            };
            if id.starts_with('.') {
                continue;
            }
            match self.read(id) {
                Ok(Some(r)) => out.records.push(r),
                Ok(None) => {}
                Err(e) => out.skipped.push(Skipped {
                    file: name,
                    why: e.to_string(),
                }),
            }
        }
        out.records
            .sort_by(|a, b| (a.requested_at_ms, &a.id).cmp(&(b.requested_at_ms, &b.id)));
        out.skipped.sort_by(|a, b| a.file.cmp(&b.file));
        out
    }

    /// The records still waiting for a person, oldest first (unusable files are skipped; see
    /// [`scan`](Self::scan) for them).
    pub fn list_pending(&self) -> Vec<PendingApproval> {
        self.scan()
            .records
            .into_iter()
            .filter(|r| r.state == PendingState::Pending)
            .collect()
    }

    /// The records of `run` at gate `gate` still waiting (for `loopward approve <run> <gate>`).
    pub fn find_pending(&self, run: &str, gate: &str) -> Vec<PendingApproval> {
        self.list_pending()
            .into_iter()
            .filter(|r| r.run.as_str() == run && r.gate == gate)
            .collect()
    }

    fn decide(
        &self,
        id: &str,
        state: PendingState,
        by: &str,
        now_ms: u64,
    ) -> Result<PendingApproval, DurableError> {
        if by.trim().is_empty() || by.len() > MAX_DECIDER_BYTES || by.contains('\n') {
            return Err(DurableError::BadDecider { len: by.len() });
        }
        check_id(id)?;
        std::fs::create_dir_all(&self.dir).map_err(|e| io(&self.dir, &e))?;
        // One decider at a time: the read, the check and the write are one step.
        let lock_path = self.dir.join(".decide.lock");
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(&lock_path)
            .map_err(|e| io(&lock_path, &e))?;
        let _held = Flock::lock(lock, FlockArg::LockExclusive)
            .map_err(|(_, e)| io(&lock_path, &std::io::Error::from_raw_os_error(e as i32)))?;
        let mut record = self.read(id)?.ok_or_else(|| DurableError::NotFound {
            id: id.into(),
            dir: self.dir.display().to_string(),
        })?;
        if record.state != PendingState::Pending {
            return Err(DurableError::AlreadyDecided {
                id: id.into(),
                state: record.state,
                decision: record.decision_text(),
            });
        }
        record.state = state;
        record.decided = Some(Decided {
            by: by.trim().into(),
            at_ms: now_ms,
        });
        self.put(&mut record, true)?;
        Ok(record)
    }

    /// Approves pending record `id` as `by` at `now_ms`: the next run that reaches its action
    /// runs it once. Of racing decisions exactly one wins; the others get
    /// [`DurableError::AlreadyDecided`] naming it.
    pub fn approve(
        &self,
        id: &str,
        by: &str,
        now_ms: u64,
    ) -> Result<PendingApproval, DurableError> {
        self.decide(id, PendingState::Approved, by, now_ms)
    }

    /// Denies pending record `id` as `by` at `now_ms`: the next run that reaches its action is
    /// refused.
    pub fn deny(&self, id: &str, by: &str, now_ms: u64) -> Result<PendingApproval, DurableError> {
        self.decide(id, PendingState::Denied, by, now_ms)
    }
}

/// Every record in the keyless store `dir` still waiting for a person, oldest first; unusable
/// files are skipped ([`ApprovalStore::scan`] lists them).
pub fn list_pending(dir: &Path) -> Result<Vec<PendingApproval>, DurableError> {
    Ok(ApprovalStore::new(dir).list_pending())
}

/// The records of `run` at gate `gate` in the keyless store `dir` still waiting.
pub fn find_pending(
    dir: &Path,
    run: &str,
    gate: &str,
) -> Result<Vec<PendingApproval>, DurableError> {
    Ok(ApprovalStore::new(dir).find_pending(run, gate))
}

/// Approves record `id` of the keyless store `dir` (decided by `library`, at time 0); use
/// [`ApprovalStore::approve`] to name the person and the time.
pub fn approve(dir: &Path, id: &str) -> Result<PendingApproval, DurableError> {
    ApprovalStore::new(dir).approve(id, "library", 0)
}

/// Denies record `id` of the keyless store `dir`; see [`approve`].
pub fn deny(dir: &Path, id: &str) -> Result<PendingApproval, DurableError> {
    ApprovalStore::new(dir).deny(id, "library", 0)
}
