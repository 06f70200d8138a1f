//! The OpenAI-compatible backend against a real server: llama.cpp's `llama-server` serving the CI
//! model (SmolLM2-135M), driven through `loopward run --backend openai` by a governed team
//! (territories, a review gate, caps). Streaming is the backend's default, so every call here
//! streams; one run is stopped mid-stream by its token limit, one is killed mid-stream, and in
//! one the server is restarted mid-run and the backend's retry carries the run on.
//!
//! Tool calls: with SmolLM2's own chat template llama-server renders no tools and the model
//! answers in text (the first four tests). The last test starts a server of its own with
//! `--chat-template-file scripts/llama-server-tools.jinja`, a template that renders the tools and
//! writes a call as the tool's name and its JSON arguments with no marker around it; with
//! `tool_choice = "required"` llama-server then constrains every reply to one well-formed call
//! (with a marker such as Qwen's `<tool_call>`, its grammar lets free text come first, and a
//! 135M model never reaches the marker). Those calls stream back, are gated and recorded: an
//! allowed write shows on disk and in the ledger, a territory's refusal as a `gate_decision`
//! deny; a call cut off mid-stream by its token limit fails the run and reaches no tool. The
//! allowed and the refused write are two runs of one team: SmolLM2-135M repeats whichever tool it
//! calls first, so in one run it never writes and then hands off (ten wordings were tried).
//!
//! These tests need the server: `bash scripts/llama-server-ci.sh` builds it (cached under
//! `target/llama-server/`), starts it on 127.0.0.1 with its PID recorded, runs this file with
//! `--ignored` and stops it. They are ignored in the plain `cargo test`.
#![cfg(feature = "http")]

use loopward::ledger;
use loopward_core::{AuditEvent, Decision, EffectStatus, RunStatus};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

mod interrupted;
mod server;
mod streaming;
mod tool_calls;

use server::{healthy, port_of, wait_for, Spot};

const WHY: &str = "needs llama-server: run `bash scripts/llama-server-ci.sh`";

/// What `scripts/llama-server-ci.sh` passes in.
struct Env {
    /// The running server's root, `http://127.0.0.1:<port>`.
    url: String,
    /// Its API key.
    key: String,
    /// The `llama-server` binary (for the tests that start their own).
    bin: PathBuf,
    /// The GGUF it serves.
    model: PathBuf,
}

fn env() -> Env {
    let var =
        |name: &str| std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set: {WHY}"));
    Env {
        url: var("LOOPWARD_LLAMA_SERVER_URL"),
        key: var("LOOPWARD_LLAMA_SERVER_KEY"),
        bin: PathBuf::from(var("LOOPWARD_LLAMA_SERVER_BIN")),
        model: PathBuf::from(var("LOOPWARD_LLAMA_SERVER_MODEL")),
    }
}

/// The `[backend]` table: the openai backend at `url`, replies of at most `max_tokens`.
fn backend(url: &str, max_tokens: u32) -> String {
    format!(
        r#"[backend]
kind = "openai"
model = "smollm2"
base_url = "{url}/v1"
api_key_env = "LOOPWARD_TEST_SERVER_KEY"
max_tokens = {max_tokens}
"#
    )
}

/// A governed team on the openai backend at `url`: a coordinator that hands off, a builder that
/// owns `src/**` and must hand its changes to the auditor, caps that end every run.
fn team(url: &str, max_tokens: u32) -> String {
    format!(
        r#"[run]
first = "root"
task = "Create the file src/hello.txt containing the word hello."
runs_dir = "runs"

{backend}
[[agent]]
name = "root"
role = "You coordinate. Answer in one short sentence."
tools = ["list_dir", "handoff"]
max_steps = 2

[[agent]]
name = "builder"
role = "You write files under src/ with write_file, then hand off to the auditor."
tools = ["write_file", "read_file", "handoff"]
max_steps = 3

[[agent]]
name = "auditor"
role = "You read what the builder wrote and say whether it is right."
tools = ["read_file", "list_dir"]
max_steps = 2

[[territory]]
paths = ["src/**"]
owner = "builder"

[[gates.review]]
from = "builder"
via = "auditor"
when = ["src/**"]

[limits]
turns_per_run = 4
"#,
        backend = backend(url, max_tokens)
    )
}

/// The running server's environment, and a workspace of [`team`]'s on it.
fn on_the_server(max_tokens: u32) -> (Env, tempfile::TempDir) {
    let e = env();
    let dir = workspace(&e.url, max_tokens);
    (e, dir)
}

/// A workspace of [`team`]'s.
fn workspace(url: &str, max_tokens: u32) -> tempfile::TempDir {
    workspace_of(&team(url, max_tokens))
}

/// A workspace whose `loopward.toml` is `config`.
fn workspace_of(config: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("loopward.toml"), config).unwrap();
    dir
}

fn loopward(dir: &Path, key: &str, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_loopward"));
    c.args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .env("LOOPWARD_TEST_SERVER_KEY", key)
        .env("RUST_LOG", "loopward_runner::model::http=debug");
    c
}

/// `loopward run --id <id> --backend openai`, then `more`, in `dir`.
fn run_openai(dir: &Path, key: &str, id: &str, more: &[&str]) -> Command {
    loopward(
        dir,
        key,
        &[&["run", "--id", id, "--backend", "openai"], more].concat(),
    )
}

/// Starts `command` with its output captured (for [`wait_for`]).
fn spawn_piped(mut command: Command) -> Child {
    command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits, at most `limit`, until run `run` in `dir` has started its first turn.
fn await_first_turn(dir: &Path, run: &str, limit: Duration) {
    let deadline = Instant::now() + limit;
    while ledger_mentions(dir, run, "\"turn_started\"") == 0 {
        assert!(Instant::now() < deadline, "the run never started a turn");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The status of the ledger's last `run_ended` record, if any.
fn end_status(events: &[(loopward_core::Scope, AuditEvent)]) -> Option<RunStatus> {
    events.iter().rev().find_map(|(_, e)| match e {
        AuditEvent::RunEnded { status, .. } => Some(status.clone()),
        _ => None,
    })
}

/// The run's last `run_ended` status and its model calls' (model, output tokens), from the
/// ledger; the ledger's chain is checked by `loopward verify` too.
fn ledger_of(dir: &Path, run: &str, key: &str) -> (RunStatus, Vec<(String, u64)>, usize) {
    let run_dir = dir.join("runs").join(run);
    let events = ledger::events(&run_dir).unwrap();
    let verify = loopward(dir, key, &["verify", &format!("runs/{run}")])
        .output()
        .unwrap();
    assert_eq!(verify.status.code(), Some(0), "{}", text(&verify));
    let status = end_status(&events)
        .unwrap_or_else(|| panic!("{} has no run_ended record", run_dir.display()));
    let mut calls = vec![];
    let mut tools = 0;
    for (_, e) in &events {
        match e {
            AuditEvent::ModelCall { model, usage, .. } => {
                calls.push((model.clone(), usage.output_tokens));
            }
            AuditEvent::ToolRequested { .. } => tools += 1,
            _ => {}
        }
    }
    (status, calls, tools)
}

fn defined(status: &RunStatus) -> bool {
    matches!(
        status,
        RunStatus::Completed
            | RunStatus::Exhausted
            | RunStatus::CapReached { .. }
            | RunStatus::Stopped { .. }
    )
}

fn ledger_mentions(dir: &Path, run: &str, needle: &str) -> usize {
    std::fs::read_to_string(dir.join("runs").join(run).join("events.jsonl"))
        .map(|t| t.matches(needle).count())
        .unwrap_or(0)
}
