//! Checking a run's ledger: its header (schema and key), every record's hash, the sequence, the
//! chain links, and every anchor the run has in `runs/index.jsonl` (which must verify as a whole).
//! The first problem found is named with its sequence number. A run with no anchor, records
//! after its last anchor, a keyless chain or a key the verifier does not hold is not verified,
//! unless [`VerifyOptions`] says to accept unfinished runs or keyless chains.
//!
//! ```
//! use loopward_core::{AuditEvent, AuditSink, RunId, Scope};
//! use loopward_runner::audit::{verify, Breach, KeyRing, Ledger, LedgerKey, LedgerOptions, VerifyError, VerifyOptions};
//! let runs = tempfile::tempdir().unwrap();
//! let run = RunId::new("r1").unwrap();
//! let key = LedgerKey::generate().unwrap();
//! let opts = VerifyOptions::keyed(KeyRing::single(key.clone()));
//! let ledger = Ledger::create(runs.path(), &run, LedgerOptions::keyed(key)).unwrap();
//! let scope = Scope { run: run.clone(), turn: None, agent: None };
//! for text in ["one", "two", "three"] {
//!     ledger.record(&scope, &AuditEvent::HumanMessage { content: (&loopward_core::Person::at_the_keyboard().says(text)).into() }).unwrap();
//! }
//! // Not finished yet: not verified, unless accepted as unfinished.
//! let dir = runs.path().join("r1");
//! assert!(matches!(verify(&dir, &opts), Err(VerifyError::Unanchored { .. })));
//! assert!(!verify(&dir, &opts.clone().unfinished(true)).unwrap().anchored);
//! ledger.finish().unwrap();
//! assert_eq!(verify(&dir, &opts).unwrap().final_seq, 3);
//!
//! // Edit the second record: verify names seq 2.
//! let path = runs.path().join("r1/events.jsonl");
//! let text = std::fs::read_to_string(&path).unwrap().replace("two", "tw0");
//! std::fs::write(&path, text).unwrap();
//! let err = verify(&dir, &opts).unwrap_err();
//! assert_eq!(err.first_bad_seq(), Some(2));
//! assert_eq!(err.breach(), Some(&Breach::Edited));
//! ```

mod anchors;
mod breach;
mod scan;

pub use breach::{Breach, VerifyError};
pub(crate) use scan::scan;

use super::index::{read_index, IndexEntry};
use super::index_head::check_head;
use super::key::{KeyId, KeyRing};
use super::record::{Record, GENESIS};
use anchors::{check_anchors, check_witness};
use scan::chain_of;
use std::path::{Path, PathBuf};

/// The ledger file's name inside a run directory.
pub const EVENTS_FILE: &str = "events.jsonl";

/// What a verifier holds and accepts.
#[derive(Clone, Debug, Default)]
pub struct VerifyOptions {
    /// The keys ledgers may be chained under (each ledger names its key's id).
    pub keys: KeyRing,
    /// Accept keyless (sha256) ledgers and anchors. Off by default: a keyless chain proves
    /// nothing against whoever can write the file.
    pub allow_keyless: bool,
    /// Accept a run with no anchor yet, or records after its last anchor (a run still going).
    /// Every anchor it has is still checked.
    pub allow_unfinished: bool,
    /// The index head kept in the state directory (catches anchors dropped from the end).
    pub index_head: Option<PathBuf>,
    /// An external witness holding a copy of every anchor line (`verify --witness`).
    pub witness: Option<PathBuf>,
}

impl VerifyOptions {
    /// Verifies ledgers chained under the keys of `keys`.
    pub fn keyed(keys: KeyRing) -> Self {
        Self {
            keys,
            ..Self::default()
        }
    }

    /// Accepts keyless ledgers (labelled as such in [`VerifyOk`]).
    pub fn keyless() -> Self {
        Self {
            allow_keyless: true,
            ..Self::default()
        }
    }

    /// Sets [`allow_unfinished`](Self::allow_unfinished).
    pub fn unfinished(mut self, allow: bool) -> Self {
        self.allow_unfinished = allow;
        self
    }

    /// Sets [`index_head`](Self::index_head).
    pub fn head(mut self, head: impl Into<PathBuf>) -> Self {
        self.index_head = Some(head.into());
        self
    }

    /// Sets [`witness`](Self::witness).
    pub fn witness(mut self, witness: impl Into<PathBuf>) -> Self {
        self.witness = Some(witness.into());
        self
    }
}

/// A ledger that verified.
#[derive(Clone, Debug, PartialEq)]
pub struct VerifyOk {
    /// The run.
    pub run: String,
    /// The number of records (equal to the last sequence number).
    pub final_seq: u64,
    /// The last record's hash ([`GENESIS`] for an empty ledger).
    pub final_hash: String,
    /// Whether the last record is anchored (false only with
    /// [`allow_unfinished`](VerifyOptions::allow_unfinished)).
    pub anchored: bool,
    /// How many anchors the run has (every one was checked).
    pub anchors: u64,
    /// `sha256` or `hmac-sha256`.
    pub mac: &'static str,
    /// The key that verified it (`None`: keyless).
    pub key: Option<KeyId>,
    /// The ledger's schema version (1: no header).
    pub schema: u32,
    /// Whether the index was checked against the head kept in the state directory.
    pub head_checked: bool,
    /// Whether every anchor was found in the external witness (and the witness has no other).
    pub witnessed: bool,
}

impl VerifyOk {
    /// Which key verified the run, for people: `key k…` or `keyless (sha256)`.
    pub fn verified_by(&self) -> String {
        match &self.key {
            Some(k) => format!("key {k}"),
            None => "keyless (sha256)".into(),
        }
    }
}

/// Verifies the ledger of the run in `run_dir` (`runs/<run-id>`): every record, its header (the
/// schema and the key it names), and every anchor the run has in the parent directory's
/// `index.jsonl`, which must itself verify.
pub fn verify(run_dir: &Path, opts: &VerifyOptions) -> Result<VerifyOk, VerifyError> {
    verify_records(run_dir, opts).map(|(ok, _)| ok)
}

/// [`verify`], also returning the verified records.
pub fn verify_records(
    run_dir: &Path,
    opts: &VerifyOptions,
) -> Result<(VerifyOk, Vec<Record>), VerifyError> {
    // `runs/r1/.` or a relative `.` must still name the run and find the index beside it.
    let run_dir = &run_dir
        .canonicalize()
        .unwrap_or_else(|_| run_dir.to_path_buf());
    let path = run_dir.join(EVENTS_FILE);
    let run = run_dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let bytes = std::fs::read(&path).map_err(|source| VerifyError::Io {
        path: path.clone(),
        source,
    })?;
    let (chain, header) = chain_of(&path, &bytes, opts)?;
    let scan = scan(&bytes, &chain, Some(&run), header.as_ref());
    if let Some((seq, breach)) = scan.bad {
        return Err(VerifyError::Breach { path, seq, breach });
    }
    let runs_dir = run_dir.parent().unwrap_or(Path::new("."));
    let index = read_index(runs_dir, &opts.keys, opts.allow_keyless)?;
    let head_checked = match &opts.index_head {
        Some(h) => check_head(runs_dir, &index, h)?,
        None => false,
    };
    let anchors: Vec<&IndexEntry> = index.iter().filter(|e| e.anchor.run == run).collect();
    let breach = |(seq, breach)| VerifyError::Breach {
        path: path.clone(),
        seq,
        breach,
    };
    check_anchors(&scan.records, &anchors, &chain, opts.allow_unfinished).map_err(breach)?;
    let last_anchored = anchors.last().map(|a| a.anchor.final_seq);
    let final_seq = scan.records.len() as u64;
    if last_anchored.is_none() && !opts.allow_unfinished {
        return Err(VerifyError::Unanchored { path, run });
    }
    let witnessed = match &opts.witness {
        Some(w) => {
            check_witness(w, &anchors, &run, opts)?;
            true
        }
        None => false,
    };
    let ok = VerifyOk {
        run,
        final_seq,
        final_hash: scan
            .records
            .last()
            .map_or_else(|| GENESIS.to_string(), |r| r.hash.clone()),
        anchored: last_anchored == Some(final_seq),
        anchors: anchors.len() as u64,
        mac: chain.label(),
        key: chain.key_id().cloned(),
        schema: header.as_ref().map_or(1, |h| h.schema),
        head_checked,
        witnessed,
    };
    Ok((ok, scan.records))
}

/// One run's verdict in [`verify_all`].
#[derive(Debug)]
pub struct RunVerdict {
    /// The run (its folder's name).
    pub run: String,
    /// What [`verify`] said.
    pub result: Result<VerifyOk, VerifyError>,
}

/// Verifies every run under `runs_dir`: each folder holding an `events.jsonl`, and each run the
/// index anchors whose folder is gone (never verified). In run-name order.
pub fn verify_all(runs_dir: &Path, opts: &VerifyOptions) -> Result<Vec<RunVerdict>, VerifyError> {
    Ok(each_run(runs_dir, opts, verify)?
        .into_iter()
        .map(|(run, result)| RunVerdict { run, result })
        .collect())
}

/// A run's name and what a check said about it.
pub(crate) type Named<T> = (String, Result<T, VerifyError>);

/// Runs `check` on every run folder under `runs_dir`, and reports anchored runs whose folder is
/// gone, in run-name order.
pub(crate) fn each_run<T>(
    runs_dir: &Path,
    opts: &VerifyOptions,
    check: impl Fn(&Path, &VerifyOptions) -> Result<T, VerifyError>,
) -> Result<Vec<Named<T>>, VerifyError> {
    let io = |source| VerifyError::Io {
        path: runs_dir.to_path_buf(),
        source,
    };
    let mut names: std::collections::BTreeMap<String, Option<u64>> = std::fs::read_dir(runs_dir)
        .map_err(io)?
        .filter_map(Result::ok)
        .filter(|e| e.path().join(EVENTS_FILE).is_file())
        .map(|e| (e.file_name().to_string_lossy().into_owned(), None))
        .collect();
    // An index that does not verify still lets each run report it (through `verify`).
    if let Ok(index) = read_index(runs_dir, &opts.keys, opts.allow_keyless) {
        for e in index {
            if !runs_dir.join(&e.anchor.run).join(EVENTS_FILE).is_file() {
                names.insert(e.anchor.run.clone(), Some(e.seq));
            }
        }
    }
    Ok(names
        .into_iter()
        .map(|(run, gone)| {
            let result = match gone {
                Some(line) => Err(VerifyError::FolderGone {
                    path: runs_dir.join(&run),
                    run: run.clone(),
                    line,
                }),
                None => check(&runs_dir.join(&run), opts),
            };
            (run, result)
        })
        .collect())
}
