//! `loopward-bench`: the timing parts (1, 2, 3, 7–12 and, with the `llama` feature, 5 and 6).
//! Writes one JSON file; with `--llama-child` it is one side of part 5 (see
//! `loopward_bench::llama`), with `--console-child` the console part 8 measures.
//! `cargo xtask bench` merges it with the scale binary's and renders
//! `bench/results.md`.
//!
//! Usage: `loopward-bench --out FILE [--quick] [--only N]... [--model GGUF]`

// A binary: its output is the point.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use anyhow::{bail, Context as _, Result};
use loopward_bench::harness::{timer_overhead_ns, Effort};
use loopward_bench::machine::{load_average, Machine};
use loopward_bench::report::Section;
use loopward_bench::{
    console, containment, disk_run, gates, governed, hook_call, ledger, loop_cli, stack,
};
use serde_json::json;
use std::path::PathBuf;

struct Args {
    out: PathBuf,
    effort: Effort,
    only: Vec<u8>,
    model: Option<PathBuf>,
}

fn args() -> Result<Args> {
    let mut out = None;
    let mut effort = Effort::Full;
    let mut only = vec![];
    let mut model = None;
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--out" => out = it.next().map(PathBuf::from),
            "--quick" => effort = Effort::Quick,
            "--model" => model = it.next().map(PathBuf::from),
            "--only" => only.push(it.next().context("--only needs a part number")?.parse()?),
            other => bail!(
                "unknown argument {other:?}; usage: loopward-bench --out FILE [--quick] [--only N]"
            ),
        }
    }
    Ok(Args {
        out: out.context("--out FILE is required")?,
        effort,
        only,
        model,
    })
}

/// A part that needs no model: its number, what it measures, its short name (in an error), and
/// how it runs.
type Part = (
    u8,
    &'static str,
    &'static str,
    fn(Effort) -> Result<Section>,
);

/// The parts that need no model, in the order they run.
const PARTS: [Part; 9] = [
    (1, "gate decisions", "gate decisions", gates::run),
    (2, "stack overhead per turn", "stack overhead", stack::run),
    (3, "ledger throughput", "ledger throughput", ledger::run),
    (
        8,
        "the console following live runs",
        "console",
        console::run,
    ),
    (
        7,
        "governed iteration in memory",
        "governed iteration",
        governed::run,
    ),
    (
        9,
        "loop over a CLI agent",
        "loop over a CLI agent",
        loop_cli::run,
    ),
    (10, "containment", "containment", containment::run),
    (
        11,
        "a run's fixed cost on disk",
        "a run on disk",
        disk_run::run,
    ),
    (12, "one hook call", "hook call", hook_call::run),
];

fn main() -> Result<()> {
    // The init of the sandboxes this program starts (its shell commands).
    if let Some(code) = loopward_runner::sandbox::serve_init_if_asked(std::env::args_os()) {
        std::process::exit(if code == std::process::ExitCode::SUCCESS {
            0
        } else {
            126
        });
    }
    // Part 8's console runs in a child process of its own, measured from outside.
    let argv: Vec<String> = std::env::args().collect();
    if argv.get(1).map(String::as_str) == Some("--console-child") {
        let (Some(config), Some(state)) = (argv.get(2), argv.get(3)) else {
            bail!("usage: loopward-bench --console-child CONFIG STATE_BASE");
        };
        return console::child(config.as_ref(), state.as_ref());
    }
    #[cfg(feature = "llama")]
    if llama_child()?.is_some() {
        return Ok(());
    }
    let args = args()?;
    let started_at = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    let mut machine = Machine::probe();
    let timer = timer_overhead_ns();
    let wanted = |part: u8| args.only.is_empty() || args.only.contains(&part);
    let mut sections: Vec<Section> = vec![];
    for (part, heading, name, run) in PARTS {
        if wanted(part) {
            eprintln!("part {part}: {heading}");
            sections.push(run(args.effort).with_context(|| format!("part {part} ({name})"))?);
        }
    }
    if wanted(5) {
        eprintln!("part 5: local inference");
        sections.push(local_inference(args.model.as_deref(), args.effort)?);
    }
    if wanted(6) {
        eprintln!("part 6: concurrent runs on one model");
        sections.push(concurrent_runs(args.model.as_deref(), args.effort)?);
    }
    machine.load_at_end = load_average();
    let doc = json!({ "started_at": started_at, "machine": machine, "timer_overhead_ns": timer, "sections": sections });
    std::fs::write(&args.out, serde_json::to_vec_pretty(&doc)?)
        .with_context(|| format!("writing {}", args.out.display()))?;
    Ok(())
}

#[cfg(not(feature = "llama"))]
fn local_inference(_model: Option<&std::path::Path>, _effort: Effort) -> Result<Section> {
    Ok(Section::skipped(
        5,
        "Local inference",
        "skipped: this run was built without the `llama` feature (`cargo xtask bench` turns it on \
         when `models/SmolLM2-135M-Instruct.Q4_1.gguf` exists; `cargo xtask fetch-model` puts it there)",
    ))
}

#[cfg(feature = "llama")]
fn local_inference(model: Option<&std::path::Path>, effort: Effort) -> Result<Section> {
    loopward_bench::llama::run(model, effort).context("part 5 (local inference)")
}

#[cfg(not(feature = "llama"))]
fn concurrent_runs(_model: Option<&std::path::Path>, _effort: Effort) -> Result<Section> {
    Ok(Section::skipped(
        6,
        "Concurrent runs on one model",
        "skipped: this run was built without the `llama` feature",
    ))
}

#[cfg(feature = "llama")]
fn concurrent_runs(model: Option<&std::path::Path>, effort: Effort) -> Result<Section> {
    match model.filter(|m| m.is_file()) {
        Some(m) => {
            loopward_bench::concurrent::run(m, effort, loopward_bench::llama::llama_threads())
        }
        None => Ok(Section::skipped(
            6,
            "Concurrent runs on one model",
            "skipped: the model file is missing; `cargo xtask fetch-model` puts it in place",
        )),
    }
}

/// `--llama-child KIND --model GGUF --reps N --threads T`: one side of part 5, its JSON on stdout.
#[cfg(feature = "llama")]
fn llama_child() -> Result<Option<()>> {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let Some(at) = argv.iter().position(|a| a == "--llama-child") else {
        return Ok(None);
    };
    let value = |flag: &str| {
        argv.iter()
            .position(|a| a == flag)
            .and_then(|i| argv.get(i + 1))
    };
    let kind = argv.get(at + 1).context("--llama-child needs a kind")?;
    let model = value("--model").context("--model GGUF is required")?;
    let reps = value("--reps").map_or(Ok(3), |r| r.parse())?;
    let threads = value("--threads").map_or(Ok(1), |t| t.parse())?;
    let json = loopward_bench::llama::child(kind, std::path::Path::new(model), reps, threads)?;
    println!("{json}");
    Ok(Some(()))
}
