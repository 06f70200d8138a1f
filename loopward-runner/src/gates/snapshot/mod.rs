//! Workspace snapshots around shell calls: effects, not tool names.
//!
//! Before a command runs, every path of the workspace is recorded (kind, size, mode, content
//! hash; link targets; for protected paths the content itself, in a [`ContentStore`]). After
//! it, the two are compared; each change is judged like a file tool's write, and a forbidden one
//! is reverted from the snapshot (content restored, created paths deleted, deleted paths
//! recreated).
//!
//! One type for both enforcement points: the runner keeps contents in memory
//! ([`MemoryStore`]) for the length of a call; the Claude Code hook, whose `PreToolUse` and
//! `PostToolUse` are two processes, saves the snapshot (it is `serde`) and keeps contents on disk
//! ([`DirStore`]) in loopward's state directory.
//!
//! ```
//! use loopward_runner::gates::{MemoryStore, Snapshot};
//! let dir = tempfile::tempdir().unwrap();
//! let store = MemoryStore::default();
//! std::fs::write(dir.path().join("a.txt"), "one").unwrap();
//! let before = Snapshot::take(dir.path(), &[], u64::MAX, &|_: &str| true, &store).unwrap();
//! std::fs::write(dir.path().join("a.txt"), "two").unwrap();
//! std::fs::write(dir.path().join("b.txt"), "new").unwrap();
//! let after = Snapshot::take(dir.path(), &[], u64::MAX, &|_: &str| false, &store).unwrap();
//! let changes = before.diff(&after);
//! assert_eq!(changes.len(), 2);
//! for c in &changes { before.revert(dir.path(), c, &store).unwrap(); }
//! assert_eq!(std::fs::read_to_string(dir.path().join("a.txt")).unwrap(), "one");
//! assert!(!dir.path().join("b.txt").exists());
//! ```

use loopward_core::EffectKind;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The most paths one snapshot records before it fails closed.
pub const MAX_SNAPSHOT_PATHS: usize = 200_000;

/// Where a snapshot keeps the contents it may have to put back, by SHA-256 (hex).
pub trait ContentStore: Send + Sync {
    /// Keeps `bytes`, whose hash is `sha256`.
    fn put(&self, sha256: &str, bytes: &[u8]) -> Result<(), SnapshotError>;
    /// The bytes kept under `sha256`.
    fn get(&self, sha256: &str) -> Result<Vec<u8>, SnapshotError>;
}

/// Contents kept in memory (the runner: one shell call, one process).
#[derive(Debug, Default)]
pub struct MemoryStore(Mutex<HashMap<String, Vec<u8>>>);

impl ContentStore for MemoryStore {
    fn put(&self, sha256: &str, bytes: &[u8]) -> Result<(), SnapshotError> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(sha256.to_string())
            .or_insert_with(|| bytes.to_vec());
        Ok(())
    }

    fn get(&self, sha256: &str) -> Result<Vec<u8>, SnapshotError> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(sha256)
            .cloned()
            .ok_or_else(|| SnapshotError(format!("no saved content {sha256}")))
    }
}

/// Contents kept as files named by their hash in a folder (the hook: kept between the
/// `PreToolUse` and `PostToolUse` processes). Each is written to a temporary name, synced and
/// renamed into place, so a reader finds a whole file or none.
#[derive(Clone, Debug)]
pub struct DirStore {
    dir: PathBuf,
}

impl DirStore {
    /// A store in `dir` (created on first use).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }
}

impl ContentStore for DirStore {
    fn put(&self, sha256: &str, bytes: &[u8]) -> Result<(), SnapshotError> {
        let path = self.dir.join(sha256);
        if path.exists() {
            return Ok(());
        }
        let err = |e: std::io::Error| SnapshotError(format!("cannot keep {}: {e}", path.display()));
        std::fs::create_dir_all(&self.dir).map_err(err)?;
        crate::atomic_file::write_atomic(&path, bytes, 0o600).map_err(err)
    }

    fn get(&self, sha256: &str) -> Result<Vec<u8>, SnapshotError> {
        let path = self.dir.join(sha256);
        std::fs::read(&path).map_err(|e| {
            SnapshotError(format!("cannot read saved content {}: {e}", path.display()))
        })
    }
}

/// One path's state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Entry {
    File {
        mode: u32,
        sha256: String,
        /// Whether its content is in the store.
        kept: bool,
        /// (device, inode, link count), to see hard links.
        node: (u64, u64, u64),
    },
    Dir {
        mode: u32,
    },
    Link {
        target: std::path::PathBuf,
    },
    Other,
}

impl Entry {
    fn same(&self, other: &Self) -> bool {
        match (self, other) {
            (
                Self::File {
                    mode: a, sha256: h, ..
                },
                Self::File {
                    mode: b, sha256: g, ..
                },
            ) => a == b && h == g,
            (Self::Dir { mode: a }, Self::Dir { mode: b }) => a == b,
            (Self::Link { target: a }, Self::Link { target: b }) => a == b,
            (Self::Other, Self::Other) => true,
            _ => false,
        }
    }
}

/// Why a snapshot could not be taken or a change reverted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("workspace snapshot: {0}")]
pub struct SnapshotError(pub String);

/// The state of a workspace at one moment.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Snapshot {
    entries: BTreeMap<String, Entry>,
}

/// One changed path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    /// The canonical workspace-relative path.
    pub path: String,
    /// Created, modified or deleted.
    pub kind: EffectKind,
}

/// Whether an error says the path is no longer there.
fn gone(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::NotFound
}

impl Snapshot {
    /// Records `root`, skipping the workspace-relative paths in `skip`, reading at most
    /// `max_bytes` of file content; `keep(path)` says whose content to keep in `store` for
    /// reverts.
    pub fn take(
        root: &Path,
        skip: &[String],
        max_bytes: u64,
        keep: &dyn Fn(&str) -> bool,
        store: &dyn ContentStore,
    ) -> Result<Self, SnapshotError> {
        let mut snap = Self::default();
        let mut budget = max_bytes;
        let mut stack = vec![String::new()];
        while let Some(dir) = stack.pop() {
            let abs = if dir.is_empty() {
                root.to_path_buf()
            } else {
                root.join(&dir)
            };
            // A path removed while it is being recorded (a temporary file another process
            // made and removed) was not there at that moment: it is left out, not an error.
            let rd = match std::fs::read_dir(&abs) {
                Err(e) if gone(&e) && !dir.is_empty() => {
                    snap.entries.remove(&dir);
                    continue;
                }
                r => r.map_err(|e| SnapshotError(format!("cannot list {}: {e}", abs.display())))?,
            };
            for ent in rd {
                let ent = ent.map_err(|e| SnapshotError(format!("cannot list {dir:?}: {e}")))?;
                let name = ent.file_name().to_string_lossy().into_owned();
                let rel = if dir.is_empty() {
                    name.clone()
                } else {
                    format!("{dir}/{name}")
                };
                if skip.iter().any(|s| s.trim_matches('/') == rel) {
                    continue;
                }
                if snap.entries.len() >= MAX_SNAPSHOT_PATHS {
                    return Err(SnapshotError(format!(
                        "more than {MAX_SNAPSHOT_PATHS} paths; list big generated folders under [gates.shell] skip"
                    )));
                }
                let meta = match std::fs::symlink_metadata(ent.path()) {
                    Err(e) if gone(&e) => continue,
                    r => r.map_err(|e| SnapshotError(format!("cannot stat {rel}: {e}")))?,
                };
                let ft = meta.file_type();
                let entry = if ft.is_symlink() {
                    Entry::Link {
                        target: match std::fs::read_link(ent.path()) {
                            Err(e) if gone(&e) => continue,
                            r => r.map_err(|e| {
                                SnapshotError(format!("cannot read link {rel}: {e}"))
                            })?,
                        },
                    }
                } else if ft.is_dir() {
                    stack.push(rel.clone());
                    Entry::Dir {
                        mode: meta.permissions().mode(),
                    }
                } else if ft.is_file() {
                    if meta.len() > budget {
                        return Err(SnapshotError(format!(
                            "the workspace holds more than the {max_bytes} bytes a snapshot may read ([gates.shell] max_snapshot_bytes); list big generated folders under [gates.shell] skip"
                        )));
                    }
                    budget -= meta.len();
                    let bytes = match std::fs::read(ent.path()) {
                        Err(e) if gone(&e) => continue,
                        r => r.map_err(|e| SnapshotError(format!("cannot read {rel}: {e}")))?,
                    };
                    let sha256 = hex::encode(Sha256::digest(&bytes));
                    let kept = keep(&rel);
                    if kept {
                        store.put(&sha256, &bytes)?;
                    }
                    Entry::File {
                        mode: meta.mode() & 0o7777,
                        sha256,
                        kept,
                        node: (meta.dev(), meta.ino(), meta.nlink()),
                    }
                } else {
                    Entry::Other
                };
                snap.entries.insert(rel, entry);
            }
        }
        Ok(snap)
    }

    /// The paths recorded.
    pub fn paths(&self) -> impl Iterator<Item = &str> {
        self.entries.keys().map(String::as_str)
    }

    /// Whether `path` is a symbolic link in this snapshot.
    pub fn is_link(&self, path: &str) -> bool {
        matches!(self.entries.get(path), Some(Entry::Link { .. }))
    }

    /// Other paths that are hard links to the same file as `path` in this snapshot.
    pub fn hard_links_of(&self, path: &str) -> Vec<String> {
        let Some(Entry::File { node, .. }) = self.entries.get(path) else {
            return vec![];
        };
        if node.2 < 2 {
            return vec![];
        }
        self.entries
            .iter()
            .filter(|(p, e)| {
                p.as_str() != path
                    && matches!(e, Entry::File { node: n, .. } if n.0 == node.0 && n.1 == node.1)
            })
            .map(|(p, _)| p.clone())
            .collect()
    }

    /// What changed from `self` to `after`, in path order.
    pub fn diff(&self, after: &Self) -> Vec<Change> {
        let keys: BTreeSet<&String> = self.entries.keys().chain(after.entries.keys()).collect();
        let mut out = Vec::new();
        for k in keys {
            let (was, now) = (self.entries.get(k), after.entries.get(k));
            let kind = match (was, now) {
                (Some(a), Some(b)) if a.same(b) => continue,
                (_, Some(Entry::Link { .. })) => EffectKind::Link,
                (None, Some(_)) => EffectKind::Create,
                (Some(_), None) => EffectKind::Delete,
                (Some(_), Some(_)) => EffectKind::Modify,
                (None, None) => continue,
            };
            // A directory whose mode did not change is not itself a change worth reporting
            // when only its contents changed (those are listed on their own).
            out.push(Change {
                path: k.clone(),
                kind,
            });
        }
        out
    }

    /// Whether `path` is a directory in this snapshot.
    pub fn is_dir(&self, path: &str) -> bool {
        matches!(self.entries.get(path), Some(Entry::Dir { .. }))
    }

    /// Undoes one change, restoring the state recorded in `self` (kept contents come from
    /// `store`).
    pub fn revert(
        &self,
        root: &Path,
        change: &Change,
        store: &dyn ContentStore,
    ) -> Result<(), SnapshotError> {
        let abs = root.join(&change.path);
        let err = |what: &str, e: std::io::Error| {
            SnapshotError(format!("cannot {what} {}: {e}", change.path))
        };
        // Remove whatever is there now (unless it is a directory we must keep).
        let now = std::fs::symlink_metadata(&abs).ok();
        let before = self.entries.get(&change.path);
        match (&now, before) {
            (Some(m), Some(Entry::Dir { .. })) if m.is_dir() => {}
            (Some(m), _) if m.is_dir() => {
                std::fs::remove_dir_all(&abs).map_err(|e| err("remove", e))?;
            }
            (Some(_), _) => std::fs::remove_file(&abs).map_err(|e| err("remove", e))?,
            (None, _) => {}
        }
        let Some(before) = before else {
            return Ok(());
        };
        if let Some(parent) = abs.parent() {
            std::fs::create_dir_all(parent).map_err(|e| err("recreate the folder of", e))?;
        }
        match before {
            Entry::File {
                mode, sha256, kept, ..
            } => {
                if !kept {
                    return Err(SnapshotError(format!(
                        "no saved content to restore {}",
                        change.path
                    )));
                }
                let bytes = store.get(sha256)?;
                // Renamed over, so a link put in place meanwhile is replaced, not followed.
                crate::atomic_file::write_atomic(&abs, &bytes, *mode)
                    .map_err(|e| err("restore", e))?;
            }
            Entry::Dir { mode } => {
                std::fs::create_dir_all(&abs).map_err(|e| err("recreate", e))?;
                std::fs::set_permissions(&abs, std::fs::Permissions::from_mode(*mode))
                    .map_err(|e| err("restore the mode of", e))?;
            }
            Entry::Link { target } => {
                std::os::unix::fs::symlink(target, &abs).map_err(|e| err("restore link", e))?;
            }
            Entry::Other => {
                return Err(SnapshotError(format!(
                    "{} was a special file and cannot be restored",
                    change.path
                )))
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_put_where_a_kept_file_was_is_replaced_not_followed() {
        let d = tempfile::tempdir().unwrap();
        let (ws, blobs) = (d.path().join("ws"), d.path().join("blobs"));
        std::fs::create_dir(&ws).unwrap();
        std::fs::write(ws.join("plan.md"), "plan").unwrap();
        std::fs::write(d.path().join("outside.txt"), "outside").unwrap();
        let store = DirStore::new(&blobs);
        let before = Snapshot::take(&ws, &[], u64::MAX, &|_: &str| true, &store).unwrap();
        // Between the two processes of the hook the snapshot travels as JSON.
        let before: Snapshot =
            serde_json::from_str(&serde_json::to_string(&before).unwrap()).unwrap();
        std::fs::remove_file(ws.join("plan.md")).unwrap();
        std::os::unix::fs::symlink(d.path().join("outside.txt"), ws.join("plan.md")).unwrap();
        let after = Snapshot::take(&ws, &[], u64::MAX, &|_: &str| false, &store).unwrap();
        let changes = before.diff(&after);
        assert_eq!(
            changes,
            vec![Change {
                path: "plan.md".into(),
                kind: EffectKind::Link
            }]
        );
        before.revert(&ws, &changes[0], &store).unwrap();
        assert!(!std::fs::symlink_metadata(ws.join("plan.md"))
            .unwrap()
            .is_symlink());
        assert_eq!(std::fs::read_to_string(ws.join("plan.md")).unwrap(), "plan");
        assert_eq!(
            std::fs::read_to_string(d.path().join("outside.txt")).unwrap(),
            "outside"
        );
    }
}
