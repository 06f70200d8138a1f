//! The `loopward` command-line tool. The commands live in `loopward_cli::cli`.

#![allow(clippy::print_stderr)]

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<_> = std::env::args_os().collect();
    // Started as the init of a sandbox's PID namespace; otherwise the init of the sandboxes
    // this process starts (`contain`, `sandbox exec`, `run`'s shell).
    if let Some(code) = loopward_runner::sandbox::serve_init_if_asked(args.iter().cloned()) {
        return code;
    }
    // A contained program's hook relays to its supervisor before anything is parsed or built.
    if let Some(code) = loopward_cli::cli::relay_contained_hook(&args, |k| std::env::var_os(k)) {
        return code;
    }
    // A hook answers before anything else can fail (exit 1 would let its host go ahead), and
    // its command line is parsed alone.
    if let Some(hook) = loopward_cli::cli::hook::event_command(&args) {
        return loopward_cli::cli::hook::run(&hook).unwrap_or(ExitCode::from(2));
    }
    let cli = loopward_cli::cli::Cli::parse().with_config();
    // A hook answers before anything else can fail: exit 1 would let its host go ahead.
    if let loopward_cli::cli::Command::Hook(a) = &cli.command {
        if a.target.answers_an_event() {
            return loopward_cli::cli::hook::run(a).unwrap_or(ExitCode::from(2));
        }
    }
    // `sandbox exec` runs on a runtime of its own, without telemetry (its stderr is the command's).
    if let loopward_cli::cli::Command::Sandbox(a) = &cli.command {
        return loopward_cli::cli::sandbox::run(a);
    }
    // Spans on stderr under RUST_LOG, OTLP export under OTEL_EXPORTER_OTLP_* (not for the hook:
    // its stderr is what Claude Code shows the model).
    let (_telemetry, note) = loopward_cli::observe::init(|k| std::env::var(k).ok());
    if let Some(note) = note {
        eprintln!("note: {note}");
    }
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(loopward_cli::cli::dispatch(cli)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {}", loopward_cli::error_text(&e));
            ExitCode::FAILURE
        }
    }
}
