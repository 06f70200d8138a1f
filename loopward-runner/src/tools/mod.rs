//! The built-in tools: `read_file`, `write_file`, `edit_file`, `list_dir`, `shell`, `handoff`,
//! `say`.
//!
//! Every path goes through the workspace canonicaliser; every tool validates its arguments
//! against its schema before anything runs.

mod beneath;
mod fs;
mod handoff;
mod say;
mod shell;

pub use fs::{EditFile, ListDir, ReadFile, WriteFile};
pub use handoff::HandoffTool;
pub use say::{Say, MAX_SAY_CHARS, SAID, SAY_TOOL};
pub use shell::{ProcessTable, Shell, DEFAULT_SCRATCH_ROOT};

use crate::tool::ToolSet;
use loopward_core::AgentId;

/// The longest file a tool reads back to the model, in bytes.
pub const MAX_READ_BYTES: usize = 256 * 1024;

/// Every built-in tool, with `handoff` offering the given team.
pub fn builtin(team: &[AgentId]) -> ToolSet {
    ToolSet::new()
        .with(ReadFile)
        .with(WriteFile)
        .with(EditFile)
        .with(ListDir)
        .with(Shell::default())
        .with(HandoffTool::new(team.to_vec()))
        .with(Say)
}
