//! Writing where the gate judged: files are opened relative to a handle on the workspace root,
//! with `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`, so a symbolic link put in place of
//! any part of the path after the check makes the write fail instead of redirecting it.
//!
//! The path given is the canonical one the gates judged (links already resolved), so a path
//! that still holds a link at write time has changed since the check.

use rustix::fs::{Mode, OFlags, ResolveFlags};
use rustix::io::Errno;
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::path::Path;

const RESOLVE: ResolveFlags = ResolveFlags::BENEATH
    .union(ResolveFlags::NO_SYMLINKS)
    .union(ResolveFlags::NO_MAGICLINKS);

fn explain(rel: &str, e: Errno) -> std::io::Error {
    if e == Errno::LOOP || e == Errno::XDEV {
        std::io::Error::other(format!(
            "{rel} changed since it was checked (a symbolic link is now in its path); nothing was written"
        ))
    } else {
        e.into()
    }
}

fn root_fd(root: &Path) -> std::io::Result<OwnedFd> {
    Ok(rustix::fs::open(
        root,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?)
}

/// Creates the folders of `rel`'s parent beneath `root`, none through a link.
fn parent_dir(root: &OwnedFd, rel: &str) -> std::io::Result<OwnedFd> {
    let mut dir = rustix::fs::openat2(
        root,
        ".",
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
        RESOLVE,
    )?;
    let parts: Vec<&str> = rel.split('/').collect();
    for part in &parts[..parts.len().saturating_sub(1)] {
        match rustix::fs::mkdirat(&dir, *part, Mode::from_raw_mode(0o777)) {
            Ok(()) | Err(Errno::EXIST) => {}
            Err(e) => return Err(explain(rel, e)),
        }
        dir = rustix::fs::openat2(
            &dir,
            *part,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
            RESOLVE,
        )
        .map_err(|e| explain(rel, e))?;
    }
    Ok(dir)
}

/// Writes `bytes` to the canonical workspace-relative `rel` under `root` (creating folders as
/// needed) without following any link; returns whether the file existed.
pub(crate) fn write(root: &Path, rel: &str, bytes: &[u8]) -> std::io::Result<bool> {
    let root = root_fd(root)?;
    let dir = parent_dir(&root, rel)?;
    let name = rel.rsplit('/').next().unwrap_or(rel);
    let existed = rustix::fs::statat(&dir, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW).is_ok();
    let fd = rustix::fs::openat2(
        &dir,
        name,
        OFlags::WRONLY | OFlags::CREATE | OFlags::TRUNC | OFlags::CLOEXEC | OFlags::NOFOLLOW,
        Mode::from_raw_mode(0o666),
        RESOLVE,
    )
    .map_err(|e| explain(rel, e))?;
    let mut f = std::fs::File::from(fd);
    f.write_all(bytes)?;
    Ok(existed)
}

/// Reads the canonical workspace-relative `rel` under `root` without following any link, at
/// most `max` bytes (more is an error).
pub(crate) fn read(root: &Path, rel: &str, max: u64) -> std::io::Result<Vec<u8>> {
    let root = root_fd(root)?;
    let fd = rustix::fs::openat2(
        &root,
        rel,
        OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOFOLLOW,
        Mode::empty(),
        RESOLVE,
    )
    .map_err(|e| explain(rel, e))?;
    let mut bytes = Vec::new();
    std::fs::File::from(fd)
        .take(max + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(std::io::Error::other(format!(
            "{rel} is larger than {max} bytes"
        )));
    }
    Ok(bytes)
}
