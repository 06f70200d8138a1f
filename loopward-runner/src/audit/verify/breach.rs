//! What a verifier can find wrong: the breach at the first bad record, and the errors.

use super::super::index::IndexError;
use super::super::key::KeyId;
use super::super::record::SCHEMA;
use std::path::PathBuf;

/// What is wrong at the first bad record.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Breach {
    /// The line is not a well-formed record.
    #[error("unparseable: {0}")]
    Unparseable(String),
    /// The record's content does not match its hash (it was edited, or the key is wrong).
    #[error("edited: the record's content does not match its hash")]
    Edited,
    /// A sequence number is absent: a record was deleted.
    #[error(
        "missing: the record with this sequence number is absent (found seq {found} in its place)"
    )]
    Missing {
        /// The sequence number found where this one should be.
        found: u64,
    },
    /// A sequence number appears out of order: records were moved.
    #[error("reordered: found seq {found} in its place; this record appears later in the file")]
    Reordered {
        /// The sequence number found where this one should be.
        found: u64,
    },
    /// The record's `prev` is not the previous record's hash (the chain was re-hashed from here).
    #[error("bad prev link: the record does not chain to the one before it")]
    BadLink,
    /// The record belongs to another run.
    #[error("wrong run: the record belongs to run {found}")]
    WrongRun {
        /// The run it names.
        found: String,
    },
    /// The ledger header (first record) is missing, repeated, or not the one expected.
    #[error("header: {0}")]
    Header(String),
    /// The ledger ends before an anchor's final sequence number.
    #[error("truncated: the ledger ends at seq {last} but its anchor in runs/index.jsonl says {anchored}")]
    Truncated {
        /// The last sequence number present.
        last: u64,
        /// The anchored final sequence number.
        anchored: u64,
    },
    /// The record at an anchored sequence number has another hash (the ledger was re-chained).
    #[error(
        "anchor mismatch: the record's hash is not the one anchored in runs/index.jsonl (line {line})"
    )]
    AnchorMismatch {
        /// The index line of the anchor.
        line: u64,
    },
    /// An anchor was made under another key or chain than the ledger's.
    #[error("anchor mismatch: runs/index.jsonl line {line} anchors this run under {anchor}, but the ledger is chained under {ledger}")]
    AnchorKey {
        /// The index line.
        line: u64,
        /// The anchor's chain and key.
        anchor: String,
        /// The ledger's.
        ledger: String,
    },
    /// A later anchor ends the run earlier than an earlier one did: one of them is a rewrite.
    #[error("contradicting anchors: runs/index.jsonl line {line} ends the run at seq {later}, before an earlier anchor's seq {earlier}")]
    AnchorRegressed {
        /// The later anchor's index line.
        line: u64,
        /// The earlier anchor's final sequence number.
        earlier: u64,
        /// The later one's.
        later: u64,
    },
    /// Records follow the last anchored record (the run did not finish since).
    #[error("after anchor: records were appended after the run's last anchored end (seq {anchored}); if the run is still going, pass --unfinished")]
    AfterAnchor {
        /// The anchored final sequence number.
        anchored: u64,
    },
}

/// A ledger did not verify.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VerifyError {
    /// A record is bad.
    #[error("{path}: seq {seq}: {breach}")]
    Breach {
        /// The ledger file.
        path: PathBuf,
        /// The first bad sequence number (the position where it went wrong).
        seq: u64,
        /// What is wrong.
        breach: Breach,
    },
    /// The ledger is keyed with a key the verifier does not hold.
    #[error("{path}: the ledger is chained under key {key}, which this machine does not hold; pass the key file (`--key FILE`) or verify where the key is kept")]
    KeyNotHeld {
        /// The ledger file.
        path: PathBuf,
        /// The key it names.
        key: KeyId,
    },
    /// The ledger is a keyless chain and keyless chains were not accepted.
    #[error("{path}: a keyless (sha256) chain{legacy}: anyone who can write the file can rewrite it undetected; pass --allow-keyless to check it anyway (it then proves only that nobody edited it carelessly)")]
    Keyless {
        /// The ledger file.
        path: PathBuf,
        /// ` from schema 1` when the ledger has no header.
        legacy: &'static str,
    },
    /// The ledger was written under another schema than the one this version reads ([`SCHEMA`]).
    #[error("{path}: ledger schema {schema} is not the one this version of loopward reads ({SCHEMA}): it was written by {by} loopward; verify and report it with the version that wrote it")]
    OtherSchema {
        /// The ledger file.
        path: PathBuf,
        /// The schema its header names.
        schema: u32,
        /// `an older` or `a newer`.
        by: &'static str,
    },
    /// The run has no anchor in `runs/index.jsonl`.
    #[error("{path}: run {run} has no anchor in runs/index.jsonl: it did not finish, or its anchor was removed; truncation cannot be ruled out. Pass --unfinished to check a run that is still going")]
    Unanchored {
        /// The ledger file.
        path: PathBuf,
        /// The run.
        run: String,
    },
    /// An anchor names a run whose folder is gone.
    #[error(
        "run {run} is anchored in runs/index.jsonl (line {line}) but its folder {path} is gone"
    )]
    FolderGone {
        /// The missing folder.
        path: PathBuf,
        /// The run.
        run: String,
        /// The index line of its last anchor.
        line: u64,
    },
    /// `runs/index.jsonl` is not evidence (a line forged, edited, dropped or out of place).
    #[error(transparent)]
    Index(#[from] IndexError),
    /// The external witness disagrees with the index.
    #[error("witness {path}: {why}")]
    Witness {
        /// The witness file.
        path: PathBuf,
        /// What disagrees.
        why: String,
    },
    /// The ledger could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

impl VerifyError {
    /// The first bad sequence number, when a record is bad.
    pub fn first_bad_seq(&self) -> Option<u64> {
        match self {
            Self::Breach { seq, .. } => Some(*seq),
            _ => None,
        }
    }

    /// What is wrong, when a record is bad.
    pub fn breach(&self) -> Option<&Breach> {
        match self {
            Self::Breach { breach, .. } => Some(breach),
            _ => None,
        }
    }
}
