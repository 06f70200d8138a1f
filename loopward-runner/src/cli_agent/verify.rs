//! The verifier: a command (`cargo test`, a script) run in the kernel sandbox after each
//! session, in its own process group ended by its recorded PID at its timeout.

use super::process::kill_group;
use crate::sandbox::{spawn_confined, Confinement, Protected};
use crate::workspace::Workspace;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

/// How much of the verifier's output is kept (its end: where test failures are summed up).
const MAX_OUTPUT_BYTES: usize = 8 * 1024;

/// Where the verifier's scratch `$TMPDIR` is made.
const SCRATCH_ROOT: &str = "/tmp";

/// The command that says whether the work is done.
#[derive(Clone, Debug)]
pub struct Verifier {
    command: String,
    timeout: Duration,
    protected: Protected,
    unreadable: Vec<PathBuf>,
    reach: Option<crate::sandbox::Reach>,
}

/// What the verifier said.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// Whether it passed (exit status 0).
    pub passed: bool,
    /// Its exit status (`None`: ended by a signal, timed out, or not run).
    pub code: Option<i32>,
    /// The end of its stdout and stderr, or why it did not run.
    pub output: String,
}

impl Verdict {
    /// What decides a repeat: pass or fail, and the exit status.
    pub(crate) fn key(&self) -> String {
        format!("{}:{:?}", self.passed, self.code)
    }
}

impl Verifier {
    /// `command`, run by `sh -c` in the workspace root, unable to write what `protected` holds
    /// or read `unreadable`, ended after `timeout`.
    pub fn new(command: impl Into<String>, timeout: Duration, protected: Protected) -> Self {
        Self {
            command: command.into(),
            timeout,
            protected,
            unreadable: vec![],
            reach: None,
        }
    }

    /// What the verifier reads and the environment it starts with (default: the workspace and
    /// the system folders, `PATH` only), as the team's commands get it (`[read] allow`, the
    /// toolchain homes, `[env] pass`).
    pub fn reach(mut self, reach: crate::sandbox::Reach) -> Self {
        self.reach = Some(reach);
        self
    }

    /// Folders the verifier may not even read (loopward's keys).
    pub fn unreadable(mut self, dirs: Vec<PathBuf>) -> Self {
        self.unreadable = dirs;
        self
    }

    /// The command.
    pub fn command(&self) -> &str {
        &self.command
    }

    /// Runs the verifier once. Every failure to run it is a failed verdict saying why.
    pub async fn run(&self, ws: &Workspace) -> Verdict {
        match self.try_run(ws).await {
            Ok(v) => v,
            Err(why) => Verdict {
                passed: false,
                code: None,
                output: why,
            },
        }
    }

    async fn try_run(&self, ws: &Workspace) -> Result<Verdict, String> {
        let (w, protected) = (ws.clone(), self.protected.clone());
        let mut plan = tokio::task::spawn_blocking(move || Confinement::plan(&w, &protected))
            .await
            .map_err(|e| format!("not run: sandbox planning failed: {e}"))?
            .map_err(|e| format!("not run: {e}"))?;
        if let Some(r) = &self.reach {
            plan = plan.with_reach(r.clone());
        }
        for d in &self.unreadable {
            plan = plan.with_unreadable(d.clone());
        }
        let scratch = tempfile::Builder::new()
            .prefix("loopward-verify-")
            .tempdir_in(SCRATCH_ROOT)
            .map_err(|e| format!("not run: cannot make its scratch folder: {e}"))?;
        let plan = plan.with_outside(scratch.path().to_path_buf());
        let mut cmd = tokio::process::Command::new("sh");
        // The environment is an allow-list: the loop's own (API keys, tokens) stays out.
        plan.apply_env(cmd.as_std_mut());
        cmd.arg("-c")
            .arg(&self.command)
            .env("TMPDIR", scratch.path())
            .env("HOME", scratch.path())
            .current_dir(ws.root())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        let child = spawn_confined(cmd, &plan)
            .await
            .map_err(|e| format!("not run: {e}"))?;
        let pid = child.id().ok_or("not run: sh exited before it started")?;
        struct Guard(u32);
        impl Drop for Guard {
            fn drop(&mut self) {
                kill_group(self.0);
            }
        }
        let _guard = Guard(pid);
        let out = match tokio::time::timeout(self.timeout, child.wait_with_output()).await {
            Ok(r) => r.map_err(|e| format!("the verifier failed: {e}"))?,
            Err(_) => {
                return Ok(Verdict {
                    passed: false,
                    code: None,
                    output: format!(
                        "the verifier `{}` ran past its timeout of {}s and was ended",
                        self.command,
                        self.timeout.as_secs()
                    ),
                })
            }
        };
        let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.push_str(&String::from_utf8_lossy(&out.stderr));
        Ok(Verdict {
            passed: out.status.success(),
            code: out.status.code(),
            output: tail(&text),
        })
    }
}

/// The last [`MAX_OUTPUT_BYTES`] of `s`.
fn tail(s: &str) -> String {
    if s.len() <= MAX_OUTPUT_BYTES {
        return s.to_string();
    }
    let mut at = s.len() - MAX_OUTPUT_BYTES;
    while !s.is_char_boundary(at) {
        at += 1;
    }
    format!("… ({at} bytes cut)\n{}", &s[at..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_keeps_the_end_where_failures_are_summed_up() {
        let long = format!("{}END", "x".repeat(MAX_OUTPUT_BYTES * 2));
        let t = tail(&long);
        assert!(
            t.ends_with("END") && t.len() < MAX_OUTPUT_BYTES + 40,
            "{}",
            t.len()
        );
    }
}
