//! The hook commands through the binary, as the hosts run them: `loopward hook claude-code`
//! (one process per event, the event on stdin) and `hook claude-code|codex|gemini`,
//! `hook install|doctor --host …`, the hook written where each host reads it.

mod claude_code;
mod hosts;
