//! How a ledger is opened: when it syncs, its key, where its anchor goes, and the hook that sees
//! (and may fail) every write, sync and new file.

use super::super::key::LedgerKey;
use super::super::page::Page;
#[cfg(doc)]
use super::Ledger;
use crate::clock::{Clock, SystemClock};
#[cfg(doc)]
use loopward_core::{AuditEvent, AuditSink};
use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::sync::Arc;

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
    /// Benchmarks only: never sync — not the ledger, its folders, the index, its head nor the
    /// witness (a killed process still loses nothing; a power loss may, and may leave an anchor
    /// or a head ahead of what survived, which `verify` then reports as damage).
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
    /// Making a new file or folder of the run: its folder and ledger at create, its pages and
    /// summaries at finish (each a temporary renamed onto this name), the index (when this run
    /// is its first) and the index head's temporary (when the head's log is new or replaced).
    Create {
        /// The name it will have.
        path: &'a Path,
    },
    /// Syncing a file other than the ledger: the index, the index head, the witness.
    SyncFile {
        /// The file.
        path: &'a Path,
    },
    /// Syncing a folder, so that a new name in it survives a power loss (the run's folder and
    /// the runs folder, with the ledger's first sync).
    SyncDir {
        /// The folder.
        path: &'a Path,
    },
}

impl LedgerOp<'_> {
    /// Whether the operation is an `fsync` or `fdatasync` (of the ledger, a folder or another
    /// file).
    pub fn is_sync(&self) -> bool {
        matches!(
            self,
            Self::Sync { .. } | Self::SyncFile { .. } | Self::SyncDir { .. }
        )
    }
}

/// Sees every write, sync and new file before it happens and may fail it; for testing fail-closed paths
/// (a full disk, a failing fsync), and for counting a run's syncs and files. Implemented for
/// closures.
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
/// applications pass the current key of the state directory's [`KeyRing`](super::super::KeyRing)
/// ([`LedgerOptions::keyed`]), as `loopward run` does.
#[derive(Clone)]
pub struct LedgerOptions {
    /// When to sync.
    pub durability: Durability,
    /// The key of the HMAC chain; `None`: a keyless SHA-256 chain (an explicit opt-out).
    pub key: Option<LedgerKey>,
    /// The file in the state directory that keeps the index's last line (see
    /// [`IndexHead`](super::super::IndexHead)); written at [`Ledger::finish`].
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
    /// The pages written beside `audit.json` and `audit.md` when the ledger finishes
    /// (`loopward-pages`' `audit.html`); none by default.
    pub pages: Vec<Arc<dyn Page>>,
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
            pages: Vec::new(),
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
            .field(
                "pages",
                &self.pages.iter().map(|p| p.file_name()).collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}
