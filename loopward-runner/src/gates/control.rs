//! Control files: `.loopward/`, the agent hosts' settings folders where loopward's hook is
//! installed (`.claude/`, `.codex/`, `.gemini/`), the config file and the runs directory. No agent ever writes
//! them, override or not, and no mode or runtime change can relax that.
//!
//! ```
//! use loopward_runner::gates::ControlFiles;
//! let c = ControlFiles::default();
//! assert!(c.covers(".loopward/overrides/x.json") && c.covers(".claude/settings.json"));
//! assert!(c.covers(".codex/hooks.json") && c.covers(".gemini/settings.json"));
//! assert!(c.covers("loopward.toml") && c.covers("runs/r1/events.jsonl") && c.covers("runs"));
//! assert!(!c.covers("runsheet.md") && !c.covers("src/loopward.toml"));
//! assert_eq!(c.runs_dir(), Some("runs"));
//! ```
//!
//! A `.loopward` that is a link is protected where it lands too ([`ControlFiles::resolved`]).

use crate::workspace::Workspace;
use std::path::Path;

/// The gate name control-file refusals carry.
pub const CONTROL_GATE: &str = loopward_core::GateKind::Control.as_str();

/// The workspace-relative control paths. Each covers itself and everything below it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControlFiles {
    paths: Vec<String>,
    /// The runs directory: loopward's own ledgers, appended to while a command runs, so never
    /// compared or put back by a watch (a watch that "reverts" them destroys the evidence).
    runs: Option<String>,
}

impl Default for ControlFiles {
    fn default() -> Self {
        Self::new("loopward.toml", "runs")
    }
}

impl ControlFiles {
    /// `.loopward/`, `.claude/`, `.codex/`, `.gemini/` plus the given config file and runs directory (workspace-relative; pass
    /// paths outside the workspace as `""`: agents cannot reach them anyway).
    pub fn new(config_file: &str, runs_dir: &str) -> Self {
        let mut paths: Vec<String> = [".loopward", ".claude", ".codex", ".gemini"]
            .map(String::from)
            .into();
        for p in [config_file, runs_dir] {
            let p = p.trim_matches('/');
            if !p.is_empty() {
                paths.push(p.to_string());
            }
        }
        let runs = Some(runs_dir.trim_matches('/'))
            .filter(|r| !r.is_empty())
            .map(str::to_string);
        Self { paths, runs }
    }

    /// Adds another control path (workspace-relative; `""` is ignored): a file loopward itself
    /// reads for the run, such as the fake backend's script.
    ///
    /// ```
    /// use loopward_runner::gates::ControlFiles;
    /// let c = ControlFiles::default().with_path("loopward.script.toml");
    /// assert!(c.covers("loopward.script.toml") && !c.covers("src/a.rs"));
    /// ```
    pub fn with_path(mut self, rel: &str) -> Self {
        let p = rel.trim_matches('/');
        if !p.is_empty() && !self.paths.iter().any(|c| c == p) {
            self.paths.push(p.to_string());
        }
        self
    }

    /// The workspace-relative runs directory, when it lies in the workspace: loopward writes
    /// ledgers there while agents act, so the shell watch neither compares nor restores it
    /// (`loopward verify` guards the ledgers; the sandbox keeps commands from writing there).
    pub fn runs_dir(&self) -> Option<&str> {
        self.runs.as_deref()
    }

    /// `.loopward/` plus a config file and runs directory given as paths on disk (absolute, or
    /// relative to the workspace root); those outside the workspace need no protection here.
    pub fn in_workspace(ws: &Workspace, config_file: &Path, runs_dir: &Path) -> Self {
        let rel = |p: &Path| -> String {
            let abs = if p.is_absolute() {
                p.to_path_buf()
            } else {
                ws.root().join(p)
            };
            ws.resolve(&abs.to_string_lossy())
                .map(|w| w.rel().to_string())
                .unwrap_or_default()
        };
        Self::new(&rel(config_file), &rel(runs_dir))
    }

    /// [`ControlFiles::with_path`] for each of `files` that lies in the workspace (absolute, or
    /// relative to the workspace root); links are followed as far as they exist.
    pub fn with_host_files(self, ws: &Workspace, files: &[std::path::PathBuf]) -> Self {
        files.iter().fold(self, |c, p| {
            let abs = if p.is_absolute() {
                p.clone()
            } else {
                ws.root().join(p)
            };
            match ws.resolve(&abs.to_string_lossy()) {
                Ok(w) => c.with_path(w.rel()),
                Err(_) => c,
            }
        })
    }

    /// Adds where each control path lands when links are followed, so a control folder that is
    /// a link is protected at both ends.
    pub fn resolved(mut self, ws: &Workspace) -> Self {
        let landed: Vec<String> = self
            .paths
            .iter()
            .filter_map(|p| ws.resolve(p).ok())
            .map(|w| w.rel().to_string())
            .filter(|r| !r.is_empty())
            .collect();
        for l in landed {
            if !self.paths.contains(&l) {
                self.paths.push(l);
            }
        }
        self
    }

    /// The control paths.
    pub fn paths(&self) -> &[String] {
        &self.paths
    }

    /// Whether the canonical workspace-relative `path` is a control file, or a directory holding
    /// one (writing, deleting or renaming it would touch control files).
    pub fn covers(&self, path: &str) -> bool {
        self.paths.iter().any(|c| {
            path == c
                || path
                    .strip_prefix(c.as_str())
                    .is_some_and(|r| r.starts_with('/'))
                || path.is_empty()
                || c.strip_prefix(path).is_some_and(|r| r.starts_with('/'))
        })
    }
}
