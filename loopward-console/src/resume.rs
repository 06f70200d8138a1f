//! Runs the console goes on with: when a person's answer leaves a paused run with no gate
//! waiting, the console starts `loopward run --resume <run>` (the binary it was given) in its
//! own process group, its output in `<state>/console/logs/<run>.log`, and keeps its PID. The
//! kill switch's "end it now" ends that process group by the recorded PID, never by a name or
//! pattern; a run the console did not start is only asked to stop at its next boundary.

use crate::error::ConsoleError;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// Starts and tracks resumed runs.
#[derive(Debug)]
pub struct Resumer {
    program: PathBuf,
    config: PathBuf,
    logs: PathBuf,
    children: Arc<Mutex<BTreeMap<String, u32>>>,
}

impl Resumer {
    /// Resumes runs with `program run --resume <run> --config <config>`, logging to `logs/`.
    pub fn new(program: PathBuf, config: PathBuf, logs: PathBuf) -> Self {
        Self {
            program,
            config,
            logs,
            children: Arc::default(),
        }
    }

    /// The PID of the process the console started for `run`, while it runs.
    pub fn pid(&self, run: &str) -> Option<u32> {
        self.children
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(run)
            .copied()
    }

    /// Starts `run` again from its journal, unless the console already runs it. Needs a tokio
    /// runtime (a task waits for the process and forgets its PID when it exits).
    pub fn resume(&self, run: &str) -> Result<u32, ConsoleError> {
        if let Some(pid) = self.pid(run) {
            return Ok(pid);
        }
        let fail = |e: std::io::Error| {
            ConsoleError::Internal(format!(
                "could not start `{} run --resume {run}`: {e}; resume it by hand",
                self.program.display()
            ))
        };
        std::fs::create_dir_all(&self.logs).map_err(fail)?;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.logs.join(format!("{run}.log")))
            .map_err(fail)?;
        let mut child = tokio::process::Command::new(&self.program)
            .args(["run", "--resume", run, "--config"])
            .arg(&self.config)
            .env("NO_COLOR", "1")
            .stdin(std::process::Stdio::null())
            .stdout(log.try_clone().map_err(fail)?)
            .stderr(log)
            .process_group(0)
            .spawn()
            .map_err(fail)?;
        let pid = child.id().unwrap_or_default();
        let children = self.children.clone();
        children
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(run.to_string(), pid);
        let run = run.to_string();
        tokio::spawn(async move {
            let _ = child.wait().await;
            let mut held = children.lock().unwrap_or_else(|p| p.into_inner());
            if held.get(&run) == Some(&pid) {
                held.remove(&run);
            }
        });
        Ok(pid)
    }

    /// Ends the process group of the process the console started for `run` (SIGTERM, by its
    /// recorded PID); `false` when the console runs no process for it.
    pub fn end_now(&self, run: &str) -> bool {
        let Some(pid) = self.pid(run) else {
            return false;
        };
        let Ok(pid) = i32::try_from(pid) else {
            return false;
        };
        nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGTERM,
        )
        .is_ok()
    }
}
