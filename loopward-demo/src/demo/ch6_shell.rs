//! Chapter 6: writes through `shell` are judged by what changed on disk.

use super::{agent, Act, Stage};
use anyhow::Result;
use loopward_runner::model::fake::Script;
use loopward_term::render::Tone;
use serde_json::json;
use std::io::Write;

pub(super) const TITLE: &str = "Shell side channel";
pub(super) const LESSON: &str = "\
Refused by the file tools, the builder rewrites plan.md through `shell`. The command runs in a
kernel sandbox (Landlock) that lets it write only what the builder may write: the write fails
with \"Permission denied\", and the watch behind the sandbox finds nothing to revert.";

/// The chapter's run, and the task the person gives it.
const RUN: &str = "ch6-shell";
const TASK: &str = "Speed things up.";

const PLAN: &str = "# Plan\n1. add greet()\n";

fn script() -> Script {
    let (b, p) = (agent("builder"), agent("planner"));
    let mut s = Script::default();
    s.call(
        &b,
        "shell",
        json!({"command": "printf '# Plan\\n1. skip the tests\\n' > plan.md"}),
    )
    .call(
        &b,
        "handoff",
        json!({"to": "planner", "message": "plan.md should drop step 2; please decide."}),
    )
    .say(&p, "Step 2 stays: tests are part of the plan.");
    s
}

pub(super) async fn play<W: Write + Send + 'static>(stage: &Stage<W>) -> Result<()> {
    let ws = stage.workspace("ch6-shell");
    std::fs::create_dir_all(&ws)?;
    std::fs::write(ws.join("plan.md"), PLAN)?;
    let played = stage.act(Act::new(RUN, TASK, "builder", script())).await?;
    let intact = std::fs::read_to_string(played.workspace.join("plan.md"))? == PLAN;
    stage.say(
        Tone::Ok,
        format!(
            "  the kernel refused the write; {} violations to revert; plan.md {}; {} unauthorised writes stand",
            played.figures.violations,
            if intact {
                "is as the planner left it"
            } else {
                "was changed"
            },
            played.figures.unauthorised_writes.len()
        ),
    );
    Ok(())
}
