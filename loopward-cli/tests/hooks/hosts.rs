//! `loopward hook claude-code|codex|gemini` and `hook install|doctor --host …` as the hosts run them: one
//! process per event, the event on stdin; the hook written where each host reads it.

use super::{text, CONFIG};
use serde_json::{json, Value};
use std::path::Path;
use std::process::{Command, Output};

fn project() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap().join("project");
    std::fs::create_dir(&root).unwrap();
    std::fs::write(root.join("loopward.toml"), CONFIG).unwrap();
    (dir, root)
}

fn loopward(root: &Path, args: &[&str], stdin: Option<&str>) -> Output {
    loopward_env(root, args, stdin, &[])
}

/// [`loopward`], with `env` set too.
fn loopward_env(root: &Path, args: &[&str], stdin: Option<&str>, env: &[(&str, &str)]) -> Output {
    crate::support::with_stdin(
        Command::new(env!("CARGO_BIN_EXE_loopward"))
            .args(args)
            .envs(env.iter().copied())
            .current_dir(root)
            .env("PATH", "/usr/bin:/bin")
            .env("XDG_STATE_HOME", root.with_file_name("state")),
        stdin.unwrap_or("").as_bytes(),
    )
}

#[test]
fn install_writes_each_hosts_own_settings_with_an_absolute_command_and_doctor_says_what_it_cannot_check(
) {
    for (host, file, pre, unit) in [
        ("codex", ".codex/hooks.json", "PreToolUse", 1),
        ("gemini", ".gemini/settings.json", "BeforeTool", 1000),
    ] {
        let (_d, root) = project();
        let install = loopward(&root, &["hook", "install", "--host", host], None);
        assert_eq!(install.status.code(), Some(0), "{}", text(&install));
        let settings: Value =
            serde_json::from_str(&std::fs::read_to_string(root.join(file)).unwrap()).unwrap();
        let entry = &settings["hooks"][pre][0];
        let cmd = entry["hooks"][0]["command"].as_str().unwrap();
        assert!(
            cmd.starts_with(&format!(
                "'{}' hook {host} --config '{}'",
                env!("CARGO_BIN_EXE_loopward-hook"),
                root.join("loopward.toml").display()
            )),
            "{cmd}"
        );
        assert_eq!(entry["hooks"][0]["timeout"], 60 * unit, "{settings}");
        let doctor = loopward(&root, &["hook", "doctor", "--host", host], None);
        assert_eq!(doctor.status.code(), Some(0), "{}", text(&doctor));
        crate::support::assert_prints(&doctor, "would not fail open");
        crate::support::assert_prints(&doctor, "not checked:");
        // The other host's doctor finds no hook of its own here.
        let other = if host == "codex" { "gemini" } else { "codex" };
        let doctor = loopward(&root, &["hook", "doctor", "--host", other], None);
        assert_eq!(doctor.status.code(), Some(1), "{}", text(&doctor));
    }
}

/// A bare `loopward` that is not on the host's PATH exits 127, which Codex reads as "go ahead".
#[test]
fn doctor_catches_a_codex_hook_whose_binary_is_not_on_the_path() {
    let (_d, root) = project();
    std::fs::create_dir(root.join(".codex")).unwrap();
    let bare = json!({"hooks": {
        "PreToolUse": [{"matcher": "Bash|apply_patch", "hooks": [{"type": "command", "command": "loopward hook codex --config loopward.toml"}]}],
        "PostToolUse": [{"matcher": "Bash|apply_patch", "hooks": [{"type": "command", "command": "loopward hook codex --config loopward.toml"}]}],
        "UserPromptSubmit": [{"hooks": [{"type": "command", "command": "loopward hook codex --config loopward.toml"}]}],
    }});
    std::fs::write(root.join(".codex/hooks.json"), bare.to_string()).unwrap();
    let doctor = loopward(&root, &["hook", "doctor", "--host", "codex"], None);
    assert_eq!(doctor.status.code(), Some(1), "{}", text(&doctor));
    crate::support::assert_prints(&doctor, "exits 127");
    crate::support::assert_prints(&doctor, "loopward hook install --host codex");
}

#[test]
fn a_settings_file_that_is_not_the_hosts_json_is_refused_and_left_alone() {
    let (_d, root) = project();
    std::fs::create_dir(root.join(".gemini")).unwrap();
    std::fs::write(root.join(".gemini/settings.json"), "[1, 2]").unwrap();
    let install = loopward(&root, &["hook", "install", "--host", "gemini"], None);
    assert_eq!(install.status.code(), Some(1), "{}", text(&install));
    crate::support::assert_prints(&install, "is not a JSON object");
    crate::support::assert_file(&root, ".gemini/settings.json", "[1, 2]");
}

#[test]
fn the_codex_hook_denies_a_foreign_patch_and_lets_the_owner_through() {
    let (_d, root) = project();
    let event = |agent: Option<&str>| {
        let mut e = json!({
            "session_id": "cx-1", "transcript_path": null, "cwd": root,
            "hook_event_name": "PreToolUse", "model": "m", "permission_mode": "default",
            "turn_id": "t", "tool_name": "apply_patch", "tool_use_id": "call_1",
            "tool_input": {"command": "*** Begin Patch\n*** Add File: plan.md\n+# Plan\n*** End Patch\n"},
        });
        if let Some(a) = agent {
            e["agent_type"] = a.into();
        }
        e.to_string()
    };
    let denied = loopward(&root, &["hook", "codex"], Some(&event(None)));
    assert_eq!(denied.status.code(), Some(0), "{}", text(&denied));
    let v: Value = serde_json::from_slice(&denied.stdout).unwrap();
    assert_eq!(v["hookSpecificOutput"]["permissionDecision"], "deny");
    let reason = |v: &Value| v["hookSpecificOutput"]["permissionDecisionReason"].to_string();
    assert!(reason(&v).contains("in your reply"), "{v}");
    // In a loop's session served loopward's handoff (the loop says so in its environment),
    // the refusal names that tool instead.
    let served = [("LOOPWARD_MCP_TOOLS", "handoff,report_attempt")];
    let o = loopward_env(&root, &["hook", "codex"], Some(&event(None)), &served);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(reason(&v).contains("mcp__loopward__handoff"), "{v}");
    assert!(!reason(&v).contains("in your reply"), "{v}");
    let allowed = loopward(&root, &["hook", "codex"], Some(&event(Some("planner"))));
    assert_allowed_silently(&allowed);
}

#[test]
fn the_gemini_hook_blocks_an_event_of_another_host_with_exit_2() {
    let (_d, root) = project();
    let claude = json!({"session_id": "g-1", "cwd": root, "hook_event_name": "PreToolUse",
        "tool_name": "Write", "tool_use_id": "t", "tool_input": {"file_path": "plan.md", "content": "x"}});
    let o = loopward(&root, &["hook", "gemini"], Some(&claude.to_string()));
    assert_eq!((o.status.code(), o.stdout.as_slice()), (Some(2), &b""[..]));
    crate::support::assert_prints(&o, "--host gemini");
}

fn claude_pre_tool(root: &Path, tool: &str) -> String {
    json!({"session_id": "cc-tools", "cwd": root, "hook_event_name": "PreToolUse",
        "tool_name": tool, "tool_use_id": format!("toolu_{tool}"), "tool_input": {"x": 1}})
    .to_string()
}

/// The hook let the call through as a host expects an allow: exit status 0, nothing on stdout.
#[track_caller]
fn assert_allowed_silently(o: &Output) {
    assert_eq!(
        (o.status.code(), o.stdout.as_slice()),
        (Some(0), &b""[..]),
        "{}",
        text(o)
    );
}

fn decision(o: &Output) -> Option<String> {
    let v: Value = serde_json::from_slice(&o.stdout).ok()?;
    v["hookSpecificOutput"]["permissionDecision"]
        .as_str()
        .map(str::to_string)
}

/// Claude Code's hook sees every tool: a tool it does not know is denied with the remedy (exit
/// 0, the JSON deny), an MCP server's tool too until `[hooks] allow_tools` names it, and the
/// client's own tools that change nothing run; each decision is in the session's ledger.
#[test]
fn the_claude_code_hook_denies_unknown_tools_until_allow_tools_names_them() {
    let (_d, root) = project();
    let hook = |tool: &str| {
        loopward(
            &root,
            &["hook", "claude-code"],
            Some(&claude_pre_tool(&root, tool)),
        )
    };
    let unknown = hook("EnterWorktree");
    assert_eq!(unknown.status.code(), Some(0), "{}", text(&unknown));
    assert_eq!(
        decision(&unknown).as_deref(),
        Some("deny"),
        "{}",
        text(&unknown)
    );
    for says in [
        "EnterWorktree is neither",
        "made for Claude Code 2.1.332",
        r#"[hooks] allow_tools = [\"EnterWorktree\"]"#,
    ] {
        assert!(text(&unknown).contains(says), "{says}: {}", text(&unknown));
    }
    let mcp = hook("mcp__github__create_issue");
    assert_eq!(decision(&mcp).as_deref(), Some("deny"), "{}", text(&mcp));
    assert!(
        text(&mcp).contains(r#"allow_tools = [\"mcp__github__*\"]"#),
        "{}",
        text(&mcp)
    );
    let known = hook("TodoWrite");
    assert_allowed_silently(&known);

    let config = format!("{CONFIG}\n[hooks]\nallow_tools = [\"mcp__github__*\"]\n");
    let line = config.lines().position(|l| l == "[hooks]").unwrap() + 1;
    std::fs::write(root.join("loopward.toml"), &config).unwrap();
    let mcp = hook("mcp__github__create_issue");
    assert_allowed_silently(&mcp);
    assert_eq!(decision(&hook("mcp__slack__post")).as_deref(), Some("deny"));

    let ledger =
        std::fs::read_to_string(root.join("runs/claude-code-cc-tools/events.jsonl")).unwrap();
    let decided = |tool: &str, decision: &str| {
        ledger.lines().any(|l| {
            l.contains(r#""kind":"gate_decision""#)
                && l.contains(&format!(r#""action":"tool:{tool}""#))
                && l.contains(&format!(r#"{{"decision":"{decision}""#))
        })
    };
    assert!(decided("EnterWorktree", "deny"), "{ledger}");
    assert!(decided("mcp__github__create_issue", "deny"), "{ledger}");
    assert!(decided("mcp__github__create_issue", "allow"), "{ledger}");
    assert!(
        ledger.contains(&format!(r#""gate":"allow_tools:mcp__github__*","gate_kind":"policy","mode":"enforce","source":"loopward.toml:{line}""#)),
        "{ledger}"
    );
    assert!(ledger.contains(r#""tool":"TodoWrite""#), "{ledger}");

    // A regex where a glob goes does not load: every call blocks, naming the entry.
    std::fs::write(
        root.join("loopward.toml"),
        format!("{CONFIG}\n[hooks]\nallow_tools = [\"mcp__github__.*\"]\n"),
    )
    .unwrap();
    let bad = hook("TodoWrite");
    assert_eq!(
        (bad.status.code(), bad.stdout.as_slice()),
        (Some(2), &b""[..])
    );
    assert!(
        text(&bad).contains("hooks.allow_tools[0]") && text(&bad).contains("\"mcp__github__*\""),
        "{}",
        text(&bad)
    );
}

/// `hook install` hooks every tool at PreToolUse; `hook doctor` says what runs unjudged, and
/// that a matcher leaving tools out fails open for them.
#[test]
fn claude_code_install_hooks_every_tool_and_doctor_names_a_matcher_that_leaves_tools_out() {
    let (_d, root) = project();
    std::fs::write(
        root.join("loopward.toml"),
        format!("{CONFIG}\n[hooks]\nallow_tools = [\"WebFetch\"]\n"),
    )
    .unwrap();
    let install = loopward(&root, &["hook", "install"], None);
    assert_eq!(install.status.code(), Some(0), "{}", text(&install));
    let path = root.join(".claude/settings.json");
    let mut settings: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(settings["hooks"]["PreToolUse"][0]["matcher"], "*");
    let doctor = loopward(&root, &["hook", "doctor"], None);
    assert_eq!(doctor.status.code(), Some(0), "{}", text(&doctor));
    crate::support::assert_prints(&doctor, "allow_tools lets WebFetch run unjudged");
    settings["hooks"]["PreToolUse"][0]["matcher"] =
        "Write|Edit|Bash|Read|Grep|Glob|LS|NotebookRead|NotebookEdit|MultiEdit".into();
    std::fs::write(&path, settings.to_string()).unwrap();
    let doctor = loopward(&root, &["hook", "doctor"], None);
    assert_eq!(doctor.status.code(), Some(1), "{}", text(&doctor));
    crate::support::assert_says_all(
        &text(&doctor),
        &[
            "would fail open: PreToolUse matches only",
            "MCP tools",
            "fix: `loopward hook install --host claude-code`",
        ],
    );
}
