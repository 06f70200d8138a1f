//! Checking a run's ledger: every record's hash, the sequence, the chain links, and the final
//! hash against the run's anchor in `runs/index.jsonl`. The first problem found is named with
//! its sequence number.
//!
//! ```
//! use loopward_core::{AuditEvent, AuditSink, RunId, Scope};
//! use loopward_runner::audit::{verify, Breach, Ledger, LedgerOptions};
//! let runs = tempfile::tempdir().unwrap();
//! let run = RunId::new("r1").unwrap();
//! let ledger = Ledger::create(runs.path(), &run, LedgerOptions::default()).unwrap();
//! let scope = Scope { run: run.clone(), turn: None, agent: None };
//! for text in ["one", "two", "three"] {
//!     ledger.record(&scope, &AuditEvent::HumanMessage { content: text.into() }).unwrap();
//! }
//! ledger.finish().unwrap();
//! assert_eq!(verify(&runs.path().join("r1"), None).unwrap().final_seq, 3);
//!
//! // Edit the second record: verify names seq 2.
//! let path = runs.path().join("r1/events.jsonl");
//! let text = std::fs::read_to_string(&path).unwrap().replace("two", "tw0");
//! std::fs::write(&path, text).unwrap();
//! let err = verify(&runs.path().join("r1"), None).unwrap_err();
//! assert_eq!(err.first_bad_seq(), Some(2));
//! assert_eq!(err.breach(), Some(&Breach::Edited));
//! ```

use super::index::{latest_anchor, Anchor};
use super::record::{Chain, LedgerKey, Record, GENESIS};
use std::path::{Path, PathBuf};

/// The ledger file's name inside a run directory.
pub const EVENTS_FILE: &str = "events.jsonl";

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
    /// The ledger ends before its anchor's final sequence number.
    #[error("truncated: the ledger ends at seq {last} but its anchor in runs/index.jsonl says {anchored}")]
    Truncated {
        /// The last sequence number present.
        last: u64,
        /// The anchored final sequence number.
        anchored: u64,
    },
    /// The record at the anchored sequence number has another hash (the ledger was re-chained).
    #[error(
        "anchor mismatch: the record's hash is not the final hash anchored in runs/index.jsonl"
    )]
    AnchorMismatch,
    /// Records follow the anchored final record without a newer anchor.
    #[error("after anchor: records were appended after the run's anchored end (seq {anchored})")]
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
    /// The ledger is keyed (its anchor says so) and no key was given.
    #[error("{path}: the ledger is an HMAC chain; pass its key to verify it")]
    KeyRequired {
        /// The ledger file.
        path: PathBuf,
    },
    /// The ledger or the index could not be read.
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

/// A ledger that verified.
#[derive(Clone, Debug, PartialEq)]
pub struct VerifyOk {
    /// The run.
    pub run: String,
    /// The number of records (equal to the last sequence number).
    pub final_seq: u64,
    /// The last record's hash ([`GENESIS`] for an empty ledger).
    pub final_hash: String,
    /// Whether the final hash matched an anchor in `runs/index.jsonl` (false: the run has not
    /// finished, or its anchor is gone; truncation cannot be detected without one).
    pub anchored: bool,
    /// `sha256` or `hmac-sha256`.
    pub mac: &'static str,
}

/// Verifies the ledger of the run in `run_dir` (`runs/<run-id>`), against its anchor in the
/// parent directory's `index.jsonl`. Pass the key when the ledger is an HMAC chain.
pub fn verify(run_dir: &Path, key: Option<&LedgerKey>) -> Result<VerifyOk, VerifyError> {
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
    let runs_dir = run_dir.parent().unwrap_or(Path::new("."));
    let anchor = latest_anchor(runs_dir, &run).map_err(|source| VerifyError::Io {
        path: runs_dir.join(super::index::INDEX_FILE),
        source,
    })?;
    let chain = match (key, &anchor) {
        (Some(k), _) => Chain::Hmac(k.clone()),
        (None, Some(a)) if a.mac != "sha256" => return Err(VerifyError::KeyRequired { path }),
        (None, _) => Chain::Sha256,
    };
    let scan = scan(&bytes, &chain, Some(&run));
    if let Some((seq, breach)) = scan.bad {
        return Err(VerifyError::Breach { path, seq, breach });
    }
    let final_seq = scan.records.len() as u64;
    let final_hash = scan
        .records
        .last()
        .map_or_else(|| GENESIS.to_string(), |r| r.hash.clone());
    if let Some(a) = &anchor {
        check_anchor(&scan.records, a).map_err(|(seq, breach)| VerifyError::Breach {
            path: path.clone(),
            seq,
            breach,
        })?;
    }
    Ok(VerifyOk {
        run,
        final_seq,
        final_hash,
        anchored: anchor.is_some(),
        mac: chain.label(),
    })
}

fn check_anchor(records: &[Record], a: &Anchor) -> Result<(), (u64, Breach)> {
    let last = records.len() as u64;
    if last < a.final_seq {
        return Err((
            last + 1,
            Breach::Truncated {
                last,
                anchored: a.final_seq,
            },
        ));
    }
    let at = match a.final_seq {
        0 => GENESIS,
        n => records[usize::try_from(n - 1).unwrap_or(usize::MAX)]
            .hash
            .as_str(),
    };
    if at != a.final_hash {
        return Err((a.final_seq, Breach::AnchorMismatch));
    }
    if last > a.final_seq {
        return Err((
            a.final_seq + 1,
            Breach::AfterAnchor {
                anchored: a.final_seq,
            },
        ));
    }
    Ok(())
}

/// The result of reading a ledger's bytes front to back.
pub(crate) struct Scan {
    /// The records that verified, in order.
    pub(crate) records: Vec<Record>,
    /// Bytes up to the end of the last good line.
    pub(crate) good_len: usize,
    /// The first problem: (seq, what).
    pub(crate) bad: Option<(u64, Breach)>,
    /// Whether the first problem is in the last line of the file (a torn write looks like this).
    pub(crate) bad_is_last_line: bool,
}

/// Reads records until the first bad one. `run`, when given, is the run every record must name.
pub(crate) fn scan(bytes: &[u8], chain: &Chain, run: Option<&str>) -> Scan {
    let mut out = Scan {
        records: vec![],
        good_len: 0,
        bad: None,
        bad_is_last_line: false,
    };
    let mut prev = GENESIS.to_string();
    let mut pos = 0;
    while pos < bytes.len() {
        let end = bytes[pos..]
            .iter()
            .position(|b| *b == b'\n')
            .map_or(bytes.len(), |i| pos + i + 1);
        let line = &bytes[pos..end];
        let expected = out.records.len() as u64 + 1;
        let is_last = end == bytes.len();
        let checked = if line.ends_with(b"\n") {
            check_line(line, chain, expected, &prev, run, &bytes[end..])
        } else {
            Err(Breach::Unparseable(
                "the last line has no newline (torn write)".into(),
            ))
        };
        let record = match checked {
            Ok(r) => r,
            Err(b) => {
                out.bad = Some((expected, b));
                out.bad_is_last_line = is_last;
                return out;
            }
        };
        prev.clone_from(&record.hash);
        out.records.push(record);
        out.good_len = end;
        pos = end;
    }
    out
}

fn check_line(
    line: &[u8],
    chain: &Chain,
    expected: u64,
    prev: &str,
    run: Option<&str>,
    rest: &[u8],
) -> Result<Record, Breach> {
    let (record, canonical) = Record::parse_line(line).map_err(|e| Breach::Unparseable(e.0))?;
    if chain.digest(&canonical) != record.hash {
        return Err(Breach::Edited);
    }
    if record.seq != expected {
        let later = rest
            .split(|b| *b == b'\n')
            .filter_map(|l| Record::parse_line(l).ok())
            .any(|(r, _)| r.seq == expected);
        return Err(if later {
            Breach::Reordered { found: record.seq }
        } else {
            Breach::Missing { found: record.seq }
        });
    }
    if record.prev != prev {
        return Err(Breach::BadLink);
    }
    if let Some(run) = run {
        if record.run.as_str() != run {
            return Err(Breach::WrongRun {
                found: record.run.to_string(),
            });
        }
    }
    Ok(record)
}
