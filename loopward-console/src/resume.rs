//! Runs the console goes on with: when a person's answer leaves a paused run with no gate
//! waiting, the console waits for the run's own process to let go of its ledger (the writer's
//! lock), then starts `loopward run --resume <run>` (the binary it was given) in its own process
//! group, its output in `<state>/console/logs/<run>.log`, and keeps its PID. The
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

    /// Resumes `run` once no process holds its ledger (`events`) any more — the run that paused
    /// may still be writing its last records when a person answers — trying for up to 30 s.
    pub fn resume_when_free(self: &Arc<Self>, run: &str, events: PathBuf) {
        let (me, run) = (self.clone(), run.to_string());
        tokio::spawn(async move {
            for _ in 0..300 {
                if !held(&events) {
                    if let Err(e) = me.resume(&run) {
                        tracing::warn!(%run, error = %e, "could not resume the run");
                    }
                    return;
                }
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            tracing::warn!(%run, "the run's ledger stayed locked for 30 s; resume it by hand");
        });
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

/// Whether a writer holds the ledger `events` (its exclusive lock).
fn held(events: &std::path::Path) -> bool {
    use nix::fcntl::{Flock, FlockArg};
    let Ok(file) = std::fs::File::open(events) else {
        return false;
    };
    // Taken and let go at once: the resumed run takes it for itself after this.
    Flock::lock(file, FlockArg::LockSharedNonblock).is_err()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use std::time::Duration;

    async fn gone(pid: &str) -> bool {
        for _ in 0..100 {
            let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            // Gone, or a zombie waiting for its parent (ended all the same).
            if state.is_empty() || state.split_whitespace().nth(2) == Some("Z") {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        false
    }

    #[test]
    fn a_ledger_is_held_while_its_writer_has_it_locked_and_free_after() {
        use nix::fcntl::{Flock, FlockArg};
        let dir = tempfile::tempdir().unwrap();
        let events = dir.path().join("events.jsonl");
        assert!(!held(&events), "no ledger: nobody holds it");
        std::fs::write(&events, "").unwrap();
        let file = std::fs::OpenOptions::new()
            .append(true)
            .open(&events)
            .unwrap();
        let writer = Flock::lock(file, FlockArg::LockExclusiveNonblock).unwrap();
        assert!(held(&events));
        drop(writer);
        assert!(!held(&events));
    }

    #[tokio::test]
    async fn end_now_ends_the_whole_process_group_of_the_resumed_run_by_its_recorded_pid() {
        let dir = tempfile::tempdir().unwrap();
        // A stand-in for `loopward run --resume`: it starts a child of its own and waits.
        let program = dir.path().join("fake-loopward");
        let child_pid = dir.path().join("child.pid");
        std::fs::write(
            &program,
            format!(
                "#!/bin/sh\nsleep 30 &\necho $! > {}\nwait\n",
                child_pid.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
        let r = Resumer::new(
            program,
            dir.path().join("loopward.toml"),
            dir.path().join("logs"),
        );
        assert!(!r.end_now("r1"), "nothing started yet");
        let pid = r.resume("r1").unwrap();
        assert_eq!(r.resume("r1").unwrap(), pid, "one process per run");
        let mut grandchild = String::new();
        for _ in 0..100 {
            grandchild = std::fs::read_to_string(&child_pid).unwrap_or_default();
            if !grandchild.trim().is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(
            !grandchild.trim().is_empty(),
            "the stand-in started its child"
        );
        assert!(r.end_now("r1"));
        assert!(gone(&pid.to_string()).await, "the resumed process ended");
        assert!(gone(grandchild.trim()).await, "and the process it started");
        for _ in 0..100 {
            if r.pid("r1").is_none() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(r.pid("r1"), None, "its PID is forgotten once it exited");
    }
}
