//! The init of a sandbox's PID namespace: a small process of loopward's own at PID 1 that
//! mounts a `/proc` of the namespace's own and reaps every orphan, while the command runs
//! beside it as PID 2.
//!
//! The command cannot be PID 1 itself: an init must reap the orphans the kernel hands it (a
//! long-lived agent host's shells fork and exit for hours), and it ignores every signal it has
//! no handler for, so `SIGTERM` would not end it. Nor can the supervisor mount `/proc` for the
//! namespace: a procfs shows the PID namespace of the process that mounts it, and Landlock
//! forbids mounting to the command. So the sandbox thread, not yet restricted, starts this
//! init first (it mounts `/proc`, restricts itself to nothing, says `ready`), then restricts
//! itself and starts the command, which stays the supervisor's own child: its exit status,
//! stdio, terminal and signals are exactly as they were. When the command ends the init
//! exits, and the kernel ends everything left in the namespace.
//!
//! `unsafe` is forbidden in loopward, so the init is a program, not a fork: the binary that
//! runs the sandbox hosts it ([`serve_init_if_asked`], first thing in `main`), or
//! `loopward-sandbox-init` lies beside it (this crate builds one).

use super::SandboxError;
use nix::sys::signal::{SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use rustix::event::{PollFd, PollFlags};
use rustix::process::{Pid, PidfdFlags, WaitOptions};
use std::ffi::OsString;
use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::process::{ExitCode, Stdio};
use std::sync::OnceLock;

/// The argument that makes a binary hosting the init ([`serve_init_if_asked`]) run it.
pub const INIT_ARG: &str = "__loopward-sandbox-init";

/// The file name of the stand-alone init this crate builds.
pub const INIT_BIN: &str = "loopward-sandbox-init";

/// The program started as PID 1 of every sandbox: this binary with [`INIT_ARG`] when it
/// called [`serve_init_if_asked`], else `loopward-sandbox-init` beside it.
struct Program {
    path: PathBuf,
    args: Vec<OsString>,
}

static HOSTED: OnceLock<Program> = OnceLock::new();

/// Runs the sandbox's init when this process was started as one (`args`, its command line,
/// has [`INIT_ARG`] first after the program) and returns its exit status; otherwise records
/// that this binary hosts the init for the sandboxes it starts, and returns `None`. Call it
/// first in `main` of a program that runs sandboxed commands:
///
/// ```no_run
/// fn main() -> std::process::ExitCode {
///     if let Some(code) = loopward_runner::sandbox::serve_init_if_asked(std::env::args_os()) {
///         return code;
///     }
///     // ... the program, whose sandboxes start this binary as their init
///     std::process::ExitCode::SUCCESS
/// }
/// ```
pub fn serve_init_if_asked(args: impl IntoIterator<Item = OsString>) -> Option<ExitCode> {
    if args.into_iter().nth(1).is_some_and(|a| a == INIT_ARG) {
        return Some(main());
    }
    if let Ok(path) = this_binary() {
        let _ = HOSTED.set(Program {
            path,
            args: vec![INIT_ARG.into()],
        });
    }
    None
}

/// Where the init is: this binary if it hosts it, else `loopward-sandbox-init` in this
/// binary's folder or the one above (cargo puts test binaries in `deps/`).
fn program() -> Result<&'static Program, SandboxError> {
    static FOUND: OnceLock<Option<Program>> = OnceLock::new();
    if let Some(p) = HOSTED.get() {
        return Ok(p);
    }
    let found = FOUND.get_or_init(|| {
        let exe = this_binary().ok()?;
        exe.ancestors()
            .skip(1)
            .take(2)
            .map(|d| d.join(INIT_BIN))
            .find(|p| p.is_file())
            .map(|path| Program { path, args: vec![] })
    });
    found.as_ref().ok_or_else(|| SandboxError::Init {
        why: format!(
            "this program does not host the sandbox's init and there is no {INIT_BIN} beside it"
        ),
    })
}

/// Whether process `pid` (as this process's `/proc` names it) runs as a sandbox's init, by
/// its command line.
pub(super) fn is_sandbox_init(pid: u32) -> bool {
    let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
        return false;
    };
    let mut args = cmdline.split(|b| *b == 0);
    let program = args.next().unwrap_or_default();
    let arg = args.next().unwrap_or_default();
    arg == INIT_ARG.as_bytes() || program.ends_with(format!("/{INIT_BIN}").as_bytes())
}

/// The binary this process runs, as the kernel names it (not a setting: the file it was
/// started from).
fn this_binary() -> std::io::Result<PathBuf> {
    std::fs::read_link("/proc/self/exe")
}

/// The init, started and ready; the command may start. Dropped without [`Ready::go`] (the
/// command did not start), the init sees its stdin close and exits.
pub(super) struct Ready {
    go: std::fs::File,
    child: tokio::process::Child,
}

/// Gives the calling thread a mount namespace of its own (nothing in it propagates to the
/// host) and starts the init in it, as the first process of the PID namespace the thread made;
/// returns once the init has mounted the namespace's `/proc`. The thread must not be
/// restricted yet (Landlock forbids mounts) and must have entered a tokio runtime.
pub(super) fn start() -> Result<Ready, SandboxError> {
    let fail = |why: String| SandboxError::Init { why };
    let program = program()?;
    nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNS)
        .map_err(|e| fail(format!("cannot give the command a mount namespace ({e})")))?;
    use rustix::mount::MountPropagationFlags as P;
    rustix::mount::mount_change("/", P::PRIVATE | P::REC)
        .map_err(|e| fail(format!("cannot make the command's mounts private ({e})")))?;
    let mut child = tokio::process::Command::new(&program.path)
        .args(&program.args)
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        // Out of the terminal's foreground group: its signals are the command's.
        .process_group(0)
        .spawn()
        .map_err(|e| fail(format!("cannot start {}: {e}", program.path.display())))?;
    let pipe = |fd: Option<std::io::Result<std::os::fd::OwnedFd>>| {
        fd.and_then(Result::ok)
            .map(std::fs::File::from)
            .ok_or_else(|| fail("cannot talk to the init".into()))
    };
    let out = pipe(child.stdout.take().map(|o| o.into_owned_fd()))?;
    let go = pipe(child.stdin.take().map(|i| i.into_owned_fd()))?;
    let mut line = String::new();
    let _ = std::io::BufReader::new(out).read_line(&mut line);
    match line.trim_end() {
        "ready" => Ok(Ready { go, child }),
        "" => Err(fail(format!(
            "{} ended before it was ready",
            program.path.display()
        ))),
        said => Err(fail(said.trim_start_matches("error: ").to_string())),
    }
}

impl Ready {
    /// Tells the init the command (PID 2) runs, and reaps the init when it exits.
    pub(super) fn go(mut self, rt: &tokio::runtime::Handle) {
        let _ = self.go.write_all(b"go\n");
        let mut child = self.child;
        rt.spawn(async move {
            let _ = child.wait().await;
        });
    }
}

/// The init's own program: run as PID 1 of a fresh PID namespace, by the sandbox alone.
/// Exit status 0 once the command has ended; 126 when it could not set up (what failed is
/// its one line of output, which the sandbox reports).
pub fn main() -> ExitCode {
    let mut out = std::io::stdout();
    let signals = match setup() {
        Ok(s) => s,
        Err(why) => {
            let _ = writeln!(out, "error: {why}");
            return ExitCode::from(126);
        }
    };
    if writeln!(out, "ready").and_then(|()| out.flush()).is_err() {
        return ExitCode::from(126);
    }
    let mut line = String::new();
    let _ = std::io::stdin().lock().read_line(&mut line);
    if line != "go\n" {
        return ExitCode::SUCCESS; // the command did not start
    }
    // The first process after this one in the namespace: nothing else forks into it before.
    let Some(command) = Pid::from_raw(2) else {
        return ExitCode::SUCCESS;
    };
    let Ok(command) = rustix::process::pidfd_open(command, PidfdFlags::empty()) else {
        return ExitCode::SUCCESS; // already gone
    };
    loop {
        let mut fds = [
            PollFd::new(&command, PollFlags::IN),
            PollFd::new(&signals, PollFlags::IN),
        ];
        match rustix::event::poll(&mut fds, None) {
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(_) => return ExitCode::FAILURE,
        }
        let (ended, reap) = (!fds[0].revents().is_empty(), !fds[1].revents().is_empty());
        if reap {
            while let Ok(Some(_)) = signals.read_signal() {}
            while let Ok(Some(_)) = rustix::process::wait(WaitOptions::NOHANG) {}
        }
        if ended {
            // The kernel now ends whatever is left in the namespace.
            return ExitCode::SUCCESS;
        }
    }
}

/// Mounts the namespace's `/proc`, then keeps nothing it does not need to reap: no file
/// access, no capabilities, not inspectable. Returns where `SIGCHLD` arrives.
fn setup() -> Result<SignalFd, String> {
    if rustix::process::getpid() != Pid::INIT {
        return Err(format!(
            "{INIT_ARG} is the init of a loopward sandbox's PID namespace; loopward starts it there, never by hand"
        ));
    }
    use rustix::mount::MountFlags as M;
    // Over the host's procfs, not in its place: a read grant on `/proc` (opened on the host's
    // procfs root, the new mount's mountpoint) still covers it.
    rustix::mount::mount(
        "proc",
        "/proc",
        "proc",
        M::NOSUID | M::NODEV | M::NOEXEC,
        None,
    )
    .map_err(|e| format!("cannot mount a /proc of the sandbox's own ({e})"))?;
    let mut chld = SigSet::empty();
    chld.add(Signal::SIGCHLD);
    chld.thread_block()
        .map_err(|e| format!("cannot block SIGCHLD ({e})"))?;
    let signals = SignalFd::with_flags(&chld, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC)
        .map_err(|e| format!("cannot watch for ended children ({e})"))?;
    use landlock::{Access, AccessFs, CompatLevel, Compatible, Ruleset, RulesetAttr, ABI};
    Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(ABI::V6))
        .and_then(|r| r.create())
        .and_then(|r| r.restrict_self())
        .map_err(|e| format!("cannot restrict the init ({e})"))?;
    rustix::thread::set_capabilities(
        None,
        rustix::thread::CapabilitySets {
            effective: rustix::thread::CapabilitySet::empty(),
            permitted: rustix::thread::CapabilitySet::empty(),
            inheritable: rustix::thread::CapabilitySet::empty(),
        },
    )
    .map_err(|e| format!("cannot drop the init's capabilities ({e})"))?;
    super::privilege::hide_this_process().map_err(|e| e.to_string())?;
    Ok(signals)
}
