//! Chapter 7: a failing strategy class-jumps; when strategies run out the run ends `Exhausted`.

use super::Stage;
use crate::render::Tone;
use anyhow::Result;
use std::io::Write;

pub(super) const TITLE: &str = "Anti-loop";
pub(super) const LESSON: &str = "\
The tester retries a failing approach. After 3 failures the strategy may not be retried and the
next one is forced; when every strategy has failed, the run ends Exhausted at a known bound.";

pub(super) async fn play<W: Write + Send + 'static>(stage: &Stage<W>) -> Result<()> {
    stage.say(Tone::Dim, "  (needs the class-jump layer)");
    Ok(())
}
