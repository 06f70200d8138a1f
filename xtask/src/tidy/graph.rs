//! The crate graph (which workspace crate may depend on which; llama.cpp only where allowed)
//! and a true `rust-version` (at least every locked dependency's own).

use anyhow::{bail, Context, Result};
use std::path::Path;
use std::process::Command;

/// Which workspace crates each crate may depend on (normal and build dependencies). A crate that
/// is not listed fails the check: add its row when you add the crate.
const GRAPH: &[(&str, &[&str])] = &[
    ("loopward-core", &[]),
    ("loopward-runner", &["loopward-core"]),
    ("loopward-pages", &["loopward-core", "loopward-runner"]),
    (
        "loopward-calibrate",
        &["loopward-core", "loopward-runner", "loopward-pages"],
    ),
    ("loopward-llama", &["loopward-core"]),
    ("loopward-hooks", &["loopward-core", "loopward-runner"]),
    (
        "loopward",
        &[
            "loopward-core",
            "loopward-runner",
            "loopward-pages",
            "loopward-llama",
        ],
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
            "loopward-calibrate",
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
            "loopward-calibrate",
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
            "loopward-pages",
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

/// What `loopward-runner` may not depend on: HTML is `loopward-pages`' (issue 36: one reason to
/// change per crate).
const NOT_IN_RUNNER: &[&str] = &["maud"];

/// Crates allowed to declare `llama-cpp-2` (it compiles llama.cpp).
const LLAMA_ALLOWED: &[&str] = &["loopward-llama", "loopward-bench"];

/// `cargo metadata --no-deps` of the workspace at `root`: its crates, their folders and their
/// dependencies.
pub(super) fn metadata(root: &Path) -> Result<serde_json::Value> {
    cargo_metadata(root, "--no-deps")
}

/// `cargo metadata --format-version 1` with `flag`, run in `root`, as JSON.
fn cargo_metadata(root: &Path, flag: &str) -> Result<serde_json::Value> {
    let out = Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", flag])
        .current_dir(root)
        .output()
        .context("cannot run cargo metadata")?;
    if !out.status.success() {
        bail!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(serde_json::from_slice(&out.stdout)?)
}

pub(super) fn crate_graph(meta: &serde_json::Value, problems: &mut Vec<String>) -> Result<()> {
    graph_problems(meta, problems)
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
            if name == "loopward-runner" && NOT_IN_RUNNER.contains(&dep) && !dev {
                problems.push(format!(
                    "loopward-runner depends on {dep}; pages are rendered in loopward-pages, handed to the ledger as a `Page`"
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

pub(super) fn rust_version(root: &Path, problems: &mut Vec<String>) -> Result<()> {
    let meta = cargo_metadata(root, "--locked")?;
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

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    pub(in crate::tidy) fn graph(packages: serde_json::Value) -> Vec<String> {
        let mut p = Vec::new();
        graph_problems(&serde_json::json!({ "packages": packages }), &mut p).unwrap();
        p
    }

    pub(in crate::tidy) fn package(name: &str, deps: &[(&str, &str)]) -> serde_json::Value {
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
    fn the_runner_renders_no_html() {
        let p = graph(serde_json::json!([
            package("loopward-core", &[]),
            package("loopward-runner", &[("loopward-core", ""), ("maud", "")]),
        ]));
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(p[0].contains("loopward-runner depends on maud"), "{p:?}");
        assert!(graph(serde_json::json!([
            package("loopward-core", &[]),
            package("loopward-runner", &[("loopward-core", "")]),
            package("loopward-pages", &[("loopward-runner", ""), ("maud", "")]),
        ]))
        .is_empty());
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
