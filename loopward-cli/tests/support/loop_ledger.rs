//! Reading a loop's ledger in the tests of `loopward loop`: its records, by kind and by layer,
//! its sessions, and `loopward verify`/`replay` of it.

#![allow(dead_code, unreachable_pub)]

use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

/// A run's ledger, one JSON record a line.
pub fn records(root: &Path, run: &str) -> Vec<Value> {
    std::fs::read_to_string(root.join("runs").join(run).join("events.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Its records of kind `k`.
pub fn kind<'a>(rs: &'a [Value], k: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
    rs.iter().filter(move |r| r["kind"] == k)
}

/// Its decisions of `layer`.
pub fn decisions<'a>(rs: &'a [Value], layer: &'a str) -> Vec<&'a Value> {
    kind(rs, "layer_decision")
        .filter(|r| r["data"]["layer"] == layer)
        .collect()
}

/// How many sessions of the client recorded as `tool` (`claude_code`, `codex`, `gemini`).
pub fn sessions(rs: &[Value], tool: &str) -> usize {
    kind(rs, "tool_requested")
        .filter(|r| r["data"]["tool"] == tool)
        .count()
}

/// `loopward verify runs/<run>`.
pub fn verify_run(root: &Path, home: &Path, run: &str) -> Output {
    checked(root, home, "verify", run)
}

/// `loopward replay runs/<run>`: re-judged offline from the ledger, no client, no verifier.
pub fn replay_run(root: &Path, home: &Path, run: &str) -> Output {
    checked(root, home, "replay", run)
}

fn checked(root: &Path, home: &Path, command: &str, run: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_loopward"))
        .current_dir(root)
        .arg(command)
        .arg(root.join("runs").join(run))
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .output()
        .unwrap()
}

/// Runs `c` (a `loopward loop`) and shows what it printed, for a failing test's output.
#[allow(clippy::print_stderr)]
pub fn shown(c: &mut Command) -> Output {
    let out = c.output().unwrap();
    eprintln!(
        "loop: {}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Whether a process whose command line is exactly `argv` is running.
pub fn running(argv: &[&str]) -> bool {
    let want: Vec<u8> = argv
        .iter()
        .flat_map(|a| [a.as_bytes(), b"\0"].concat())
        .collect();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .any(|e| std::fs::read(e.path().join("cmdline")).is_ok_and(|c| c == want))
}
