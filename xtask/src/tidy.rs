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
//! - **hooks**: the host adapters (`loopward-hooks`) decide nothing and say nothing of their own:
//!   no `Refusal` made and no refusal text written there (the engine's `gates::refusals` holds
//!   every one), and no runner source pulled in with `#[path]` (the crate boundary is what keeps
//!   them on the runner's public API);
//! - **code map**: every workspace crate and every public module of a library crate is named in
//!   ARCHITECTURE.md;
//! - **invariants**: every row of ARCHITECTURE.md's `## Invariants` table names what enforces it
//!   (a test `file::fn` that exists, a doc example, or one of these checks), and no invariant is
//!   stated outside that table.

use anyhow::{bail, Context, Result};
use std::path::Path;
use std::process::Command;

/// Which workspace crates each crate may depend on (normal and build dependencies). A crate that
/// is not listed fails the check: add its row when you add the crate.
const GRAPH: &[(&str, &[&str])] = &[
    ("loopward-core", &[]),
    ("loopward-runner", &["loopward-core"]),
    ("loopward-llama", &["loopward-core"]),
    ("loopward-hooks", &["loopward-core", "loopward-runner"]),
    (
        "loopward",
        &["loopward-core", "loopward-runner", "loopward-llama"],
    ),
    ("loopward-term", &["loopward-core", "loopward-runner"]),
    (
        "loopward-restate",
        &["loopward-core", "loopward-runner", "loopward"],
    ),
    (
        "loopward-console",
        &["loopward", "loopward-core", "loopward-runner"],
    ),
    (
        "loopward-cli",
        &[
            "loopward",
            "loopward-core",
            "loopward-runner",
            "loopward-hooks",
            "loopward-term",
            "loopward-restate",
            "loopward-console",
        ],
    ),
    (
        "loopward-demo",
        &[
            "loopward",
            "loopward-core",
            "loopward-runner",
            "loopward-hooks",
            "loopward-term",
        ],
    ),
    (
        "loopward-examples",
        &[
            "loopward",
            "loopward-core",
            "loopward-runner",
            "loopward-llama",
            "loopward-restate",
        ],
    ),
    (
        "loopward-bench",
        &[
            "loopward",
            "loopward-core",
            "loopward-runner",
            "loopward-llama",
            "loopward-console",
        ],
    ),
    ("xtask", &[]),
];

/// Crates that nothing may depend on (dev-dependencies for tests excepted).
const LEAVES: &[&str] = &[
    "loopward-cli",
    "loopward-demo",
    "xtask",
    "loopward-examples",
];

/// What `loopward-core`, the vocabulary, may not depend on (DESIGN.md: no IO, no runtime, no
/// argv parsing).
const NOT_IN_CORE: &[&str] = &["tokio", "reqwest", "clap", "hyper", "tokio-util"];

/// What `loopward-core` may not name in its code: files, sockets, processes, stdio, a runtime.
const CORE_IO: &[&str] = &[
    "std::fs",
    "std::net",
    "std::process",
    "std::io::std",
    "tokio::",
];

/// The checks a row of ARCHITECTURE.md's invariants table may name as `tidy: <check>`.
const CHECKS: &[&str] = &[
    "crate graph",
    "llama",
    "environment",
    "clock",
    "printing",
    "core io",
    "human origin",
    "turn in the request",
    "code map",
    "rust-version",
    "invariants",
    "layer names",
    "hooks",
];

/// The words the built-in layers are written as in the ledger; only `LayerId` spells them.
const LAYER_WORDS: &[&str] = &[
    "caps",
    "repeat",
    "class_jump",
    "stopgate",
    "rate_limit",
    "budget",
    "timeout",
    "inbox",
    "resume",
    "claude_code",
];

/// The page of invariants, one a table row, grouped by area.
const INVARIANTS: &str = "docs/invariants.md";

/// Every crate's source folder: the layer-name rule holds in binaries too.
const ALL_SOURCES: &[&str] = &[
    "loopward-core/src",
    "loopward-runner/src",
    "loopward-hooks/src",
    "loopward-llama/src",
    "loopward/src",
    "loopward-restate/src",
    "loopward-term/src",
    "loopward-console/src",
    "loopward-cli/src",
    "loopward-demo/src",
    "loopward-bench/src",
    "examples",
];

/// Crates allowed to declare `llama-cpp-2` (it compiles llama.cpp).
const LLAMA_ALLOWED: &[&str] = &["loopward-llama", "loopward-bench"];

/// Library source folders the environment and clock rules apply to.
const LIBRARIES: &[&str] = &[
    "loopward-core/src",
    "loopward-runner/src",
    "loopward-hooks/src",
    "loopward-llama/src",
    "loopward/src",
    "loopward-restate/src",
    "loopward-console/src",
];

/// The library files that may make a `Person` (`Person::at_the_keyboard`): its definition; the
/// runner, for the messages its inbox delivered and, on resume, the task its journal read from
/// the `run_started` record; the Restate workflow, whose start request carries the run's task
/// (as argv does the CLI's). Binaries, tests, examples and the demo talk to a person themselves.
const HUMAN_SOURCES: &[&str] = &[
    "loopward-core/src/person.rs",
    "loopward-runner/src/runner.rs",
    "loopward-runner/src/runner/drive.rs",
    "loopward-restate/src/workflow.rs",
    // The Claude Code hook, for the prompt a person typed (UserPromptSubmit, notices excluded).
    "loopward-hooks/src/decide.rs",
];

pub(crate) fn run(root: &Path) -> Result<()> {
    let mut problems = Vec::new();
    crate_graph(root, &mut problems)?;
    rust_version(root, &mut problems)?;
    for lib in LIBRARIES {
        let dir = root.join(lib);
        if dir.is_dir() {
            sources(&dir, &mut |path, text| {
                library_rules(root, path, text, &mut problems)
            })?;
        }
    }
    for dir in ALL_SOURCES {
        let dir = root.join(dir);
        if dir.is_dir() {
            sources(&dir, &mut |path, text| {
                layer_name_rules(root, path, text, &mut problems)
            })?;
        }
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
            "tidy: crate graph, environment, clock, printing, core io, human origin, turn in the request, layer names, hooks, rust-version, code map and invariants hold"
        );
        return Ok(());
    }
    for p in &problems {
        eprintln!("tidy: {p}");
    }
    bail!("{} repository rule(s) broken (see above)", problems.len())
}

fn crate_graph(root: &Path, problems: &mut Vec<String>) -> Result<()> {
    let out = Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .current_dir(root)
        .output()
        .context("cannot run cargo metadata")?;
    if !out.status.success() {
        bail!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    graph_problems(&meta, problems)
}

/// The crate-graph rules over `cargo metadata --no-deps` output.
fn graph_problems(meta: &serde_json::Value, problems: &mut Vec<String>) -> Result<()> {
    let packages = meta["packages"]
        .as_array()
        .context("no packages in metadata")?;
    let members: Vec<&str> = packages.iter().filter_map(|p| p["name"].as_str()).collect();
    for p in packages {
        let name = p["name"].as_str().unwrap_or_default();
        let Some((_, allowed)) = GRAPH.iter().find(|(n, _)| *n == name) else {
            problems.push(format!(
                "crate {name} has no row in the crate graph (xtask/src/tidy.rs GRAPH): say which crates it may depend on"
            ));
            continue;
        };
        for d in p["dependencies"].as_array().into_iter().flatten() {
            let dep = d["name"].as_str().unwrap_or_default();
            let dev = d["kind"].as_str() == Some("dev");
            if name == "loopward-core" && NOT_IN_CORE.contains(&dep) && !dev {
                problems.push(format!(
                    "loopward-core depends on {dep}; the vocabulary does no IO and needs no runtime"
                ));
            }
            if dep == "llama-cpp-2" && !LLAMA_ALLOWED.contains(&name) {
                problems.push(format!(
                    "{name} depends on llama-cpp-2; only {LLAMA_ALLOWED:?} may"
                ));
            }
            if !members.contains(&dep) || dev {
                continue;
            }
            if LEAVES.contains(&dep) {
                problems.push(format!(
                    "{name} depends on {dep}, which nothing may depend on"
                ));
            } else if !allowed.contains(&dep) {
                problems.push(format!(
                    "{name} depends on {dep}; its row in the crate graph allows only {allowed:?}"
                ));
            }
        }
    }
    Ok(())
}

fn rust_version(root: &Path, problems: &mut Vec<String>) -> Result<()> {
    let out = Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--locked"])
        .current_dir(root)
        .output()
        .context("cannot run cargo metadata")?;
    if !out.status.success() {
        bail!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    let members: Vec<&str> = meta["workspace_members"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m.as_str())
        .collect();
    let mut declared = None;
    let mut needed: Option<(Vec<u64>, String)> = None;
    for p in meta["packages"].as_array().into_iter().flatten() {
        let Some(v) = p["rust_version"].as_str() else {
            continue;
        };
        let parsed = parse_version(v);
        if members.contains(&p["id"].as_str().unwrap_or_default()) {
            declared = Some((parsed, v.to_string()));
        } else if needed.as_ref().is_none_or(|(n, _)| parsed > *n) {
            let who = format!(
                "{} {} needs {v}",
                p["name"].as_str().unwrap_or("?"),
                p["version"].as_str().unwrap_or("?")
            );
            needed = Some((parsed, who));
        }
    }
    if let (Some((declared, text)), Some((needed, who))) = (declared, needed) {
        if needed > declared {
            problems.push(format!(
                "the workspace declares rust-version {text}, but {who}: raise `rust-version` in Cargo.toml"
            ));
        }
    }
    Ok(())
}

fn parse_version(v: &str) -> Vec<u64> {
    let mut parts: Vec<u64> = v.split('.').map(|p| p.parse().unwrap_or(0)).collect();
    parts.resize(3, 0);
    parts
}

fn library_rules(root: &Path, path: &Path, text: &str, problems: &mut Vec<String>) {
    let rel = path
        .strip_prefix(root)
        .unwrap_or(path)
        .display()
        .to_string();
    let speaks_for_people = HUMAN_SOURCES.iter().any(|f| rel.ends_with(f));
    let is_layer_file = text.lines().any(|l| {
        let l = l.trim_start();
        l.starts_with("impl<") && l.contains("Layer<S> for") && !rel.ends_with("from_fn.rs")
    });
    let mut in_tests = false;
    for (i, line) in text.lines().enumerate() {
        let code = line.trim_start();
        if code.starts_with("//") {
            continue;
        }
        let at = format!("{rel}:{}", i + 1);
        in_tests |= code.starts_with("#[cfg(test)]");
        if !speaks_for_people && !in_tests && code.contains("Person::at_the_keyboard") {
            problems.push(format!(
                "{at}: makes a `Person`, the capability to speak for one; in library code only the runner (inbox, resumed task) and the Restate workflow (start request) do — take `HumanWords` from the caller instead (see ARCHITECTURE.md, loopward-core)"
            ));
        }
        if code.contains("std::env::")
            || code.contains("use std::env")
            || (code.starts_with("use std::{") && code.contains("env"))
        {
            problems.push(format!(
                "{at}: a library reads the environment; take the value (or a lookup) from the caller"
            ));
        }
        if !in_tests && code.contains("task_local!") {
            problems.push(format!(
                "{at}: a task-local in library code; the turn travels in the request (`TurnRequest::turn`, `ToolInvocation::turn`, `TurnContext::of(&ChatRequest)`), and what an engine gives a run goes on its extensions (`Runner::run_seeded`)"
            ));
        }
        // One readiness idiom: a layer's service is the kit's `FromFn`, whose `call` hands on
        // the very service that was polled ready; a hand-written one polls twice or waits in
        // `poll_ready`. Leaves (agents, backends, executors) keep their own `poll_ready`.
        if !in_tests && code.starts_with("fn poll_ready") && is_layer_file {
            problems.push(format!(
                "{at}: a layer with a hand-written service; build it with the layer kit (`layers::from_fn`: a policy struct implementing `LayerFn`, `type Service = FromFn<Policy, S>`)"
            ));
        }
        if !in_tests
            && ["print!(", "println!(", "eprint!(", "eprintln!(", "dbg!("]
                .iter()
                .any(|m| code.contains(m))
        {
            problems.push(format!(
                "{at}: a library prints; record an audit event or a `tracing` span instead"
            ));
        }
        if rel.starts_with("loopward-core/") && CORE_IO.iter().any(|m| code.contains(m)) {
            problems.push(format!(
                "{at}: loopward-core does IO; the vocabulary only describes, the runner acts"
            ));
        }
        let clock_file = rel.ends_with("/clock.rs");
        // `Instant::now()` is the wall clock unless it is tokio's (paused in tests).
        let std_instant = code.contains("std::time::Instant")
            || (code.starts_with("use std::time::{") && code.contains("Instant"))
            || (code.contains("Instant::now") && !code.contains("tokio::time::Instant::now"));
        if !clock_file && (code.contains("SystemTime::now") || std_instant) {
            problems.push(format!(
                "{at}: time outside the clock; use the injected `Clock` (or tokio time)"
            ));
        }
    }
}

/// A layer is read back as a `LayerId`: no source compares or matches a layer by the word the
/// ledger writes (a drifting spelling is how `classjump` and `class_jump` came apart).
fn layer_name_rules(root: &Path, path: &Path, text: &str, problems: &mut Vec<String>) {
    let rel = path
        .strip_prefix(root)
        .unwrap_or(path)
        .display()
        .to_string();
    if rel.ends_with("loopward-core/src/layer_id.rs") {
        return;
    }
    let mut in_tests = false;
    for (i, line) in text.lines().enumerate() {
        let code = line.trim_start();
        in_tests |= code.starts_with("#[cfg(test)]");
        if in_tests || code.starts_with("//") {
            continue;
        }
        let by_word = code.contains("layer == \"")
            || code.contains("layer != \"")
            || LAYER_WORDS.iter().any(|w| {
                code.contains(&format!("(\"{w}\", V::"))
                    || code.contains(&format!("(\"{w}\", LayerVerdict::"))
                    || code.contains(&format!("\"{w}\" =>"))
                    || code.contains(&format!("\"{w}\" |"))
            });
        if by_word {
            problems.push(format!(
                "{rel}:{}: a layer matched by its ledger word; match `LayerId` (loopward_core::LayerId::StopGate, …) instead",
                i + 1
            ));
        }
    }
}

/// The hooks rule: an adapter renders the engine's refusals; it makes none and words none.
fn hooks_rules(root: &Path, path: &Path, text: &str, problems: &mut Vec<String>) {
    let rel = path
        .strip_prefix(root)
        .unwrap_or(path)
        .display()
        .to_string();
    let mut in_tests = false;
    for (i, line) in text.lines().enumerate() {
        let code = line.trim_start();
        in_tests |= code.starts_with("#[cfg(test)]");
        if in_tests || code.starts_with("//") {
            continue;
        }
        let at = format!("{rel}:{}", i + 1);
        if code.contains("Refusal::new(")
            || code.contains("Refusal {")
            || code.to_ascii_lowercase().contains("\"refused by")
        {
            problems.push(format!(
                "{at}: a hook adapter words a refusal of its own; add it to loopward-runner's `gates::refusals` (with a remedy for each `Host`) and call it from there"
            ));
        }
        if code.starts_with("#[path") {
            problems.push(format!(
                "{at}: a hook adapter includes a source file by path; use loopward-runner's public API instead"
            ));
        }
    }
}

fn code_map(root: &Path, problems: &mut Vec<String>) -> Result<()> {
    let map = std::fs::read_to_string(root.join("ARCHITECTURE.md"))
        .context("cannot read ARCHITECTURE.md")?;
    let mut crates = Vec::new();
    for entry in std::fs::read_dir(root)? {
        let dir = entry?.path();
        if !dir.join("Cargo.toml").is_file() {
            continue;
        }
        let folder = dir
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let lib = std::fs::read_to_string(dir.join("src/lib.rs")).ok();
        crates.push((folder, lib));
    }
    map_problems(&map, &crates, problems);
    Ok(())
}

/// The code-map rule: every crate folder, and every `pub mod` of a crate's `lib.rs`, is named
/// (in backticks) in the map.
fn map_problems(map: &str, crates: &[(String, Option<String>)], problems: &mut Vec<String>) {
    for (folder, lib) in crates {
        if !map.contains(&format!("`{folder}/`")) {
            problems.push(format!(
                "ARCHITECTURE.md's code map does not name the crate folder `{folder}/`"
            ));
        }
        for line in lib.iter().flat_map(|t| t.lines()) {
            let Some(rest) = line.trim().strip_prefix("pub mod ") else {
                continue;
            };
            let module = rest.trim_end_matches(';').trim();
            if !map.contains(&format!("`{module}")) {
                problems.push(format!(
                    "ARCHITECTURE.md's code map does not name the public module `{module}` of {folder}"
                ));
            }
        }
    }
}

/// The invariants rule: ARCHITECTURE.md states each invariant once, as a row of the table under
/// `## Invariants`, and each row names what enforces it — `file.rs::fn` (the file must have that
/// function), `file.rs` followed by `(doctest)` or `(compile_fail)` (the file must have such a
/// doc example), or `tidy: <check>` (one of [`CHECKS`]). `read` reads a repository file.
fn invariant_problems(
    map: &str,
    read: &dyn Fn(&str) -> Option<String>,
    problems: &mut Vec<String>,
) {
    let heading = "## Invariants";
    let Some(start) = map.lines().position(|l| l.trim_end() == heading) else {
        problems.push(format!(
            "ARCHITECTURE.md has no `{heading}` section: state the invariants there, one a row"
        ));
        return;
    };
    let lines: Vec<&str> = map.lines().collect();
    let end = lines[start + 1..]
        .iter()
        .position(|l| l.starts_with("## "))
        .map_or(lines.len(), |n| start + 1 + n);
    for (i, line) in lines.iter().enumerate() {
        if (i < start || i >= end) && line.contains("**Invariant") {
            problems.push(format!(
                "ARCHITECTURE.md:{}: an invariant stated outside `{heading}`; make it a row there, with what enforces it",
                i + 1
            ));
        }
    }
    for (i, line) in lines.iter().enumerate().take(end).skip(start + 1) {
        check_row(&format!("ARCHITECTURE.md:{}", i + 1), line, read, problems);
    }
}

/// The invariants page (`docs/invariants.md`): every table row on it is an invariant and must
/// name what enforces it (see [`check_row`]).
fn invariant_page(
    name: &str,
    text: &str,
    read: &dyn Fn(&str) -> Option<String>,
    problems: &mut Vec<String>,
) {
    let mut rows = 0;
    for (i, line) in text.lines().enumerate() {
        if line.trim().starts_with('|') {
            rows += 1;
        }
        check_row(&format!("{name}:{}", i + 1), line, read, problems);
    }
    if rows == 0 {
        problems.push(format!("{name} holds no invariant table"));
    }
}

/// One row of an invariants table: it names what enforces it — `file.rs::fn` (the file must
/// have that function), `file.rs` followed by `(doctest)` or `(compile_fail)` (the file must
/// have such a doc example), or `tidy: <check>` (one of [`CHECKS`]).
fn check_row(
    at: &str,
    line: &str,
    read: &dyn Fn(&str) -> Option<String>,
    problems: &mut Vec<String>,
) {
    let row = line.trim();
    if !row.starts_with('|') || row.starts_with("|---") || row.starts_with("| invariant |") {
        return;
    }
    let cells: Vec<&str> = row.trim_matches('|').split(" | ").collect();
    let Some(by) = cells.last().filter(|_| cells.len() >= 2) else {
        problems.push(format!(
            "{at}: a row needs an invariant and what enforces it"
        ));
        return;
    };
    let mut backed = 0;
    let mut rest = *by;
    while let Some(open) = rest.find('`') {
        let Some(len) = rest[open + 1..].find('`') else {
            break;
        };
        let reference = &rest[open + 1..open + 1 + len];
        rest = &rest[open + len + 2..];
        let after = rest.trim_start();
        if let Some(check) = reference.strip_prefix("tidy: ") {
            if CHECKS.contains(&check) {
                backed += 1;
            } else {
                problems.push(format!(
                    "{at}: `tidy: {check}` is not a tidy check (one of {CHECKS:?})"
                ));
            }
        } else if let Some((file, function)) = reference.split_once("::") {
            let found = read(file).is_some_and(|text| {
                text.contains(&format!("fn {function}("))
                    || text.contains(&format!("fn {function}<"))
            });
            if found {
                backed += 1;
            } else {
                problems.push(format!(
                    "{at}: names {reference}, which does not exist: name the test that enforces the invariant"
                ));
            }
        } else if reference.ends_with(".rs") {
            let kinds: &[&str] = if after.starts_with("(compile_fail)") {
                &["```compile_fail"]
            } else if after.starts_with("(doctest)") {
                &["//! ```", "/// ```"]
            } else {
                problems.push(format!(
                    "{at}: after {reference} say `(doctest)` or `(compile_fail)`, or name a test `file::fn`"
                ));
                continue;
            };
            if read(reference).is_some_and(|t| kinds.iter().any(|k| t.contains(k))) {
                backed += 1;
            } else {
                problems.push(format!("{at}: {reference} has no {} doc example", kinds[0]));
            }
        }
    }
    if backed == 0 {
        problems.push(format!(
            "{at}: names nothing that enforces it: add a test (`file::fn`), a doc example or a tidy check, or move the line to the list of what is not enforced"
        ));
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn problems(file: &str, text: &str) -> Vec<String> {
        let mut p = Vec::new();
        library_rules(Path::new("/r"), Path::new(file), text, &mut p);
        p
    }

    #[test]
    fn a_hook_adapter_wording_a_refusal_or_including_runner_source_is_named_by_line() {
        let check = |text: &str| {
            let mut p = Vec::new();
            hooks_rules(
                Path::new("/r"),
                Path::new("/r/loopward-hooks/src/codex.rs"),
                text,
                &mut p,
            );
            p
        };
        let p = check(
            "fn a() {}\nlet r = Refusal::new(\"g\", \"no\", \"hint\");\nlet t = format!(\"Refused by loopward: x\");\n#[path = \"../../loopward-runner/src/gates/refusals.rs\"]\n",
        );
        assert_eq!(p.len(), 3, "{p:?}");
        assert!(p[0].starts_with("loopward-hooks/src/codex.rs:2:"), "{p:?}");
        assert!(p[2].contains("by path"), "{p:?}");
        // Rendering the engine's refusal, comments and tests are fine.
        assert!(check(
            "// Refusal::new is the engine's\nlet r = refusals::territory(t);\n#[cfg(test)]\nmod tests { fn f() { Refusal::new(\"a\", \"b\", \"c\"); } }\n"
        )
        .is_empty());
    }

    #[test]
    fn a_layer_matched_by_its_ledger_word_is_named_and_a_typed_match_is_not() {
        let check = |file: &str, text: &str| {
            let mut p = Vec::new();
            layer_name_rules(Path::new("/r"), Path::new(file), text, &mut p);
            p
        };
        let p = check(
            "/r/loopward-cli/src/x.rs",
            "if layer == \"stopgate\" {}\nmatch l { \"class_jump\" => 1 }\nmatch (l, v) { (\"caps\", V::X) => 1 }\n",
        );
        assert_eq!(p.len(), 3, "{p:?}");
        assert!(p[0].starts_with("loopward-cli/src/x.rs:1:"), "{p:?}");
        assert!(check(
            "/r/loopward-cli/src/x.rs",
            "if *layer == LayerId::StopGate {}\n"
        )
        .is_empty());
        assert!(check("/r/loopward-core/src/layer_id.rs", "\"caps\" => 1\n").is_empty());
        assert!(check(
            "/r/loopward-cli/src/x.rs",
            "#[cfg(test)]\nlayer == \"caps\"\n"
        )
        .is_empty());
    }

    #[test]
    fn a_library_reading_the_environment_or_the_wall_clock_is_named_by_line() {
        let p = problems(
            "/r/loopward-runner/src/x.rs",
            "fn a() {}\nlet k = std::env::var(\"K\");\nlet t = std::time::SystemTime::now();\n",
        );
        assert_eq!(p.len(), 2, "{p:?}");
        assert!(p[0].starts_with("loopward-runner/src/x.rs:2:"), "{p:?}");
        assert!(p[1].contains("outside the clock"), "{p:?}");
    }

    #[test]
    fn a_task_local_in_any_library_is_named_by_line() {
        let text = "use x;\ntokio::task_local! { static T: u32; }\n";
        for file in [
            "loopward-runner/src/layers/budget/service.rs",
            "loopward-restate/src/journal.rs",
        ] {
            let p = problems(&format!("/r/{file}"), text);
            assert_eq!(p.len(), 1, "{p:?}");
            assert!(
                p[0].starts_with(&format!("{file}:2: a task-local in library code")),
                "{p:?}"
            );
        }
        let in_tests = "#[cfg(test)]\nmod t { tokio::task_local! { static T: u32; } }\n";
        assert!(problems("/r/loopward-restate/src/x.rs", in_tests).is_empty());
    }

    #[test]
    fn a_layer_with_its_own_poll_ready_is_named_but_a_leaf_service_is_not() {
        let layer = "impl<S> tower::Layer<S> for L {\n    type Service = S2<S>;\n}\nimpl<S> Service<R> for S2<S> {\n    fn poll_ready(&mut self, cx: &mut Context<'_>) {}\n}\n";
        let p = problems("/r/loopward-restate/src/model.rs", layer);
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(
            p[0].starts_with(
                "loopward-restate/src/model.rs:5: a layer with a hand-written service"
            ),
            "{p:?}"
        );
        let leaf = "impl Service<R> for Backend {\n    fn poll_ready(&mut self, cx: &mut Context<'_>) {}\n}\n";
        assert!(problems("/r/loopward-runner/src/model/fake.rs", leaf).is_empty());
        assert!(problems("/r/loopward-runner/src/layers/from_fn.rs", layer).is_empty());
    }

    #[test]
    fn the_clock_tokio_time_and_comments_are_allowed() {
        assert!(problems("/r/loopward-runner/src/clock.rs", "SystemTime::now()").is_empty());
        assert!(problems("/r/a.rs", "let s = tokio::time::Instant::now();").is_empty());
        assert!(problems("/r/a.rs", "// std::env::var is read by the binary").is_empty());
    }

    #[test]
    fn only_the_runner_and_the_workflow_make_a_person_in_library_code() {
        let mint = "let p = Person::at_the_keyboard();\n";
        let p = problems("/r/loopward-llama/src/lib.rs", mint);
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(p[0].starts_with("loopward-llama/src/lib.rs:1:"), "{p:?}");
        for allowed in [
            "/r/loopward-runner/src/runner.rs",
            "/r/loopward-restate/src/workflow.rs",
            "/r/loopward-core/src/person.rs",
        ] {
            assert!(problems(allowed, mint).is_empty(), "{allowed}");
        }
        // Tests and doc examples talk to a person; taking words is not making them.
        let test = "#[cfg(test)]\nmod t { let p = Person::at_the_keyboard(); }\n";
        assert!(problems("/r/loopward-runner/src/x.rs", test).is_empty());
        let doc = "/// let p = Person::at_the_keyboard();\nfn f(w: HumanWords) -> Message { Message::human(w) }\n";
        assert!(problems("/r/loopward-runner/src/x.rs", doc).is_empty());
    }

    #[test]
    fn imported_wall_clocks_and_environments_are_caught_too() {
        let p = problems(
            "/r/loopward/src/x.rs",
            "use std::time::{Duration, Instant};\nlet t = Instant::now();\nuse std::{env, fs};\n",
        );
        assert_eq!(p.len(), 3, "{p:?}");
        assert!(p[2].contains("reads the environment"), "{p:?}");
    }

    fn graph(packages: serde_json::Value) -> Vec<String> {
        let mut p = Vec::new();
        graph_problems(&serde_json::json!({ "packages": packages }), &mut p).unwrap();
        p
    }

    fn package(name: &str, deps: &[(&str, &str)]) -> serde_json::Value {
        let deps: Vec<_> = deps
            .iter()
            .map(|(d, kind)| serde_json::json!({"name": d, "kind": if kind.is_empty() { serde_json::Value::Null } else { (*kind).into() }}))
            .collect();
        serde_json::json!({"name": name, "dependencies": deps})
    }

    #[test]
    fn the_crate_graph_refuses_an_upward_dependency_a_leaf_and_llama_in_the_runner() {
        let ok = graph(serde_json::json!([
            package("loopward-core", &[("serde", "")]),
            package(
                "loopward-runner",
                &[("loopward-core", ""), ("loopward-demo", "dev")]
            ),
            package("loopward-demo", &[]),
        ]));
        assert!(ok.is_empty(), "{ok:?}");
        let p = graph(serde_json::json!([
            package("loopward-core", &[("loopward-runner", "")]),
            package(
                "loopward-runner",
                &[("loopward-cli", ""), ("llama-cpp-2", "")]
            ),
            package("loopward-cli", &[]),
            package("loopward-newcrate", &[]),
        ]));
        assert_eq!(p.len(), 4, "{p:?}");
        assert!(
            p[0].contains("loopward-core depends on loopward-runner"),
            "{p:?}"
        );
        assert!(
            p.iter().any(|m| m.contains("nothing may depend on")),
            "{p:?}"
        );
        assert!(p.iter().any(|m| m.contains("llama-cpp-2")), "{p:?}");
        assert!(p.iter().any(|m| m.contains("no row")), "{p:?}");
    }

    #[test]
    fn the_code_map_names_every_crate_folder_and_public_module() {
        let map = "### `loopward-core/`\n- `audit/` the trail\n";
        let crates = vec![
            (
                "loopward-core".to_string(),
                Some("pub mod audit;\npub mod hook;\nmod private;\n".to_string()),
            ),
            ("loopward-new".to_string(), None),
        ];
        let mut p = Vec::new();
        map_problems(map, &crates, &mut p);
        assert_eq!(p.len(), 2, "{p:?}");
        assert!(p[0].contains("`hook` of loopward-core"), "{p:?}");
        assert!(p[1].contains("`loopward-new/`"), "{p:?}");
    }

    fn invariants(map: &str) -> Vec<String> {
        let files = |path: &str| match path {
            "a/tests/t.rs" => Some("#[test]\nfn holds() {}\n".to_string()),
            "a/src/lib.rs" => Some("/// ```compile_fail\n/// x\n/// ```\n".to_string()),
            "a/src/none.rs" => Some("fn x() {}\n".to_string()),
            _ => None,
        };
        let mut p = Vec::new();
        invariant_problems(map, &files, &mut p);
        p
    }

    #[test]
    fn every_row_of_the_invariants_page_is_checked_whatever_its_area() {
        let files = |path: &str| (path == "a/tests/t.rs").then(|| "fn holds() {}".to_string());
        let page = "# Invariants\n## Area one\n| invariant | enforced by |\n|---|---|\n| x | `a/tests/t.rs::holds` |\n## Area two\n| invariant | enforced by |\n|---|---|\n| y | `a/tests/t.rs::gone` |\n";
        let mut p = Vec::new();
        invariant_page("docs/invariants.md", page, &files, &mut p);
        assert_eq!(
            p.len(),
            2,
            "a missing test, so nothing backs the row: {p:?}"
        );
        assert!(
            p[0].starts_with("docs/invariants.md:9: names a/tests/t.rs::gone"),
            "{p:?}"
        );
        let mut p = Vec::new();
        invariant_page("docs/invariants.md", "# Invariants\nnone\n", &files, &mut p);
        assert_eq!(p, ["docs/invariants.md holds no invariant table"]);
    }

    #[test]
    fn every_invariant_row_names_a_test_a_doc_example_or_a_check_that_exists() {
        let good = "# A\n## Invariants\n| invariant | enforced by |\n|---|---|\n| x holds | `a/tests/t.rs::holds` |\n| y holds | `a/src/lib.rs` (compile_fail), `tidy: clock` |\n## Next\n";
        assert!(invariants(good).is_empty(), "{:?}", invariants(good));
        let bad = "Text. **Invariant:** z.\n## Invariants\n| invariant | enforced by |\n| x | `a/tests/t.rs::gone` |\n| y | nobody |\n| w | `tidy: vibes` |\n| v | `a/src/none.rs` (doctest) |\n";
        let p = invariants(bad);
        assert_eq!(p.len(), 8, "{p:?}");
        assert!(
            p[0].contains("ARCHITECTURE.md:1: an invariant stated outside"),
            "{p:?}"
        );
        assert!(
            p[1].contains("a/tests/t.rs::gone, which does not exist"),
            "{p:?}"
        );
        assert!(
            p.iter()
                .any(|m| m.contains("ARCHITECTURE.md:5: names nothing")),
            "{p:?}"
        );
        assert!(
            p.iter()
                .any(|m| m.contains("`tidy: vibes` is not a tidy check")),
            "{p:?}"
        );
        assert!(
            p.iter()
                .any(|m| m.contains("none.rs has no //! ``` doc example")),
            "{p:?}"
        );
        assert_eq!(invariants("no section").len(), 1);
    }

    #[test]
    fn a_library_that_prints_or_a_core_that_does_io_is_named() {
        let p = problems("/r/loopward-runner/src/x.rs", "println!(\"hi\");\n");
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(p[0].contains("a library prints"), "{p:?}");
        assert!(problems("/r/loopward-runner/src/x.rs", "#[cfg(test)]\ndbg!(1);").is_empty());
        let p = problems(
            "/r/loopward-core/src/x.rs",
            "let f = std::fs::read(\"x\");\n",
        );
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(p[0].contains("loopward-core does IO"), "{p:?}");
        assert!(problems("/r/loopward-runner/src/x.rs", "std::fs::read(\"x\");").is_empty());
        let p = graph(serde_json::json!([package(
            "loopward-core",
            &[("tokio", "")]
        )]));
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(p[0].contains("loopward-core depends on tokio"), "{p:?}");
    }

    #[test]
    fn versions_compare_as_numbers_not_text() {
        assert!(parse_version("1.88") > parse_version("1.9.0"));
        assert_eq!(parse_version("1.88"), parse_version("1.88.0"));
    }

    #[test]
    fn the_graph_has_a_row_for_every_crate_it_names() {
        for (_, allowed) in GRAPH {
            for dep in *allowed {
                assert!(GRAPH.iter().any(|(n, _)| n == dep), "{dep} has no row");
            }
        }
    }
}
