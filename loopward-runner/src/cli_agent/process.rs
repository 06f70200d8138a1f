//! A session's process: started in a process group of its own whose id is the recorded PID,
//! its stdout read line by line, and that group — only that group — ended when the session
//! times out or its future is dropped (a turn timeout, a stopped run). Never by name or pattern.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Stdio;

/// A command line, as the agent would run it: what a [`Wrap`] may rewrite.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommandLine {
    /// The program.
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<OsString>,
    /// Variables set for it (over the inherited environment).
    pub env: Vec<(OsString, OsString)>,
    /// Where it runs.
    pub cwd: PathBuf,
}

/// The containment seam: wraps a session's command line before it starts (a whole-process
/// sandbox such as `loopward contain -- …`, a network namespace, a secret broker). The
/// wrapped command must `exec` or wait for what it wraps, so the recorded PID's group still
/// holds the session. The default wraps nothing.
pub trait Wrap: Send + Sync + std::fmt::Debug {
    /// The command line to run instead; an error stops the session before it starts.
    fn wrap(&self, cmd: CommandLine) -> Result<CommandLine, String>;
}

/// Runs the command as it is.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoWrap;

impl Wrap for NoWrap {
    fn wrap(&self, cmd: CommandLine) -> Result<CommandLine, String> {
        Ok(cmd)
    }
}

/// Ends the process group led by the PID we started and recorded.
pub(crate) fn kill_group(pid: u32) {
    if let Ok(raw) = i32::try_from(pid) {
        let _ =
            nix::sys::signal::killpg(nix::unistd::Pid::from_raw(raw), nix::sys::signal::SIGKILL);
    }
}

/// The variable every process of a session inherits: `LOOPWARD_SESSION=<session id>`. The
/// client starts its shell commands in sessions of their own (outside its process group), and
/// a process whose parent died is handed to init; this mark, set by loopward on the client it
/// starts, is how they are still found.
pub const SESSION_MARK: &str = "LOOPWARD_SESSION";

/// Ends a session: the process group led by the recorded `pid`, then every process the
/// kernel lists as carrying the session's mark (each by its own PID). Listed twice, for a
/// process forked while the first list was taken.
pub(crate) fn end_session(pid: u32, session: &str) {
    kill_group(pid);
    let _ = end_marked(session);
}

/// Ends every process the kernel lists as carrying `session`'s mark, each by its PID; says how
/// many it ended.
pub(crate) fn end_marked(session: &str) -> usize {
    let mark = format!("{SESSION_MARK}={session}");
    let mut ended = 0;
    for _ in 0..2 {
        for p in marked(mark.as_bytes()) {
            if let Ok(raw) = i32::try_from(p) {
                if nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(raw),
                    nix::sys::signal::SIGKILL,
                )
                .is_ok()
                {
                    ended += 1;
                }
            }
        }
    }
    ended
}

/// Whether process `pid` carries `session`'s mark (the clients whose command line does not
/// name the session, Codex's, are known by it).
pub(crate) fn carries_mark(pid: u32, session: &str) -> bool {
    let mark = format!("{SESSION_MARK}={session}");
    std::fs::read(format!("/proc/{pid}/environ"))
        .is_ok_and(|env| env.split(|b| *b == 0).any(|v| v == mark.as_bytes()))
}

/// The processes whose environment holds `mark` exactly (`NAME=value`).
fn marked(mark: &[u8]) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return vec![];
    };
    let me = std::process::id();
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|p| *p != me)
        .filter(|p| {
            std::fs::read(format!("/proc/{p}/environ"))
                .is_ok_and(|env| env.split(|b| *b == 0).any(|v| v == mark))
        })
        .collect()
}

/// A running session: its child and the guard that ends its group.
pub(crate) struct Running {
    pub(crate) child: tokio::process::Child,
    pub(crate) pid: u32,
    pub(crate) stdout: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
    _guard: GroupGuard,
}

/// Ends the session when its future is dropped or the session is done with.
struct GroupGuard(u32, String);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        end_session(self.0, &self.1);
    }
}

/// Starts `cmd` in its own process group, marked as `session`, stdin closed, stdout piped,
/// stderr to `stderr`.
pub(crate) fn start(
    cmd: &CommandLine,
    session: &str,
    stderr: std::fs::File,
) -> Result<Running, String> {
    use tokio::io::AsyncBufReadExt;
    let mut c = tokio::process::Command::new(&cmd.program);
    c.args(&cmd.args)
        .envs(cmd.env.iter().map(|(k, v)| (k, v)))
        .env(SESSION_MARK, session)
        .current_dir(&cmd.cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .process_group(0)
        .kill_on_drop(true);
    let mut child = c
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", cmd.program.display()))?;
    let pid = child
        .id()
        .ok_or_else(|| format!("{} exited before it started", cmd.program.display()))?;
    let guard = GroupGuard(pid, session.to_string());
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| "the session's stdout was not open".to_string())?;
    Ok(Running {
        child,
        pid,
        stdout: tokio::io::BufReader::new(stdout).lines(),
        _guard: guard,
    })
}
