//! A team of Claude Code agents routes itself over MCP, with the real client (headless,
//! against the scripted Messages API on 127.0.0.1): the planner's "model" calls loopward's
//! `handoff` tool, which the client reaches through `loopward mcp` from the session's MCP
//! config; the runner decides and records the handoff, and the next session is the builder's.
//!
//! Needs the client (`scripts/claude-code-install.sh`, run by `.ci/run`, or `LOOPWARD_CLAUDE`);
//! without one the test says so loudly and passes.

mod support;

use serde_json::{json, Value};
use std::process::Command;
use support::anthropic_server::{self, Reply};

const TEAM: &str = r#"
[run]
first = "planner"
task = "Plan it, then build it."

[backend]
kind = "fake"
script = "loopward.script.toml"

[[agent]]
name = "planner"
kind = "claude-code"
verify = "test -f plan.md"
tools = ["handoff"]

[[agent]]
name = "builder"
kind = "claude-code"
verify = "test -f src/done.txt"
"#;

#[test]
fn a_claude_code_planner_hands_off_over_mcp_and_the_next_session_is_the_builders() {
    let Some(claude) = support::claude() else {
        eprintln!("\n\n*** SKIPPED: Claude Code is not installed. Run scripts/claude-code-install.sh (CI does) or set LOOPWARD_CLAUDE. ***\n\n");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("project");
    let home = dir.path().join("home");
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(root.join("loopward.toml"), TEAM).unwrap();
    std::fs::write(root.join("loopward.script.toml"), "[agents]\n").unwrap();
    let root = root.canonicalize().unwrap();
    let p = |rel: &str| root.join(rel).to_str().unwrap().to_string();
    let (port, server) = anthropic_server::start(vec![
        Reply::tool(
            "mcp__loopward__handoff",
            json!({"to": "builder", "message": "Write src/done.txt."}),
        ),
        Reply::text("Handed to the builder."),
        Reply::tool(
            "Write",
            json!({"file_path": p("src/done.txt"), "content": "yes\n"}),
        ),
        Reply::text("Built."),
    ]);
    let bin = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(&claude, bin.path().join("claude")).unwrap();
    let path = std::env::join_paths(
        std::iter::once(bin.path().to_path_buf())
            .chain(std::env::split_paths(&std::env::var_os("PATH").unwrap())),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_loopward"))
        .current_dir(&root)
        .args(["run", "--id", "team"])
        .env_clear()
        .env("PATH", path)
        .env("HOME", &home)
        .env("ANTHROPIC_BASE_URL", format!("http://127.0.0.1:{port}"))
        .env("ANTHROPIC_API_KEY", "test")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{text}{}\n{:#?}",
        String::from_utf8_lossy(&out.stderr),
        server.tool_results()
    );
    let rs: Vec<Value> = std::fs::read_to_string(root.join("runs/team/events.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let kind = |k: &'static str| rs.iter().filter(move |r| r["kind"] == k);
    let turns: Vec<&str> = kind("turn_started")
        .map(|r| r["data"]["agent"].as_str().unwrap())
        .collect();
    assert_eq!(turns, ["planner", "builder"]);
    // The handoff the client called over MCP is the runner's record, under the planner's turn.
    let handoffs: Vec<&Value> = kind("handoff_registered").collect();
    assert_eq!(handoffs.len(), 1, "{rs:#?}");
    assert_eq!(handoffs[0]["data"]["to"], "builder");
    assert_eq!(handoffs[0]["data"]["from"], "planner");
    // The model read the runner's answer as the MCP tool's result.
    assert!(
        server
            .tool_results()
            .iter()
            .any(|(_, is_error, t)| !is_error && t.contains("handed off to builder")),
        "{:#?}",
        server.tool_results()
    );
    // Only the builder's session was verified (the planner's handed off).
    let verdicts: Vec<&Value> = kind("layer_decision")
        .filter(|r| r["data"]["layer"] == "verify")
        .map(|r| &r["data"]["decision"])
        .collect();
    assert_eq!(verdicts, [&json!("allow")]);
    assert!(root.join("src/done.txt").is_file());
    // Offline, from the ledger: the relayed handoff is judged again by the same gates.
    for command in ["verify", "replay"] {
        let r = Command::new(env!("CARGO_BIN_EXE_loopward"))
            .current_dir(&root)
            .arg(command)
            .arg(root.join("runs/team"))
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &home)
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&r.stdout);
        assert!(
            r.status.success(),
            "{command}: {said}{}",
            String::from_utf8_lossy(&r.stderr)
        );
        if command == "replay" {
            assert!(said.contains("all the same"), "{said}");
        }
    }
}
