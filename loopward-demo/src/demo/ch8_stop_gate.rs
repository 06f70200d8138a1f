//! Chapter 8: a critical phase waits for a person's approval.

use super::Stage;
use crate::render::Tone;
use anyhow::Result;
use std::io::Write;

pub(super) const TITLE: &str = "Stop-gate";
pub(super) const LESSON: &str = "\
Before the scribe publishes the changelog, the run stops and asks for approval: automatically
here (and logged as such); with --gate interactive, on this terminal.";

pub(super) async fn play<W: Write + Send + 'static>(stage: &Stage<W>) -> Result<()> {
    stage.say(Tone::Dim, "  (needs the stop-gate layer)");
    Ok(())
}
