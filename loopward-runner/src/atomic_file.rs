//! The one way loopward replaces a file: write a temporary file beside it, sync it, rename it
//! over the old one (`tempfile`'s persist), sync the folder. A reader sees the old file or the
//! new one, never half of one; a link at the destination is replaced, not followed; two writers
//! never share a temporary name.
//!
//! The ledger passes an observer ([`Step`]) that sees each new file and each sync before it
//! happens (its fault hook, which also counts them); everyone else writes unobserved.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// One step of writing a file, shown to an observer before it is taken; an error from the
/// observer fails the step as if the OS had failed it.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Step<'a> {
    /// A new file (a temporary renamed onto this name, or the file itself).
    Create(&'a Path),
    /// Syncing the file that will have this name.
    SyncFile(&'a Path),
    /// Syncing a folder, so that a new name in it survives a power loss.
    SyncDir(&'a Path),
}

/// What sees the steps of a write.
pub(crate) type Observer<'o> = &'o dyn Fn(Step<'_>) -> std::io::Result<()>;

/// The observer of writes nobody watches.
pub(crate) fn unobserved(_: Step<'_>) -> std::io::Result<()> {
    Ok(())
}

/// `bytes` in a temporary file beside `path` (in its folder, also returned), with exactly the
/// permissions `mode`, set before anything can open it by name under `path`; synced when `sync`.
fn staged<'a>(
    path: &'a Path,
    bytes: &[u8],
    mode: u32,
    sync: bool,
    observe: Observer<'_>,
) -> std::io::Result<(tempfile::NamedTempFile, &'a Path)> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    observe(Step::Create(path))?;
    let mut tmp = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(".tmp")
        .permissions(std::fs::Permissions::from_mode(0o600))
        .tempfile_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.as_file()
        .set_permissions(std::fs::Permissions::from_mode(mode))?;
    if sync {
        observe(Step::SyncFile(path))?;
        tmp.as_file().sync_all()?;
    }
    Ok((tmp, dir))
}

/// Replaces `path` with `bytes`, with exactly the permissions `mode` (set before the rename, so
/// the file is never seen with others).
pub fn write_atomic(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    write_atomic_observed(path, bytes, mode, &unobserved)
}

/// [`write_atomic`], each step shown to `observe` first.
pub(crate) fn write_atomic_observed(
    path: &Path,
    bytes: &[u8],
    mode: u32,
    observe: Observer<'_>,
) -> std::io::Result<()> {
    let (tmp, dir) = staged(path, bytes, mode, true, observe)?;
    tmp.persist(path).map_err(|e| e.error)?;
    observe(Step::SyncDir(dir))?;
    std::fs::File::open(dir)?.sync_all()
}

/// Replaces `path` with `bytes` as [`write_atomic`] does — a reader sees the old file or the new
/// one — but syncs nothing: for files regenerable from the ledger (a run's pages and
/// summaries), which a crash may leave old or missing, never half-written, at no fsync's cost.
pub(crate) fn replace_unsynced(
    path: &Path,
    bytes: &[u8],
    mode: u32,
    observe: Observer<'_>,
) -> std::io::Result<()> {
    let (tmp, _) = staged(path, bytes, mode, false, observe)?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// Creates `path` with `bytes` and exactly `mode` unless something is already there: the file
/// appears whole or not at all, and of many racing writers exactly one wins. `Ok(false)` when
/// the name was taken.
pub(crate) fn publish_new(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<bool> {
    let (tmp, dir) = staged(path, bytes, mode, true, &unobserved)?;
    match tmp.persist_noclobber(path) {
        Ok(_) => {}
        Err(e) if e.error.kind() == std::io::ErrorKind::AlreadyExists => return Ok(false),
        Err(e) => return Err(e.error),
    }
    std::fs::File::open(dir)?.sync_all()?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::{publish_new, replace_unsynced, write_atomic};

    #[test]
    fn an_unsynced_replace_is_still_whole_and_leaves_no_temporary() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("audit.html");
        replace_unsynced(&path, b"old", 0o644, &super::unobserved).unwrap();
        replace_unsynced(&path, b"new", 0o644, &super::unobserved).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"new");
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 1);
    }

    #[test]
    fn publish_new_never_replaces() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("p1.json");
        assert!(publish_new(&path, b"first", 0o600).unwrap());
        assert!(!publish_new(&path, b"second", 0o600).unwrap());
        assert_eq!(std::fs::read(&path).unwrap(), b"first");
        assert_eq!(
            std::fs::read_dir(d.path()).unwrap().count(),
            1,
            "no temporary left"
        );
    }
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn replaces_the_file_and_a_link_in_its_place_leaving_no_temporary() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("state.json");
        write_atomic(&path, b"one", 0o600).unwrap();
        write_atomic(&path, b"two", 0o640).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"two");
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o640
        );
        // A link put where the file goes is replaced, and its target left alone.
        let target = d.path().join("elsewhere");
        std::fs::write(&target, "keep").unwrap();
        std::fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink(&target, &path).unwrap();
        write_atomic(&path, b"three", 0o600).unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
        assert!(!std::fs::symlink_metadata(&path).unwrap().is_symlink());
        let names: Vec<String> = std::fs::read_dir(d.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(names.iter().all(|n| !n.ends_with(".tmp")), "{names:?}");
    }
}
