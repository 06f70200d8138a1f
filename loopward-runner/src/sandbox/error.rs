use std::path::PathBuf;

/// A sandbox could not be planned or set up. Shell is then refused (fail closed).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SandboxError {
    /// The kernel cannot enforce the sandbox.
    #[error("the kernel cannot sandbox shell commands: {why}. Run on Linux 6.2 or newer with Landlock enabled (`lsm=...,landlock` on the kernel command line), or opt out explicitly with `[gates.shell] sandbox = \"watch-only\"` in loopward.toml (then commands are only watched, not contained)")]
    Unsupported {
        /// What was missing.
        why: String,
    },
    /// The command's own network namespace could not be made.
    #[error("the shell sandbox cannot cut the command off the network: {why}. Run loopward where it may create network namespaces (as root, or in a container that grants CAP_SYS_ADMIN), or opt out explicitly with `[net] isolate = false` in loopward.toml (then commands reach any host, and every call records it)")]
    Network {
        /// What failed.
        why: String,
    },
    /// The command's PID namespace could not be given its init and its own `/proc`.
    #[error("the shell sandbox cannot give the command an init and a /proc of its own: {why}. Run loopward where it may create mount namespaces (as root, or in a container that grants CAP_SYS_ADMIN); a program that embeds loopward's runner calls `loopward_runner::sandbox::serve_init_if_asked()` first in main, or ships `loopward-sandbox-init` beside itself")]
    Init {
        /// What failed.
        why: String,
    },
    /// A path of the plan could not be read or opened.
    #[error("planning the shell sandbox: {path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The sandboxed process could not be started.
    #[error("starting the sandboxed command: {0}")]
    Spawn(String),
}
