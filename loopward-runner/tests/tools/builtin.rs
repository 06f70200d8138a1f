//! The built-in tools, called directly through the tool boundary.

use loopward_core::{AgentId, EffectKind, RunId, ToolCall, TurnNumber};
use loopward_runner::audit::MemorySink;
use loopward_runner::tool::{ToolError, ToolExecutor, ToolInvocation, ToolOutput};
use loopward_runner::tools::{self, Shell};
use loopward_runner::{ManualClock, RunContext, TurnContext, Workspace};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use tower::ServiceExt;

fn turn(dir: &std::path::Path) -> TurnContext {
    let team = vec![
        AgentId::new("builder").unwrap(),
        AgentId::new("tester").unwrap(),
    ];
    let run = RunContext::new(
        RunId::new("t").unwrap(),
        team.clone(),
        Workspace::new(dir).unwrap(),
        Arc::new(MemorySink::default()),
        Arc::new(ManualClock::new(0)),
    );
    TurnContext::new(run, team[0].clone(), TurnNumber(1))
}

async fn call_tool(
    tool: Arc<dyn loopward_runner::tool::Tool>,
    turn: &TurnContext,
    args: serde_json::Value,
) -> Result<ToolOutput, ToolError> {
    let accesses = tool.accesses(&args, turn)?;
    let inv = ToolInvocation {
        call: ToolCall::new("c1", tool.spec().name, args),
        tool,
        accesses,
        turn: turn.clone(),
    };
    ToolExecutor.oneshot(inv).await
}

/// Calls the built-in tool `name` of `turn`'s team with `args` ([`call_tool`]).
async fn builtin(
    turn: &TurnContext,
    name: &str,
    args: serde_json::Value,
) -> Result<ToolOutput, ToolError> {
    let tool = tools::builtin(turn.run().team()).get(name).unwrap();
    call_tool(tool, turn, args).await
}

/// Calls `edit_file` of `turn`'s team: `old`, once in `path`, becomes `new`.
async fn edit(
    turn: &TurnContext,
    path: &str,
    old: &str,
    new: &str,
) -> Result<ToolOutput, ToolError> {
    let args = json!({"path": path, "old": old, "new": new});
    builtin(turn, "edit_file", args).await
}

#[tokio::test]
async fn write_edit_read_and_list_report_their_effects() {
    let dir = tempfile::tempdir().unwrap();
    let t = turn(dir.path());
    let out = builtin(
        &t,
        "write_file",
        json!({"path": "src/a.rs", "content": "fn a() {}"}),
    )
    .await
    .unwrap();
    assert_eq!(out.effects[0].path, "src/a.rs");
    assert_eq!(out.effects[0].kind, EffectKind::Create);
    let out = edit(&t, "src/a.rs", "a()", "b()").await.unwrap();
    assert_eq!(out.effects[0].kind, EffectKind::Modify);
    let out = builtin(&t, "read_file", json!({"path": "./src/../src/a.rs"}))
        .await
        .unwrap();
    assert_eq!(out.content, "fn b() {}");
    let out = builtin(&t, "list_dir", json!({})).await.unwrap();
    assert_eq!(out.content, "src/");
}

#[tokio::test]
async fn edit_needs_exactly_one_occurrence() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("f.txt"), "x x").unwrap();
    let t = turn(dir.path());
    let err = edit(&t, "f.txt", "x", "y").await.unwrap_err();
    assert!(err.to_string().contains("occurs 2 times"), "{err}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("f.txt")).unwrap(),
        "x x"
    );
}

#[tokio::test]
async fn handoff_target_must_be_on_the_team() {
    let dir = tempfile::tempdir().unwrap();
    let t = turn(dir.path());
    let err = builtin(&t, "handoff", json!({"to": "ghost", "message": "m"}))
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("no agent named \"ghost\"") && err.to_string().contains("tester"),
        "{err}"
    );
    assert!(t.state().handoff.is_none());
}

#[tokio::test]
async fn shell_runs_in_the_workspace_root() {
    let dir = tempfile::tempdir().unwrap();
    let t = turn(dir.path());
    let out = call_tool(
        Arc::new(Shell::default()),
        &t,
        json!({"command": "pwd; exit 3"}),
    )
    .await
    .unwrap();
    assert!(out.is_error);
    assert!(out.content.starts_with("exit status: 3"), "{}", out.content);
    let root = Workspace::new(dir.path())
        .unwrap()
        .root()
        .display()
        .to_string();
    assert!(out.content.contains(&root));
}

#[tokio::test]
async fn shell_timeout_ends_the_process_group_it_started() {
    let dir = tempfile::tempdir().unwrap();
    // The sandbox lets a command write in existing folders, not create files at the root.
    std::fs::create_dir(dir.path().join("work")).unwrap();
    let t = turn(dir.path());
    let shell = Shell::new(Duration::from_millis(300));
    let table = shell.processes();
    // A grandchild would write after the timeout; it must be gone by then. (Its PID is the
    // command's PID namespace's, not one this test could look up.)
    let err = call_tool(
        Arc::new(shell),
        &t,
        json!({"command": "(sleep 1; echo late > work/late.txt) & echo started > work/started; wait"}),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, ToolError::Timeout { .. }), "{err}");
    assert!(table.running().is_empty(), "the process table is cleared");
    assert!(dir.path().join("work/started").exists());
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(
        !dir.path().join("work/late.txt").exists(),
        "the grandchild survived the timeout"
    );
}
