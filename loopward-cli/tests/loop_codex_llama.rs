//! `loopward loop --agent codex` against the `llama-server` CI starts (llama.cpp serving
//! SmolLM2-135M on 127.0.0.1): Codex speaks the OpenAI Responses API, which llama-server
//! serves, through the custom provider `--base-url` writes into the session's own config.
//! A 135M model makes no reliable tool call, so the loop asserts what does not depend on the
//! model's skill: a real session against a real local model, its usage as the server counted
//! it in the loop's ledger, the verifier run, the loop completed and its ledger intact.
//!
//! Codex's first request is about 4,600 tokens (its instructions and tools): the server needs
//! a context of at least 8,192 (`scripts/llama-server-ci.sh` starts it so). Needs the server
//! (`bash scripts/llama-server-ci.sh` runs this file with `--ignored`) and Codex
//! (`scripts/codex-install.sh`); ignored in the plain `cargo test`.

mod support;

use std::process::{Command, Stdio};
use support::clients::{self, Client};
use support::loop_ledger::{decisions, kind, records, sessions, shown, verify_run};

#[test]
#[ignore = "needs llama-server: run `bash scripts/llama-server-ci.sh`"]
fn a_loop_of_codex_sessions_runs_against_the_local_llama_server() {
    let var = |name: &str| {
        std::env::var(name)
            .unwrap_or_else(|_| panic!("{name} is not set: run `bash scripts/llama-server-ci.sh`"))
    };
    let (url, key) = (
        var("LOOPWARD_LLAMA_SERVER_URL"),
        var("LOOPWARD_LLAMA_SERVER_KEY"),
    );
    let Some(codex) = Client::Codex.find() else {
        return;
    };
    let (_dir, root, home) = clients::project();
    std::fs::write(root.join("PROMPT.md"), "Say hello in one sentence.\n").unwrap();
    let mut c = Command::new(env!("CARGO_BIN_EXE_loopward"));
    c.current_dir(&root)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", &home)
        .env("OPENAI_API_KEY", &key)
        .stdin(Stdio::null())
        .args(["loop", "--agent", "codex", "--model", "smollm2", "--codex"])
        .arg(&codex)
        .arg("--base-url")
        .arg(format!("{url}/v1"))
        .args(["--prompt", "PROMPT.md", "--verify", "test -f PROMPT.md"])
        .args(["--max-iterations", "2", "--session-timeout", "8m"])
        .args(["--id", "llama1"]);
    let out = shown(&mut c);
    assert_eq!(out.status.code(), Some(0), "the loop ends verified");
    let rs = records(&root, "llama1");
    assert_eq!(sessions(&rs, "codex"), 1);
    // The session ran to its end against the server, which counted Codex's whole prompt.
    let finished = kind(&rs, "tool_finished")
        .find(|r| r["data"]["tool"] == "codex")
        .unwrap();
    assert_eq!(finished["data"]["is_error"], false, "{finished}");
    let call = kind(&rs, "model_call").next().expect("a model call");
    assert_eq!(call["data"]["model"], "smollm2");
    let input = call["data"]["usage"]["input_tokens"].as_u64().unwrap();
    assert!(input > 1000, "{call}");
    assert_eq!(decisions(&rs, "verify")[0]["data"]["decision"], "allow");
    let end = kind(&rs, "run_ended").next().unwrap();
    assert_eq!(end["data"]["status"]["status"], "completed");
    let v = verify_run(&root, &home, "llama1");
    assert!(v.status.success(), "verify: {v:?}");
}
