//! Chapter 5: one handoff per turn; the first stands.

use super::{agent, Act, Stage};
use anyhow::Result;
use loopward_core::ToolCall;
use loopward_runner::model::fake::{Script, ScriptedCall, ScriptedReply};
use loopward_term::render::Tone;
use serde_json::json;
use std::io::Write;

pub(super) const TITLE: &str = "One handoff per turn";
pub(super) const LESSON: &str = "\
Root hands the work to the planner and, in the same reply, to the builder too. The second
handoff is refused and names the one that stands; the planner takes the next turn.";

/// The chapter's run, and the task the person gives it.
const RUN: &str = "ch5-one-handoff";
const TASK: &str = "Add farewell().";

fn handoff(to: &str, message: &str) -> ScriptedCall {
    let call = ToolCall::new("", "handoff", json!({"to": to, "message": message}));
    ScriptedCall {
        id: None,
        name: call.name,
        arguments: call.arguments,
    }
}

fn script() -> Script {
    let (root, planner) = (agent("root"), agent("planner"));
    let mut s = Script::default();
    s.push(
        &root,
        ScriptedReply {
            text: "Planner, plan it; builder, start building.".into(),
            tool_calls: vec![
                handoff("planner", "Plan the farewell feature."),
                handoff("builder", "Start building farewell()."),
            ],
            ..Default::default()
        },
    )
    .say(&root, "The planner has it.")
    .say(&planner, "I will plan farewell() next.");
    s
}

pub(super) async fn play<W: Write + Send + 'static>(stage: &Stage<W>) -> Result<()> {
    let played = stage.act(Act::new(RUN, TASK, "root", script())).await?;
    let f = &played.figures;
    let stood: Vec<String> = f
        .handoffs
        .iter()
        .map(|h| format!("{} → {}", h.from, h.to))
        .collect();
    stage.say(
        Tone::Ok,
        format!("  handoffs that stood: {}", stood.join(", ")),
    );
    Ok(())
}
