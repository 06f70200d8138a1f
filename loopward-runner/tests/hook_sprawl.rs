//! The sprawl gate in a Claude Code session: a third unit of work with no plan is refused once
//! per turn; writing the plan really clears it; only a person's prompt starts a new turn.

mod hook_support;

use hook_support::{fixture_text, Project};

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
