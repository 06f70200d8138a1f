//! Whatever arrives on the hook's stdin, the answer is exit 0 with a well-formed reply, or exit 2
//! (blocking) with a reason — never a panic, never another status Claude Code would let through.

use crate::support::{assert_tells, Project};
use proptest::prelude::*;

const POLICY: &str = "[[territory]]\npaths = [\"plan.md\"]\nowner = \"planner\"\n";

fn json_value() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        any::<i64>().prop_map(serde_json::Value::from),
        ".{0,40}".prop_map(serde_json::Value::from),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::from),
            prop::collection::btree_map("[a-z_]{1,12}", inner, 0..4)
                .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn any_bytes_answer_exit_0_or_2(input in ".{0,300}") {
        let p = Project::new(POLICY);
        let a = p.send(&input);
        prop_assert!(a.exit_code == 0 || a.exit_code == 2);
        if a.exit_code == 2 {
            prop_assert!(a.stdout.is_empty() && a.stderr.contains("blocked"));
        }
    }

    #[test]
    fn any_field_of_a_write_event_replaced_never_lets_a_foreign_write_through(
        field in prop::sample::select(vec!["session_id", "cwd", "hook_event_name", "tool_name",
            "tool_use_id", "tool_input", "agent_type", "prompt", "tool_response"]),
        value in json_value(),
    ) {
        let p = Project::new(POLICY);
        let mut event: serde_json::Value =
            serde_json::from_str(&p.fixture("pre_write_plan_root.json")).unwrap();
        event[field] = value;
        let a = p.send(&event.to_string());
        prop_assert!(a.exit_code == 0 || a.exit_code == 2, "{a:?}");
        // The main agent's write to the planner's file is never allowed, whatever else changed
        // (unless the event is no longer a PreToolUse Write by the main agent for that file).
        let still_same_call = event["hook_event_name"] == "PreToolUse"
            && event["tool_name"] == "Write"
            && event["agent_type"].is_null()
            && event["tool_input"]["file_path"].as_str().is_some_and(|f| f.ends_with("/plan.md"));
        if still_same_call {
            prop_assert!(!a.stdout.contains(r#""permissionDecision":"allow""#), "{a:?}");
        }
    }
}

fn pre_tool(p: &Project, tool: &str) -> String {
    serde_json::json!({
        "session_id": "s-tools", "cwd": p.root, "hook_event_name": "PreToolUse",
        "tool_name": tool, "tool_use_id": "toolu_9", "tool_input": {"anything": 1},
    })
    .to_string()
}

/// The names the hook knows: judged, read, or known to change nothing it judges.
fn known(name: &str) -> bool {
    ["Write", "Edit", "MultiEdit", "NotebookEdit", "Bash"].contains(&name)
        || loopward_hooks::claude_code::ReadTool::from_name(name).is_some()
        || loopward_hooks::claude_code::QUIET_TOOLS.contains(&name)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// A tool name the hook does not know is denied, never answered with silence or `allow`
    /// (either of which lets Claude Code run it).
    #[test]
    fn an_unknown_tool_is_never_let_through(name in "(mcp__[a-z]{1,8}__)?[A-Za-z_]{1,16}") {
        prop_assume!(!known(&name) && !name.starts_with("mcp__loopward__"));
        let p = Project::new(POLICY);
        let a = p.send(&pre_tool(&p, &name));
        prop_assert_eq!(a.exit_code, 0, "{:?}", a);
        prop_assert!(a.stdout.contains(r#""permissionDecision":"deny""#), "{:?}", a);
    }
}

/// An MCP tool is denied with the remedy; listed in `[hooks] allow_tools`, the same call is let
/// through unjudged (no permission decision: the client's own rules still apply) and recorded
/// with the entry and the line of `[hooks]`.
#[test]
fn an_mcp_tool_is_denied_until_allow_tools_names_it_and_then_recorded_with_its_line() {
    let p = Project::new(POLICY);
    let a = p.send(&pre_tool(&p, "mcp__github__create_issue"));
    assert_tells(&a, r#""permissionDecision":"deny""#);
    assert_tells(&a, "made for Claude Code 2.1.332");
    assert!(
        a.stdout
            .contains(r#"[hooks] allow_tools = [\"mcp__github__*\"]"#),
        "{a:?}"
    );
    let text = format!("{POLICY}\n[hooks]\nallow_tools = [\"WebFetch\", \"mcp__github__*\"]\n");
    let cfg = loopward_runner::gates::PolicyConfig::from_toml_in("loopward.toml", &text).unwrap();
    let ctx = loopward_hooks::HookContext::builder(&cfg)
        .root(&p.root)
        .build()
        .unwrap();
    let a = loopward_hooks::handle(&pre_tool(&p, "mcp__github__create_issue"), &ctx);
    assert_eq!((a.exit_code, a.stdout.as_str()), (0, ""), "{a:?}");
    let ledger = std::fs::read_to_string(p.path("runs/claude-code-s-tools/events.jsonl")).unwrap();
    let allowed = ledger
        .lines()
        .find(|l| l.contains("allow_tools:mcp__github__*"))
        .unwrap_or_else(|| panic!("{ledger}"));
    assert!(allowed.contains(r#""decision":"allow""#), "{allowed}");
    assert!(
        allowed.contains(r#""source":"loopward.toml:5""#),
        "{allowed}"
    );
    // Another server's tool is still denied; a judged tool stays judged.
    let a = loopward_hooks::handle(&pre_tool(&p, "mcp__files__write"), &ctx);
    assert_tells(&a, r#""permissionDecision":"deny""#);
}

/// Another host's writing tool at the Claude Code hook (a Codex config running it) is denied
/// whatever `allow_tools` says, naming the install that fixes it.
#[test]
fn another_hosts_tool_is_denied_even_when_allow_tools_takes_everything() {
    let p = Project::new(&format!("{POLICY}\n[hooks]\nallow_tools = [\"*\"]\n"));
    let a = p.send(&pre_tool(&p, "apply_patch"));
    assert_tells(&a, r#""permissionDecision":"deny""#);
    assert_tells(&a, "loopward hook install --host codex");
    // Everything else is then the person's to accept.
    let a = p.send(&pre_tool(&p, "CronCreate"));
    assert_eq!(a.stdout, "", "{a:?}");
}
