//! `cargo run -p loopward-demo`: loopward's lessons acted out by a scripted team, offline, in
//! a few seconds. The chapters live in `loopward_demo::demo`.

#![allow(clippy::print_stderr)]

use clap::Parser;
use loopward_demo::demo::stand_in;
use loopward_demo::demo::{self, DemoBackend, GateAnswer, Options};
use loopward_term::render::Printer;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// loopward demo: a scripted team acting out each lesson, offline, no keys.
#[derive(Debug, Parser)]
#[command(
    name = "loopward-demo",
    version,
    after_help = "Examples:\n  cargo run -p loopward-demo\n  cargo run -p loopward-demo -- --gate interactive\n  cargo run -p loopward-demo --features llama -- --backend llama --model models/SmolLM2-135M-Instruct.Q4_1.gguf"
)]
struct Args {
    /// The model backend: the scripted fake (default) or a local GGUF model.
    #[arg(long, value_enum, default_value = "fake")]
    backend: BackendArg,
    /// The GGUF file, with --backend llama.
    #[arg(long, required_if_eq("backend", "llama"))]
    model: Option<PathBuf>,
    /// With --backend llama: model layers to offload to the GPU (a number, or `all`).
    #[arg(long, value_parser = parse_layers)]
    gpu_layers: Option<u32>,
    /// How chapter 8's stop-gate is answered.
    #[arg(long, value_enum, default_value = "auto")]
    gate: GateAnswer,
    /// Where to put the scratch workspace and the runs (default: a new temporary folder).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Play only these chapters (1–9), e.g. `--chapter 1 --chapter 9`.
    #[arg(long = "chapter", value_parser = clap::value_parser!(u8).range(1..=9))]
    chapters: Vec<u8>,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum BackendArg {
    Fake,
    Llama,
}

fn parse_layers(s: &str) -> Result<u32, String> {
    if s == "all" {
        return Ok(u32::MAX);
    }
    s.parse()
        .map_err(|_| format!("{s:?} is not a number of layers; give a number or `all`"))
}

fn main() -> ExitCode {
    // The init of the sandboxes this program starts (its shell commands).
    if let Some(code) = loopward_runner::sandbox::serve_init_if_asked(std::env::args_os()) {
        return code;
    }
    // Chapter 9 runs this binary as its hook command and as its stand-in coding agent.
    let argv: Vec<String> = std::env::args().skip(1).collect();
    if argv.first().map(String::as_str) == Some(stand_in::HOOK_FLAG) {
        return hook();
    }
    if let Some(state) = std::env::var_os(stand_in::STAND_IN_ENV) {
        return stand_in_client(Path::new(&state), &argv);
    }
    let args = Args::parse();
    let backend = match (args.backend, args.model) {
        (BackendArg::Llama, Some(model)) => DemoBackend::Llama {
            model,
            gpu_layers: args.gpu_layers,
        },
        _ => DemoBackend::Fake,
    };
    let opts = Options {
        dir: args.dir,
        gate: args.gate,
        backend,
        chapters: args.chapters,
        stand_in: std::env::current_exe().ok(),
    };
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
    let out = demo::shared(Printer::stdout());
    match rt.block_on(demo::run(opts, out)) {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// The stand-in's hook command, as `loopward hook claude-code` in a loop's session: relays the
/// event on stdin to the loop and prints its answer; exit status 2 when blocked or unanswered.
fn hook() -> ExitCode {
    use loopward_runner::cli_agent::{HookReply, HOOK_ENV, TOKEN_ENV};
    let mut input = String::new();
    let answer = match std::io::stdin().read_to_string(&mut input) {
        Ok(_) => demo::cli_loop::hook(
            std::env::var_os(HOOK_ENV),
            std::env::var(TOKEN_ENV).ok(),
            &input,
        ),
        Err(e) => HookReply::block(format!("reading the hook event on stdin: {e}")),
    };
    answer.print()
}

/// The stand-in Claude Code client of chapter 9, its state in `state`.
fn stand_in_client(state: &Path, args: &[String]) -> ExitCode {
    let run = std::env::current_dir()
        .map_err(anyhow::Error::from)
        .and_then(|cwd| stand_in::client(state, &cwd, args, &mut std::io::stdout().lock()));
    match run {
        Ok(0) => ExitCode::SUCCESS,
        Ok(_) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("stand-in client: {e:#}");
            ExitCode::FAILURE
        }
    }
}
