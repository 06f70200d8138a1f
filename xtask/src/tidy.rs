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
//! - **code map**: every workspace crate and every public module of a library crate is named in
//!   ARCHITECTURE.md.

use anyhow::{bail, Context, Result};
use std::path::Path;
use std::process::Command;

/// Which workspace crates each crate may depend on (normal and build dependencies). A crate that
/// is not listed fails the check: add its row when you add the crate.
const GRAPH: &[(&str, &[&str])] = &[
    ("loopward-core", &[]),
    ("loopward-runner", &["loopward-core"]),
    ("loopward-llama", &["loopward-core"]),
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
        "loopward-cli",
        &[
            "loopward",
            "loopward-core",
            "loopward-runner",
            "loopward-term",
            "loopward-restate",
        ],
    ),
    (
        "loopward-demo",
        &[
            "loopward",
            "loopward-core",
            "loopward-runner",
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

/// Crates allowed to declare `llama-cpp-2` (it compiles llama.cpp).
const LLAMA_ALLOWED: &[&str] = &["loopward-llama", "loopward-bench"];

/// Library source folders the environment and clock rules apply to.
const LIBRARIES: &[&str] = &[
    "loopward-core/src",
    "loopward-runner/src",
    "loopward-llama/src",
    "loopward/src",
    "loopward-restate/src",
];

/// The library files that may make a `Person` (`Person::at_the_keyboard`): its definition; the
/// runner, for the messages its inbox delivered and, on resume, the task its journal read from
/// the `run_started` record; the Restate workflow, whose start request carries the run's task
/// (as argv does the CLI's). Binaries, tests, examples and the demo talk to a person themselves.
const HUMAN_SOURCES: &[&str] = &[
    "loopward-core/src/person.rs",
    "loopward-runner/src/runner.rs",
    "loopward-restate/src/workflow.rs",
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
    code_map(root, &mut problems)?;
    if problems.is_empty() {
        println!(
            "tidy: crate graph, environment, clock, human origin, rust-version and code map hold"
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
        if code.contains("std::env::") || code.contains("use std::env") {
            problems.push(format!(
                "{at}: a library reads the environment; take the value (or a lookup) from the caller"
            ));
        }
        let clock_file = rel.ends_with("/clock.rs");
        if !clock_file && (code.contains("SystemTime::now") || code.contains("std::time::Instant"))
        {
            problems.push(format!(
                "{at}: time outside the clock; use the injected `Clock` (or tokio time)"
            ));
        }
    }
}

fn code_map(root: &Path, problems: &mut Vec<String>) -> Result<()> {
    let map = std::fs::read_to_string(root.join("ARCHITECTURE.md"))
        .context("cannot read ARCHITECTURE.md")?;
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
        if !map.contains(&format!("`{folder}/`")) {
            problems.push(format!(
                "ARCHITECTURE.md's code map does not name the crate folder `{folder}/`"
            ));
        }
        let lib = dir.join("src/lib.rs");
        let Ok(text) = std::fs::read_to_string(&lib) else {
            continue;
        };
        for line in text.lines() {
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
    Ok(())
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
