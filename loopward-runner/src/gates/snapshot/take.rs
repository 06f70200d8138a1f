//! Recording a workspace: the walk, then the contents — watched ones first, in full.

use super::{ContentStore, Entry, Snapshot, SnapshotError, Stat, MAX_SNAPSHOT_PATHS};
use crate::path_text;
use sha2::{Digest, Sha256};
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// How long a record waits, try after try, for a kept file that changed while it was read
/// before it is taken again; after the last, the file is refused as changing. Short beside a
/// host's hook timeout (Claude Code's is 60 s): a write settles in milliseconds, a file written
/// without end is refused within a fifth of a second.
pub(crate) const SETTLE_WAITS: [std::time::Duration; 3] = [
    std::time::Duration::from_millis(10),
    std::time::Duration::from_millis(40),
    std::time::Duration::from_millis(150),
];

/// Whether an error says the path is no longer there.
fn gone(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::NotFound
}

/// A file's content as read, or why it could not be taken as one.
enum Content {
    Whole(Vec<u8>),
    Gone,
    Changing,
    Failed(String),
}

/// Reads the regular file at `abs`, which `lstat` found with `meta`: without following a link
/// put in its place, without waiting on a FIFO put there, and never more than its size then.
/// A file whose size, inode or change time moved while it was read is `Changing`.
fn read_whole(abs: &Path, meta: &std::fs::Metadata) -> Content {
    let flags = rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK;
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags.bits() as i32)
        .open(abs)
    {
        Ok(f) => f,
        Err(e) if gone(&e) => return Content::Gone,
        Err(e) => return Content::Failed(e.to_string()),
    };
    let same = |m: &std::fs::Metadata| {
        m.is_file()
            && m.ino() == meta.ino()
            && m.dev() == meta.dev()
            && m.len() == meta.len()
            && Stat::of(m) == Stat::of(meta)
    };
    match file.metadata() {
        Ok(m) if same(&m) => {}
        Ok(_) => return Content::Changing,
        Err(e) => return Content::Failed(e.to_string()),
    }
    let mut bytes = Vec::new();
    // One byte more than it held: a file that grew is seen to grow, and is not read forever.
    if let Err(e) = (&file).take(meta.len() + 1).read_to_end(&mut bytes) {
        return Content::Failed(e.to_string());
    }
    match file.metadata() {
        Ok(m) if same(&m) && bytes.len() as u64 == meta.len() => Content::Whole(bytes),
        Ok(_) => Content::Changing,
        Err(e) => Content::Failed(e.to_string()),
    }
}

impl Snapshot {
    /// Records `root`, skipping the workspace-relative paths in `skip`. Every path is recorded
    /// (kind, mode; a link's target; a file's size, inode and times). Then contents, within
    /// `max_bytes` read in all: first every file for which `keep(path)` holds, read in full and
    /// kept in `store` (it may have to be put back); then the others, smallest first, hashed while
    /// the budget lasts. A file left unread — too big for what is left, unreadable, changing
    /// while read — is compared by its size, inode, mode and change times instead, so a huge or
    /// unreadable file in a free folder blinds nothing.
    ///
    /// Fails, naming the path, only where what the watch must know cannot be known: a kept file
    /// that cannot be kept whole (too big, unreadable, still changing after three short waits —
    /// another process's write in progress, such as a parallel subagent's, is waited out for
    /// under a fifth of a second, the whole record taken again after each), a folder that cannot be
    /// listed, more than [`MAX_SNAPSHOT_PATHS`] paths.
    pub fn take(
        root: &Path,
        skip: &[String],
        max_bytes: u64,
        keep: &dyn Fn(&str) -> bool,
        store: &dyn ContentStore,
    ) -> Result<Self, SnapshotError> {
        let mut waits = SETTLE_WAITS.iter();
        loop {
            let (mut snap, files) = Self::walk(root, skip)?;
            match snap.read_contents(root, files, max_bytes, keep, store) {
                Err(SnapshotError::Changing { path }) => match waits.next() {
                    Some(wait) => std::thread::sleep(*wait),
                    None => return Err(SnapshotError::Changing { path }),
                },
                read => return read.map(|()| snap),
            }
        }
    }

    /// Records every path under `root` but `skip` (no contents yet), with the regular files
    /// found and how `lstat` found them.
    fn walk(
        root: &Path,
        skip: &[String],
    ) -> Result<(Self, Vec<(String, std::fs::Metadata)>), SnapshotError> {
        let mut snap = Self::default();
        let mut files: Vec<(String, std::fs::Metadata)> = Vec::new();
        let mut stack = vec![String::new()];
        while let Some(dir) = stack.pop() {
            let abs = root.join(path_text::path(&dir));
            // A path removed while it is being recorded (a temporary file another process
            // made and removed) was not there at that moment: it is left out, not an error.
            let rd = match std::fs::read_dir(&abs) {
                Err(e) if gone(&e) && !dir.is_empty() => {
                    snap.entries.remove(&dir);
                    continue;
                }
                r => r.map_err(|e| unlistable(&dir, &e))?,
            };
            for ent in rd {
                let ent = ent.map_err(|e| unlistable(&dir, &e))?;
                let name = path_text::encode(ent.file_name().as_bytes()).into_owned();
                let rel = if dir.is_empty() {
                    name
                } else {
                    format!("{dir}/{name}")
                };
                if skip.iter().any(|s| s.trim_matches('/') == rel) {
                    continue;
                }
                if snap.entries.len() >= MAX_SNAPSHOT_PATHS {
                    return Err(SnapshotError::TooManyPaths {
                        dir: if dir.is_empty() { ".".into() } else { dir },
                    });
                }
                let meta = match std::fs::symlink_metadata(ent.path()) {
                    Err(e) if gone(&e) => continue,
                    r => r.map_err(|e| unlistable(&dir, &e))?,
                };
                let ft = meta.file_type();
                let entry = if ft.is_symlink() {
                    let target = match std::fs::read_link(ent.path()) {
                        Err(e) if gone(&e) => continue,
                        r => r.map_err(|e| SnapshotError::Unreadable {
                            path: rel.clone(),
                            why: e.to_string(),
                        })?,
                    };
                    Entry::Link {
                        target: path_text::encode(target.as_os_str().as_bytes()).into_owned(),
                    }
                } else if ft.is_dir() {
                    stack.push(rel.clone());
                    Entry::Dir {
                        mode: meta.permissions().mode(),
                    }
                } else if ft.is_file() {
                    let entry = Entry::File {
                        mode: meta.mode() & 0o7777,
                        sha256: None,
                        kept: false,
                        node: (meta.dev(), meta.ino(), meta.nlink()),
                        stat: Stat::of(&meta),
                    };
                    files.push((rel.clone(), meta));
                    entry
                } else {
                    Entry::Other
                };
                snap.entries.insert(rel, entry);
            }
        }
        Ok((snap, files))
    }

    fn read_contents(
        &mut self,
        root: &Path,
        files: Vec<(String, std::fs::Metadata)>,
        max_bytes: u64,
        keep: &dyn Fn(&str) -> bool,
        store: &dyn ContentStore,
    ) -> Result<(), SnapshotError> {
        let (kept, mut rest): (Vec<_>, Vec<_>) = files.into_iter().partition(|(p, _)| keep(p));
        let mut budget = max_bytes;
        for (rel, meta) in kept {
            if meta.len() > budget {
                return Err(SnapshotError::TooBig {
                    path: rel,
                    size: meta.len(),
                    left: budget,
                    limit: max_bytes,
                });
            }
            let bytes = match read_whole(&root.join(path_text::path(&rel)), &meta) {
                Content::Whole(b) => b,
                Content::Gone => {
                    self.entries.remove(&rel);
                    continue;
                }
                Content::Changing => return Err(SnapshotError::Changing { path: rel }),
                Content::Failed(why) => return Err(SnapshotError::Unreadable { path: rel, why }),
            };
            budget -= meta.len();
            let sha = hex::encode(Sha256::digest(&bytes));
            store.put(&sha, &bytes)?;
            if let Some(Entry::File { sha256, kept, .. }) = self.entries.get_mut(&rel) {
                *sha256 = Some(sha);
                *kept = true;
            }
        }
        // Smallest first: one huge file does not leave the others unhashed.
        rest.sort_by_key(|(_, m)| m.len());
        for (rel, meta) in rest {
            if meta.len() > budget {
                // Everything after it is as big or bigger.
                break;
            }
            match read_whole(&root.join(path_text::path(&rel)), &meta) {
                Content::Whole(bytes) => {
                    budget -= meta.len();
                    if let Some(Entry::File { sha256, .. }) = self.entries.get_mut(&rel) {
                        *sha256 = Some(hex::encode(Sha256::digest(&bytes)));
                    }
                }
                Content::Gone => {
                    self.entries.remove(&rel);
                }
                // Compared by its `stat`, as recorded.
                Content::Changing | Content::Failed(_) => {}
            }
        }
        Ok(())
    }
}

fn unlistable(dir: &str, e: &std::io::Error) -> SnapshotError {
    SnapshotError::Unlistable {
        path: if dir.is_empty() {
            ".".into()
        } else {
            dir.into()
        },
        why: e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::{ContentStore, MemoryStore, Snapshot, SnapshotError};
    use std::fs;

    #[test]
    fn watched_files_are_kept_first_whatever_the_free_files_take_of_the_budget() {
        let d = tempfile::tempdir().unwrap();
        fs::create_dir(d.path().join("a-free")).unwrap();
        for i in 0..20 {
            fs::write(d.path().join(format!("a-free/{i}")), [b'x'; 100]).unwrap();
        }
        fs::write(d.path().join("z-plan.md"), "the plan").unwrap();
        let store = MemoryStore::default();
        let keep = |p: &str| p == "z-plan.md";
        let snap = Snapshot::take(d.path(), &[], 508, &keep, &store).unwrap();
        assert_eq!(snap.kept_paths().collect::<Vec<_>>(), ["z-plan.md"]);
        // What the budget left unread is still compared: by size, inode and times.
        fs::write(d.path().join("a-free/19"), [b'y'; 100]).unwrap();
        let after = Snapshot::take(d.path(), &[], 508, &|_| false, &store).unwrap();
        let changed: Vec<_> = snap.diff(&after).into_iter().map(|c| c.path).collect();
        assert_eq!(changed, ["a-free/19"]);
    }

    #[test]
    fn a_file_growing_while_it_is_recorded_neither_fails_nor_stalls_the_record() {
        let d = tempfile::tempdir().unwrap();
        let grow = d.path().join("grow.log");
        fs::write(&grow, "").unwrap();
        fs::write(d.path().join("plan.md"), "the plan").unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let writer = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                use std::io::Write;
                let mut f = fs::OpenOptions::new().append(true).open(grow).unwrap();
                let mut written = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    f.write_all(&[b'x'; 4096]).unwrap();
                    written += 4096;
                    // Still changing under the reader, but never filling a slow machine's disk.
                    if written >= 16 << 20 {
                        f.set_len(0).unwrap();
                        written = 0;
                    }
                }
            })
        };
        let store = MemoryStore::default();
        for _ in 0..20 {
            let snap =
                Snapshot::take(d.path(), &[], u64::MAX, &|p| p == "plan.md", &store).unwrap();
            assert_eq!(snap.kept_paths().collect::<Vec<_>>(), ["plan.md"]);
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        writer.join().unwrap();
    }

    /// A store that, on each of its first `writes` puts, rewrites every watched file with more
    /// bytes than before: whichever is read after the first was changed under the reader.
    struct RewritingStore {
        inner: MemoryStore,
        files: Vec<std::path::PathBuf>,
        writes: usize,
        puts: std::sync::atomic::AtomicUsize,
    }

    impl ContentStore for RewritingStore {
        fn put(&self, sha256: &str, bytes: &[u8]) -> Result<(), SnapshotError> {
            let n = self.puts.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            if n < self.writes {
                for f in &self.files {
                    let mut longer = fs::read(f).unwrap();
                    longer.extend_from_slice(b" and more");
                    fs::write(f, longer).unwrap();
                }
            }
            self.inner.put(sha256, bytes)
        }

        fn get(&self, sha256: &str) -> Result<Vec<u8>, SnapshotError> {
            self.inner.get(sha256)
        }
    }

    fn rewriting(d: &std::path::Path, writes: usize) -> RewritingStore {
        let files = ["a.md", "b.md"].map(|n| d.join(n)).to_vec();
        for f in &files {
            fs::write(f, "the plan").unwrap();
        }
        RewritingStore {
            inner: MemoryStore::default(),
            files,
            writes,
            puts: Default::default(),
        }
    }

    #[test]
    fn a_watched_file_written_while_it_is_recorded_is_recorded_again_once_it_settles() {
        let d = tempfile::tempdir().unwrap();
        // The first record sees b.md (or a.md) change under it, as a parallel subagent's write.
        let store = rewriting(d.path(), 1);
        let keep = |p: &str| p.ends_with(".md");
        let snap = Snapshot::take(d.path(), &[], u64::MAX, &keep, &store).unwrap();
        assert_eq!(snap.kept_paths().collect::<Vec<_>>(), ["a.md", "b.md"]);
        // What was recorded is the settled file, with its content kept to put back.
        let after = Snapshot::take(d.path(), &[], u64::MAX, &|_| false, &store).unwrap();
        assert!(snap.diff(&after).is_empty());
        assert!(store.puts.load(std::sync::atomic::Ordering::SeqCst) > 2);
    }

    #[test]
    fn a_watched_file_that_never_settles_is_refused_after_the_last_wait() {
        let d = tempfile::tempdir().unwrap();
        let store = rewriting(d.path(), usize::MAX);
        let keep = |p: &str| p.ends_with(".md");
        let err = Snapshot::take(d.path(), &[], u64::MAX, &keep, &store).unwrap_err();
        assert!(matches!(err, SnapshotError::Changing { .. }), "{err}");
        // One first try and one after each wait, each stopped by its second file.
        let puts = store.puts.load(std::sync::atomic::Ordering::SeqCst);
        assert_eq!(puts, 1 + super::SETTLE_WAITS.len());
    }

    #[test]
    fn a_fifo_is_recorded_and_never_opened() {
        let d = tempfile::tempdir().unwrap();
        let status = std::process::Command::new("mkfifo")
            .arg(d.path().join("pipe"))
            .status()
            .unwrap();
        assert!(status.success());
        let store = MemoryStore::default();
        let snap = Snapshot::take(d.path(), &[], u64::MAX, &|_| true, &store).unwrap();
        assert_eq!(snap.paths().collect::<Vec<_>>(), ["pipe"]);
    }
}
