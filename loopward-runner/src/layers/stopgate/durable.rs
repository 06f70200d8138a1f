//! Durable approvals: pending records under `<workspace>/.loopward/pending/`, decided by a
//! person with [`approve`] / [`deny`] (the `loopward approve|deny` commands), consumed
//! atomically (a rename) by the gate when the run is started again.

use super::action::GatedAction;
use loopward_core::{AgentId, RunId};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

/// Where pending approvals live, relative to the workspace root.
pub const PENDING_DIR: &str = ".loopward/pending";

/// The largest pending record read, in bytes; a bigger file is refused (the gate denies).
pub const MAX_RECORD_BYTES: u64 = 64 * 1024;

/// The pending-approval folder of the workspace at `root`.
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
}

/// A pending record could not be read, written or decided.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DurableError {
    /// No pending record has this id.
    #[error("no pending approval {id:?} in {dir}; list them with `loopward pending`")]
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
    #[error("pending approval {id} was already {state:?}; a decision cannot be changed")]
    AlreadyDecided {
        /// The id.
        id: String,
        /// Its state.
        state: PendingState,
    },
    /// A file is not a plain, small, well-formed record.
    #[error("pending approval file {path} is unusable: {why}")]
    Malformed {
        /// The file.
        path: String,
        /// What is wrong.
        why: String,
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

fn record_path(dir: &Path, id: &str) -> PathBuf {
    dir.join(format!("{id}.json"))
}

/// Reads the record `id`, if there is one. Links, folders, huge and malformed files are errors.
pub(super) fn read(dir: &Path, id: &str) -> Result<Option<PendingApproval>, DurableError> {
    check_id(id)?;
    let path = record_path(dir, id);
    let meta = match std::fs::symlink_metadata(&path) {
        Ok(m) => m,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(&path, &e)),
    };
    let malformed = |why: &str| DurableError::Malformed {
        path: path.display().to_string(),
        why: why.into(),
    };
    if !meta.file_type().is_file() {
        return Err(malformed("not a regular file"));
    }
    if meta.len() > MAX_RECORD_BYTES {
        return Err(malformed("larger than 64 KiB"));
    }
    let text = std::fs::read_to_string(&path).map_err(|e| io(&path, &e))?;
    let record: PendingApproval =
        serde_json::from_str(&text).map_err(|e| malformed(&e.to_string()))?;
    if record.id != id {
        return Err(malformed("its id does not match its file name"));
    }
    Ok(Some(record))
}

/// Writes `record` atomically (a temporary file renamed into place).
pub(super) fn write(dir: &Path, record: &PendingApproval) -> Result<(), DurableError> {
    check_id(&record.id)?;
    std::fs::create_dir_all(dir).map_err(|e| io(dir, &e))?;
    let tmp = dir.join(format!(".{}.json.tmp", record.id));
    let text = serde_json::to_string_pretty(record).map_err(|e| DurableError::Malformed {
        path: tmp.display().to_string(),
        why: e.to_string(),
    })?;
    std::fs::write(&tmp, text).map_err(|e| io(&tmp, &e))?;
    let path = record_path(dir, &record.id);
    std::fs::rename(&tmp, &path).map_err(|e| io(&path, &e))
}

/// Moves record `id` to `consumed/`: exactly one caller wins the rename. `Ok(false)`: someone
/// else consumed it first.
pub(super) fn consume(dir: &Path, id: &str, now_ms: u64) -> Result<bool, DurableError> {
    check_id(id)?;
    let consumed = dir.join("consumed");
    std::fs::create_dir_all(&consumed).map_err(|e| io(&consumed, &e))?;
    let from = record_path(dir, id);
    let to = consumed.join(format!("{id}.{now_ms}.json"));
    match std::fs::rename(&from, &to) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(false),
        Err(e) => Err(io(&from, &e)),
    }
}

/// Every record in `dir` still waiting for a person, oldest first.
pub fn list_pending(dir: &Path) -> Result<Vec<PendingApproval>, DurableError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(vec![]),
        Err(e) => return Err(io(dir, &e)),
    };
    let mut out = vec![];
    for entry in entries {
        let entry = entry.map_err(|e| io(dir, &e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(id) = name.strip_suffix(".json") else {
            continue;
        };
        if id.starts_with('.') {
            continue;
        }
        if let Some(r) = read(dir, id)? {
            if r.state == PendingState::Pending {
                out.push(r);
            }
        }
    }
    out.sort_by(|a, b| (a.requested_at_ms, &a.id).cmp(&(b.requested_at_ms, &b.id)));
    Ok(out)
}

/// The records of `run` at gate `gate` still waiting (for `loopward approve <run> <gate>`).
pub fn find_pending(
    dir: &Path,
    run: &str,
    gate: &str,
) -> Result<Vec<PendingApproval>, DurableError> {
    Ok(list_pending(dir)?
        .into_iter()
        .filter(|r| r.run.as_str() == run && r.gate == gate)
        .collect())
}

fn decide(dir: &Path, id: &str, state: PendingState) -> Result<PendingApproval, DurableError> {
    let mut record = read(dir, id)?.ok_or_else(|| DurableError::NotFound {
        id: id.into(),
        dir: dir.display().to_string(),
    })?;
    if record.state != PendingState::Pending {
        return Err(DurableError::AlreadyDecided {
            id: id.into(),
            state: record.state,
        });
    }
    record.state = state;
    write(dir, &record)?;
    Ok(record)
}

/// Approves pending record `id`: the next run that reaches its action runs it once.
pub fn approve(dir: &Path, id: &str) -> Result<PendingApproval, DurableError> {
    decide(dir, id, PendingState::Approved)
}

/// Denies pending record `id`: the next run that reaches its action is refused.
pub fn deny(dir: &Path, id: &str) -> Result<PendingApproval, DurableError> {
    decide(dir, id, PendingState::Denied)
}
