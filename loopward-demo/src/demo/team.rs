//! The demo team's `loopward.toml`: one team and one set of rules for every chapter; a chapter
//! changes only what its lesson is about.

/// How many agents the team has.
pub(crate) const AGENTS: u32 = 6;

/// The team and the rules, with `{plan_mode}` for chapter 1's advisory runs.
const TEAM: &str = r##"[run]
first = "root"

[[agent]]
name = "root"
role = "You coordinate the team. Route work to the agent who owns it."
tools = ["read_file", "write_file", "edit_file", "list_dir", "handoff"]

[[agent]]
name = "planner"
role = "You write plan.md."
tools = ["read_file", "write_file", "handoff"]

[[agent]]
name = "builder"
role = "You implement the plan under src/."
tools = ["read_file", "write_file", "edit_file", "list_dir", "shell", "handoff"]

[[agent]]
name = "auditor"
role = "You review the builder's changes."
tools = ["read_file", "list_dir", "handoff"]

[[agent]]
name = "tester"
role = "You run the tests."
tools = ["read_file", "shell", "report_attempt", "handoff"]

[[agent]]
name = "scribe"
role = "You write the changelog and docs."
tools = ["read_file", "write_file", "handoff"]

[[territory]]
paths = ["plan.md", "plans/**"]
owner = "planner"
mode = "{plan_mode}"

[[territory]]
paths = ["src/**"]
owner = "builder"

[[territory]]
paths = ["tests/**"]
owner = "tester"

[[territory]]
paths = ["docs/**", "CHANGELOG.md"]
owner = "scribe"

[gates.sprawl]
threshold = 3
plan_path = "notes/plan.md"
marker = "# Plan"

[[gates.review]]
from = "builder"
via = "auditor"
when = ["src/**"]

[limits]
turns_per_run = 12

[class_jump]
strategies = ["patch", "rewrite"]
failures_per_strategy = 3
count_failed_tools = []   # chapter 7 counts the tester's reports; tests cover counted results
"##;

/// The team with every gate enforced, plus `extra` TOML.
pub(crate) fn config(extra: &str) -> String {
    with_plan_mode("enforce", extra)
}

/// The team with the plan territory in `mode`, plus `extra` TOML.
pub(crate) fn with_plan_mode(mode: &str, extra: &str) -> String {
    let mut s = TEAM.replace("{plan_mode}", mode);
    if !extra.is_empty() {
        s.push('\n');
        s.push_str(extra);
    }
    s
}

#[cfg(test)]
mod tests {
    #[test]
    fn agents_counts_the_team() {
        assert_eq!(
            super::TEAM.matches("[[agent]]").count(),
            super::AGENTS as usize
        );
    }
}
