//! What a run was started with beyond its config, kept in its folder for `--resume`.

use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

/// What a run was started with beyond its config and its `run_started` record (task, first
/// agent), kept in its folder so that `--resume` goes on with the same backend.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
pub(super) struct StartedWith {
    /// `--script`, absolute.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) script: Option<PathBuf>,
}

impl StartedWith {
    /// Its file in the run's folder.
    const FILE: &'static str = "started_with.json";

    /// What the run in `run_dir` was started with; nothing for a run started without flags to
    /// remember (or by a loopward that did not remember them).
    pub(super) fn read(run_dir: &Path) -> Result<Self> {
        let path = run_dir.join(Self::FILE);
        match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).with_context(|| {
                format!(
                    "{} is not what `loopward run` wrote; restore it, or delete it to resume with the config's script",
                    path.display()
                )
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Self::default()),
            Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
        }
    }

    /// Kept in `run_dir` before the run's first record, so a run that can be resumed has it
    /// whole; nothing to remember removes what an earlier start under the same id left.
    pub(super) fn keep(&self, run_dir: &Path) -> Result<()> {
        let path = run_dir.join(Self::FILE);
        if self.script.is_none() {
            return match std::fs::remove_file(&path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    Err(e).with_context(|| format!("cannot remove {}", path.display()))
                }
                _ => Ok(()),
            };
        }
        let json =
            serde_json::to_vec_pretty(self).context("cannot encode what the run started with")?;
        std::fs::write(&path, json).with_context(|| format!("cannot write {}", path.display()))
    }
}
