//! `runs/index.jsonl`: one anchor per finished run (its final sequence number and hash), so a
//! ledger that was truncated and re-chained no longer matches its anchor.
//!
//! ```
//! use loopward_runner::audit::{read_anchors, Anchor};
//! let dir = tempfile::tempdir().unwrap();
//! let a = Anchor { run: "r1".into(), final_seq: 3, final_hash: "ab".repeat(32), time: "T".into(), mac: "sha256".into() };
//! loopward_runner::audit::append_anchor(dir.path(), &a).unwrap();
//! assert_eq!(read_anchors(dir.path()).unwrap(), vec![a]);
//! ```

use nix::fcntl::{Flock, FlockArg};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::Path;

/// The file name of the index, inside the runs directory.
pub const INDEX_FILE: &str = "index.jsonl";

/// One line of `runs/index.jsonl`.
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
    /// How the chain is hashed: `sha256` or `hmac-sha256`.
    #[serde(default = "default_mac")]
    pub mac: String,
}

fn default_mac() -> String {
    "sha256".into()
}

/// Appends `anchor` to `runs_dir/index.jsonl` under an exclusive lock, and syncs it.
pub fn append_anchor(runs_dir: &Path, anchor: &Anchor) -> std::io::Result<()> {
    let path = runs_dir.join(INDEX_FILE);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)?;
    // Writers in other processes append too; the lock keeps lines whole.
    let mut file = Flock::lock(file, FlockArg::LockExclusive)
        .map_err(|(_, e)| std::io::Error::from_raw_os_error(e as i32))?;
    let mut line = serde_json::to_vec(anchor).map_err(std::io::Error::other)?;
    line.push(b'\n');
    file.write_all(&line)?;
    file.sync_data()
}

/// Every anchor in `runs_dir/index.jsonl`, in order; empty when there is no index. Lines that
/// are not anchors are an error: the index is evidence and is not skipped over.
pub fn read_anchors(runs_dir: &Path) -> std::io::Result<Vec<Anchor>> {
    let path = runs_dir.join(INDEX_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(vec![]),
        Err(e) => return Err(e),
    };
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|e| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("{} line {}: not an anchor: {e}", path.display(), i + 1),
                )
            })
        })
        .collect()
}

/// The latest anchor of `run`, if it ever finished.
pub fn latest_anchor(runs_dir: &Path, run: &str) -> std::io::Result<Option<Anchor>> {
    Ok(read_anchors(runs_dir)?
        .into_iter()
        .rev()
        .find(|a| a.run == run))
}
