//! `cargo xtask tidy`: repository rules that ARCHITECTURE.md states, enforced by code so the
//! next change cannot quietly break them.
//!
//! - **crate graph**: each workspace crate depends only on the crates its row allows; nothing
//!   depends on the binaries' crates; llama.cpp is built only where it is allowed;
//! - **no environment in libraries**: no `std::env` in the library crates (the binaries inject it);
//! - **time only through the clock**: no `SystemTime::now`/`std::time::Instant` in library crates
//!   outside `clock.rs` (tokio time, which tests pause, is allowed);
//! - **a true `rust-version`**: the workspace's declared minimum Rust is at least every
//!   dependency's own `rust-version` (the lock file's versions);
//! - **human origin**: the types make a person's words only through a `Person`
//!   (`Message::human` and `RunSpec::task` take `HumanWords`); as a second line, in library code
//!   only `person.rs`, the runner (its inbox's messages, the journal's task on resume) and the
//!   Restate workflow (its start request) make a `Person` — no model, tool or backend does;
//! - **no printing in libraries**: no `print!`/`println!`/`eprint!`/`eprintln!`/`dbg!` outside
//!   tests (libraries emit audit events and `tracing` spans);
//! - **a vocabulary without IO**: `loopward-core` touches no file, socket, process or runtime,
//!   and depends on none of tokio, reqwest, clap, hyper;
//! - **the turn travels in the request**: no `task_local!` in any library (a layer that
//!   spawns, or is spawned, would lose a turn kept in one; read it from the request, and what an
//!   engine gives a run from the run's extensions);
//! - **one readiness idiom**: a library's layer builds its service with the layer kit
//!   (`layers::from_fn`), never a hand-written `poll_ready`;
//! - **layer details by type**: no source outside the ledger unit (`loopward-core`'s `detail/`
//!   and `audit*`) reads a layer decision's detail by its JSON key (`detail["…"]`,
//!   `.to_json().get(…)`); readers use the typed accessors;
//! - **hooks**: the host adapters (`loopward-hooks`) decide nothing and say nothing of their own:
//!   no `Refusal` made and no refusal text written there (the engine's `gates::refusals` holds
//!   every one), and no runner source pulled in with `#[path]` (the crate boundary is what keeps
//!   them on the runner's public API);
//! - **code map**: every workspace crate and every public module of a library crate is named in
//!   ARCHITECTURE.md;
//! - **invariants**: every row of ARCHITECTURE.md's `## Invariants` table names what enforces it
//!   (a test `file::fn` that exists, a doc example, or one of these checks), and no invariant is
//!   stated outside that table.

mod code_rules;
mod doc_rules;
mod graph;

use code_rules::{detail_key_rules, hooks_rules, layer_name_rules, library_rules, source_folders};
use doc_rules::{code_map, invariant_page, invariant_problems, INVARIANTS};
use graph::{crate_graph, metadata, rust_version};

use anyhow::{bail, Context, Result};
use std::path::Path;

pub(crate) fn run(root: &Path) -> Result<()> {
    let mut problems = Vec::new();
    let meta = metadata(root)?;
    crate_graph(&meta, &mut problems)?;
    rust_version(root, &mut problems)?;
    let (all, libraries) = source_folders(&meta);
    for dir in &libraries {
        sources(dir, &mut |path, text| {
            library_rules(root, path, text, &mut problems)
        })?;
    }
    for dir in &all {
        sources(dir, &mut |path, text| {
            layer_name_rules(root, path, text, &mut problems);
            detail_key_rules(root, path, text, &mut problems);
        })?;
    }
    let hooks = root.join("loopward-hooks/src");
    if hooks.is_dir() {
        sources(&hooks, &mut |path, text| {
            hooks_rules(root, path, text, &mut problems)
        })?;
    }
    code_map(root, &mut problems)?;
    let map = std::fs::read_to_string(root.join("ARCHITECTURE.md"))
        .context("cannot read ARCHITECTURE.md")?;
    let read = |path: &str| std::fs::read_to_string(root.join(path)).ok();
    invariant_problems(&map, &read, &mut problems);
    let page = std::fs::read_to_string(root.join(INVARIANTS))
        .with_context(|| format!("cannot read {INVARIANTS}"))?;
    invariant_page(INVARIANTS, &page, &read, &mut problems);
    if problems.is_empty() {
        println!(
            "tidy: crate graph, environment, clock, printing, core io, human origin, turn in the request, layer names, detail keys, hooks, rust-version, code map and invariants hold"
        );
        return Ok(());
    }
    for p in &problems {
        eprintln!("tidy: {p}");
    }
    bail!("{} repository rule(s) broken (see above)", problems.len())
}

fn sources(dir: &Path, f: &mut dyn FnMut(&Path, &str)) -> Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            sources(&path, f)?;
        } else if path.extension().is_some_and(|e| e == "rs") {
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            f(&path, &text);
        }
    }
    Ok(())
}
