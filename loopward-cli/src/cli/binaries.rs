//! loopward's two binaries, installed side by side: `loopward`, and `loopward-hook`, what an
//! agent host starts on every tool call (the same `hook <host> …` command line, built without
//! the rest of the CLI so that it starts faster).

use anyhow::{bail, Result};
use std::path::{Path, PathBuf};

/// The hook binary's file name.
pub(super) const HOOK: &str = "loopward-hook";

/// The program a host's hook starts, given the running `loopward` at `exe`: `loopward-hook`
/// where it sits beside it, else `exe` itself (which answers the same command line).
pub(super) fn hook_program(exe: &Path) -> PathBuf {
    if exe.file_name().is_some_and(|n| n == HOOK) {
        return exe.to_path_buf();
    }
    exe.parent()
        .map(|dir| dir.join(HOOK))
        .filter(|hook| hook.is_file())
        .unwrap_or_else(|| exe.to_path_buf())
}

/// The `loopward` binary, given the running one at `exe`: `exe` itself, or the `loopward`
/// beside it when `exe` is `loopward-hook` (the hook runs a `Bash` command through `loopward
/// sandbox exec`, which only the whole binary has).
pub(super) fn loopward(exe: &Path) -> Result<PathBuf> {
    if exe.file_name().is_none_or(|n| n != HOOK) {
        return Ok(exe.to_path_buf());
    }
    let whole = exe.with_file_name("loopward");
    if !whole.is_file() {
        bail!(
            "no `loopward` beside {} (the hook runs commands through `loopward sandbox exec`); install both binaries: `cargo install --path loopward-cli`",
            exe.display()
        );
    }
    Ok(whole)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hook_program_is_the_hook_binary_beside_loopward_when_there() {
        let dir = tempfile::tempdir().unwrap();
        let whole = dir.path().join("loopward");
        std::fs::write(&whole, "").unwrap();
        assert_eq!(
            hook_program(&whole),
            whole,
            "alone, loopward answers itself"
        );
        let hook = dir.path().join(HOOK);
        std::fs::write(&hook, "").unwrap();
        assert_eq!(hook_program(&whole), hook);
        assert_eq!(hook_program(&hook), hook);
    }

    #[test]
    fn the_hook_binary_finds_loopward_beside_it_or_says_what_to_install() {
        let dir = tempfile::tempdir().unwrap();
        let hook = dir.path().join(HOOK);
        let e = loopward(&hook).unwrap_err().to_string();
        assert!(e.contains("cargo install --path loopward-cli"), "{e}");
        std::fs::write(dir.path().join("loopward"), "").unwrap();
        assert_eq!(loopward(&hook).unwrap(), dir.path().join("loopward"));
        let elsewhere = Path::new("/opt/bin/loopward");
        assert_eq!(loopward(elsewhere).unwrap(), elsewhere);
    }
}
