//! Chapter 2: deny, deny, then a person's one-shot override — exactly one write goes through.

use super::{agent, Act, Stage};
use anyhow::Result;
use loopward_runner::model::fake::Script;
use loopward_term::render::Tone;
use serde_json::json;
use std::io::Write;

pub(super) const TITLE: &str = "Deny, deny, override";
pub(super) const LESSON: &str = "\
The builder needs a fix in plan.md, which the planner owns. It is refused twice. A person then
grants a one-shot override with a reason: one write goes through, and the next is refused again.";

const WORKSPACE: &str = "ch2";
const AGENT: &str = "builder";
const PATH: &str = "plan.md";
const REASON: &str = "step 2 names the wrong file; the planner is away and agreed";

/// The builder's fix of step 2, then `then` (a tool and its arguments), then its last words.
fn script(then: (&str, serde_json::Value), words: &str) -> Script {
    let builder = agent(AGENT);
    let mut s = Script::default();
    s.call(
        &builder,
        "edit_file",
        json!({"path": PATH, "old": "src/greet.py", "new": "src/greet.rs"}),
    )
    .call(&builder, then.0, then.1)
    .say(&builder, words);
    s
}

fn blocked_script() -> Script {
    script(
        (
            "write_file",
            json!({"path": PATH, "content": "# Plan\n1. add greet()\n2. write src/greet.rs\n"}),
        ),
        "plan.md is the planner's; I need a person to let me fix step 2.",
    )
}

fn override_script() -> Script {
    script(
        (
            "edit_file",
            json!({"path": PATH, "old": "add greet()", "new": "add greet() and farewell()"}),
        ),
        "Step 2 is fixed; the rest of plan.md is the planner's.",
    )
}

pub(super) async fn play<W: Write + Send + 'static>(stage: &Stage<W>) -> Result<()> {
    let ws = stage.workspace(WORKSPACE);
    std::fs::create_dir_all(&ws)?;
    std::fs::write(
        ws.join(PATH),
        "# Plan\n1. add greet()\n2. write src/greet.py\n",
    )?;
    let first = stage
        .act(
            Act::new(
                "ch2-denied",
                "Fix step 2 of plan.md: the file is src/greet.rs.",
                AGENT,
                blocked_script(),
            )
            .in_workspace(WORKSPACE),
        )
        .await?;
    let denied: u64 = first.figures.gates.values().map(|g| g.denied).sum();
    stage.say(
        Tone::Plain,
        format!("  {denied} refusals; plan.md is unchanged."),
    );
    stage.blank();
    stage.say(
        Tone::Title,
        format!("  $ loopward override grant --agent {AGENT} --path {PATH} --ttl 10m --reason \"{REASON}\""),
    );
    let ttl = std::time::Duration::from_secs(600);
    let clock = loopward_runner::ManualClock::new(super::DEMO_EPOCH_MILLIS);
    let id = loopward::team::grant_override(
        &ws,
        Some(&stage.custody),
        AGENT,
        PATH,
        REASON,
        ttl,
        ttl,
        &clock,
    )?;
    stage.say(
        Tone::Dim,
        format!("    granted {id}: one write, by {AGENT}, to {PATH}"),
    );
    let second = stage
        .act(
            Act::new(
                "ch2-override",
                "Fix step 2 of plan.md: the file is src/greet.rs.",
                AGENT,
                override_script(),
            )
            .in_workspace(WORKSPACE),
        )
        .await?;
    let f = &second.figures;
    let overridden: u64 = f.gates.values().map(|g| g.overridden).sum();
    let denied: u64 = f.gates.values().map(|g| g.denied).sum();
    stage.say(
        Tone::Ok,
        format!(
            "  {overridden} write went through on the override ({} consumed, reason logged); the next was refused ({denied} refusal)",
            f.overrides.len()
        ),
    );
    Ok(())
}
