//! The Codex adapter: Codex's hook events (shapes from the JSON schemas in the Codex 0.171.0
//! binary) judged by the same engine, answered the way Codex takes answers.

use crate::support::{
    assert_silent, assert_tells, host_policy_sandboxed, HostSession, HOST_POLICY as POLICY, NOW,
};
use loopward_hooks::{handle, HookAnswer, HookContext};
use loopward_runner::gates::{Host, PolicyConfig};
use loopward_runner::ManualClock;
use serde_json::{json, Value};
use std::sync::Arc;

const SESSION: &str = "019a1b2c-3d4e-7f00-8a9b-0c1d2e3f4a5b";

/// A scratch project whose hook answers as Codex, in the session [`SESSION`].
fn codex(policy: &str, exe: Option<&str>) -> HostSession {
    HostSession::new(Host::Codex, SESSION, policy, exe, false)
}

/// Codex's tool events, as its hook receives them.
trait Codex {
    /// A Codex tool event, every field its schema requires.
    fn tool(&self, event: &str, id: &str, tool: &str, input: Value) -> HookAnswer;

    fn patch(&self, event: &str, id: &str, patch: &str) -> HookAnswer {
        self.tool(event, id, "apply_patch", json!({ "command": patch }))
    }

    fn bash(&self, event: &str, id: &str, command: &str) -> HookAnswer {
        self.tool(event, id, "Bash", json!({ "command": command }))
    }
}

impl Codex for HostSession {
    fn tool(&self, event: &str, id: &str, tool: &str, input: Value) -> HookAnswer {
        let mut e = json!({
            "session_id": SESSION, "transcript_path": null, "cwd": self.root,
            "hook_event_name": event, "model": "gpt-test", "permission_mode": "default",
            "turn_id": "t1", "tool_name": tool, "tool_use_id": id, "tool_input": input,
        });
        if event == "PostToolUse" {
            e["tool_response"] = json!({"output": "ok"});
        }
        handle(&e.to_string(), &self.ctx)
    }
}

fn update(path: &str) -> String {
    format!("*** Begin Patch\n*** Update File: {path}\n@@\n-old\n+new\n*** End Patch\n")
}

fn decision(a: &HookAnswer) -> Option<String> {
    let v: Value = serde_json::from_str(&a.stdout).ok()?;
    v["hookSpecificOutput"]["permissionDecision"]
        .as_str()
        .map(str::to_string)
}

#[test]
fn a_patch_into_another_agents_territory_is_denied_with_a_remedy_codex_has() {
    let c = codex(POLICY, None);
    let a = c.patch("PreToolUse", "call_1", &update("plan.md"));
    assert_eq!(a.exit_code, 0, "{}", a.stderr);
    assert_eq!(decision(&a).as_deref(), Some("deny"), "{}", a.stdout);
    assert_tells(&a, "plan.md belongs to planner");
    // No subagent tool to name on Codex: the person passes it on.
    assert_tells(&a, "in your reply");
    assert!(!a.stdout.contains("subagent_type"), "{}", a.stdout);
    assert!(c.ledger().contains(r#""run_started""#));
    assert!(c.ledger().contains("Codex session"));
}

#[test]
fn a_session_served_loopwards_handoff_is_told_to_hand_the_change_to_the_owner_with_it() {
    let c = HostSession::new(Host::Codex, SESSION, POLICY, None, true);
    let a = c.patch("PreToolUse", "call_1", &update("plan.md"));
    assert_eq!(decision(&a).as_deref(), Some("deny"), "{}", a.stdout);
    // Codex's own name for the tool the loop serves it, and the owner to pass.
    assert!(
        a.stdout.contains(
            r#"hand it to planner (the mcp__loopward__handoff tool with to \"planner\")"#
        ),
        "{}",
        a.stdout
    );
    assert!(!a.stdout.contains("in your reply"), "{}", a.stdout);
}

#[test]
fn an_allowed_patch_gets_no_answer_as_codex_refuses_a_bare_allow_and_its_effects_are_counted() {
    let c = codex(POLICY, None);
    let patch = "*** Begin Patch\n*** Add File: src/a.rs\n+fn a() {}\n*** End Patch\n";
    let pre = c.patch("PreToolUse", "call_1", patch);
    assert_silent(&pre);
    std::fs::create_dir_all(c.root.join("src")).unwrap();
    c.write("src/a.rs", "fn a() {}\n");
    let post = c.patch("PostToolUse", "call_1", patch);
    assert_silent(&post);
    let ledger = c.ledger();
    assert!(ledger.contains(r#""tool":"apply_patch""#), "{ledger}");
    assert!(ledger.contains(r#""path":"src/a.rs""#), "{ledger}");
}

#[test]
fn a_one_shot_override_lets_exactly_one_patch_through() {
    let c = codex(POLICY, None);
    c.grant("root", "plan.md", "fix the typo");
    let first = c.patch("PreToolUse", "call_1", &update("plan.md"));
    assert_silent(&first);
    assert!(c.ledger().contains("override_consumed"));
    let again = c.patch("PreToolUse", "call_2", &update("plan.md"));
    assert_eq!(
        decision(&again).as_deref(),
        Some("deny"),
        "{}",
        again.stdout
    );
}

#[test]
fn a_moved_file_is_judged_at_both_ends() {
    let c = codex(POLICY, None);
    let patch = "*** Begin Patch\n*** Update File: notes.md\n*** Move to: plan.md\n@@\n-a\n+b\n*** End Patch\n";
    let a = c.patch("PreToolUse", "call_1", patch);
    assert_eq!(decision(&a).as_deref(), Some("deny"), "{}", a.stdout);
    assert_tells(&a, "plan.md belongs to planner");
}

#[test]
fn a_patch_body_that_is_not_a_patch_or_leaves_the_project_is_denied() {
    let c = codex(POLICY, None);
    let a = c.patch("PreToolUse", "call_1", "echo not a patch");
    assert_eq!(decision(&a).as_deref(), Some("deny"), "{}", a.stdout);
    assert_tells(&a, "Begin Patch");
    let b = c.patch("PreToolUse", "call_2", &update("../outside.txt"));
    assert_eq!(decision(&b).as_deref(), Some("deny"), "{}", b.stdout);
}

#[test]
fn a_tool_the_codex_hook_does_not_know_is_denied_never_let_through() {
    let c = codex(POLICY, None);
    let a = c.tool(
        "PreToolUse",
        "call_1",
        "mcp__files__write",
        json!({"path": "plan.md"}),
    );
    assert_eq!(decision(&a).as_deref(), Some("deny"), "{}", a.stdout);
    assert!(
        a.stdout
            .contains("mcp__files__write is not a tool loopward's Codex hook knows"),
        "{}",
        a.stdout
    );
    assert_tells(&a, "apply_patch");
}

#[test]
fn a_codex_shell_command_is_wrapped_with_the_allow_codex_requires_for_a_rewrite() {
    let c = codex(&host_policy_sandboxed(), Some("/opt/loopward"));
    let a = c.bash("PreToolUse", "call_1", "echo hi > notes.txt");
    assert_eq!(a.exit_code, 0, "{}", a.stderr);
    let v: Value = serde_json::from_str(&a.stdout).unwrap();
    let out = &v["hookSpecificOutput"];
    assert_eq!(out["permissionDecision"], "allow", "{out}");
    let cmd = out["updatedInput"]["command"].as_str().unwrap();
    assert!(
        cmd.starts_with("'/opt/loopward' sandbox exec --config "),
        "{cmd}"
    );
    assert!(cmd.ends_with("-- bash -c 'echo hi > notes.txt'"), "{cmd}");
}

#[test]
fn a_forbidden_shell_write_is_put_back_and_reported_to_codex() {
    let c = codex(POLICY, None);
    c.write("plan.md", "# Plan\n");
    let pre = c.bash("PreToolUse", "call_1", "echo mine > plan.md");
    assert_silent(&pre);
    c.write("plan.md", "mine\n");
    let post = c.bash("PostToolUse", "call_1", "echo mine > plan.md");
    let v: Value = serde_json::from_str(&post.stdout).unwrap();
    assert_eq!(v["decision"], "block", "{}", post.stdout);
    assert!(
        v["reason"].as_str().unwrap().contains("plan.md"),
        "{}",
        post.stdout
    );
    assert_eq!(c.read("plan.md").as_deref(), Some("# Plan\n"));
}

#[test]
fn input_that_is_not_a_codex_hook_event_blocks_with_exit_2() {
    let c = codex(POLICY, None);
    let a = handle(r#"{"hook_event_name":"PreToolUse"}"#, &c.ctx);
    assert_eq!((a.exit_code, a.stdout.as_str()), (2, ""));
    let b = handle(
        &json!({"session_id": SESSION, "cwd": c.root, "hook_event_name": "PreToolUse",
            "tool_name": "apply_patch", "tool_use_id": "c", "tool_input": {"patch": 1}})
        .to_string(),
        &c.ctx,
    );
    assert_eq!(b.exit_code, 2, "{}", b.stdout);
    assert!(b.stderr.contains("tool_input.command"), "{}", b.stderr);
}

#[test]
fn a_gemini_event_sent_to_the_codex_hook_blocks_and_a_gemini_tool_is_denied() {
    let c = codex(POLICY, None);
    let a = handle(
        &json!({"session_id": SESSION, "cwd": c.root, "hook_event_name": "BeforeTool",
            "tool_name": "write_file", "tool_input": {"file_path": "plan.md", "content": "x"}})
        .to_string(),
        &c.ctx,
    );
    assert_eq!((a.exit_code, a.stdout.as_str()), (2, ""));
    assert!(a.stderr.contains("Gemini CLI event"), "{}", a.stderr);
    let b = c.tool(
        "PreToolUse",
        "call_1",
        "write_file",
        json!({"file_path": "plan.md", "content": "x"}),
    );
    assert_eq!(decision(&b).as_deref(), Some("deny"), "{}", b.stdout);
}

/// `loopward hook claude-code` installed in another host's settings: that host's writing tools
/// are denied, not waved through as tools Claude Code does not judge.
#[test]
fn another_hosts_writing_tool_reaching_the_claude_code_hook_is_denied() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let cfg = PolicyConfig::from_toml(POLICY).unwrap();
    let ctx = HookContext::builder(&cfg).root(&root).build().unwrap();
    for (tool, input, install) in [
        (
            "apply_patch",
            json!({"command": update("plan.md")}),
            "codex",
        ),
        (
            "write_file",
            json!({"file_path": "plan.md", "content": "x"}),
            "gemini",
        ),
    ] {
        let e = json!({"session_id": "s", "cwd": root, "hook_event_name": "PreToolUse",
            "tool_name": tool, "tool_use_id": "t", "tool_input": input});
        let a = handle(&e.to_string(), &ctx);
        assert_eq!(
            decision(&a).as_deref(),
            Some("deny"),
            "{tool}: {}",
            a.stdout
        );
        assert!(
            a.stdout
                .contains(&format!("loopward hook install --host {install}")),
            "{}",
            a.stdout
        );
    }
    let gemini = json!({"session_id": "s", "cwd": root, "hook_event_name": "AfterTool",
        "tool_name": "write_file", "tool_input": {}});
    assert_eq!(handle(&gemini.to_string(), &ctx).exit_code, 2);
}

/// Every decision is made under a recorded policy version: written when the session starts and
/// again when the config changes between calls, never twice for the same one.
#[test]
fn the_policy_version_is_recorded_at_the_start_and_whenever_the_config_changes() {
    let mut c = codex(POLICY, None);
    let versions = |c: &HostSession| -> Vec<String> {
        c.ledger()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|r| r["kind"] == "layer_decision" && r["data"]["layer"] == "policy")
            .map(|r| r["data"]["detail"]["version"].as_str().unwrap().to_string())
            .collect()
    };
    c.patch("PreToolUse", "call_1", &update("notes.md"));
    c.patch("PreToolUse", "call_2", &update("notes.md"));
    let first = PolicyConfig::from_toml(POLICY).unwrap().version();
    assert_eq!(versions(&c), vec![first.clone()]);
    // A person changes the config: the next call records the new version before deciding.
    let changed = POLICY.replace("plan.md", "plans/**");
    let cfg = PolicyConfig::from_toml(&changed).unwrap();
    c.project.ctx = HookContext::builder(&cfg)
        .root(&c.root)
        .host(Host::Codex)
        .clock(Arc::new(ManualClock::new(NOW)))
        .build()
        .unwrap();
    c.patch("PreToolUse", "call_3", &update("notes.md"));
    assert_eq!(versions(&c), vec![first, cfg.version()]);
}
