//! The Gemini CLI adapter: Gemini CLI's hook events (shapes from its 0.61.0 hooks reference)
//! judged by the same engine, answered the way Gemini CLI takes answers.

use crate::support::{assert_silent, host_policy_sandboxed, HostSession, HOST_POLICY as POLICY};
use loopward_hooks::{handle, HookAnswer};
use loopward_runner::gates::Host;
use serde_json::{json, Value};

const SESSION: &str = "5b1c8a2e-0000-4000-8000-00000000g001";

/// A scratch project whose hook answers as Gemini CLI, in the session [`SESSION`].
fn gemini(policy: &str, exe: Option<&str>) -> HostSession {
    HostSession::new(Host::GeminiCli, SESSION, policy, exe, false)
}

/// Gemini CLI's tool events, as its hook receives them.
trait Gemini {
    /// A Gemini CLI tool event: no call id, a timestamp, `tool_response` after the call.
    fn tool(&self, event: &str, tool: &str, input: Value) -> HookAnswer;
}

impl Gemini for HostSession {
    fn tool(&self, event: &str, tool: &str, input: Value) -> HookAnswer {
        let mut e = json!({
            "session_id": SESSION, "transcript_path": "/t.json", "cwd": self.root,
            "hook_event_name": event, "timestamp": "2026-12-01T00:00:00Z",
            "tool_name": tool, "tool_input": input,
        });
        if event == "AfterTool" {
            e["tool_response"] = json!({"llmContent": "ok", "returnDisplay": "ok"});
        }
        handle(&e.to_string(), &self.ctx)
    }
}

fn deny_reason(a: &HookAnswer) -> Option<String> {
    let v: Value = serde_json::from_str(&a.stdout).ok()?;
    (v["decision"] == "deny").then(|| v["reason"].as_str().unwrap_or("").to_string())
}

fn write_plan() -> Value {
    json!({"file_path": "plan.md", "content": "mine now"})
}

#[test]
fn a_write_file_into_another_agents_territory_is_denied_with_a_remedy_gemini_has() {
    let g = gemini(POLICY, None);
    let a = g.tool("BeforeTool", "write_file", write_plan());
    assert_eq!(a.exit_code, 0, "{}", a.stderr);
    let reason = deny_reason(&a).expect("a deny");
    assert!(reason.contains("plan.md belongs to planner"), "{reason}");
    assert!(reason.contains("in your reply"), "{reason}");
    assert!(!reason.contains("subagent_type"), "{reason}");
    assert!(g.ledger().contains("Gemini CLI session"));
}

#[test]
fn a_session_served_loopwards_handoff_is_told_to_hand_the_change_to_the_owner_with_it() {
    let g = HostSession::new(Host::GeminiCli, SESSION, POLICY, None, true);
    let reason = deny_reason(&g.tool("BeforeTool", "write_file", write_plan())).expect("a deny");
    // Gemini CLI's own name for the tool the loop serves it, and the owner to pass.
    assert!(
        reason.contains(r#"hand it to planner (the mcp_loopward_handoff tool with to "planner")"#),
        "{reason}"
    );
    assert!(!reason.contains("in your reply"), "{reason}");
}

#[test]
fn a_one_shot_override_lets_exactly_one_write_file_through_and_it_pairs_with_its_after_tool() {
    let g = gemini(POLICY, None);
    g.grant("root", "plan.md", "fix the typo");
    let pre = g.tool("BeforeTool", "write_file", write_plan());
    assert_silent(&pre);
    g.write("plan.md", "mine now");
    let post = g.tool("AfterTool", "write_file", write_plan());
    // Paired by its arguments: an allowed write, not one that skipped the check.
    assert_silent(&post);
    assert!(
        !g.ledger().contains(r#""kind":"violation""#),
        "{}",
        g.ledger()
    );
    let again = g.tool("BeforeTool", "write_file", write_plan());
    assert!(deny_reason(&again).is_some(), "{}", again.stdout);
}

#[test]
fn a_gemini_shell_command_is_wrapped_by_merging_its_arguments() {
    let g = gemini(&host_policy_sandboxed(), Some("/opt/loopward"));
    let a = g.tool(
        "BeforeTool",
        "run_shell_command",
        json!({"command": "ls", "description": "list"}),
    );
    assert_eq!(a.exit_code, 0, "{}", a.stderr);
    let v: Value = serde_json::from_str(&a.stdout).unwrap();
    let cmd = v["hookSpecificOutput"]["tool_input"]["command"]
        .as_str()
        .unwrap();
    assert!(cmd.starts_with("'/opt/loopward' sandbox exec"), "{cmd}");
    assert_eq!(v["hookSpecificOutput"]["tool_input"]["description"], "list");
}

#[test]
fn a_forbidden_shell_write_is_put_back_and_told_to_the_model_after_the_call() {
    let g = gemini(POLICY, None);
    g.write("plan.md", "# Plan\n");
    let input = json!({"command": "echo mine > plan.md"});
    let pre = g.tool("BeforeTool", "run_shell_command", input.clone());
    assert_silent(&pre);
    g.write("plan.md", "mine\n");
    let post = g.tool("AfterTool", "run_shell_command", input);
    assert_eq!(post.exit_code, 0, "{}", post.stderr);
    let v: Value = serde_json::from_str(&post.stdout).unwrap();
    let told = v["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap();
    assert!(told.contains("plan.md"), "{told}");
    assert_eq!(g.read("plan.md").as_deref(), Some("# Plan\n"));
}

#[test]
fn a_tool_the_gemini_hook_does_not_know_is_denied() {
    let g = gemini(POLICY, None);
    let a = g.tool("BeforeTool", "mcp_files_write", json!({"path": "plan.md"}));
    let reason = deny_reason(&a).expect("a deny");
    assert!(reason.contains("write_file, replace"), "{reason}");
}

#[test]
fn a_claude_code_event_sent_to_the_gemini_hook_blocks_with_exit_2() {
    let g = gemini(POLICY, None);
    let a = handle(
        &json!({"session_id": SESSION, "cwd": g.root, "hook_event_name": "PreToolUse",
            "tool_name": "Write", "tool_use_id": "t", "tool_input": write_plan()})
        .to_string(),
        &g.ctx,
    );
    assert_eq!((a.exit_code, a.stdout.as_str()), (2, ""));
    assert!(a.stderr.contains("--host gemini"), "{}", a.stderr);
}
