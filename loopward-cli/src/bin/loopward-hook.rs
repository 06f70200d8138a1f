//! `loopward-hook`: what an agent host starts on every tool call. It takes the same command
//! line as `loopward hook claude-code|codex|gemini …` and answers it with the same library code,
//! in a binary without the rest of the CLI (no runtime, no HTTP, no pages), which starts faster:
//! the host waits on its start for every tool call. `hook install` writes it where it sits
//! beside `loopward`.

#![allow(clippy::print_stderr, clippy::print_stdout)]

use clap::Parser as _;
use loopward_cli::cli::hook::{self, HookOnly};
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<_> = std::env::args_os().collect();
    if args.len() == 2 && (args[1] == "--version" || args[1] == "-V") {
        println!("loopward-hook {}", env!("CARGO_PKG_VERSION"));
        return ExitCode::SUCCESS;
    }
    // Inside `loopward contain`: relayed to the supervisor, which judges and records.
    if let Some(code) = loopward_cli::cli::relay_contained_hook(&args, |k| std::env::var_os(k)) {
        return code;
    }
    if let Some(event) = hook::event_command(&args) {
        // Never a failure the host would read as "go ahead": exit 2 whatever happens.
        return hook::run(&event).unwrap_or(ExitCode::from(2));
    }
    // Help, or a command line that is not a hook event's: clap prints help (exit 0) or the
    // usage error (exit 2, which blocks where a host ran it).
    let _ = HookOnly::parse_from(&args);
    eprintln!(
        "error: loopward-hook answers hook events only (`hook claude-code|codex|gemini …`); run `loopward hook …` for the others"
    );
    ExitCode::from(2)
}
