//! A scratch workspace with its own state base, for the tests that read what loopward keeps
//! outside the workspace (ledger keys, sealed approvals and overrides, the console's token).

#![allow(dead_code, unreachable_pub)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A workspace and its own `$XDG_STATE_HOME`, both removed when dropped.
pub struct Scratch {
    dir: tempfile::TempDir,
    xdg: tempfile::TempDir,
}

impl Scratch {
    pub fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
            xdg: tempfile::tempdir().unwrap(),
        }
    }

    /// The workspace.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// `loopward args` in the workspace, under this state base, with nothing on its stdin
    /// (a test never leaves a command waiting on the terminal).
    pub fn loopward(&self, args: &[&str]) -> Command {
        let mut c = super::loopward_cmd(self.dir(), args);
        c.env("XDG_STATE_HOME", self.xdg.path())
            .stdin(Stdio::null());
        c
    }

    /// The workspace's state directory (the only one under the base).
    pub fn state(&self) -> PathBuf {
        std::fs::read_dir(self.xdg.path().join("loopward"))
            .unwrap()
            .next()
            .expect("a command made the workspace's state directory")
            .unwrap()
            .path()
    }
}
