//! What a session changed in the workspace, by evidence: a manifest of every path (and a
//! digest of each file's content) taken before the session and again when it is needed. A
//! manifest's digest is the workspace's fingerprint (the evidence a session made progress);
//! two compared are the paths the session wrote, which the review gates judge its handoff by,
//! as they judge a hosted agent's by its recorded writes. A CLI session writes through its
//! client's own tools, so only the workspace can say what it changed.

use crate::context::TurnContext;
use crate::turn::TurnError;
use loopward_core::{
    AuditEvent, Effect, EffectKind, LayerDetail, LayerId, LayerVerdict, SessionChangesDetail,
};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::MetadataExt as _;
use std::path::Path;

/// Folders a manifest skips: version control, build output, loopward's and the client's
/// own files.
const SKIP: [&str; 6] = [
    ".git",
    "target",
    "runs",
    ".loopward",
    "node_modules",
    ".claude-code",
];

/// Files larger than this are known by size and time, not content.
const MAX_HASHED_BYTES: u64 = 16 * 1024 * 1024;

/// One path of a manifest.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Entry {
    /// A folder (its files are entries of their own).
    Dir,
    /// A folder that could not be listed: what is in it is unknown.
    Unlistable,
    /// A file or a symbolic link: a digest of its content or target.
    File([u8; 32]),
}

/// Every path under a workspace root (but the skipped folders), in name order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Manifest {
    paths: BTreeMap<String, Entry>,
}

impl Manifest {
    /// Walks `root`.
    pub(crate) fn take(root: &Path) -> Self {
        let mut m = Self::default();
        m.walk(root, root);
        m
    }

    /// The fingerprint: equal fingerprints, the session changed nothing the loop can see.
    pub(crate) fn fingerprint(&self) -> String {
        let mut h = Sha256::new();
        for (path, entry) in &self.paths {
            h.update(path.as_bytes());
            h.update(b"\0");
            match entry {
                Entry::Dir => h.update(b"dir"),
                Entry::Unlistable => h.update(b"unlistable"),
                Entry::File(d) => h.update(d),
            }
            h.update(b"\0");
        }
        hex::encode(h.finalize())
    }

    /// The files created, modified or deleted between this manifest and `after`, in name
    /// order; a folder that could not be listed in either counts as modified (what changed in
    /// it is unknown, so it is named rather than left out).
    pub(crate) fn changes_to(&self, after: &Self) -> Vec<Effect> {
        let paths: BTreeSet<&String> = self.paths.keys().chain(after.paths.keys()).collect();
        paths
            .into_iter()
            .filter_map(|p| {
                let kind = match (self.paths.get(p), after.paths.get(p)) {
                    // A folder's files are named alone.
                    (Some(Entry::Dir) | None, Some(Entry::Dir) | None) => return None,
                    (Some(_), None) => EffectKind::Delete,
                    (None, Some(_)) => EffectKind::Create,
                    (Some(b), Some(a)) if b == a && *a != Entry::Unlistable => return None,
                    (Some(_), Some(_)) => EffectKind::Modify,
                };
                Some(Effect::ok(p.clone(), kind))
            })
            .collect()
    }

    fn walk(&mut self, root: &Path, dir: &Path) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            let rel = rel_of(root, dir);
            self.paths.insert(rel, Entry::Unlistable);
            return;
        };
        for e in entries.filter_map(Result::ok) {
            let path = e.path();
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            if meta.is_dir() && dir == root && SKIP.iter().any(|s| e.file_name() == *s) {
                continue;
            }
            let rel = rel_of(root, &path);
            if meta.is_dir() {
                self.paths.insert(rel, Entry::Dir);
                self.walk(root, &path);
                continue;
            }
            let mut h = Sha256::new();
            if meta.is_symlink() {
                h.update(b"link\0");
                if let Ok(t) = std::fs::read_link(&path) {
                    h.update(t.as_os_str().as_encoded_bytes());
                }
            } else if !meta.is_file() {
                // A FIFO, socket or device is never opened: reading a FIFO the session made
                // would wait for a writer for ever.
                h.update(format!("special {:o}", meta.mode()));
            } else if meta.len() <= MAX_HASHED_BYTES {
                match read_regular(&path) {
                    Some(bytes) => h.update(&bytes),
                    None => h.update(format!("unreadable {}", meta.len())),
                }
            } else {
                let mtime = meta
                    .modified()
                    .ok()
                    .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                    .unwrap_or_default();
                h.update(format!("{} {}", meta.len(), mtime.as_nanos()));
            }
            self.paths.insert(rel, Entry::File(h.finalize().into()));
        }
    }
}

/// The content of the regular file at `path`, opened without waiting and without following
/// a link: `None` when it is not a regular file by then (swapped after it was listed) or
/// cannot be read.
fn read_regular(path: &Path) -> Option<Vec<u8>> {
    use std::io::Read as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK | nix::libc::O_NOFOLLOW)
        .open(path)
        .ok()?;
    if !f.metadata().ok()?.is_file() {
        return None;
    }
    let mut bytes = Vec::new();
    f.read_to_end(&mut bytes).ok()?;
    Some(bytes)
}

/// `path` relative to `root`, with forward slashes (as an [`Effect`] names it).
fn rel_of(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .to_string_lossy()
        .into_owned()
}

/// Records `changes`, what the session wrote so far, as the turn's effects (replacing any
/// recorded at an earlier handoff of the same session), first in the ledger so a replay judges
/// the handoff by the same paths ([`recorded`]).
pub(super) fn written(turn: &TurnContext, changes: Vec<Effect>) -> Result<(), TurnError> {
    turn.record_owned(AuditEvent::LayerDecision {
        layer: LayerId::Session,
        decision: LayerVerdict::Observed,
        detail: LayerDetail::SessionChanges(SessionChangesDetail {
            changed: changes.clone(),
        }),
    })?;
    turn.state().effects = changes;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fingerprint(root: &Path) -> String {
        Manifest::take(root).fingerprint()
    }

    #[test]
    fn a_fifo_in_the_workspace_is_listed_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("pipe");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let root = dir.path().to_path_buf();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || tx.send(Manifest::take(&root)).unwrap());
        let m = rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("taking the manifest waited on the FIFO");
        assert!(m.paths.contains_key("pipe"), "{m:?}");
    }

    #[test]
    fn a_fingerprint_changes_with_content_and_names_and_ignores_build_output() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "one").unwrap();
        let before = fingerprint(dir.path());
        assert_eq!(before, fingerprint(dir.path()));
        std::fs::create_dir(dir.path().join("target")).unwrap();
        std::fs::write(dir.path().join("target/x"), "built").unwrap();
        assert_eq!(
            before,
            fingerprint(dir.path()),
            "build output is not progress"
        );
        std::fs::write(dir.path().join("a.txt"), "two").unwrap();
        assert_ne!(before, fingerprint(dir.path()));
        std::fs::write(dir.path().join("a.txt"), "one").unwrap();
        std::fs::rename(dir.path().join("a.txt"), dir.path().join("b.txt")).unwrap();
        assert_ne!(before, fingerprint(dir.path()));
        std::fs::create_dir(dir.path().join("empty")).unwrap();
        let with_dir = fingerprint(dir.path());
        std::fs::remove_dir(dir.path().join("empty")).unwrap();
        assert_ne!(
            with_dir,
            fingerprint(dir.path()),
            "a new folder is a change"
        );
    }

    #[test]
    fn the_changes_between_two_manifests_name_each_file_created_modified_or_deleted() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("src/old")).unwrap();
        std::fs::write(root.join("src/lib.rs"), "v1").unwrap();
        std::fs::write(root.join("src/old/gone.rs"), "x").unwrap();
        std::fs::write(root.join("same.md"), "x").unwrap();
        let before = Manifest::take(root);
        std::fs::write(root.join("src/lib.rs"), "v2").unwrap();
        std::fs::remove_dir_all(root.join("src/old")).unwrap();
        std::fs::create_dir_all(root.join("docs/new")).unwrap();
        std::fs::write(root.join("docs/new/a.md"), "x").unwrap();
        std::fs::create_dir_all(root.join("target")).unwrap();
        std::fs::write(root.join("target/built"), "x").unwrap();
        let changes = before.changes_to(&Manifest::take(root));
        let named: Vec<(&str, &EffectKind)> =
            changes.iter().map(|e| (e.path.as_str(), &e.kind)).collect();
        assert_eq!(
            named,
            [
                ("docs/new/a.md", &EffectKind::Create),
                ("src/lib.rs", &EffectKind::Modify),
                ("src/old/gone.rs", &EffectKind::Delete),
            ]
        );
        assert!(before.changes_to(&before).is_empty());
    }
}
