//! `loopward policy explain|lint`: the rule that decides, where it is written, and the version
//! of the policy that said so; and rules that will not do what they seem to.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const CONFIG: &str = r#"[run]
first = "planner"

[[agent]]
name = "planner"
tools = ["read_file", "write_file"]

[[agent]]
name = "builder"
tools = ["read_file", "write_file", "shell"]

[[territory]]
paths = ["plans/**"]
owner = "planner"
"#;

fn project(config: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap().join("project");
    std::fs::create_dir(&root).unwrap();
    std::fs::write(root.join("loopward.toml"), config).unwrap();
    (dir, root)
}

fn loopward(root: &Path, args: &[&str]) -> (Option<i32>, String) {
    let o: Output = Command::new(env!("CARGO_BIN_EXE_loopward"))
        .args(args)
        .current_dir(root)
        .env("XDG_STATE_HOME", root.with_file_name("state"))
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    (o.status.code(), text)
}

fn version(text: &str) -> String {
    text.lines()
        .next()
        .and_then(|l| l.strip_prefix("policy "))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| panic!("no version: {text}"))
        .to_string()
}

#[test]
fn explain_names_the_rule_its_line_the_remedy_and_the_policy_version() {
    let (_d, root) = project(CONFIG);
    let (code, text) = loopward(
        &root,
        &[
            "policy",
            "explain",
            "--agent",
            "builder",
            "--write",
            "plans/a.md",
        ],
    );
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains("deny     territory:planner        loopward.toml:12"),
        "{text}"
    );
    assert!(text.contains("plans/a.md belongs to planner"), "{text}");
    assert!(text.contains("hand it to planner"), "{text}");
    // The same rule, worded for the host that would show it.
    let (_, codex) = loopward(
        &root,
        &[
            "policy",
            "explain",
            "--agent",
            "builder",
            "--write",
            "plans/a.md",
            "--host",
            "codex",
        ],
    );
    assert!(codex.contains("in your reply"), "{codex}");
    let (code, text) = loopward(
        &root,
        &[
            "policy",
            "explain",
            "--agent",
            "planner",
            "--write",
            "plans/a.md",
        ],
    );
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("decision: allow"), "{text}");
    // The version follows the effective policy, not the file's bytes.
    let v1 = version(&text);
    std::fs::write(root.join("loopward.toml"), format!("# a comment\n{CONFIG}")).unwrap();
    let (_, same) = loopward(
        &root,
        &["policy", "explain", "--agent", "planner", "--write", "x"],
    );
    assert_eq!(version(&same), v1);
    std::fs::write(
        root.join("loopward.toml"),
        CONFIG.replace("plans/**", "plans/*.md"),
    )
    .unwrap();
    let (_, other) = loopward(
        &root,
        &["policy", "explain", "--agent", "planner", "--write", "x"],
    );
    assert_ne!(version(&other), v1);
}

#[test]
fn explain_shows_the_override_a_write_would_use_and_uses_none() {
    let (_d, root) = project(CONFIG);
    let (code, text) = loopward(
        &root,
        &[
            "override",
            "grant",
            "--agent",
            "builder",
            "--path",
            "plans/a.md",
            "--reason",
            "fix the typo",
            "--ttl",
            "10m",
        ],
    );
    assert_eq!(code, Some(0), "{text}");
    for _ in 0..2 {
        let (code, text) = loopward(
            &root,
            &[
                "policy",
                "explain",
                "--agent",
                "builder",
                "--write",
                "plans/a.md",
            ],
        );
        assert_eq!(code, Some(0), "{text}");
        assert!(text.contains("override"), "{text}");
        assert!(text.contains("\"fix the typo\""), "{text}");
    }
}

#[test]
fn explain_a_command_lists_what_its_sandbox_leaves_read_only() {
    let (_d, root) = project(CONFIG);
    let (code, text) = loopward(
        &root,
        &[
            "policy",
            "explain",
            "--agent",
            "builder",
            "--command",
            "make test",
        ],
    );
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.contains("read-only: territory:planner plans/** (loopward.toml:12)"),
        "{text}"
    );
    assert!(text.contains("not compared afterwards: .git"), "{text}");
}

#[test]
fn lint_finds_a_territory_in_control_files_a_plan_only_one_agent_can_write_and_watch_only() {
    let (_d, root) = project(CONFIG);
    let (code, text) = loopward(&root, &["policy", "lint"]);
    assert_eq!(code, Some(0), "{text}");
    let bad = format!(
        "{CONFIG}\n[[territory]]\npaths = [\".loopward/notes/*.md\"]\nowner = \"builder\"\n\n[gates.sprawl]\nplan_path = \"plans/plan.md\"\n\n[gates.shell]\nsandbox = \"watch-only\"\n"
    );
    std::fs::write(root.join("loopward.toml"), bad).unwrap();
    let (code, text) = loopward(&root, &["policy", "lint"]);
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains("loopward.toml:16: territory:builder: `.loopward/notes/*.md` lies in loopward's control files"),
        "{text}"
    );
    assert!(
        text.contains("plan plans/plan.md lies in territory:planner"),
        "{text}"
    );
    assert!(text.contains("watch-only"), "{text}");
    assert!(text.contains("3 finding(s)"), "{text}");
}
