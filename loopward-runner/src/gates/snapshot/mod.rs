//! Workspace snapshots around shell calls: effects, not tool names.
//!
//! Before a command runs, every path of the workspace is recorded (kind, mode; a file's size,
//! inode, times and content hash; link targets; for protected paths the content itself, in a
//! [`ContentStore`]). After it, the two are compared; each change is judged like a file tool's
//! write, and a forbidden one is reverted from the snapshot (content restored, created paths
//! deleted, deleted paths recreated).
//!
//! Paths and link targets are bytes on Linux, and are recorded as such: each is kept as its
//! lossless text (`path_text`: a UTF-8 path is itself, any other byte is
//! `U+FFFD` and two hex digits), so a name that is not UTF-8 is compared, judged by where it
//! lies (its folders are kept as they are), put back by its real bytes, and saved between the
//! hook's processes without loss — it neither breaks the record nor hides in it.
//!
//! A snapshot is not blinded by what a command can make next to a watched path (see
//! [`Snapshot::take`] and `unchecked.rs`): watched files are read first and in full; any
//! other file too big for what is left of the budget, unreadable or changing while it is read
//! is compared by its `stat` instead of its content.
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

use crate::path_text;
use loopward_core::EffectKind;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::MetadataExt;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

mod store;
mod take;

pub use store::{ContentStore, DirStore, MemoryStore};

/// The most paths one snapshot records before it fails closed.
pub const MAX_SNAPSHOT_PATHS: usize = 200_000;

/// A file's size and times, to compare a file whose content was not read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
struct Stat {
    size: u64,
    /// Modified, seconds and nanoseconds.
    mtime: (i64, i64),
    /// Changed (content, mode, links; not settable by a command), seconds and nanoseconds.
    ctime: (i64, i64),
}

impl Stat {
    fn of(m: &std::fs::Metadata) -> Self {
        Self {
            size: m.len(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
        }
    }
}

/// One path's state. Paths and link targets are `path_text`: any bytes, losslessly.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Entry {
    File {
        mode: u32,
        /// The content's SHA-256; `None` when it was not read (see [`Snapshot::take`]), and the
        /// file is compared by its `stat`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sha256: Option<String>,
        /// Whether its content is in the store.
        kept: bool,
        /// (device, inode, link count), to see hard links.
        node: (u64, u64, u64),
        #[serde(default)]
        stat: Stat,
    },
    Dir {
        mode: u32,
    },
    Link {
        target: String,
    },
    Other,
}

impl Entry {
    fn same(&self, other: &Self) -> bool {
        match (self, other) {
            (
                Self::File {
                    mode: a,
                    sha256: h,
                    node: n,
                    stat: s,
                    ..
                },
                Self::File {
                    mode: b,
                    sha256: g,
                    node: m,
                    stat: t,
                    ..
                },
            ) => {
                a == b
                    && match (h, g) {
                        (Some(h), Some(g)) => h == g,
                        // One side unread: the same file, untouched, has the same inode, size
                        // and times (the change time moves on every write and cannot be set).
                        _ => (n.0, n.1) == (m.0, m.1) && s == t,
                    }
            }
            (Self::Dir { mode: a }, Self::Dir { mode: b }) => a == b,
            (Self::Link { target: a }, Self::Link { target: b }) => a == b,
            (Self::Other, Self::Other) => true,
            _ => false,
        }
    }
}

/// Why a snapshot could not be taken or a change put back. Each names the workspace path it is
/// about ([`SnapshotError::path`]; `.` for the workspace itself).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SnapshotError {
    /// A folder could not be listed, or its entries not looked at.
    #[error("workspace snapshot: folder {path} cannot be listed ({why}); what is in it cannot be compared. What to do: make it readable again (`chmod u+rwx {path}`) or remove it; a person can list it under [gates.shell] skip")]
    Unlistable {
        /// The folder.
        path: String,
        /// The error.
        why: String,
    },
    /// A path that must be read could not be.
    #[error("workspace snapshot: {path} cannot be read ({why}); it is watched, so it must be. What to do: make it readable again (`chmod u+r {path}`); a person can restore it")]
    Unreadable {
        /// The path.
        path: String,
        /// The error.
        why: String,
    },
    /// A watched file is too big to keep.
    #[error("workspace snapshot: {path} is watched (its content is kept to put it back) and holds {size} bytes, more than the {left} bytes left of the {limit} a snapshot may read ([gates.shell] max_snapshot_bytes). What to do: a person shrinks it, raises max_snapshot_bytes or lists big generated folders under [gates.shell] skip")]
    TooBig {
        /// The file.
        path: String,
        /// Its size.
        size: u64,
        /// What was left of the budget.
        left: u64,
        /// `max_snapshot_bytes`.
        limit: u64,
    },
    /// A watched file changed while it was read.
    #[error("workspace snapshot: {path} is watched and changed while it was being recorded, and again each time it was taken again a moment later. What to do: try again when nothing is writing it")]
    Changing {
        /// The file.
        path: String,
    },
    /// Too many paths.
    #[error("workspace snapshot: listing {dir} took the workspace past {MAX_SNAPSHOT_PATHS} paths. What to do: remove what made so many, or a person lists big generated folders under [gates.shell] skip")]
    TooManyPaths {
        /// The folder being listed.
        dir: String,
    },
    /// Kept content could not be written or read.
    #[error("workspace snapshot: {what}")]
    Store {
        /// What failed.
        what: String,
    },
    /// A change could not be put back.
    #[error("cannot put back {path}: {why}")]
    Revert {
        /// The path.
        path: String,
        /// Why.
        why: String,
    },
}

impl SnapshotError {
    /// The workspace path the error is about (`.`: the workspace, or the store outside it).
    pub fn path(&self) -> &str {
        match self {
            Self::Unlistable { path, .. }
            | Self::Unreadable { path, .. }
            | Self::TooBig { path, .. }
            | Self::Changing { path }
            | Self::Revert { path, .. } => path,
            Self::TooManyPaths { dir } => dir,
            Self::Store { .. } => ".",
        }
    }
}

/// The state of a workspace at one moment.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Snapshot {
    entries: BTreeMap<String, Entry>,
}

/// One changed path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    /// The canonical workspace-relative path, as `path_text` writes it.
    pub path: String,
    /// Created, modified or deleted.
    pub kind: EffectKind,
}

impl Snapshot {
    /// The paths recorded.
    pub fn paths(&self) -> impl Iterator<Item = &str> {
        self.entries.keys().map(String::as_str)
    }

    /// The paths whose content is kept (watched: they may have to be put back).
    pub fn kept_paths(&self) -> impl Iterator<Item = &str> {
        self.entries
            .iter()
            .filter(|(_, e)| matches!(e, Entry::File { kept: true, .. }))
            .map(|(p, _)| p.as_str())
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

    /// The SHA-256 (hex) of the regular file at `path`, when it is one whose content was read.
    pub fn content_sha256(&self, path: &str) -> Option<&str> {
        match self.entries.get(path) {
            Some(Entry::File { sha256, .. }) => sha256.as_deref(),
            _ => None,
        }
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
        let abs = root.join(path_text::path(&change.path));
        let err = |what: &str, e: std::io::Error| SnapshotError::Revert {
            path: change.path.clone(),
            why: format!("cannot {what} it: {e}"),
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
                let (true, Some(sha256)) = (kept, sha256) else {
                    return Err(SnapshotError::Revert {
                        path: change.path.clone(),
                        why: "no saved content to restore it from".into(),
                    });
                };
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
                std::os::unix::fs::symlink(path_text::path(target), &abs)
                    .map_err(|e| err("restore the link", e))?;
            }
            Entry::Other => {
                return Err(SnapshotError::Revert {
                    path: change.path.clone(),
                    why: "it was a special file, which cannot be restored".into(),
                })
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

    #[test]
    fn odd_names_and_link_targets_travel_as_json_and_are_put_back_by_their_bytes() {
        use std::ffi::OsStr;
        use std::os::unix::ffi::OsStrExt;
        let d = tempfile::tempdir().unwrap();
        let (ws, blobs) = (d.path().join("ws"), d.path().join("blobs"));
        std::fs::create_dir(&ws).unwrap();
        let odd = ws.join(OsStr::from_bytes(b"pl\xffan.md"));
        std::fs::write(&odd, "kept").unwrap();
        std::os::unix::fs::symlink(OsStr::from_bytes(b"\xfe"), ws.join("link")).unwrap();
        let store = DirStore::new(&blobs);
        let before = Snapshot::take(&ws, &[], u64::MAX, &|_: &str| true, &store).unwrap();
        let before: Snapshot =
            serde_json::from_str(&serde_json::to_string(&before).unwrap()).unwrap();
        std::fs::write(&odd, "changed").unwrap();
        std::fs::remove_file(ws.join("link")).unwrap();
        std::os::unix::fs::symlink("elsewhere", ws.join("link")).unwrap();
        let after = Snapshot::take(&ws, &[], u64::MAX, &|_: &str| false, &store).unwrap();
        let changes = before.diff(&after);
        let paths: Vec<_> = changes.iter().map(|c| c.path.as_str()).collect();
        assert_eq!(paths, ["link", "pl\u{fffd}ffan.md"]);
        for c in &changes {
            before.revert(&ws, c, &store).unwrap();
        }
        assert_eq!(std::fs::read_to_string(&odd).unwrap(), "kept");
        let target = std::fs::read_link(ws.join("link")).unwrap();
        assert_eq!(target.as_os_str().as_bytes(), b"\xfe");
    }
}
