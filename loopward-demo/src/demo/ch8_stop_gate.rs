//! Chapter 8: a critical phase waits for a person's approval.

use super::{agent, team, Act, GateAnswer, Stage};
use anyhow::Result;
use loopward_core::LayerId;
use loopward_runner::model::fake::Script;
use loopward_term::render::Tone;
use serde_json::json;
use std::io::Write;

pub(super) const TITLE: &str = "Stop-gate";
pub(super) const LESSON: &str = "\
Publishing the changelog is a critical phase: before the scribe's turn the run stops for a
person's approval — automatically here (and logged as such); with --gate interactive, on this
terminal.";

fn script() -> Script {
    let (root, scribe) = (agent("root"), agent("scribe"));
    let mut s = Script::default();
    s.call(
        &root,
        "handoff",
        json!({"to": "scribe", "message": "Publish the changelog for greet()."}),
    )
    .call(
        &scribe,
        "write_file",
        json!({"path": "CHANGELOG.md", "content": "# Changelog\n\n- greet() says hello\n"}),
    )
    .say(&scribe, "CHANGELOG.md is published.");
    s
}

pub(super) async fn play<W: Write + Send + 'static>(stage: &Stage<W>) -> Result<()> {
    let mode = match stage.opts.gate {
        GateAnswer::Auto => "auto",
        GateAnswer::Interactive => "interactive",
    };
    let gate = format!(
        "[[stopgate]]\nname = \"publish\"\npoint = \"turn\"\nagent = \"scribe\"\nmode = \"{mode}\"\n"
    );
    let played = stage
        .act(
            Act::new("ch8-stop-gate", "Publish the changelog.", "root", script())
                .with_config(team::config(&gate)),
        )
        .await?;
    let decisions = played.layer_decisions(&LayerId::StopGate);
    let published = played.workspace.join("CHANGELOG.md").is_file();
    stage.say(
        Tone::Ok,
        format!(
            "  stop-gate decisions: {}; CHANGELOG.md {}",
            if decisions.is_empty() {
                "none".to_string()
            } else {
                decisions.join(", ")
            },
            if published {
                "published"
            } else {
                "not published"
            }
        ),
    );
    Ok(())
}
