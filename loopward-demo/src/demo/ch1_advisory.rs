//! Chapter 1: an advisory rule is just more context; an enforced one holds.

use super::{agent, team, Act, Stage};
use anyhow::Result;
use loopward_runner::model::fake::Script;
use loopward_term::render::Tone;
use serde_json::json;
use std::io::Write;

pub(super) const TITLE: &str = "Advisory vs enforced";
pub(super) const LESSON: &str = "\
plan.md belongs to the planner. First the rule only warns (advisory), three times; then it is
enforced. Root is scripted to write the plan itself, as agents did when a hook only warned.";

const TASK: &str = "Plan the greeting feature.";
const PLAN: &str = "# Plan\n1. add greet()\n2. test it\n";

fn advisory_script() -> Script {
    let root = agent("root");
    let mut s = Script::default();
    s.call(
        &root,
        "write_file",
        json!({"path": "plan.md", "content": PLAN}),
    )
    .say(&root, "I wrote plan.md myself; it was quicker.");
    s
}

fn enforced_script() -> Script {
    let (root, planner) = (agent("root"), agent("planner"));
    let mut s = Script::default();
    s.call(
        &root,
        "write_file",
        json!({"path": "plan.md", "content": PLAN}),
    )
    .call(
        &root,
        "edit_file",
        json!({"path": "plan.md", "old": "# Plan", "new": "# Plan (root)"}),
    )
    .call(
        &root,
        "handoff",
        json!({"to": "planner", "message": "Please write plan.md for the greeting feature."}),
    )
    .call(
        &planner,
        "write_file",
        json!({"path": "plan.md", "content": PLAN}),
    )
    .say(&planner, "plan.md is written.");
    s
}

pub(super) async fn play<W: Write + Send + 'static>(stage: &Stage<W>) -> Result<()> {
    let mut ignored = 0;
    let mut runs = 0;
    let mut went_ahead = 0;
    for i in 1..=3 {
        let run = format!("ch1-advisory-{i}");
        let played = stage
            .act(
                Act::new(&run, TASK, "root", advisory_script())
                    .with_config(team::with_plan_mode("advisory", "")),
            )
            .await?;
        runs += 1;
        let f = &played.figures;
        if f.advisory.ignored > 0 {
            ignored += 1;
        }
        went_ahead += f.advisory.ignored;
    }
    stage.say(
        Tone::Warn,
        format!(
            "  advisory: root wrote plan.md itself in {ignored} runs out of {runs} ({went_ahead} warned writes went ahead)"
        ),
    );
    stage.blank();
    let played = stage
        .act(Act::new("ch1-enforced", TASK, "root", enforced_script()))
        .await?;
    let f = &played.figures;
    let denied = f.gates.values().map(|g| g.denied).sum::<u64>();
    let routed = f
        .handoffs
        .iter()
        .any(|h| h.from.as_str() == "root" && h.to.as_str() == "planner");
    stage.say(
        Tone::Ok,
        format!(
            "  enforced: {denied} refusals, root {} the planner; {} unauthorised writes",
            if routed {
                "routed the work to"
            } else {
                "did not route to"
            },
            f.unauthorised_writes.len()
        ),
    );
    Ok(())
}
