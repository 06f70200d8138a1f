//! What opening, writing or finishing a ledger reports.

use super::super::index::IndexError;
use super::super::key::KeyId;
use super::super::verify::{Breach, VerifyError};
#[cfg(doc)]
use super::Ledger;
use std::path::PathBuf;

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
    /// The run's ledger does not verify: its pages are not written from it.
    #[error("{0}")]
    Verify(#[from] VerifyError),
    /// The run is finished and anchored, but a page or summary of it could not be written.
    #[error("the run's ledger is finished and anchored, but {path} could not be written: {source}; `loopward report --html` writes the pages again from the ledger")]
    Page {
        /// The page.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
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
    /// The pages of [`LedgerOptions::pages`](super::LedgerOptions::pages), in that order
    /// (`runs/<run-id>/audit.html`).
    pub pages: Vec<PathBuf>,
}

/// What [`Ledger::open_existing`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Recovery {
    /// Records kept.
    pub kept: u64,
    /// Bytes of a torn last line that were cut (0: the ledger ended cleanly).
    pub truncated_bytes: u64,
}
