//! `runs/index.jsonl`: a chain of anchors. Each line records one run's end (its final sequence
//! number and hash) and is itself chained and authenticated like a ledger record: it names the
//! previous line's hash and carries an HMAC under the run's key (or a keyless SHA-256), so an
//! anchor cannot be edited, dropped from the middle, reordered or forged without the key.
//!
//! Dropping the *last* lines keeps a valid prefix; two places catch that: the index head kept in
//! loopward's state directory ([`IndexHead`], where agents cannot write), and an optional
//! external witness that receives a copy of every anchor line.
//!
//! ```
//! use loopward_runner::audit::{append_anchor, read_index, Anchor, Chain, KeyRing, LedgerKey};
//! let dir = tempfile::tempdir().unwrap();
//! let key = LedgerKey::from_bytes(vec![7u8; 32]).unwrap();
//! let a = Anchor::new("r1", 3, "ab".repeat(32), "T");
//! append_anchor(dir.path(), &a, &Chain::Hmac(key.clone()), None, None).unwrap();
//! let index = read_index(dir.path(), &KeyRing::single(key), false).unwrap();
//! assert_eq!(index[0].anchor.final_seq, 3);
//! assert_eq!(index[0].key.as_ref().map(|k| k.as_str().len()), Some(17));
//! // Without the key, the index cannot be read as evidence.
//! assert!(read_index(dir.path(), &KeyRing::empty(), false).is_err());
//! ```

use super::index_head::{record_head, IndexHead};
use super::key::{KeyId, KeyRing};
use super::record::{Chain, GENESIS};
use crate::atomic_file::{unobserved, Observer, Step};
use nix::fcntl::{Flock, FlockArg};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The file name of the index, inside the runs directory.
pub const INDEX_FILE: &str = "index.jsonl";

/// Domain separation prefix of every index line's hash.
pub const INDEX_DOMAIN: &[u8] = b"loopward.index.v2\0";

/// What one anchor says about one run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Anchor {
    /// The run id.
    pub run: String,
    /// The sequence number of the run's last record when it finished.
    pub final_seq: u64,
    /// That record's hash.
    pub final_hash: String,
    /// When the run finished (RFC 3339).
    pub time: String,
}

impl Anchor {
    /// An anchor of `run` at `final_seq` / `final_hash`.
    pub fn new(
        run: impl Into<String>,
        final_seq: u64,
        final_hash: impl Into<String>,
        time: impl Into<String>,
    ) -> Self {
        Self {
            run: run.into(),
            final_seq,
            final_hash: final_hash.into(),
            time: time.into(),
        }
    }
}

/// One authenticated line of `runs/index.jsonl`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexEntry {
    /// The line's position, counting from 1.
    pub seq: u64,
    /// The anchor.
    pub anchor: Anchor,
    /// `hmac-sha256` or `sha256` (keyless).
    pub mac: String,
    /// The key the line (and the run's ledger) is authenticated under.
    pub key: Option<KeyId>,
    /// The previous line's hash ([`GENESIS`] for the first).
    pub prev: String,
    /// This line's hash.
    pub hash: String,
}

/// The line as written, without `hash`; the field order is fixed.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    seq: u64,
    run: String,
    final_seq: u64,
    final_hash: String,
    time: String,
    mac: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    key: Option<KeyId>,
    prev: String,
}

/// A line as read back: the `Line` and its `hash`, split. Unknown members are still refused
/// (by `Line`), and so is a missing or non-string `hash`.
fn sealed(raw: &[u8]) -> Result<(Line, String), String> {
    let mut members: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(raw).map_err(|e| e.to_string())?;
    let Some(serde_json::Value::String(hash)) = members.remove("hash") else {
        return Err("missing field `hash`".into());
    };
    let line =
        serde_json::from_value(serde_json::Value::Object(members)).map_err(|e| e.to_string())?;
    Ok((line, hash))
}

/// The index is not evidence: a line is forged, edited, out of place or unreadable.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IndexError {
    /// The index could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A line does not verify.
    #[error("{path} line {line}: {why}")]
    Line {
        /// The index.
        path: PathBuf,
        /// The line number.
        line: u64,
        /// What is wrong and what to do.
        why: String,
    },
    /// The index is shorter than, or differs from, the head kept in the state directory.
    #[error("{path}: the index ends at line {found_seq} but loopward's state directory ({head}) records its last line as {seq} with hash {hash}: anchors were dropped from its end")]
    Head {
        /// The index.
        path: PathBuf,
        /// The head file.
        head: PathBuf,
        /// The recorded last line.
        seq: u64,
        /// Its hash.
        hash: String,
        /// The index's actual last line.
        found_seq: u64,
    },
}

pub(super) fn io(path: &Path) -> impl FnOnce(std::io::Error) -> IndexError + '_ {
    move |source| IndexError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Appends `anchor` to `runs_dir/index.jsonl`, chained to the last line and authenticated with
/// `chain`, under an exclusive lock, and syncs it. Then records the new head in `head` (a file in
/// the state directory) and a copy of the line in `witness` (an append-only file elsewhere).
pub fn append_anchor(
    runs_dir: &Path,
    anchor: &Anchor,
    chain: &Chain,
    head: Option<&Path>,
    witness: Option<&Path>,
) -> Result<IndexEntry, IndexError> {
    append_anchor_observed(runs_dir, anchor, chain, head, witness, true, &unobserved)
}

/// [`append_anchor`], each new file and sync shown to `observe` first (the ledger's fault hook);
/// `durable: false` syncs nothing (a ledger under `Durability::NoSync`).
pub(crate) fn append_anchor_observed(
    runs_dir: &Path,
    anchor: &Anchor,
    chain: &Chain,
    head: Option<&Path>,
    witness: Option<&Path>,
    durable: bool,
    observe: Observer<'_>,
) -> Result<IndexEntry, IndexError> {
    let path = runs_dir.join(INDEX_FILE);
    let mut open = std::fs::OpenOptions::new();
    open.read(true).append(true);
    // The index's own name must survive a power loss too: its folder is synced when this
    // writer made it.
    let (file, created) = match open.open(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            observe(Step::Create(&path)).map_err(io(&path))?;
            (open.create(true).open(&path), true)
        }
        found => (found, false),
    };
    let file = file.map_err(io(&path))?;
    // Writers in other processes append too; the lock keeps lines whole and the chain linear.
    let mut file = Flock::lock(file, FlockArg::LockExclusive)
        .map_err(|(_, e)| io(&path)(std::io::Error::from_raw_os_error(e as i32)))?;
    // Only the last line's position and hash are needed to chain: the writer trusts nothing else.
    let last = last_line(&file).map_err(io(&path))?;
    let (seq, prev) = match last.as_deref() {
        None => (1, GENESIS.to_string()),
        Some(l) => match sealed(l) {
            Ok((line, hash)) => (line.seq + 1, hash),
            Err(e) => {
                let text = std::fs::read(&path).map_err(io(&path))?;
                return Err(IndexError::Line {
                    path,
                    line: text.split(|b| *b == b'\n').filter(|l| !l.is_empty()).count() as u64,
                    why: format!("not an index line ({e}); the index is damaged: run `loopward verify` on the runs folder and restore it from a backup or the witness"),
                });
            }
        },
    };
    let line = Line {
        seq,
        run: anchor.run.clone(),
        final_seq: anchor.final_seq,
        final_hash: anchor.final_hash.clone(),
        time: anchor.time.clone(),
        mac: chain.label().into(),
        key: chain.key_id().cloned(),
        prev,
    };
    let (bytes, hash) = seal(&line, chain).map_err(io(&path))?;
    file.write_all(&bytes).map_err(io(&path))?;
    // The line is durable before the head that names it: a power loss may leave the head
    // behind the index, never ahead of it (which `verify` would report as anchors dropped).
    if durable {
        observe(Step::SyncFile(&path)).map_err(io(&path))?;
        file.sync_data().map_err(io(&path))?;
    }
    if created && durable {
        observe(Step::SyncDir(runs_dir)).map_err(io(runs_dir))?;
        std::fs::File::open(runs_dir)
            .and_then(|d| d.sync_all())
            .map_err(io(runs_dir))?;
    }
    if let Some(head) = head {
        let h = IndexHead {
            index: path.clone(),
            seq,
            hash: hash.clone(),
        };
        record_head(head, &h, durable, observe).map_err(io(head))?;
    }
    if let Some(w) = witness {
        append_witness(w, &bytes, durable, observe).map_err(io(w))?;
    }
    Ok(IndexEntry {
        seq,
        anchor: anchor.clone(),
        mac: line.mac,
        key: line.key,
        prev: line.prev,
        hash,
    })
}

/// The index's last non-empty line (`None`: it has none), read from its end: a run's anchor
/// costs the same with ten runs in the folder as with ten thousand.
fn last_line(file: &std::fs::File) -> std::io::Result<Option<Vec<u8>>> {
    use std::os::unix::fs::FileExt;
    let len = file.metadata()?.len();
    let mut want = 4096u64;
    loop {
        let from = len.saturating_sub(want);
        let mut tail = vec![0; (len - from) as usize];
        file.read_exact_at(&mut tail, from)?;
        let body = match tail.iter().rposition(|b| *b != b'\n') {
            Some(end) => &tail[..=end],
            None if from == 0 => return Ok(None),
            None => &[][..],
        };
        match body.iter().rposition(|b| *b == b'\n') {
            Some(start) => return Ok(Some(body[start + 1..].to_vec())),
            None if from == 0 => return Ok(Some(body.to_vec())),
            // The line began before the tail read: read more of the end.
            None => want = want.saturating_mul(4),
        }
    }
}

/// The line's bytes (with the newline) and its hash.
fn seal(line: &Line, chain: &Chain) -> std::io::Result<(Vec<u8>, String)> {
    let mut bytes = serde_json::to_vec(line).map_err(std::io::Error::other)?;
    let hash = chain.digest_in(INDEX_DOMAIN, &bytes);
    bytes.pop();
    bytes.extend_from_slice(format!(",\"hash\":\"{hash}\"}}\n").as_bytes());
    Ok((bytes, hash))
}

fn append_witness(
    path: &Path,
    line: &[u8],
    durable: bool,
    observe: Observer<'_>,
) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    let mut f = Flock::lock(f, FlockArg::LockExclusive)
        .map_err(|(_, e)| std::io::Error::from_raw_os_error(e as i32))?;
    f.write_all(line)?;
    if !durable {
        return Ok(());
    }
    observe(Step::SyncFile(path))?;
    f.sync_data()
}

/// Reads and verifies every line of `runs_dir/index.jsonl`: each line's hash under the key it
/// names (which `keys` must hold), its position and its link to the line before. Keyless lines
/// are accepted only with `allow_keyless`. No index is an empty list.
pub fn read_index(
    runs_dir: &Path,
    keys: &KeyRing,
    allow_keyless: bool,
) -> Result<Vec<IndexEntry>, IndexError> {
    let path = runs_dir.join(INDEX_FILE);
    let text = match std::fs::read(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(vec![]),
        Err(e) => return Err(io(&path)(e)),
    };
    parse_lines(&path, &text, keys, allow_keyless)
}

/// Verifies index lines (from the index itself, or a witness copy of it).
fn parse_lines(
    path: &Path,
    text: &[u8],
    keys: &KeyRing,
    allow_keyless: bool,
) -> Result<Vec<IndexEntry>, IndexError> {
    let mut out: Vec<IndexEntry> = vec![];
    let mut prev = GENESIS.to_string();
    for (i, raw) in text.split_inclusive(|b| *b == b'\n').enumerate() {
        let n = i as u64 + 1;
        let entry = parse_one(path, n, raw, keys, allow_keyless)?;
        let bad = |why: &str| IndexError::Line {
            path: path.to_path_buf(),
            line: n,
            why: why.into(),
        };
        if entry.seq != n {
            return Err(bad(&format!(
                "it says it is line {}: lines were removed, inserted or moved",
                entry.seq
            )));
        }
        if entry.prev != prev {
            return Err(bad(
                "it does not chain to the line before it: lines were removed, inserted or moved",
            ));
        }
        prev.clone_from(&entry.hash);
        out.push(entry);
    }
    Ok(out)
}

/// Reads an external witness: the copies of index lines it received, verified like the index.
pub fn read_witness(
    witness: &Path,
    keys: &KeyRing,
    allow_keyless: bool,
) -> Result<Vec<IndexEntry>, IndexError> {
    let text = std::fs::read(witness).map_err(io(witness))?;
    // A witness holds copies of lines from one or more indexes: each is checked on its own
    // (its hash), not as one chain.
    let mut out = vec![];
    for (i, raw) in text.split_inclusive(|b| *b == b'\n').enumerate() {
        out.push(parse_one(witness, i as u64 + 1, raw, keys, allow_keyless)?);
    }
    Ok(out)
}

/// Checks one line's hash under the chain it names; not its place in the chain.
fn parse_one(
    path: &Path,
    n: u64,
    raw: &[u8],
    keys: &KeyRing,
    allow_keyless: bool,
) -> Result<IndexEntry, IndexError> {
    let bad = |why: String| IndexError::Line {
        path: path.to_path_buf(),
        line: n,
        why,
    };
    if !raw.ends_with(b"\n") {
        return Err(bad(
            "the last line has no newline (a torn or edited write)".into()
        ));
    }
    let (line, claimed) = sealed(raw).map_err(|e| {
        bad(format!(
            "not an authenticated anchor ({e}); an index from before schema 2 or a hand-written line is not evidence"
        ))
    })?;
    let chain = match (line.mac.as_str(), &line.key) {
        ("hmac-sha256", Some(id)) => match keys.get(id) {
            Some(k) => Chain::Hmac(k.clone()),
            None => {
                return Err(bad(format!(
                    "it is keyed with {id}, which this machine does not hold; pass that key (`--key FILE`) to verify"
                )))
            }
        },
        ("sha256", None) if allow_keyless => Chain::Sha256,
        ("sha256", None) => {
            return Err(bad(
                "a keyless (sha256) anchor: anyone who can write the file can make one; pass --allow-keyless to accept keyless chains".into(),
            ))
        }
        (mac, _) => return Err(bad(format!("unknown chain {mac:?}"))),
    };
    let (bytes, hash) = seal(&line, &chain).map_err(|e| bad(e.to_string()))?;
    if bytes != raw || hash != claimed {
        return Err(bad(
            "its content does not match its hash: it was edited or forged".into(),
        ));
    }
    Ok(IndexEntry {
        seq: line.seq,
        anchor: Anchor {
            run: line.run,
            final_seq: line.final_seq,
            final_hash: line.final_hash,
            time: line.time,
        },
        mac: line.mac,
        key: line.key,
        prev: line.prev,
        hash,
    })
}

#[cfg(test)]
mod tests {
    use super::last_line;

    #[test]
    fn the_last_line_is_read_from_the_end_however_long_it_or_the_file_is() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("index.jsonl");
        let last = |text: &[u8]| {
            std::fs::write(&path, text).unwrap();
            last_line(&std::fs::File::open(&path).unwrap()).unwrap()
        };
        assert_eq!(last(b""), None);
        assert_eq!(last(b"\n\n"), None);
        assert_eq!(last(b"one"), Some(b"one".to_vec()));
        let long = vec![b'x'; 20_000];
        let mut text = b"first\n".repeat(3000);
        text.extend_from_slice(&long);
        text.extend_from_slice(b"\n\n");
        assert_eq!(last(&text), Some(long.clone()));
        assert_eq!(last(&[&long[..], b"\n"].concat()), Some(long));
        assert_eq!(last(&b"a\nb\n".repeat(5000)), Some(b"b".to_vec()));
    }
}
