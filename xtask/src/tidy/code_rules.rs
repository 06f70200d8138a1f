//! Rules read in the source text: no environment, wall clock, printing or task-local in
//! libraries; no IO in the vocabulary; a `Person` made only where allowed; layers read back as
//! `LayerId`, not by their ledger word; hook adapters that decide and word nothing.

use std::path::{Path, PathBuf};

/// What `loopward-core` may not name in its code: files, sockets, processes, stdio, a runtime.
const CORE_IO: &[&str] = &[
    "std::fs",
    "std::net",
    "std::process",
    "std::io::std",
    "tokio::",
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

/// The workspace's crates that are not libraries for the library rules: the binaries, the
/// terminal renderer (it prints, for them), the examples and this tool. Every other crate is
/// held to them — a crate added to the workspace is, until it is named here.
const NOT_LIBRARIES: &[&str] = &[
    "loopward-cli",
    "loopward-demo",
    "loopward-bench",
    "loopward-term",
    "loopward-examples",
    "xtask",
];

/// The crates whose sources no rule reads: this tool (its rules spell what they forbid).
const UNREAD: &[&str] = &["xtask"];

/// The services that keep a hand-written `poll_ready`, each for its reason.
const OWN_READINESS: &[&str] = &[
    // The kit itself: the leaf macro and the layer service.
    "loopward-runner/src/leaf.rs",
    "loopward-runner/src/layers/from_fn.rs",
    // Answers with a ready future: no allocation per call on the benches' measured path.
    "loopward-runner/src/model/fake.rs",
    // Depends only on the vocabulary, not on the runner that holds the macro.
    "loopward-llama/src/",
];

/// Every crate's source folder (the layer-name rule holds in binaries too), and the library
/// crates' among them, from `cargo metadata`: `<crate>/src`, or the crate's folder where it has
/// no `src` (the examples).
pub(super) fn source_folders(meta: &serde_json::Value) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let (mut all, mut libraries) = (vec![], vec![]);
    for p in meta["packages"].as_array().into_iter().flatten() {
        let name = p["name"].as_str().unwrap_or_default();
        let Some(dir) = p["manifest_path"]
            .as_str()
            .and_then(|m| Path::new(m).parent())
        else {
            continue;
        };
        if UNREAD.contains(&name) {
            continue;
        }
        let src = dir.join("src");
        let folder = if src.is_dir() { src } else { dir.to_path_buf() };
        if !NOT_LIBRARIES.contains(&name) {
            libraries.push(folder.clone());
        }
        all.push(folder);
    }
    (all, libraries)
}

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

/// Whether `rel` is a module's tests kept beside it (`#[cfg(test)] mod tests;` in `tests.rs`):
/// test code from its first line, as an inline `#[cfg(test)]` module is from that line on.
fn is_test_file(rel: &str) -> bool {
    Path::new(rel).file_name().is_some_and(|n| n == "tests.rs")
}

/// `path` relative to `root`, as the problems name it.
fn relative(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .display()
        .to_string()
}

/// The lines of `text` (the file `rel`) that are code: outside comments and test code, each
/// with its line number (from 1), trimmed at the start.
fn code_lines<'a>(rel: &str, text: &'a str) -> impl Iterator<Item = (usize, &'a str)> {
    let mut in_tests = is_test_file(rel);
    text.lines().enumerate().filter_map(move |(i, line)| {
        let code = line.trim_start();
        in_tests |= code.starts_with("#[cfg(test)]");
        (!in_tests && !code.starts_with("//")).then_some((i + 1, code))
    })
}

pub(super) fn library_rules(root: &Path, path: &Path, text: &str, problems: &mut Vec<String>) {
    let rel = relative(root, path);
    let speaks_for_people = HUMAN_SOURCES.iter().any(|f| rel.ends_with(f));
    let is_layer_file = text.lines().any(|l| {
        let l = l.trim_start();
        l.starts_with("impl<") && l.contains("Layer<S> for") && !rel.ends_with("from_fn.rs")
    });
    let mut in_tests = is_test_file(&rel);
    let mut before = "";
    for (i, line) in text.lines().enumerate() {
        let code = line.trim_start();
        if code.starts_with("//") {
            continue;
        }
        let at = format!("{rel}:{}", i + 1);
        // A `tests.rs` is read as test code whole: it must be one only tests compile.
        if code.starts_with("mod tests;") && !before.starts_with("#[cfg(test)]") {
            problems.push(format!(
                "{at}: `mod tests;` without `#[cfg(test)]` on the line before; a module's tests.rs is held to the test rules, so it must be compiled only for tests"
            ));
        }
        if !code.is_empty() {
            before = code;
        }
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
        // `poll_ready`. A leaf (agent, backend, executor) is always ready: `leaf_service!`.
        if !in_tests && code.starts_with("fn poll_ready") && is_layer_file {
            problems.push(format!(
                "{at}: a layer with a hand-written service; build it with the layer kit (`layers::from_fn`: a policy struct implementing `LayerFn`, `type Service = FromFn<Policy, S>`)"
            ));
        } else if !in_tests
            && code.starts_with("fn poll_ready")
            && !OWN_READINESS.iter().any(|f| rel.starts_with(f))
        {
            problems.push(format!(
                "{at}: a leaf service with a hand-written `poll_ready`; write it with `loopward_runner::leaf_service!` (always ready, its work in the future `call` returns), or name the file in tidy's OWN_READINESS with the reason"
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
pub(super) fn layer_name_rules(root: &Path, path: &Path, text: &str, problems: &mut Vec<String>) {
    let rel = relative(root, path);
    if rel.ends_with("loopward-core/src/layer_id.rs") {
        return;
    }
    for (n, code) in code_lines(&rel, text) {
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
                "{rel}:{n}: a layer matched by its ledger word; match `LayerId` (loopward_core::LayerId::StopGate, …) instead"
            ));
        }
    }
}

/// The ledger unit: the only sources that know a layer decision's detail by its JSON keys.
const LEDGER_UNIT: &[&str] = &["loopward-core/src/detail/", "loopward-core/src/audit"];

/// A layer decision's detail is read through its types (`detail.as_stop_gate()`,
/// `detail.call_id()`): no source outside the ledger unit picks a detail's JSON key by hand, so
/// a key renamed on write cannot leave a reader silently reading nothing.
pub(super) fn detail_key_rules(root: &Path, path: &Path, text: &str, problems: &mut Vec<String>) {
    let rel = relative(root, path);
    if LEDGER_UNIT.iter().any(|u| rel.starts_with(u)) {
        return;
    }
    for (n, code) in code_lines(&rel, text) {
        let by_key = [
            "detail[\"",
            "detail.get(\"",
            ".to_json()[",
            ".to_json().get(",
        ]
        .iter()
        .any(|p| code.contains(p));
        if by_key {
            problems.push(format!(
                "{rel}:{n}: a layer decision's detail read by its JSON key; use its typed accessor (`detail.as_stop_gate()`, `detail.call_id()` …; add one in loopward-core/src/detail/ if none fits)"
            ));
        }
    }
}

/// The hooks rule: an adapter renders the engine's refusals; it makes none and words none.
pub(super) fn hooks_rules(root: &Path, path: &Path, text: &str, problems: &mut Vec<String>) {
    let rel = relative(root, path);
    for (n, code) in code_lines(&rel, text) {
        let at = format!("{rel}:{n}");
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

#[cfg(test)]
mod tests {
    use super::super::graph::tests::{graph, package};
    use super::*;

    /// What `rule` finds in `text` as the file `file` of a tree at `/r`.
    fn findings(
        rule: fn(&Path, &Path, &str, &mut Vec<String>),
        file: &str,
        text: &str,
    ) -> Vec<String> {
        let mut p = Vec::new();
        rule(Path::new("/r"), Path::new(file), text, &mut p);
        p
    }

    fn problems(file: &str, text: &str) -> Vec<String> {
        findings(library_rules, file, text)
    }

    /// Asserts that `p` holds `count` problems, the first named `at` (`file:line:`).
    fn assert_named(p: &[String], count: usize, at: &str) {
        assert_eq!(p.len(), count, "{p:?}");
        assert!(p[0].starts_with(at), "{p:?}");
    }

    #[test]
    fn a_hook_adapter_wording_a_refusal_or_including_runner_source_is_named_by_line() {
        let check = |text: &str| findings(hooks_rules, "/r/loopward-hooks/src/codex.rs", text);
        let p = check(
            "fn a() {}\nlet r = Refusal::new(\"g\", \"no\", \"hint\");\nlet t = format!(\"Refused by loopward: x\");\n#[path = \"../../loopward-runner/src/gates/refusals.rs\"]\n",
        );
        assert_named(&p, 3, "loopward-hooks/src/codex.rs:2:");
        assert!(p[2].contains("by path"), "{p:?}");
        // Rendering the engine's refusal, comments and tests are fine.
        assert!(check(
            "// Refusal::new is the engine's\nlet r = refusals::territory(t);\n#[cfg(test)]\nmod tests { fn f() { Refusal::new(\"a\", \"b\", \"c\"); } }\n"
        )
        .is_empty());
    }

    #[test]
    fn a_layer_matched_by_its_ledger_word_is_named_and_a_typed_match_is_not() {
        let check = |file: &str, text: &str| findings(layer_name_rules, file, text);
        let p = check(
            "/r/loopward-cli/src/x.rs",
            "if layer == \"stopgate\" {}\nmatch l { \"class_jump\" => 1 }\nmatch (l, v) { (\"caps\", V::X) => 1 }\n",
        );
        assert_named(&p, 3, "loopward-cli/src/x.rs:1:");
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
        assert_named(&p, 2, "loopward-runner/src/x.rs:2:");
        assert!(p[1].contains("outside the clock"), "{p:?}");
    }

    #[test]
    fn every_crate_but_the_binaries_is_held_to_the_library_rules() {
        let d = tempfile::tempdir().unwrap();
        for c in ["loopward-pages", "loopward-cli", "xtask", "examples"] {
            std::fs::create_dir_all(d.path().join(c).join(if c == "examples" {
                ""
            } else {
                "src"
            }))
            .unwrap();
        }
        let package = |name: &str, dir: &str| {
            serde_json::json!({"name": name,
                "manifest_path": d.path().join(dir).join("Cargo.toml")})
        };
        let meta = serde_json::json!({"packages": [
            package("loopward-pages", "loopward-pages"),
            package("loopward-cli", "loopward-cli"),
            package("xtask", "xtask"),
            package("loopward-examples", "examples"),
        ]});
        let (all, libraries) = source_folders(&meta);
        let rel = |v: Vec<PathBuf>| -> Vec<String> {
            v.iter()
                .map(|p| p.strip_prefix(d.path()).unwrap().display().to_string())
                .collect()
        };
        // A crate nobody listed (a new one) is a library; the binaries are read for layer
        // names only; the examples have no `src`; xtask is not read.
        assert_eq!(rel(libraries), ["loopward-pages/src"]);
        assert_eq!(
            rel(all),
            ["loopward-pages/src", "loopward-cli/src", "examples"]
        );
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
    fn a_detail_read_by_its_json_key_is_named_outside_the_ledger_unit_only() {
        let check = |file: &str, text: &str| findings(detail_key_rules, file, text);
        let p = check(
            "/r/loopward-pages/src/x.rs",
            "let a = detail[\"gate\"];\nlet b = detail.get(\"by\");\nlet c = d.to_json()[\"why\"];\nlet e = d.to_json().get(\"id\");\n",
        );
        assert_named(&p, 4, "loopward-pages/src/x.rs:1:");
        assert!(p[3].starts_with("loopward-pages/src/x.rs:4:"), "{p:?}");
        assert!(p[0].contains("typed accessor"), "{p:?}");
        // Typed reads, the ledger unit itself, comments and tests are fine.
        let typed = "let g = detail.as_stop_gate();\nlet id = detail.call_id();\n";
        assert!(check("/r/loopward-cli/src/x.rs", typed).is_empty());
        let keyed = "let v = detail.get(\"call_id\");\n";
        assert!(check("/r/loopward-core/src/detail/mod.rs", keyed).is_empty());
        assert!(check("/r/loopward-cli/src/x.rs", &format!("// {keyed}")).is_empty());
        assert!(check(
            "/r/loopward-cli/src/x.rs",
            &format!("#[cfg(test)]\n{keyed}")
        )
        .is_empty());
    }

    #[test]
    fn a_hand_written_poll_ready_is_named_outside_the_kit_and_the_named_leaves() {
        let layer = "impl<S> tower::Layer<S> for L {\n    type Service = S2<S>;\n}\nimpl<S> Service<R> for S2<S> {\n    fn poll_ready(&mut self, cx: &mut Context<'_>) {}\n}\n";
        assert_named(
            &problems("/r/loopward-restate/src/model.rs", layer),
            1,
            "loopward-restate/src/model.rs:5: a layer with a hand-written service",
        );
        let leaf = "impl Service<R> for Backend {\n    fn poll_ready(&mut self, cx: &mut Context<'_>) {}\n}\n";
        assert_named(
            &problems("/r/loopward-cli/src/cli/recorded.rs", leaf),
            1,
            "loopward-cli/src/cli/recorded.rs:2: a leaf service with a hand-written `poll_ready`; write it with `loopward_runner::leaf_service!`",
        );
        assert!(problems("/r/loopward-runner/src/model/fake.rs", leaf).is_empty());
        assert!(problems("/r/loopward-llama/src/lib.rs", leaf).is_empty());
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
        assert_named(&p, 1, "loopward-llama/src/lib.rs:1:");
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
        assert!(problems("/r/loopward-core/src/x/tests.rs", mint).is_empty());
        // …only as a module compiled for tests alone.
        assert!(problems("/r/loopward-core/src/x.rs", "#[cfg(test)]\nmod tests;\n").is_empty());
        let unguarded = problems("/r/loopward-core/src/x.rs", "pub mod a;\nmod tests;\n");
        assert!(
            unguarded[0].contains("x.rs:2: `mod tests;` without `#[cfg(test)]`"),
            "{unguarded:?}"
        );
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
}
