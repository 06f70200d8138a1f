//! Chapter 7: a failing strategy class-jumps; when strategies run out the run ends `Exhausted`.

use super::{agent, team, Act, Stage};
use anyhow::Result;
use loopward_core::{LayerId, RunStatus};
use loopward_runner::model::fake::Script;
use loopward_term::render::Tone;
use serde_json::json;
use std::io::Write;

pub(super) const TITLE: &str = "Anti-loop";
pub(super) const LESSON: &str = "\
The tester keeps failing to make a test pass. After 3 failures a strategy may not be retried and
the next is forced; when every strategy has failed, the run ends Exhausted at a known bound.";

/// The chapter's run, and the task the person gives it.
const RUN: &str = "ch7-anti-loop";
const TASK: &str = "Make the parser test pass.";

/// Each attempt: run a check that fails, then report the failure with the strategy used.
fn script() -> Script {
    let t = agent("tester");
    let mut s = Script::default();
    let checks = [
        ("patch", "grep -q 'fn parse' src/parser.rs"),
        ("patch", "grep -q 'pub fn parse' src/parser.rs"),
        ("patch", "test -s src/parser.rs"),
        ("rewrite", "grep -q 'fn parse' src/parser2.rs"),
        ("rewrite", "grep -q 'pub fn parse' src/parser2.rs"),
        ("rewrite", "test -s src/parser2.rs"),
    ];
    for (i, (strategy, check)) in checks.iter().enumerate() {
        s.call(&t, "shell", json!({"command": check}));
        s.call(
            &t,
            "report_attempt",
            json!({"subtask": "parser-test", "strategy": strategy, "outcome": "failed",
                   "note": format!("attempt {}: `{check}` failed", i + 1)}),
        );
    }
    s.say(&t, "Every strategy failed; stopping.");
    s
}

pub(super) async fn play<W: Write + Send + 'static>(stage: &Stage<W>) -> Result<()> {
    let played = stage.act(Act::new(RUN, TASK, "tester", script())).await?;
    let verdicts = played.layer_decisions(&LayerId::ClassJump);
    let failures = verdicts.len();
    let jumps = verdicts
        .iter()
        .filter(|v| v.as_str() == "class_jump")
        .count();
    let bound = loopward::config::Config::parse("demo.toml", &team::config(""))?
        .class_jump
        .map_or(0, |c| c.strategies.len() * c.failures_per_strategy as usize);
    let status = played
        .figures
        .status
        .as_ref()
        .map_or("unfinished", RunStatus::label);
    stage.say(
        Tone::Ok,
        format!(
            "  {failures} failed attempts, {jumps} class-jump; the run ended {status} at the bound of {bound} (strategies × failures per strategy)"
        ),
    );
    Ok(())
}
