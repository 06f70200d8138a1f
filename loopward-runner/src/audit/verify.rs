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

use super::index::{check_head, read_index, read_witness, IndexEntry, IndexError, INDEX_FILE};
use super::key::{KeyId, KeyRing};
use super::record::{Chain, LedgerHeader, Record, GENESIS, SCHEMA};
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
pub(crate) fn verify_records(
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

/// The chain a ledger says it uses (its first record's header), if the verifier accepts it.
fn chain_of(
    path: &Path,
    bytes: &[u8],
    opts: &VerifyOptions,
) -> Result<(Chain, Option<LedgerHeader>), VerifyError> {
    let first = bytes.split(|b| *b == b'\n').next().unwrap_or_default();
    if first.is_empty() {
        // No records: anchors decide (an emptied ledger no longer matches them).
        return Ok((Chain::Sha256, None));
    }
    let record = Record::parse_line(first).map_err(|e| VerifyError::Breach {
        path: path.to_path_buf(),
        seq: 1,
        breach: Breach::Unparseable(e.0),
    })?;
    let header = match record.0.ledger {
        None if opts.allow_keyless => return Ok((Chain::Sha256, None)),
        None => {
            return Err(VerifyError::Keyless {
                path: path.to_path_buf(),
                legacy: " from schema 1",
            })
        }
        Some(h) => h,
    };
    let bad = |why: String| VerifyError::Breach {
        path: path.to_path_buf(),
        seq: 1,
        breach: Breach::Header(why),
    };
    if header.schema != SCHEMA {
        return Err(VerifyError::OtherSchema {
            path: path.to_path_buf(),
            schema: header.schema,
            by: if header.schema < SCHEMA {
                "an older"
            } else {
                "a newer"
            },
        });
    }
    let chain = match (header.chain.as_str(), &header.key) {
        ("hmac-sha256", Some(id)) => match opts.keys.get(id) {
            Some(k) => Chain::Hmac(k.clone()),
            None => {
                return Err(VerifyError::KeyNotHeld {
                    path: path.to_path_buf(),
                    key: id.clone(),
                })
            }
        },
        ("sha256", None) if opts.allow_keyless => Chain::Sha256,
        ("sha256", None) => {
            return Err(VerifyError::Keyless {
                path: path.to_path_buf(),
                legacy: "",
            })
        }
        (other, _) => return Err(bad(format!("unknown chain {other:?}"))),
    };
    Ok((chain, Some(header)))
}

/// Checks every anchor of a run against its records, in index order.
fn check_anchors(
    records: &[Record],
    anchors: &[&IndexEntry],
    chain: &Chain,
    allow_unfinished: bool,
) -> Result<(), (u64, Breach)> {
    let last = records.len() as u64;
    let ledger = chain_text(chain.label(), chain.key_id());
    let mut earlier = 0;
    for a in anchors {
        let at = a.anchor.final_seq;
        // An empty ledger names no chain; its anchors are checked by position only.
        let anchor = chain_text(&a.mac, a.key.as_ref());
        if !records.is_empty() && anchor != ledger {
            return Err((
                at.max(1),
                Breach::AnchorKey {
                    line: a.seq,
                    anchor,
                    ledger,
                },
            ));
        }
        if at < earlier {
            return Err((
                at,
                Breach::AnchorRegressed {
                    line: a.seq,
                    earlier,
                    later: at,
                },
            ));
        }
        earlier = at;
        if last < at {
            return Err((last + 1, Breach::Truncated { last, anchored: at }));
        }
        let hash = match at {
            0 => GENESIS,
            n => records[usize::try_from(n - 1).unwrap_or(usize::MAX)]
                .hash
                .as_str(),
        };
        if hash != a.anchor.final_hash {
            return Err((at, Breach::AnchorMismatch { line: a.seq }));
        }
    }
    match anchors.last() {
        Some(a) if a.anchor.final_seq < last && !allow_unfinished => Err((
            a.anchor.final_seq + 1,
            Breach::AfterAnchor {
                anchored: a.anchor.final_seq,
            },
        )),
        _ => Ok(()),
    }
}

fn chain_text(mac: &str, key: Option<&KeyId>) -> String {
    match key {
        Some(k) => format!("{mac} key {k}"),
        None => mac.to_string(),
    }
}

/// The witness must hold exactly the run's anchors that the index holds.
fn check_witness(
    witness: &Path,
    anchors: &[&IndexEntry],
    run: &str,
    opts: &VerifyOptions,
) -> Result<(), VerifyError> {
    let held = read_witness(witness, &opts.keys, opts.allow_keyless).map_err(|e| {
        VerifyError::Witness {
            path: witness.to_path_buf(),
            why: e.to_string(),
        }
    })?;
    let mine: Vec<&IndexEntry> = held.iter().filter(|e| e.anchor.run == run).collect();
    let fail = |why: String| VerifyError::Witness {
        path: witness.to_path_buf(),
        why,
    };
    for a in anchors {
        if !mine.iter().any(|w| w.hash == a.hash) {
            return Err(fail(format!(
                "{INDEX_FILE} line {} (run {run} at seq {}) was never witnessed: the index was rewritten",
                a.seq, a.anchor.final_seq
            )));
        }
    }
    for w in &mine {
        if !anchors.iter().any(|a| a.hash == w.hash) {
            return Err(fail(format!(
                "it holds an anchor of run {run} at seq {} that {INDEX_FILE} no longer has: anchors were dropped",
                w.anchor.final_seq
            )));
        }
    }
    Ok(())
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

/// Reads records until the first bad one. `run`, when given, is the run every record must name;
/// `header` is the header the first record must carry (`None`: a schema 1 ledger, no header).
pub(crate) fn scan(
    bytes: &[u8],
    chain: &Chain,
    run: Option<&str>,
    header: Option<&LedgerHeader>,
) -> Scan {
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
            check_line(line, chain, expected, &prev, run, header, &bytes[end..])
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
    header: Option<&LedgerHeader>,
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
    let wanted = if expected == 1 { header } else { None };
    if record.ledger.as_ref() != wanted {
        return Err(Breach::Header(match (&record.ledger, wanted) {
            (Some(_), None) if expected > 1 => {
                "a header after the first record: a second ledger was spliced in".into()
            }
            (found, wanted) => format!(
                "the first record names {}, expected {}",
                header_text(found.as_ref()),
                header_text(wanted)
            ),
        }));
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

fn header_text(h: Option<&LedgerHeader>) -> String {
    match h {
        None => "no header (schema 1)".into(),
        Some(h) => format!(
            "schema {} {}",
            h.schema,
            chain_text(&h.chain, h.key.as_ref())
        ),
    }
}
