//! The sprawl gate in a Claude Code session: a third unit of work with no plan is refused once
//! per turn; writing the plan really clears it; only a person's prompt starts a new turn.

use crate::support::{assert_tells, fixture_text, Project};

const POLICY: &str = r##"
[gates.sprawl]
threshold = 3
plan_path = "plan.md"
marker = "# Plan"
"##;

#[test]
fn sprawl_sequence_across_two_user_prompts() {
    let p = Project::new(POLICY);
    let mut transcript = Vec::new();
    for line in fixture_text("sprawl_sequence.jsonl").lines() {
        let event = line.replace("$ROOT", p.root.to_str().unwrap());
        let v: serde_json::Value = serde_json::from_str(&event).unwrap();
        let what = format!(
            "{} {} {}",
            v["hook_event_name"].as_str().unwrap(),
            v["tool_name"].as_str().unwrap_or(""),
            v["tool_input"]["file_path"]
                .as_str()
                .map(|f| f.replace(p.root.to_str().unwrap(), "$ROOT"))
                .unwrap_or_default()
        );
        let a = p.send(&event);
        assert_eq!(a.exit_code, 0, "{what}: {}", a.stderr);
        let answer = if a.stdout.is_empty() {
            "(silent)".to_string()
        } else {
            a.stdout.trim_end().to_string()
        };
        transcript.push(format!("{}\n  -> {answer}", what.trim_end()));
    }
    insta::assert_snapshot!(transcript.join("\n"));
    let ledger = p.ledger("5d9e1f20-7c3b-4a8e-b6d2-3f4e5a6b7c8d");
    let sprawl: Vec<&String> = ledger
        .iter()
        .filter(|l| l.contains(" sprawl ") || l.contains("human_message"))
        .collect();
    insta::assert_snapshot!(sprawl
        .iter()
        .map(|s| s.as_str())
        .collect::<Vec<_>>()
        .join("\n"));
}

fn tool_event(p: &Project, event: &str, tool: &str, id: &str, input: serde_json::Value) -> String {
    serde_json::json!({
        "session_id": "rename-session", "transcript_path": "/t.jsonl", "cwd": p.root,
        "hook_event_name": event, "tool_name": tool, "tool_use_id": id, "tool_input": input,
        "tool_response": {},
    })
    .to_string()
}

#[test]
fn one_replacement_repeated_across_files_is_one_unit_of_work() {
    let p = Project::new(POLICY);
    p.send(
        &serde_json::json!({"session_id": "rename-session", "cwd": p.root,
        "hook_event_name": "UserPromptSubmit", "prompt": "rename Greeter to Welcomer"})
        .to_string(),
    );
    for (i, f) in ["src/a.rs", "src/b.rs", "src/c.rs", "src/d.rs"]
        .iter()
        .enumerate()
    {
        p.write(f, "struct Greeter;");
        let input = serde_json::json!({"file_path": p.path(f), "old_string": "Greeter", "new_string": "Welcomer"});
        let pre = p.send(&tool_event(
            &p,
            "PreToolUse",
            "Edit",
            &format!("e{i}"),
            input.clone(),
        ));
        assert!(
            pre.stdout.contains(r#""permissionDecision":"allow""#),
            "{f}: {}",
            pre.stdout
        );
        p.send(&tool_event(
            &p,
            "PostToolUse",
            "Edit",
            &format!("e{i}"),
            input,
        ));
    }
    // A different edit to a fifth file starts the second unit, still under the threshold.
    let input =
        serde_json::json!({"file_path": p.path("src/e.rs"), "old_string": "a", "new_string": "b"});
    let pre = p.send(&tool_event(&p, "PreToolUse", "Edit", "e9", input));
    assert_tells(&pre, r#""permissionDecision":"allow""#);
}

#[test]
fn everything_one_bash_command_changes_is_one_unit_of_work() {
    // The command is wrapped in the sandbox at PreToolUse; what it changed is counted after.
    let p = Project::with_sandbox(POLICY, Some("/usr/local/bin/loopward"));
    p.send(
        &serde_json::json!({"session_id": "rename-session", "cwd": p.root,
        "hook_event_name": "UserPromptSubmit", "prompt": "format everything"})
        .to_string(),
    );
    let cmd = serde_json::json!({"command": "touch x.md y.md z.md"});
    p.send(&tool_event(&p, "PreToolUse", "Bash", "b1", cmd.clone()));
    for f in ["x.md", "y.md", "z.md"] {
        p.write(f, "");
    }
    assert_eq!(
        p.send(&tool_event(&p, "PostToolUse", "Bash", "b1", cmd))
            .stdout,
        ""
    );
    for (i, f) in ["one.md", "two.md"].iter().enumerate() {
        let input = serde_json::json!({"file_path": p.path(f), "content": "x"});
        let pre = p.send(&tool_event(
            &p,
            "PreToolUse",
            "Write",
            &format!("w{i}"),
            input.clone(),
        ));
        let want = if i == 0 { "allow" } else { "deny" };
        assert!(
            pre.stdout
                .contains(&format!(r#""permissionDecision":"{want}""#)),
            "{f}: {}",
            pre.stdout
        );
        p.send(&tool_event(
            &p,
            "PostToolUse",
            "Write",
            &format!("w{i}"),
            input,
        ));
    }
}
