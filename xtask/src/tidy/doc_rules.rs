//! Rules read in the docs: every crate and public module named in ARCHITECTURE.md's code map,
//! and every invariant row naming a test, a doc example or a check that exists.

use anyhow::{Context, Result};
use std::path::Path;

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
    "detail keys",
    "hooks",
];

/// The page of invariants, one a table row, grouped by area.
pub(super) const INVARIANTS: &str = "docs/invariants.md";

pub(super) fn code_map(root: &Path, problems: &mut Vec<String>) -> Result<()> {
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
pub(super) fn invariant_problems(
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
pub(super) fn invariant_page(
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
