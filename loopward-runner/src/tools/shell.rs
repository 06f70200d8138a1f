//! The `shell` tool: runs a command in the workspace, with a timeout.
//!
//! Every command runs in the kernel sandbox the policy layer planned for it (see
//! [`crate::sandbox`]); without a policy layer, in one that keeps the default control files
//! read-only. Where no sandbox can be set up, the command is not run. A sandboxed command
//! starts with the planned environment only (its [`Reach`](crate::sandbox::Reach)), with
//! `TMPDIR` and `HOME` set to a scratch folder of its own.
//!
//! Every process it starts is placed in its own process group whose id is the recorded PID of
//! the child; on timeout or when the call is dropped, only that group is ended. Nothing is ever
//! killed by name or pattern. The child is also alone with the sandbox's init in a PID
//! namespace of its own, so processes that leave the group (`setsid`, `nohup`) end with it all
//! the same.

use crate::context::TurnContext;
use crate::egress::{EgressPolicy, Record, Recorder};
use crate::gates::ControlFiles;
use crate::sandbox::{spawn_contained, Confinement, ConfinementSlot, Planned, Protected};
use crate::tool::{object_schema, parse_args, Access, Tool, ToolError, ToolInvocation, ToolOutput};
use futures::future::BoxFuture;
use futures::FutureExt;
use loopward_core::AuditEvent;
use loopward_core::ToolSpec;
use serde::Deserialize;
use serde_json::json;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::AsyncWriteExt;

/// Runs `$1` once a line arrives on stdin; exits 125 without running it when stdin closes first.
const RELEASE_GATE: &str = r#"IFS= read -r go || exit 125; exec sh -c "$1" </dev/null"#;

/// Commits the decisions that let the call through, records its start, lets the waiting command
/// run, then makes the start durable. If anything before the release fails the command is never
/// released (its stdin closes and it exits without running).
///
/// Why this order: a process kill leaves every written record on disk (the page cache outlives the
/// process), so between the start's `write` and the release there are no syscalls to be killed in
/// but the release's own: killed before the record, the command never runs and the resumed call
/// runs it; killed after, it runs once and the call is reported interrupted. Syncing the start
/// before the release would leave the command unrun for as long as the fdatasync takes.
async fn release(inv: &ToolInvocation, child: &mut tokio::process::Child) -> Result<(), ToolError> {
    let stdin = child.stdin.take();
    inv.turn.commit().map_err(ToolError::Audit)?;
    let Some(mut stdin) = stdin else {
        return Err(ToolError::Failed(
            "not run: the command's stdin was not open".into(),
        ));
    };
    inv.turn
        .record_owned(AuditEvent::ToolStarted {
            call_id: inv.call.id.clone(),
            tool: inv.call.name.clone(),
        })
        .map_err(ToolError::Audit)?;
    stdin
        .write_all(b"go\n")
        .await
        .map_err(|e| ToolError::Failed(format!("could not release the command: {e}")))?;
    // The start on disk (against machine loss, not only a process kill); a failure stops the
    // command (the caller's group guard ends it) and the run.
    inv.turn.commit().map_err(ToolError::Audit)
}

/// How much of stdout and stderr each is returned to the model.
const MAX_OUTPUT_BYTES: usize = 16 * 1024;

/// The PIDs of the process groups the shell tool started and has not yet reaped.
#[derive(Clone, Debug, Default)]
pub struct ProcessTable(Arc<Mutex<BTreeSet<u32>>>);

impl ProcessTable {
    /// The PIDs now running.
    pub fn running(&self) -> Vec<u32> {
        self.lock().iter().copied().collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeSet<u32>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn insert(&self, pid: u32) {
        self.lock().insert(pid);
    }

    fn remove(&self, pid: u32) {
        self.lock().remove(&pid);
    }
}

/// Ends the process group led by a PID we started and recorded.
fn kill_group(pid: u32) {
    if let Ok(raw) = i32::try_from(pid) {
        let _ =
            nix::sys::signal::killpg(nix::unistd::Pid::from_raw(raw), nix::sys::signal::SIGKILL);
    }
}

/// Kills the recorded group when the call's future is dropped or finishes.
struct GroupGuard {
    pid: u32,
    table: ProcessTable,
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        kill_group(self.pid);
        self.table.remove(self.pid);
    }
}

/// The call's egress proxy: its task, ended when the call ends (processes the command left
/// behind lose their way out with it), and the records it asks the call to make.
struct ProxyGuard(
    tokio::task::JoinHandle<()>,
    tokio::sync::mpsc::Receiver<Record>,
);

impl Drop for ProxyGuard {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Serves the egress proxy of one call on `listener` (in the command's network namespace):
/// the calling agent's `net` hosts; the call records every decision (see [`record_egress`]).
fn serve_egress(
    listener: std::net::TcpListener,
    plan: &Confinement,
    inv: &ToolInvocation,
) -> Result<ProxyGuard, ToolError> {
    let listener = tokio::net::TcpListener::from_std(listener)
        .map_err(|e| ToolError::Failed(format!("not run: cannot serve the egress proxy: {e}")))?;
    let policy = Arc::new(EgressPolicy::new(
        plan.reach().net_of(inv.turn.agent()).iter().cloned(),
    ));
    let (recorder, records) = Recorder::channel();
    let call_id = Some(inv.call.id.clone());
    let task = tokio::spawn(crate::egress::serve(listener, policy, recorder, call_id));
    Ok(ProxyGuard(task, records))
}

/// Records what the proxy asks, on the call's turn; a decision is made durable before the
/// proxy acts on it.
fn record_egress(inv: &ToolInvocation, r: Record) {
    let decision = r.event.is_decision();
    let done =
        inv.turn
            .record_owned(r.event)
            .and_then(|()| if decision { inv.turn.commit() } else { Ok(()) });
    let _ = r.done.send(done);
}

/// Waits for the command, recording the proxy's events meanwhile.
async fn wait_recording(
    child: tokio::process::Child,
    proxy: Option<&mut ProxyGuard>,
    inv: &ToolInvocation,
) -> std::io::Result<std::process::Output> {
    let Some(proxy) = proxy else {
        return child.wait_with_output().await;
    };
    let wait = child.wait_with_output();
    tokio::pin!(wait);
    loop {
        tokio::select! {
            out = &mut wait => {
                // What the proxy asked before the command ended is still recorded.
                while let Ok(r) = proxy.1.try_recv() {
                    record_egress(inv, r);
                }
                return out;
            }
            Some(r) = proxy.1.recv() => record_egress(inv, r),
        }
    }
}

/// `shell {command}`: runs `sh -c command` in the workspace root.
#[derive(Clone, Debug)]
pub struct Shell {
    timeout: Duration,
    processes: ProcessTable,
    scratch_root: PathBuf,
}

/// Where per-command scratch folders (the command's `$TMPDIR`) are made by default.
pub const DEFAULT_SCRATCH_ROOT: &str = "/tmp";

impl Default for Shell {
    fn default() -> Self {
        Self::new(Duration::from_secs(60))
    }
}

impl Shell {
    /// A shell tool whose commands are stopped after `timeout`.
    pub fn new(timeout: Duration) -> Self {
        Self {
            timeout,
            processes: ProcessTable::default(),
            scratch_root: PathBuf::from(DEFAULT_SCRATCH_ROOT),
        }
    }

    /// Makes each command's scratch folder (its `$TMPDIR`, writable inside the sandbox) under
    /// `root` instead of `/tmp`.
    pub fn scratch_root(mut self, root: impl Into<PathBuf>) -> Self {
        self.scratch_root = root.into();
        self
    }

    /// The table of process groups this tool started.
    pub fn processes(&self) -> ProcessTable {
        self.processes.clone()
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    command: String,
}

/// A command's scratch folder, removed when the call ends.
struct Scratch(PathBuf);

impl Scratch {
    fn make(root: &Path, workspace: &Path) -> Result<Option<Self>, ToolError> {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        // A scratch folder inside the workspace would be a hole in the sandbox: go without.
        if root.starts_with(workspace) || !root.is_dir() {
            return Ok(None);
        }
        // A process killed mid-call leaves its folder behind, and a later process may get the
        // same pid: skip names that exist rather than fail the call.
        let mut last = None;
        for _ in 0..64 {
            let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let dir = root.join(format!("loopward-sh-{}-{n}", std::process::id()));
            match std::fs::create_dir(&dir) {
                Ok(()) => return Ok(Some(Self(dir))),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some((dir, e)),
                Err(e) => {
                    last = Some((dir, e));
                    break;
                }
            }
        }
        let (dir, e) =
            last.unwrap_or_else(|| (root.to_path_buf(), std::io::ErrorKind::Other.into()));
        Err(ToolError::Failed(format!(
            "cannot create the command's scratch folder {}: {e}",
            dir.display()
        )))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn clip(bytes: &[u8]) -> String {
    let s = String::from_utf8_lossy(bytes);
    if s.len() <= MAX_OUTPUT_BYTES {
        return s.into_owned();
    }
    let mut end = MAX_OUTPUT_BYTES;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}\n… ({} bytes cut)", &s[..end], s.len() - end)
}

impl Tool for Shell {
    fn records_own_start(&self) -> bool {
        true
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "shell".into(),
            description:
                "Run a shell command in the workspace root; returns exit status, stdout and stderr."
                    .into(),
            parameters: object_schema(json!({"command": {"type": "string"}}), &["command"]),
        }
    }

    fn accesses(
        &self,
        args: &serde_json::Value,
        _turn: &TurnContext,
    ) -> Result<Vec<Access>, ToolError> {
        let a: Args = parse_args("shell", args)?;
        if a.command.trim().is_empty() || a.command.contains('\0') {
            return Err(ToolError::BadArguments {
                tool: "shell".into(),
                why: "`command` is empty or contains a NUL byte".into(),
            });
        }
        Ok(vec![Access::Exec])
    }

    fn call(&self, inv: ToolInvocation) -> BoxFuture<'static, Result<ToolOutput, ToolError>> {
        let timeout = self.timeout;
        let table = self.processes.clone();
        let scratch_root = self.scratch_root.clone();
        async move {
            let a: Args = parse_args("shell", &inv.call.arguments)?;
            let planned = match inv
                .turn
                .extensions()
                .get::<ConfinementSlot>()
                .and_then(|s| s.take())
            {
                Some(p) => p,
                None => {
                    // No policy layer planned one: keep at least the control files read-only.
                    let ws = inv.turn.workspace().clone();
                    let protected = Protected::new(ControlFiles::default().resolved(&ws), vec![]);
                    let plan =
                        tokio::task::spawn_blocking(move || Confinement::plan(&ws, &protected))
                            .await
                            .map_err(|e| {
                                ToolError::Failed(format!("sandbox planning failed: {e}"))
                            })?
                            .map_err(|e| ToolError::Failed(e.to_string()))?;
                    Planned::Confined(plan)
                }
            };
            let scratch = match &planned {
                Planned::Confined(_) => Scratch::make(&scratch_root, inv.turn.workspace().root())?,
                Planned::WatchOnly => None,
            };
            let mut cmd = tokio::process::Command::new("sh");
            if let Planned::Confined(plan) = &planned {
                // The environment is an allow-list: the runner's own (API keys, tokens) stays out.
                plan.apply_env(cmd.as_std_mut());
            }
            if let Some(s) = &scratch {
                cmd.env("TMPDIR", &s.0);
                // A home of the command's own: the user's is not readable in the sandbox.
                cmd.env("HOME", &s.0);
            }
            // The command waits for a line on stdin before it runs: it is released only once its
            // start is on record, so a runner killed before that leaves no effect behind.
            cmd.arg("-c")
                .arg(RELEASE_GATE)
                .arg("loopward-shell")
                .arg(&a.command)
                .current_dir(inv.turn.workspace().root())
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .process_group(0)
                .kill_on_drop(true);
            let (mut child, mut proxy) = match &planned {
                Planned::Confined(plan) => {
                    let plan = match &scratch {
                        Some(s) => plan.clone().with_outside(s.0.clone()),
                        None => plan.clone(),
                    };
                    let started = spawn_contained(cmd, &plan)
                        .await
                        .map_err(|e| ToolError::Failed(format!("not run: {e}")))?;
                    let proxy = match started.proxy {
                        Some(l) => Some(serve_egress(l, &plan, &inv)?),
                        None => None,
                    };
                    (started.child, proxy)
                }
                Planned::WatchOnly => (
                    cmd.spawn()
                        .map_err(|e| ToolError::Failed(format!("could not start sh: {e}")))?,
                    None,
                ),
            };
            let pid = child
                .id()
                .ok_or_else(|| ToolError::Failed("sh exited before it started".into()))?;
            table.insert(pid);
            let _guard = GroupGuard { pid, table };
            release(&inv, &mut child).await?;
            let out =
                match tokio::time::timeout(timeout, wait_recording(child, proxy.as_mut(), &inv))
                    .await
                {
                    Ok(r) => r.map_err(|e| ToolError::Failed(format!("command failed: {e}")))?,
                    Err(_) => {
                        return Err(ToolError::Timeout {
                            secs: timeout.as_secs(),
                        })
                    }
                };
            let code = out
                .status
                .code()
                .map_or_else(|| "killed by a signal".to_string(), |c| c.to_string());
            let mut text = format!(
                "exit status: {code}\nstdout:\n{}\nstderr:\n{}",
                clip(&out.stdout),
                clip(&out.stderr)
            );
            // Only when the command hit the sandbox (a hint for the model, not a decision).
            let stderr = String::from_utf8_lossy(&out.stderr);
            let hit = [
                "Permission denied",
                "Invalid cross-device link",
                "Operation not permitted",
            ]
            .iter()
            .any(|m| stderr.contains(m));
            if let (Planned::Confined(plan), true) = (&planned, hit) {
                text.push_str(&format!("\n{}", plan.describe()));
            }
            Ok(ToolOutput {
                content: text,
                is_error: !out.status.success(),
                effects: vec![],
            })
        }
        .boxed()
    }
}
