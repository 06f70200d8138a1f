//! The hook commands through the binary, as the hosts run them: `loopward hook claude-code`
//! (one process per event, the event on stdin) and `hook claude-code|codex|gemini`,
//! `hook install|doctor --host …`, the hook written where each host reads it.

mod claude_code;
mod hosts;

// The session-lock holder, shared with the hook crate's own tests.
#[path = "../../../loopward-hooks/tests/hooks/lock_holder.rs"]
mod lock_holder;

#[path = "../support/mod.rs"]
mod support;
use support::text;

/// The project both files govern: the planner owns `plan.md`.
const CONFIG: &str = r#"
[run]
first = "planner"

[[agent]]
name = "planner"
tools = ["read_file", "write_file"]

[[territory]]
paths = ["plan.md"]
owner = "planner"
"#;
