//! Whatever arrives on the hook's stdin, the answer is exit 0 with a well-formed reply, or exit 2
//! (blocking) with a reason — never a panic, never another status Claude Code would let through.

mod hook_support;

use hook_support::Project;
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
