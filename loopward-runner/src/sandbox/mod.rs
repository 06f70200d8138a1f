//! The kernel sandbox around every shell command an agent runs.
//!
//! A command may write exactly what its agent may write: its own territories and unclaimed
//! paths. Other agents' territories (existing or not yet created), the control files
//! (`.loopward/`, the config, `runs/`, `.claude/`) and everything outside the workspace
//! (loopward's state directory included) are read-only. The kernel enforces it with
//! [Landlock](https://docs.kernel.org/userspace-api/landlock.html), so the rule binds every
//! process the command starts — pipelines, interpreters, `nohup`, `setsid` and background
//! processes that outlive the call — and cannot be lifted from inside.
//!
//! Landlock grants access by file hierarchy, so "writable except these subtrees" is planned as
//! grants ([`Confinement::plan`]): a directory with no protected path at or below it is granted
//! whole; one that holds a protected path (a *mixed* directory) is not granted itself, only its
//! unprotected entries are. So a command cannot create a new entry directly in a mixed directory
//! (the workspace root, usually): that is what keeps a not-yet-created territory folder from
//! being created. The agent's own territory folders are created (empty) before the plan so
//! they can be granted.
//!
//! ```
//! use loopward_runner::gates::ControlFiles;
//! use loopward_runner::sandbox::{Confinement, Protected};
//! use loopward_runner::Workspace;
//! let dir = tempfile::tempdir().unwrap();
//! std::fs::create_dir(dir.path().join("src")).unwrap();
//! std::fs::write(dir.path().join("loopward.toml"), "").unwrap();
//! let ws = Workspace::new(dir.path()).unwrap();
//! let plan = Confinement::plan(&ws, &Protected::new(ControlFiles::default(), vec![])).unwrap();
//! // The root holds control files, so it is not granted; `src` is, whole.
//! assert_eq!(plan.writable_rel(), vec!["src/".to_string()]);
//! ```

mod error;
mod init;
mod kernel;
mod net;
mod plan;
mod privilege;
mod reach;

pub use error::SandboxError;
pub use init::{main as init_main, serve_init_if_asked, INIT_ARG, INIT_BIN};
pub use kernel::{
    confine_current_thread, kernel_support, probe, spawn_confined, spawn_contained, KernelSupport,
    Started,
};
pub use net::Network;
pub use plan::{Confinement, Grant, Protected, MAX_GRANTS};
pub use privilege::hide_this_process;
pub use reach::{Reach, DEFAULT_ENV, DEFAULT_PATH, SYSTEM_READABLE, SYSTEM_UNREADABLE};

use serde::{Deserialize, Serialize};
use std::sync::Mutex;

/// How shell commands are contained (`[gates.shell] sandbox`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum SandboxMode {
    /// Every command runs in a kernel sandbox; where none can be set up, shell is refused.
    #[default]
    Kernel,
    /// No sandbox: commands are only watched (snapshot before, compare after, revert). An
    /// explicit opt-in, shown in the run's banner, ledger and report.
    WatchOnly,
}

impl SandboxMode {
    /// The name used in `loopward.toml` and in ledgers.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Kernel => "kernel",
            Self::WatchOnly => "watch-only",
        }
    }
}

/// Where the policy layer leaves the confinement it planned for the shell call it is about to
/// run (kept in the turn's extensions; tool calls in a turn run one at a time). The shell tool
/// takes it; a tool that finds none plans a control-files-only confinement itself.
#[derive(Debug, Default)]
pub struct ConfinementSlot(Mutex<Option<Planned>>);

/// What the policy layer decided for one shell call.
// Made and moved once per shell call, beside a process spawn: its size does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug)]
pub enum Planned {
    /// Run inside this confinement.
    Confined(Confinement),
    /// Run unconfined: the configuration opted into `watch-only`.
    WatchOnly,
}

impl ConfinementSlot {
    /// Leaves the plan for the next shell call.
    pub fn put(&self, plan: Planned) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = Some(plan);
    }

    /// Takes the plan left for this call, if any.
    pub fn take(&self) -> Option<Planned> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}
