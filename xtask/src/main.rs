//! Repository automation for loopward: `cargo xtask <command>`.
//!
//! | command | does |
//! |---|---|
//! | `ci` | exactly what CI runs: format check, clippy with `-D warnings`, the tests and the docs of the workspace without `loopward-llama`, then clippy, tests and doc tests of `loopward-llama` and the demo (`demo_llama`) on the real model; `--no-llama`: the fast path, all but `loopward-llama` (no cmake, clang or model; no llama.cpp build) |
//! | `tidy` | repository rules as code: crate graph, no environment, printing or wall clock in libraries, no IO in the vocabulary, every crate and public module in the code map, every invariant in ARCHITECTURE.md backed by a test or a check |
//! | `fmt` | formats the workspace |
//! | `readme` | regenerates docs/demo.md's output section from the real demo (`--check`) |
//! | `fetch-model` | downloads the SmolLM2 GGUF the llama tests use into `models/` |
//! | `calibrate-corpus` | writes a deterministic corpus (Claude Code transcripts, copies of the demo's runs) for `loopward calibrate`'s throughput figure |
//! | `build-cuda` | installs the CUDA 13 toolkit from PyPI wheels and builds the `cuda` feature for sm_90 |
//! | `gpu-check` | on a machine with an NVIDIA GPU: a 27B-shaped GGUF, loopward vs a direct loop vs `llama-bench`, into `bench/gpu.md` |
//! | `gguf` | writes a GGUF with random weights in a named shape (`gguf tiny out.gguf`) |

#![allow(clippy::print_stdout, clippy::print_stderr)]

mod bench;
mod corpus;
mod cuda;
mod gguf;
mod gpu;
mod model;
mod readme;
mod tidy;

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let root = repo_root();
    match args.first().map(String::as_str) {
        Some("ci") => ci(&root, args.get(1).is_some_and(|a| a == "--no-llama")),
        Some("tidy") => tidy::run(&root),
        Some("fmt") => cargo(&root, &["fmt", "--all"]),
        Some("readme") => readme::run(&root, args.get(1).is_some_and(|a| a == "--check")),
        Some("fetch-model") => model::fetch_model(&root),
        Some("build-cuda") => cuda::build_cuda(&root),
        Some("bench") => bench::run(&root, &args[1..]),
        Some("calibrate-corpus") => corpus::run(
            &root,
            Path::new(
                args.get(1)
                    .context("usage: cargo xtask calibrate-corpus <dir>")?,
            ),
        ),
        Some("gpu-check") => gpu::run(&root, &args[1..]),
        Some("gguf") => write_gguf(&args[1..]),
        Some("help" | "--help" | "-h") | None => {
            println!("{}", HELP);
            Ok(())
        }
        Some(other) => bail!("unknown xtask command {other:?}\n\n{HELP}"),
    }
}

const HELP: &str = "\
usage: cargo xtask <command>

commands:
  ci     run exactly what CI runs: cargo fmt --check, clippy -D warnings, tests
         (--no-llama: all but loopward-llama, without cmake, clang, the model or a llama.cpp build)
  tidy   check the repository rules: crate graph, no env/printing in libraries, time via the clock,
         code map, every ARCHITECTURE.md invariant backed by a test or a check
  fmt    format the workspace
  readme regenerate docs/demo.md's output section from the real demo (--check: verify only)
  calibrate-corpus <dir>  a deterministic corpus for `loopward calibrate` (transcripts, demo runs)
  fetch-model  download the SmolLM2 GGUF the llama tests use into models/
  build-cuda   install the CUDA 13 toolkit wheels and build the cuda feature for sm_90
  bench        measure the cost of governance; writes bench/results.md and bench/results.json
  gpu-check    on an NVIDIA GPU: 27B-shaped GGUF, loopward vs direct loop vs llama-bench -> bench/gpu.md
  gguf SHAPE OUT  write a GGUF with random weights (shapes: gemma3-27b, tiny)";

fn write_gguf(args: &[String]) -> Result<()> {
    let [shape, out] = args else {
        bail!("usage: cargo xtask gguf <gemma3-27b|tiny> <out.gguf>");
    };
    let shape = gguf::shape(shape)?;
    let bytes = gguf::write(Path::new(out), &shape, 27)?;
    println!(
        "wrote {out}: {} weights, {bytes} bytes",
        gguf::weights(&shape)?
    );
    Ok(())
}

/// The repository root, from the `CARGO_MANIFEST_DIR` that `cargo run` sets now. A target folder
/// shared between worktrees may run an xtask built in another worktree, whose compiled-in root
/// is that worktree's.
fn repo_root() -> PathBuf {
    let run_time = std::env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from);
    let (root, note) = choose_root(run_time, Path::new(env!("CARGO_MANIFEST_DIR")));
    if let Some(note) = note {
        eprintln!("{note}");
    }
    root
}

/// The root above xtask's manifest folder as cargo gives it at run time (`run_time`), else as
/// compiled in; when the two differ, the run-time one, and a line that says so.
fn choose_root(run_time: Option<PathBuf>, compiled: &Path) -> (PathBuf, Option<String>) {
    let above = |dir: &Path| {
        dir.parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."))
    };
    let compiled = above(compiled);
    match run_time
        .filter(|d| !d.as_os_str().is_empty())
        .map(|d| above(&d))
    {
        Some(root) if root != compiled => {
            let note = format!(
                "xtask: built in {} but run in {}; using {} (a target folder shared between worktrees)",
                compiled.display(),
                root.display(),
                root.display()
            );
            (root, Some(note))
        }
        Some(root) => (root, None),
        None => (compiled, None),
    }
}

/// `no_llama`: the fast path, everything but `loopward-llama` (and so no preflight for cmake,
/// clang and the model).
fn ci(root: &Path, no_llama: bool) -> Result<()> {
    preflight(root, no_llama)?;
    cargo(root, &["fmt", "--all", "--", "--check"])?;
    tidy::run(root)?;
    // One feature set for the workspace: default plus `http` (the runner's backends and the
    // facade's `[backend]` → backend path) and `otel` (no C++ build). The
    // llama backend (the `loopward-llama` crate, which compiles llama.cpp) is built in its own,
    // single configuration by `llama_ci`.
    let features =
        "--features=loopward/http,loopward-runner/http,loopward-runner/otel,loopward-cli/http,loopward-cli/otel";
    let fast = ["--workspace", "--exclude", "loopward-llama"];
    let clippy = [&["clippy"][..], &fast, &["--all-targets", features]].concat();
    cargo(root, &[&clippy[..], &["--", "-D", "warnings"]].concat())?;
    cargo(root, &[&["test"][..], &fast, &[features]].concat())?;
    // The docs build without a warning (broken intra-doc links, missing docs).
    let doc = Command::new(env!("CARGO"))
        .args([
            "doc",
            "--no-deps",
            "--workspace",
            "--exclude",
            "loopward-llama",
            features,
        ])
        .env("RUSTDOCFLAGS", "-D warnings")
        .current_dir(root)
        .status()
        .context("cannot run cargo doc")?;
    if !doc.success() {
        bail!("cargo doc --no-deps failed with -D warnings (see above)");
    }
    readme::check(root)?;
    // The default feature set must still build on its own.
    cargo(
        root,
        &["check", "--package", "loopward-runner", "--all-targets"],
    )?;
    if no_llama {
        eprintln!("ci --no-llama: loopward-llama (llama.cpp build, real-model tests) skipped");
        return Ok(());
    }
    llama_ci(root)
}

/// The local-model checks: one llama.cpp build (dev profile, crate `loopward-llama`) shared by
/// clippy and the tests on the real model (`cargo xtask fetch-model` first).
/// Fails in seconds, not after the first half of CI, when the llama step cannot succeed.
fn preflight(root: &Path, no_llama: bool) -> Result<()> {
    let found = |tool: &str| {
        Command::new(tool)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    };
    let missing: Vec<&str> = ["cmake", "clang"]
        .into_iter()
        .filter(|t| !no_llama && !found(t))
        .collect();
    if !missing.is_empty() {
        bail!(
            "cargo xtask ci builds llama.cpp and needs {}: run `bash .ci/run` (installs them), or \
             `apt-get install -y cmake clang libclang-dev`",
            missing.join(" and ")
        );
    }
    if !["chromium-headless-shell", "chromium"]
        .into_iter()
        .any(found)
    {
        bail!(
            "the page tests drive a headless Chromium: run `bash .ci/run` (installs it), or \
             `apt-get install -y chromium-headless-shell`"
        );
    }
    if !no_llama && !root.join(model::MODEL_FILE).exists() {
        bail!(
            "the llama tests need {}: run `cargo xtask fetch-model` first (or `bash .ci/run`)",
            model::MODEL_FILE
        );
    }
    let restate = ".restate/node_modules/@restatedev/restate-server-linux-x64/bin/restate-server";
    if !root.join(restate).exists() {
        bail!(
            "the loopward-restate tests start a Restate server ({restate}): run \
             `bash scripts/restate-install.sh` first (or `bash .ci/run`)"
        );
    }
    Ok(())
}

fn llama_ci(root: &Path) -> Result<()> {
    let clippy = ["clippy", "-p", "loopward-llama", "--all-targets"];
    cargo(root, &[&clippy[..], &["--", "-D", "warnings"]].concat())?;
    // Unit tests, the tests on the real model and the doc examples (which load it too).
    cargo(root, &["test", "-p", "loopward-llama"])?;
    // Part 5's measurement helpers and verdicts (the bench itself runs in `cargo xtask bench`).
    cargo(
        root,
        &[
            "test",
            "-p",
            "loopward-bench",
            "--features",
            "llama",
            "--lib",
        ],
    )?;
    // The demo acted out on the real model: every one of its 12 runs ends completed, exhausted
    // or stopped by a gate.
    cargo(
        root,
        &[
            "test",
            "-p",
            "loopward-demo",
            "--features",
            "llama",
            "--test",
            "demo_llama",
        ],
    )
}

fn cargo(root: &Path, args: &[&str]) -> Result<()> {
    eprintln!("$ cargo {}", args.join(" "));
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(args)
        .current_dir(root)
        .env("GGML_NO_BACKTRACE", "1")
        .status()
        .with_context(|| format!("could not run cargo {}", args.join(" ")))?;
    if !status.success() {
        bail!("cargo {} failed ({status})", args.join(" "));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::choose_root;
    use std::path::{Path, PathBuf};

    #[test]
    fn the_root_cargo_gives_at_run_time_wins_over_the_compiled_in_one_and_says_so() {
        let compiled = Path::new("/work/wt/a/xtask");
        assert_eq!(
            choose_root(None, compiled),
            (PathBuf::from("/work/wt/a"), None),
            "not run by cargo: the compiled-in root"
        );
        assert_eq!(
            choose_root(Some("/work/wt/a/xtask".into()), compiled),
            (PathBuf::from("/work/wt/a"), None)
        );
        let (root, note) = choose_root(Some("/work/wt/b/xtask".into()), compiled);
        assert_eq!(root, PathBuf::from("/work/wt/b"));
        let note = note.expect("a note when the two differ");
        assert!(
            note.contains("/work/wt/a")
                && note.contains("using /work/wt/b")
                && !note.contains('\n'),
            "{note}"
        );
    }
}
