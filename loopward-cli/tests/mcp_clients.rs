//! Teams of real coding clients route themselves over MCP, each headless against a scripted API
//! server of this test's own on 127.0.0.1 (Anthropic Messages for Claude Code, the OpenAI
//! Responses API for Codex, the Gemini API for Gemini CLI): a planner's "model" calls
//! loopward's `handoff` tool under its client's name for it (`mcp__loopward__handoff`,
//! `mcp_loopward_handoff`), which the client reaches through `loopward mcp` from the MCP config
//! the loop wrote in that session's own config; the runner decides and records the handoff
//! under the planner's turn, and the next session is the builder's.
//!
//! Needs the clients (`scripts/*-install.sh`, run by `.ci/run`, or `LOOPWARD_CLAUDE`,
//! `LOOPWARD_CODEX`, `LOOPWARD_GEMINI`); without one its test says so loudly and passes.

mod support;

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use support::anthropic_server::{self, Reply};
use support::clients::Client;
use support::gemini_server::{self, Call};
use support::loop_ledger::{decisions, kind, records, replay_run, shown, verify_run};
use support::responses_server::{self, Step};

/// A team of two coding-CLI agents: `planner` (loopward's `handoff` served to its sessions)
/// and `builder`, each `[[agent]]` table going on with its own lines (its `kind`, API…).
fn team(planner: &str, builder: &str) -> String {
    format!(
        r#"
[run]
first = "planner"
task = "Plan it, then build it."

# No model agent: the fake backend answers nothing.
[backend]
kind = "fake"
script = "loopward.script.toml"

[[agent]]
name = "planner"
verify = "test -f plan.md"
tools = ["handoff"]
{planner}

[[agent]]
name = "builder"
verify = "test -f src/done.txt"
{builder}
"#
    )
}

/// `config` with `src/lib.rs` the builder's territory.
fn owned_lib(config: &str) -> String {
    format!("{config}\n[[territory]]\npaths = [\"src/lib.rs\"]\nowner = \"builder\"\n")
}

/// A Codex agent's lines, its API the Responses server on `port`.
fn codex_agent(port: u16) -> String {
    format!("kind = \"codex\"\nbase_url = \"http://127.0.0.1:{port}/v1\"\nmodel = \"gpt-5.5\"")
}

/// A scratch project holding `config`, and a home beside it: `(dir, root, home)`.
fn project(config: &str) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("project");
    let home = dir.path().join("home");
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(root.join("loopward.toml"), config).unwrap();
    std::fs::write(root.join("loopward.script.toml"), "[agents]\n").unwrap();
    (
        dir,
        root.canonicalize().unwrap(),
        home.canonicalize().unwrap(),
    )
}

/// `loopward run --id team` in `root`, the clients (`(name, binary)`) first on `PATH`, the
/// environment only what they need (`vars`: their keys and API bases).
fn run_team(
    root: &Path,
    home: &Path,
    clients: &[(&str, &Path)],
    vars: &[(&str, String)],
) -> Output {
    let bin = tempfile::tempdir().unwrap();
    for (name, program) in clients {
        std::os::unix::fs::symlink(program, bin.path().join(name)).unwrap();
    }
    let path = std::env::join_paths(
        std::iter::once(bin.path().to_path_buf())
            .chain(std::env::split_paths(&std::env::var_os("PATH").unwrap())),
    )
    .unwrap();
    let mut c = Command::new(env!("CARGO_BIN_EXE_loopward"));
    c.current_dir(root)
        .args(["run", "--id", "team"])
        .env_clear()
        .env("PATH", path)
        .env("HOME", home)
        .env("SHELL", "/bin/bash");
    for (k, v) in vars {
        c.env(k, v);
    }
    shown(&mut c)
}

/// `tool`, by loopward's own name, requested once in `rs`, over MCP (its call id says so).
fn assert_relayed_once(rs: &[Value], tool: &str) {
    let relayed: Vec<&Value> = kind(rs, "tool_requested")
        .filter(|r| r["data"]["tool"] == tool)
        .collect();
    assert_eq!(relayed.len(), 1, "{rs:#?}");
    let id = relayed[0]["data"]["call_id"].as_str().unwrap();
    assert!(id.starts_with("mcp-"), "{id}");
}

/// What every team here shows in its ledger: the planner's session, then the builder's; the
/// planner's handoff (called over MCP) recorded by the runner under the planner's turn, which
/// ended `handoff` unverified; the builder's session verified; the ledger intact, and its
/// decisions the same when replayed.
fn assert_handed_off_over_mcp(root: &Path, home: &Path, planner_tool: &str) {
    let rs = records(root, "team");
    let turns: Vec<&str> = kind(&rs, "turn_started")
        .map(|r| r["data"]["agent"].as_str().unwrap())
        .collect();
    assert_eq!(turns, ["planner", "builder"], "{rs:#?}");
    let at = |pred: &dyn Fn(&Value) -> bool| rs.iter().position(pred).unwrap();
    let handoff = at(&|r| r["kind"] == "handoff_registered");
    assert_eq!(
        (&rs[handoff]["data"]["from"], &rs[handoff]["data"]["to"]),
        (&json!("planner"), &json!("builder"))
    );
    assert_eq!(kind(&rs, "handoff_registered").count(), 1, "{rs:#?}");
    // Under the planner's turn: after its session started, before it ended.
    let session = at(&|r| r["kind"] == "tool_started" && r["data"]["tool"] == planner_tool);
    let session_end = at(&|r| r["kind"] == "tool_finished" && r["data"]["tool"] == planner_tool);
    assert!(session < handoff && handoff < session_end, "{rs:#?}");
    // The relayed call, by loopward's own name, requested and finished in the same turn.
    assert_relayed_once(&rs, "handoff");
    let finishes: Vec<&Value> = kind(&rs, "turn_ended")
        .map(|r| &r["data"]["finish"])
        .collect();
    assert_eq!(finishes, [&json!("handoff"), &json!("done")]);
    // Only the builder's session was verified (the planner's handed off).
    let verdicts: Vec<&Value> = decisions(&rs, "verify")
        .iter()
        .map(|r| &r["data"]["decision"])
        .collect();
    assert_eq!(verdicts, [&json!("allow")]);
    assert!(root.join("src/done.txt").is_file());
    let v = verify_run(root, home, "team");
    assert!(v.status.success(), "verify: {v:?}");
    let r = replay_run(root, home, "team");
    let said = String::from_utf8_lossy(&r.stdout);
    assert!(r.status.success() && said.contains("all the same"), "{r:?}");
}

/// The builder's session in each test: the file its verifier looks for, then its answer.
fn build_steps() -> Vec<Step> {
    vec![
        Step::Exec("echo yes > src/done.txt".into()),
        Step::Text("Built.".into()),
    ]
}

/// A tool call of the session was answered without an error, saying `needle`.
#[track_caller]
fn assert_answered(server: &anthropic_server::Server, needle: &str) {
    let results = server.tool_results();
    assert!(
        results
            .iter()
            .any(|(_, is_error, t)| !is_error && t.contains(needle)),
        "{results:#?}"
    );
}

#[test]
fn a_codex_planner_hands_off_over_mcp_and_the_next_session_is_the_builders() {
    let Some(codex) = Client::Codex.find() else {
        return;
    };
    let mut script = vec![
        Step::ToolSearch("handoff".into()),
        Step::McpCall(
            "mcp__loopward".into(),
            "handoff".into(),
            json!({"to": "builder", "message": "Write src/done.txt."}),
        ),
        Step::Text("Handed to the builder.".into()),
    ];
    script.extend(build_steps());
    let (port, server) = responses_server::start(script);
    let (_dir, root, home) = project(&team(&codex_agent(port), &codex_agent(port)));
    let out = run_team(
        &root,
        &home,
        &[("codex", &codex)],
        &[("OPENAI_API_KEY", "test".into())],
    );
    assert_eq!(out.status.code(), Some(0), "{:#?}", server.outputs());
    // The model read the runner's answer as the MCP tool's result.
    let outputs = server.outputs();
    assert!(
        outputs[0].1.contains("handed off to builder"),
        "{outputs:#?}"
    );
    assert_handed_off_over_mcp(&root, &home, "codex");
    // Codex recorded the call under its own name for it, and the planner's session had no hook
    // call to govern (its hook never asked the loop, and that is not an ungoverned session).
    let rs = records(&root, "team");
    assert!(kind(&rs, "model_reply")
        .any(|r| r["data"]["tool_calls"][0]["name"] == "mcp__loopward__handoff"));
    assert!(
        decisions(&rs, "hook").iter().all(|r| r["turn"] != 1),
        "the planner's session asked no hook"
    );
}

#[test]
fn a_gemini_planner_hands_off_over_mcp_and_the_next_session_is_the_builders() {
    let Some(gemini) = Client::Gemini.find() else {
        return;
    };
    let (port, server) = gemini_server::start(vec![
        // Into the builder's territory first: refused, the way out named as the tool the
        // session was served.
        Call::write("src/lib.rs", "fn a() {}\n"),
        Call::tool(
            "mcp_loopward_handoff",
            json!({"to": "builder", "message": "Write src/done.txt."}),
        ),
        Call::Text("Handed to the builder.".into()),
        Call::shell("echo yes > src/done.txt"),
        Call::Text("Built.".into()),
    ]);
    let gemini_agent = format!(
        "kind = \"gemini\"\nbase_url = \"http://127.0.0.1:{port}\"\nmodel = \"gemini-2.5-flash\""
    );
    let (_dir, root, home) = project(&owned_lib(&team(&gemini_agent, &gemini_agent)));
    let out = run_team(
        &root,
        &home,
        &[("gemini", &gemini)],
        &[("GEMINI_API_KEY", "test".into())],
    );
    assert_eq!(out.status.code(), Some(0));
    let answer = server
        .answer_to("mcp_loopward_handoff")
        .expect("the client answered the handoff call");
    assert!(
        answer.to_string().contains("handed off to builder"),
        "{answer}"
    );
    let refusal = server
        .answer_to("write_file")
        .expect("the client answered the write");
    assert!(
        refusal
            .to_string()
            .contains("hand it to builder (the mcp_loopward_handoff tool with to"),
        "{refusal}"
    );
    assert!(!root.join("src/lib.rs").exists());
    assert_handed_off_over_mcp(&root, &home, "gemini");
}

/// The issue's Show item: a Claude Code planner hands off over MCP to a Codex builder.
#[test]
fn a_claude_code_planner_hands_off_over_mcp_to_a_codex_builder() {
    let (Some(claude), Some(codex)) = (support::claude(), Client::Codex.find()) else {
        eprintln!("\n\n*** SKIPPED: Claude Code or Codex is not installed. Run scripts/claude-code-install.sh and scripts/codex-install.sh (CI does). ***\n\n");
        return;
    };
    let (anthropic, claude_server) = anthropic_server::start(vec![
        Reply::tool(
            "mcp__loopward__say",
            json!({"text": "The plan is ready; the builder takes it from here."}),
        ),
        Reply::tool(
            "mcp__loopward__handoff",
            json!({"to": "builder", "message": "Write src/done.txt."}),
        ),
        Reply::text("Handed to the builder."),
    ]);
    let (responses, codex_server) = responses_server::start(build_steps());
    // The planner is served `say` too: it tells the people watching before it hands off.
    let config = team("kind = \"claude-code\"", &codex_agent(responses)).replacen(
        "tools = [\"handoff\"]",
        "tools = [\"handoff\", \"say\"]",
        1,
    );
    let (_dir, root, home) = project(&config);
    let out = run_team(
        &root,
        &home,
        &[("claude", &claude), ("codex", &codex)],
        &[
            (
                "ANTHROPIC_BASE_URL",
                format!("http://127.0.0.1:{anthropic}"),
            ),
            ("ANTHROPIC_API_KEY", "test".into()),
            ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".into()),
            ("DISABLE_AUTOUPDATER", "1".into()),
            ("OPENAI_API_KEY", "test".into()),
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{:#?}",
        claude_server.tool_results()
    );
    assert_answered(&claude_server, "handed off to builder");
    // The builder's session was Codex's, and it was told what the planner handed on.
    assert!(
        codex_server.requests()[0]
            .to_string()
            .contains("Write src/done.txt."),
        "{:#?}",
        codex_server.requests()[0]
    );
    // The `say`, relayed under loopward's own name in the planner's turn, answered as said,
    // and never a person's message.
    let rs = records(&root, "team");
    assert_relayed_once(&rs, "say");
    assert_answered(&claude_server, "said to the people watching");
    assert!(!kind(&rs, "human_message")
        .any(|r| r.to_string().contains("the builder takes it from here")));
    assert_handed_off_over_mcp(&root, &home, "claude_code");
}
