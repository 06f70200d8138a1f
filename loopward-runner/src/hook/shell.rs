//! Watching the workspace around a Claude Code `Bash` call, across two hook processes.
//!
//! `PreToolUse` captures a snapshot (every file's hash; the content of files inside territories
//! and control paths, kept as blobs) under the session folder, keyed by the call's id.
//! `PostToolUse` compares the workspace with it; a change the caller may not make is put back
//! (the old content restored, a new file or link removed) and reported.
//!
//! Not watched: `.git/`, the `[gates.shell] skip` folders, the hook's own session folders
//! (`.loopward/sessions/`) and the runs directory (every ledger, which loopward appends to while
//! a command runs; a watch must never "revert" them). Tampering with a ledger is caught by
//! `loopward verify` instead.

use super::session::SessionError;
use crate::workspace::Workspace;
use loopward_core::{Effect, EffectKind, EffectStatus};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Why a snapshot could not be taken, compared or used to revert.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ShellWatchError {
    /// A file could not be read or written.
    #[error("watching the workspace around a shell call: {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The workspace is too big to watch.
    #[error("the workspace holds more than {0} bytes of files outside the skipped folders ([gates.shell] max_snapshot_bytes); shell calls cannot be watched, so they are refused")]
    TooBig(u64),
    /// No snapshot was taken for this call.
    #[error("no workspace snapshot was taken before shell call {0:?} (was the PreToolUse hook installed for Bash?)")]
    NoSnapshot(String),
    /// The session state failed.
    #[error(transparent)]
    Session(#[from] SessionError),
    /// A snapshot file is corrupt.
    #[error("snapshot {path} is corrupt: {why}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// Why.
        why: String,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> ShellWatchError + '_ {
    move |source| ShellWatchError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// One path's state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Entry {
    File {
        sha256: String,
        mode: u32,
        /// Whether its content was kept as a blob.
        kept: bool,
    },
    Link {
        target: String,
    },
}

/// The workspace's files at one moment.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Snapshot {
    entries: BTreeMap<String, Entry>,
}

/// A change found by [`compare`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Change {
    pub(crate) path: String,
    pub(crate) kind: EffectKind,
}

fn skipped(rel: &str, skip: &[String]) -> bool {
    rel == ".git" || skip.iter().any(|s| s.trim_matches('/') == rel) || rel == ".loopward/sessions"
}

/// Captures the workspace, skipping `.git/` and the workspace-relative paths in `skip`, reading at most
/// `max_bytes`; files for which `watched` holds have their content kept in `blobs`.
pub(crate) fn capture(
    ws: &Workspace,
    blobs: &Path,
    watched: &dyn Fn(&str) -> bool,
    skip: &[String],
    max_bytes: u64,
) -> Result<Snapshot, ShellWatchError> {
    let mut snap = Snapshot::default();
    let mut budget = max_bytes;
    let mut stack = vec![String::new()];
    while let Some(dir) = stack.pop() {
        let abs = ws.root().join(&dir);
        let mut names: Vec<_> = fs::read_dir(&abs)
            .map_err(io(&abs))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(io(&abs))?;
        names.sort_by_key(|e| e.file_name());
        for e in names {
            let name = e.file_name().to_string_lossy().into_owned();
            let rel = if dir.is_empty() {
                name
            } else {
                format!("{dir}/{name}")
            };
            if skipped(&rel, skip) {
                continue;
            }
            let path = e.path();
            let meta = fs::symlink_metadata(&path).map_err(io(&path))?;
            let ft = meta.file_type();
            if ft.is_symlink() {
                let target = fs::read_link(&path).map_err(io(&path))?;
                snap.entries.insert(
                    rel,
                    Entry::Link {
                        target: target.to_string_lossy().into_owned(),
                    },
                );
            } else if ft.is_dir() {
                stack.push(rel);
            } else if ft.is_file() {
                budget = budget
                    .checked_sub(meta.len())
                    .ok_or(ShellWatchError::TooBig(max_bytes))?;
                let bytes = fs::read(&path).map_err(io(&path))?;
                let sha256 = hex::encode(Sha256::digest(&bytes));
                let kept = watched(&rel);
                if kept {
                    let blob = blobs.join(&sha256);
                    if !blob.exists() {
                        fs::create_dir_all(blobs).map_err(io(blobs))?;
                        crate::atomic_file::write_atomic(&blob, &bytes, 0o600)
                            .map_err(io(&blob))?;
                    }
                }
                snap.entries.insert(
                    rel,
                    Entry::File {
                        sha256,
                        mode: meta.permissions().mode() & 0o7777,
                        kept,
                    },
                );
            }
        }
    }
    Ok(snap)
}

impl Snapshot {
    /// Saves the snapshot to `path`.
    pub(crate) fn save(&self, path: &Path) -> Result<(), ShellWatchError> {
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).map_err(io(parent))?;
        }
        let bytes = serde_json::to_vec(self).map_err(|e| ShellWatchError::Corrupt {
            path: path.to_path_buf(),
            why: e.to_string(),
        })?;
        crate::atomic_file::write_atomic(path, &bytes, 0o600).map_err(io(path))
    }

    /// Loads a saved snapshot.
    pub(crate) fn load(path: &Path, call: &str) -> Result<Self, ShellWatchError> {
        let bytes = match fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(ShellWatchError::NoSnapshot(call.into()))
            }
            Err(e) => return Err(io(path)(e)),
        };
        serde_json::from_slice(&bytes).map_err(|e| ShellWatchError::Corrupt {
            path: path.to_path_buf(),
            why: e.to_string(),
        })
    }
}

/// What changed between two snapshots, in path order.
pub(crate) fn compare(before: &Snapshot, after: &Snapshot) -> Vec<Change> {
    let mut out = Vec::new();
    for (path, b) in &before.entries {
        match after.entries.get(path) {
            None => out.push(Change {
                path: path.clone(),
                kind: EffectKind::Delete,
            }),
            Some(a) if !same(a, b) => out.push(Change {
                path: path.clone(),
                kind: match a {
                    Entry::Link { .. } => EffectKind::Link,
                    Entry::File { .. } => EffectKind::Modify,
                },
            }),
            Some(_) => {}
        }
    }
    for (path, a) in &after.entries {
        if !before.entries.contains_key(path) {
            out.push(Change {
                path: path.clone(),
                kind: match a {
                    Entry::Link { .. } => EffectKind::Link,
                    Entry::File { .. } => EffectKind::Create,
                },
            });
        }
    }
    out.sort_by(|x, y| x.path.cmp(&y.path));
    out
}

/// Whether two entries show the same content (whether a blob was kept does not matter).
fn same(a: &Entry, b: &Entry) -> bool {
    match (a, b) {
        (
            Entry::File {
                sha256: x, mode: m, ..
            },
            Entry::File {
                sha256: y, mode: n, ..
            },
        ) => x == y && m == n,
        (Entry::Link { target: x }, Entry::Link { target: y }) => x == y,
        _ => false,
    }
}

/// Puts `rel` back as it was in `before`.
pub(crate) fn revert(
    ws: &Workspace,
    blobs: &Path,
    before: &Snapshot,
    rel: &str,
) -> Result<Effect, ShellWatchError> {
    let abs = ws.root().join(rel);
    let kind_now = fs::symlink_metadata(&abs).ok().map(|m| m.file_type());
    let remove_now = || -> Result<(), ShellWatchError> {
        match kind_now {
            Some(ft) if ft.is_dir() => fs::remove_dir_all(&abs).map_err(io(&abs)),
            Some(_) => fs::remove_file(&abs).map_err(io(&abs)),
            None => Ok(()),
        }
    };
    let kind = match before.entries.get(rel) {
        None => {
            remove_now()?;
            EffectKind::Create
        }
        Some(Entry::Link { target }) => {
            remove_now()?;
            std::os::unix::fs::symlink(target, &abs).map_err(io(&abs))?;
            EffectKind::Link
        }
        Some(Entry::File { sha256, mode, kept }) => {
            if !kept {
                return Err(ShellWatchError::Corrupt {
                    path: abs,
                    why: "its content was not kept before the call".into(),
                });
            }
            let blob = blobs.join(sha256);
            let bytes = fs::read(&blob).map_err(io(&blob))?;
            let existed = kind_now.is_some();
            if kind_now.is_some_and(|ft| !ft.is_file()) {
                remove_now()?;
            }
            if let Some(parent) = abs.parent() {
                fs::create_dir_all(parent).map_err(io(parent))?;
            }
            // Replaced by a rename, so a link put in place is replaced, not followed.
            crate::atomic_file::write_atomic(&abs, &bytes, 0o600).map_err(io(&abs))?;
            fs::set_permissions(&abs, fs::Permissions::from_mode(*mode)).map_err(io(&abs))?;
            if existed {
                EffectKind::Modify
            } else {
                EffectKind::Delete
            }
        }
    };
    Ok(Effect {
        path: rel.to_string(),
        kind,
        status: EffectStatus::Reverted,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_watched_file_is_put_back_and_a_new_one_removed() {
        let d = tempfile::tempdir().unwrap();
        let ws = Workspace::new(d.path()).unwrap();
        let blobs = d.path().join(".loopward/sessions/s/blobs");
        fs::write(ws.root().join("plan.md"), "# Plan\n").unwrap();
        fs::write(ws.root().join("free.txt"), "a").unwrap();
        let watched = |rel: &str| rel == "plan.md" || rel == "new.md";
        let before = capture(&ws, &blobs, &watched, &[], 1 << 20).unwrap();
        fs::write(ws.root().join("plan.md"), "hacked").unwrap();
        fs::write(ws.root().join("new.md"), "x").unwrap();
        fs::write(ws.root().join("free.txt"), "b").unwrap();
        let after = capture(&ws, &blobs, &watched, &[], 1 << 20).unwrap();
        let changes = compare(&before, &after);
        let paths: Vec<_> = changes.iter().map(|c| c.path.as_str()).collect();
        assert_eq!(paths, ["free.txt", "new.md", "plan.md"]);
        revert(&ws, &blobs, &before, "plan.md").unwrap();
        revert(&ws, &blobs, &before, "new.md").unwrap();
        assert_eq!(
            fs::read_to_string(ws.root().join("plan.md")).unwrap(),
            "# Plan\n"
        );
        assert!(!ws.root().join("new.md").exists());
        assert_eq!(fs::read_to_string(ws.root().join("free.txt")).unwrap(), "b");
    }
}
