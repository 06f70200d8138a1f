//! Chapter 3: the third unit of work in one turn needs a plan; writing the plan clears the way.

use super::{agent, Act, Stage};
use anyhow::Result;
use loopward_runner::model::fake::Script;
use loopward_term::render::Tone;
use serde_json::json;
use std::io::Write;

pub(super) const TITLE: &str = "Sprawl";
pub(super) const LESSON: &str = "\
In one turn the builder starts a third unit of work with no plan. The sprawl gate refuses once,
naming the files so far; the builder writes its plan, and the same write then goes through.";

/// The chapter's run, and the task the person gives it.
const RUN: &str = "ch3-sprawl";
const TASK: &str = "Add a small expression evaluator.";

fn script() -> Script {
    let b = agent("builder");
    let mut s = Script::default();
    s.call(&b, "write_file", json!({"path": "src/lexer.rs", "content": "pub fn lex() {}\n"}))
        .call(&b, "write_file", json!({"path": "src/parser.rs", "content": "pub fn parse() {}\n"}))
        .call(&b, "write_file", json!({"path": "src/eval.rs", "content": "pub fn eval() {}\n"}))
        .call(&b, "write_file", json!({"path": "notes/plan.md", "content": "# Plan\n1. lexer\n2. parser\n3. eval, tying them together\n"}))
        .call(&b, "write_file", json!({"path": "src/eval.rs", "content": "pub fn eval() {}\n"}))
        .say(&b, "Lexer, parser and eval are in, following notes/plan.md.");
    s
}

pub(super) async fn play<W: Write + Send + 'static>(stage: &Stage<W>) -> Result<()> {
    let played = stage.act(Act::new(RUN, TASK, "builder", script())).await?;
    let sprawl = played
        .figures
        .gates
        .get("sprawl")
        .copied()
        .unwrap_or_default();
    let eval_written = played.workspace.join("src/eval.rs").is_file();
    stage.say(
        Tone::Ok,
        format!(
            "  sprawl gate: {} refusal; src/eval.rs {} after the plan",
            sprawl.denied,
            if eval_written {
                "written"
            } else {
                "not written"
            }
        ),
    );
    Ok(())
}
