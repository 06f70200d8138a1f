//! The real clients (Claude Code, Codex, Gemini CLI), one binary. Claude Code's tests are the
//! modules below that use this file's helpers: the client run headless against a scripted
//! Messages API server, with the hook installed by `loopward hook install`: what the "model" tries is decided by the script,
//! what happens is decided by Claude Code, the hook and the kernel. Asserted on disk, on what
//! the "model" was sent back, and in the hook's ledger: what the sandbox contains, what the
//! hook refuses to the client's own read tools, and that the client's permission decision for a
//! wrapped command is still its own.
//!
//! Codex's and Gemini CLI's sessions (`codex`, `gemini`), `loopward calibrate` on a real
//! transcript (`calibrate`) and the client run whole inside `loopward contain`
//! (`claude_code_contained`) bring their own set-up.
//!
//! Needs the clients: `scripts/claude-code-install.sh`, `codex-install.sh` and
//! `gemini-install.sh` (run by `.ci/run`) put the pinned versions in `.claude-code/`,
//! `.codex-cli/` and `.gemini-cli/`; `LOOPWARD_CLAUDE`, `LOOPWARD_CODEX` and `LOOPWARD_GEMINI`
//! name other binaries. Without one its tests say so loudly and pass.

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::anthropic_server::{self, Block, Reply};
use support::clients::{Client, CONFIG, ROADMAP};
use support::{ledger, wait_up_to};

mod calibrate;
mod claude_code_contained;
mod codex;
mod contained;
mod fail_closed;
mod gemini;
mod mcp_tools;
mod permission;
mod state_reads;
mod subagents;

#[path = "../support/mod.rs"]
mod support;

/// A scratch project with the config, a roadmap in the planner's territory, and the hook
/// installed by `loopward hook install`, and a home beside it: `(dir, root, home)`.
fn project() -> (tempfile::TempDir, PathBuf, PathBuf) {
    project_with(CONFIG)
}

/// [`project`] under another `config`.
fn project_with(config: &str) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("project");
    std::fs::create_dir_all(root.join("plans")).unwrap();
    std::fs::create_dir_all(dir.path().join("home")).unwrap();
    std::fs::write(root.join("loopward.toml"), config).unwrap();
    std::fs::write(root.join("plans/roadmap.md"), ROADMAP).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_loopward"))
        .args(["hook", "install", "--config"])
        .arg(root.join("loopward.toml"))
        .output()
        .unwrap();
    assert!(out.status.success(), "hook install: {out:?}");
    let root = root.canonicalize().unwrap();
    let home = dir.path().join("home");
    (dir, root, home)
}

/// One headless Claude Code session in `root` against the server on `port`, in permission
/// `mode` with `extra` arguments: its exit status, stdout and stderr. A client still running
/// after two minutes is ended (by its PID) and fails.
fn session(
    claude: &Path,
    root: &Path,
    home: &Path,
    port: u16,
    prompt: &str,
    mode: &str,
    extra: &[&str],
) -> (bool, String, String) {
    let (out, err) = (home.join("claude.stdout"), home.join("claude.stderr"));
    let mut child = claude_in(claude, root, home, port)
        .args(["-p", prompt, "--output-format", "stream-json", "--verbose"])
        .args(["--permission-mode", mode])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .expect("starting claude");
    let status = wait_up_to(&mut child, Duration::from_secs(120));
    let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
    let (stdout, stderr) = (read(&out), read(&err));
    assert!(
        status.is_some(),
        "the client hung (ended after 2 minutes)\nstdout: {stdout}\nstderr: {stderr}"
    );
    (status.unwrap().success(), stdout, stderr)
}

/// A [`session`] against a server of its own scripted with `script`, asserted to succeed: what
/// the client sent back for each tool call, and its stdout.
fn scripted(
    claude: &Path,
    root: &Path,
    home: &Path,
    script: Vec<Reply>,
    prompt: &str,
    mode: &str,
    extra: &[&str],
) -> (Vec<(String, bool, String)>, String) {
    let (port, server) = anthropic_server::start(script);
    let (ok, stdout, stderr) = session(claude, root, home, port, prompt, mode, extra);
    assert!(ok, "claude failed\nstdout: {stdout}\nstderr: {stderr}");
    (server.tool_results(), stdout)
}

/// The client in `root`, headless, with nothing of the caller's environment but `PATH`: its home
/// is `home`, its API the scripted server on `port`.
fn claude_in(claude: &Path, root: &Path, home: &Path, port: u16) -> Command {
    let mut cmd = Command::new(claude);
    cmd.current_dir(root)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("SHELL", "/bin/bash")
        .env("IS_SANDBOX", "1")
        .env("ANTHROPIC_BASE_URL", format!("http://127.0.0.1:{port}"))
        .env("ANTHROPIC_API_KEY", "test")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_AUTOUPDATER", "1");
    cmd
}

/// loopward's state directory for the project at `root`, as the hook (HOME = `home`) finds it.
fn state_dir(home: &Path, root: &Path) -> PathBuf {
    loopward_runner::StateDir::for_workspace(&home.join(".local/state"), root)
        .unwrap()
        .root()
        .to_path_buf()
}

/// Marks `root` trusted in the scratch home's client config: the client ignores an untrusted
/// project's `permissions` (it says so on stderr), though it runs its hooks.
fn trust(home: &Path, root: &Path) {
    let config = json!({"projects": {root.to_str().unwrap(): {"hasTrustDialogAccepted": true}}});
    std::fs::write(home.join(".claude.json"), config.to_string()).unwrap();
}

/// Sets the project's `permissions.allow` to `allow` and, with `defer`, adds `--defer-allows`
/// to every loopward hook command `hook install` wrote.
fn configure(root: &Path, allow: &[&str], defer: bool) {
    let path = root.join(".claude/settings.json");
    let mut settings: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    settings["permissions"] = json!({ "allow": allow });
    for entries in settings["hooks"].as_object_mut().unwrap().values_mut() {
        for entry in entries.as_array_mut().unwrap() {
            for hook in entry["hooks"].as_array_mut().unwrap() {
                if defer {
                    hook["args"]
                        .as_array_mut()
                        .unwrap()
                        .push(json!("--defer-allows"));
                }
            }
        }
    }
    std::fs::write(&path, settings.to_string()).unwrap();
}
