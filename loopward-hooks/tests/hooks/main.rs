//! The hook adapters' tests, one binary: each host's events (Claude Code, Codex, Gemini CLI)
//! judged by the one engine, the shell watch behind `Bash`, writes through links, the hook
//! protocol, and parity with the runner. One support module; one link.

mod support;

// The runner's gate-test set-up, shared with the parity test (the runner's side of it).
#[path = "../../../loopward-runner/tests/gates/support.rs"]
mod gates_support;

mod claude_code;
mod codex;
mod durability;
mod gates_parity;
mod gemini;
mod lock_holder;
mod protocol;
mod shell;
mod sprawl;
mod write_link;
