//! The index head: the last line of `runs/index.jsonl` (its position and hash), kept in
//! loopward's state directory where agents cannot write, so that anchors dropped from the end of
//! the index are caught.
//!
//! The file is a log: each anchor appends one line, synced — one `fdatasync` and no new file
//! per run, where a file replaced by rename costs two syncs (the file, its folder) and a new
//! inode. The last whole line is the head. A torn append (a power loss mid-write) leaves an
//! unterminated tail, which is ignored: the head read is then the one before, older, never ahead
//! of the index (whose line is synced first). A file that grew past [`COMPACT_BYTES`], or whose
//! tail is not a whole line (torn, or a head written before the log), is replaced whole by one
//! line.

use super::index::{io, IndexEntry, IndexError, INDEX_FILE};
use crate::atomic_file::{replace_unsynced, write_atomic_observed, Observer, Step};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// A head log longer than this is replaced by its last line at the next anchor (about a
/// hundred anchors).
const COMPACT_BYTES: u64 = 16 * 1024;

/// The last line of an index, as kept in the state directory.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexHead {
    /// The index it belongs to.
    pub index: PathBuf,
    /// Its last line's position.
    pub seq: u64,
    /// Its last line's hash.
    pub hash: String,
}

/// Records `head` in the log at `path`: appended and synced, or (a new, long or torn log)
/// written whole by rename. `durable: false` syncs nothing (`Durability::NoSync`).
pub(super) fn record_head(
    path: &Path,
    head: &IndexHead,
    durable: bool,
    observe: Observer<'_>,
) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut line = serde_json::to_vec(head).map_err(std::io::Error::other)?;
    line.push(b'\n');
    let appendable = match std::fs::OpenOptions::new()
        .read(true)
        .append(true)
        .open(path)
    {
        Ok(f) => ends_whole(&f)?.then_some(f),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(e),
    };
    match appendable {
        Some(mut f) => {
            f.write_all(&line)?;
            if durable {
                observe(Step::SyncFile(path))?;
                f.sync_data()?;
            }
            Ok(())
        }
        None if durable => write_atomic_observed(path, &line, 0o644, observe),
        None => replace_unsynced(path, &line, 0o644, observe),
    }
}

/// Whether the log may take another line: it ends with a whole line and is not too long.
fn ends_whole(f: &std::fs::File) -> std::io::Result<bool> {
    let len = f.metadata()?.len();
    if len == 0 || len > COMPACT_BYTES {
        return Ok(false);
    }
    let mut last = [0u8];
    f.read_exact_at(&mut last, len - 1)?;
    Ok(last[0] == b'\n')
}

/// The head a log holds: its last whole line, or the whole text when it has no newline (a head
/// written before the log was one JSON object).
fn last_head(text: &[u8]) -> Result<IndexHead, serde_json::Error> {
    let whole = match text.iter().rposition(|b| *b == b'\n') {
        Some(end) => &text[..end],
        None => text,
    };
    let last = whole.rsplit(|b| *b == b'\n').next().unwrap_or_default();
    serde_json::from_slice(last)
}

/// Checks a verified index against the head kept at `head` (absent file: nothing to check).
/// Returns whether a head was there.
pub fn check_head(
    runs_dir: &Path,
    entries: &[IndexEntry],
    head: &Path,
) -> Result<bool, IndexError> {
    let path = runs_dir.join(INDEX_FILE);
    let text = match std::fs::read(head) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(io(head)(e)),
    };
    let h = last_head(&text).map_err(|e| IndexError::Line {
        path: head.to_path_buf(),
        line: 1,
        why: format!("not an index head: {e}"),
    })?;
    let found = entries.get(usize::try_from(h.seq).unwrap_or(usize::MAX).wrapping_sub(1));
    // The index may have grown since (another writer); it may not have lost or changed lines.
    if found.is_none_or(|e| e.hash != h.hash) {
        return Err(IndexError::Head {
            path,
            head: head.to_path_buf(),
            seq: h.seq,
            hash: h.hash,
            found_seq: entries.len() as u64,
        });
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::{last_head, record_head, IndexHead, COMPACT_BYTES};
    use crate::atomic_file::unobserved;

    fn head(seq: u64) -> IndexHead {
        IndexHead {
            index: "/runs/index.jsonl".into(),
            seq,
            hash: format!("h{seq}"),
        }
    }

    #[test]
    fn the_last_whole_line_is_the_head_and_a_torn_tail_is_the_one_before() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("heads").join("h.json");
        record_head(&path, &head(1), true, &unobserved).unwrap();
        record_head(&path, &head(2), true, &unobserved).unwrap();
        let mut text = std::fs::read(&path).unwrap();
        assert_eq!(text.iter().filter(|b| **b == b'\n').count(), 2);
        assert_eq!(last_head(&text).unwrap(), head(2));
        // A power loss mid-append: the head read is the older one, never a false alarm.
        text.extend_from_slice(b"{\"index\":\"/runs/ind");
        assert_eq!(last_head(&text).unwrap(), head(2));
        std::fs::write(&path, &text).unwrap();
        // The next anchor replaces a torn log whole.
        record_head(&path, &head(3), true, &unobserved).unwrap();
        let text = std::fs::read(&path).unwrap();
        assert_eq!(text.iter().filter(|b| **b == b'\n').count(), 1);
        assert_eq!(last_head(&text).unwrap(), head(3));
    }

    #[test]
    fn a_head_written_before_the_log_is_read_and_replaced() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("h.json");
        std::fs::write(&path, serde_json::to_vec(&head(7)).unwrap()).unwrap();
        assert_eq!(last_head(&std::fs::read(&path).unwrap()).unwrap(), head(7));
        record_head(&path, &head(8), false, &unobserved).unwrap();
        let text = std::fs::read(&path).unwrap();
        assert_eq!(last_head(&text).unwrap(), head(8));
        assert!(text.ends_with(b"}\n"));
        assert!(last_head(b"not a head").is_err());
    }

    #[test]
    fn a_long_log_is_replaced_by_its_last_line() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("h.json");
        let mut seq = 0;
        while std::fs::metadata(&path).map_or(0, |m| m.len()) <= COMPACT_BYTES {
            seq += 1;
            record_head(&path, &head(seq), true, &unobserved).unwrap();
        }
        record_head(&path, &head(seq + 1), true, &unobserved).unwrap();
        let text = std::fs::read(&path).unwrap();
        assert_eq!(text.iter().filter(|b| **b == b'\n').count(), 1);
        assert_eq!(last_head(&text).unwrap(), head(seq + 1));
    }
}
