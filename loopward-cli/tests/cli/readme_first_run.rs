//! The README, followed as a newcomer would: the install line it prints builds this binary, and
//! its "Your own two-agent team" section — the files it shows, then the commands it prints, in
//! order — gives a first governed run offline: one refusal with its way out, a ledger that
//! verifies, a report that counts the decision. Nothing here is typed by hand: a README edit
//! that breaks the path breaks this test.

use std::path::{Path, PathBuf};
use std::process::Output;

fn readme() -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    std::fs::read_to_string(root.join("README.md")).unwrap()
}

/// The fenced blocks of `text`: (info string, body).
fn blocks(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut open: Option<(String, String)> = None;
    for line in text.lines() {
        match (&mut open, line.strip_prefix("```")) {
            (None, Some(info)) => open = Some((info.trim().to_string(), String::new())),
            (Some(_), Some(_)) => out.extend(open.take()),
            (Some((_, body)), None) => {
                body.push_str(line);
                body.push('\n');
            }
            (None, None) => {}
        }
    }
    out
}

fn run(dir: &Path, command: &str) -> Output {
    let words: Vec<&str> = command.split_whitespace().collect();
    assert_eq!(
        words[0], "loopward",
        "the README prints only loopward commands here: {command}"
    );
    super::loopward(dir, &words[1..])
}

#[test]
fn the_readme_leads_from_a_clone_to_a_first_governed_run_of_your_own_team() {
    let text = readme();
    // From a clone: the install line names this crate, whose binary is `loopward`.
    assert!(
        text.contains("cargo install --path loopward-cli"),
        "no install line"
    );
    let manifest =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml")).unwrap();
    assert!(manifest.contains("name = \"loopward\""));

    let start = text
        .find("### Your own two-agent team")
        .expect("the README has the own-team section");
    let section = &text[start..];
    let end = section.find("readme_first_run.rs").expect("section end");
    let section = &section[..end];

    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut commands = Vec::new();
    let mut files: Vec<PathBuf> = Vec::new();
    for (info, body) in blocks(section) {
        match info.as_str() {
            "toml" => {
                let name = body
                    .lines()
                    .next()
                    .and_then(|l| l.strip_prefix("# "))
                    .expect("each file block starts with `# <file name>`")
                    .trim();
                std::fs::write(d.join(name), &body).unwrap();
                files.push(d.join(name));
            }
            "sh" => commands.extend(
                body.lines()
                    .map(|l| l.split(" #").next().unwrap().trim().to_string())
                    .filter(|l| !l.is_empty()),
            ),
            other => panic!("unexpected block {other:?} in the section"),
        }
    }
    assert_eq!(files.len(), 2, "a config and a script");
    assert!(commands.iter().any(|c| c.starts_with("loopward run")));

    let mut seen = String::new();
    for c in &commands {
        let o = run(d, c);
        let out = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        assert_eq!(o.status.code(), Some(0), "`{c}` failed:\n{out}");
        seen.push_str(&format!("$ {c}\n{out}"));
    }
    // What the section's comments promise.
    crate::support::assert_says_all(
        &seen,
        &[
            "territory:writer",
            "refused by territory:writer: docs/intro.md belongs to writer",
            "what to do:",
            "completed:",
            "anchored in index.jsonl",
            "unauthorised writes: 0",
        ],
    );
    let report = run(d, "loopward report --json");
    let json: serde_json::Value = serde_json::from_slice(&report.stdout).unwrap();
    assert_eq!(json["runs"], 1, "{json}");
    assert_eq!(json["unauthorised_writes"]["total"], 0, "{json}");
    assert_eq!(
        std::fs::read_to_string(d.join("docs/intro.md")).unwrap(),
        "# Intro\n",
        "the reviewer's refused edit did not land"
    );
}
