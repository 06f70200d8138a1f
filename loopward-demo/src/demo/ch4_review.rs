//! Chapter 4: after touching src/**, the builder's handoff must go to the auditor.

use super::{agent, Act, Stage};
use anyhow::Result;
use loopward_runner::model::fake::Script;
use loopward_term::render::Tone;
use serde_json::json;
use std::io::Write;

pub(super) const TITLE: &str = "Review gate";
pub(super) const LESSON: &str = "\
The builder changes src/greet.rs and hands straight to the tester. The review gate, armed by
that change, refuses with a correctable error; the builder hands off to the auditor instead.";

/// The chapter's run, and the task the person gives it.
const RUN: &str = "ch4-review";
const TASK: &str = "Add greet() and get it tested.";

fn script() -> Script {
    let (b, a, t) = (agent("builder"), agent("auditor"), agent("tester"));
    let mut s = Script::default();
    s.call(&b, "write_file", json!({"path": "src/greet.rs", "content": "pub fn greet() -> &'static str { \"hello\" }\n"}))
        .call(&b, "handoff", json!({"to": "tester", "message": "greet() is in; please test it."}))
        .call(&b, "handoff", json!({"to": "auditor", "message": "greet() is in src/greet.rs; please review."}))
        .call(&a, "read_file", json!({"path": "src/greet.rs"}))
        .call(&a, "handoff", json!({"to": "tester", "message": "Reviewed: greet() is right. Please test."}))
        .say(&t, "greet() returns \"hello\". Tests pass.");
    s
}

pub(super) async fn play<W: Write + Send + 'static>(stage: &Stage<W>) -> Result<()> {
    let played = stage.act(Act::new(RUN, TASK, "builder", script())).await?;
    let f = &played.figures;
    let review: u64 = f
        .gates
        .values()
        .filter(|g| g.kind == Some(loopward_core::GateKind::Review))
        .map(|g| g.denied)
        .sum();
    let path: Vec<&str> = std::iter::once("builder")
        .chain(f.handoffs.iter().map(|h| h.to.as_str()))
        .collect();
    stage.say(
        Tone::Ok,
        format!(
            "  review gate: {review} refusal; the work went {}",
            path.join(" → ")
        ),
    );
    Ok(())
}
