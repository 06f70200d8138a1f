//! A file a person's tool drops into a folder of loopward's state for a run (a message for the
//! inbox, a stop request): claimed by a rename, so exactly one taker has it, and read without
//! following a link and no larger than its kind allows. The inbox and the stop store share it.

use loopward_core::RunId;
use serde::de::DeserializeOwned;
use std::io::{ErrorKind, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Moves `from` to `to`; `Ok(false)` when there is nothing to move (or another taker moved it).
pub(crate) fn claim(from: &Path, to: &Path) -> Result<bool, String> {
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent).map_err(|e| e.to_string())?;
    }
    match std::fs::rename(from, to) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e.to_string()),
    }
}

/// The bytes of the claimed file at `path`: a regular file (a link is refused, not followed),
/// at most `max` bytes. `what` names the kind of file in the error (`a stop request`).
fn read_bounded(path: &Path, max: u64, what: &str) -> Result<Vec<u8>, String> {
    let flags = nix::fcntl::OFlag::O_NOFOLLOW | nix::fcntl::OFlag::O_NONBLOCK;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags.bits())
        .open(path)
        .map_err(|e| {
            if e.raw_os_error() == Some(nix::libc::ELOOP) {
                format!("a symbolic link, not {what}")
            } else {
                format!("unreadable: {e}")
            }
        })?;
    let meta = file.metadata().map_err(|e| format!("unreadable: {e}"))?;
    if !meta.file_type().is_file() {
        return Err("not a regular file".into());
    }
    let mut text = Vec::new();
    file.take(max + 1)
        .read_to_end(&mut text)
        .map_err(|e| format!("unreadable: {e}"))?;
    if text.len() as u64 > max {
        return Err(format!("larger than {} KiB", max / 1024));
    }
    Ok(text)
}

/// A claimed record: JSON, addressed to one run.
pub(crate) trait Addressed: DeserializeOwned {
    /// The run it is for.
    fn run(&self) -> &RunId;
}

/// The claimed record at `path` (as [`read_bounded`] reads it), `what` as JSON, addressed to
/// `run`.
pub(crate) fn read_addressed<R: Addressed>(
    path: &Path,
    max: u64,
    what: &str,
    run: &RunId,
) -> Result<R, String> {
    let text = read_bounded(path, max, what)?;
    let record: R = serde_json::from_slice(&text).map_err(|e| format!("not {what}: {e}"))?;
    if record.run() != run {
        return Err(format!("addressed to run {}, not {run}", record.run()));
    }
    Ok(record)
}
