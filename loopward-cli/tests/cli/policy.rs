//! `loopward policy explain|lint`: the rule that decides, where it is written, and the version
//! of the policy that said so; and rules that will not do what they seem to.

use super::assert_says;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Planner and builder, the plans the planner's (its territory at line 12).
const CONFIG: &str = include_str!("policies/two-agents.toml");

fn project(config: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap().join("project");
    std::fs::create_dir(&root).unwrap();
    std::fs::write(root.join("loopward.toml"), config).unwrap();
    (dir, root)
}

fn loopward(root: &Path, args: &[&str]) -> (Option<i32>, String) {
    let o = super::loopward_cmd(root, args)
        .env("XDG_STATE_HOME", root.with_file_name("state"))
        .output()
        .unwrap();
    (o.status.code(), super::text(&o))
}

/// `loopward policy explain --agent <agent> <what…>` in `root`.
fn explain(root: &Path, agent: &str, what: &[&str]) -> (Option<i32>, String) {
    let mut args = vec!["policy", "explain", "--agent", agent];
    args.extend(what);
    loopward(root, &args)
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
    let (code, text) = explain(&root, "builder", &["--write", "plans/a.md"]);
    assert_eq!(code, Some(1), "{text}");
    assert_says(&text, "deny     territory:planner        loopward.toml:12");
    assert_says(&text, "plans/a.md belongs to planner");
    assert_says(&text, "hand it to planner");
    // The same rule, worded for the host that would show it.
    let (_, codex) = explain(
        &root,
        "builder",
        &["--write", "plans/a.md", "--host", "codex"],
    );
    assert_says(&codex, "in your reply");
    let (code, text) = explain(&root, "planner", &["--write", "plans/a.md"]);
    assert_eq!(code, Some(0), "{text}");
    assert_says(&text, "decision: allow");
    // The version follows the effective policy, not the file's bytes.
    let v1 = version(&text);
    std::fs::write(root.join("loopward.toml"), format!("# a comment\n{CONFIG}")).unwrap();
    let (_, same) = explain(&root, "planner", &["--write", "x"]);
    assert_eq!(version(&same), v1);
    std::fs::write(
        root.join("loopward.toml"),
        CONFIG.replace("plans/**", "plans/*.md"),
    )
    .unwrap();
    let (_, other) = explain(&root, "planner", &["--write", "x"]);
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
        let (code, text) = explain(&root, "builder", &["--write", "plans/a.md"]);
        assert_eq!(code, Some(0), "{text}");
        assert_says(&text, "override");
        assert_says(&text, "\"fix the typo\"");
    }
}

#[test]
fn explain_a_command_lists_what_its_sandbox_leaves_read_only() {
    let (_d, root) = project(CONFIG);
    let (code, text) = explain(&root, "builder", &["--command", "make test"]);
    assert_eq!(code, Some(0), "{text}");
    assert_says(
        &text,
        "read-only: territory:planner plans/** (loopward.toml:12)",
    );
    assert_says(&text, "not compared afterwards: .git");
}

/// [`CONFIG`] with a territory for the builder (lines 16–18): every agent is named somewhere.
fn clean() -> String {
    format!("{CONFIG}\n[[territory]]\npaths = [\"src/**\"]\nowner = \"builder\"\n")
}

/// `loopward policy lint` of `config`, in a project of its own.
fn lint(config: &str) -> (Option<i32>, String) {
    let (_d, root) = project(config);
    loopward(&root, &["policy", "lint"])
}

/// Lints `config`, which must fail with each of `findings` in its output; the output.
#[track_caller]
fn lint_finds(config: &str, findings: &[&str]) -> String {
    let (code, text) = lint(config);
    assert_eq!(code, Some(1), "{text}");
    for said in findings {
        assert_says(&text, said);
    }
    text
}

#[test]
fn lint_finds_nothing_in_a_config_whose_rules_all_do_what_they_say() {
    let (code, text) = lint(&clean());
    assert_eq!(code, Some(0), "{text}");
    assert_says(&text, "no finding: every rule does what it says");
}

#[test]
fn lint_finds_a_territory_in_control_files_a_plan_only_one_agent_can_write_and_watch_only() {
    let bad = format!(
        "{}\n[[territory]]\npaths = [\".loopward/notes/*.md\"]\nowner = \"builder\"\n\n[gates.sprawl]\nplan_path = \"plans/plan.md\"\n\n[gates.shell]\nsandbox = \"watch-only\"\n",
        clean()
    );
    lint_finds(
        &bad,
        &[
            "loopward.toml:20: territory:builder: `.loopward/notes/*.md` lies in loopward's control files",
            "loopward.toml:24: the sprawl gate's plan plans/plan.md lies in territory:planner",
            "loopward.toml:27: [gates.shell] sandbox = \"watch-only\"",
            "what to do: move plan_path out of territory:planner",
            "3 finding(s)",
        ],
    );
}

#[test]
fn lint_finds_paths_claimed_twice_and_globs_that_match_nothing() {
    let bad = format!(
        "{}\n[[territory]]\nname = \"builder-extra\"\npaths = [\"src/main.rs\", 'lib\\util.rs', \"docs//a.md\", \"tests/\"]\nowner = \"builder\"\n\n[[territory]]\nname = \"notes\"\npaths = [\"notes/**\", \"notes/todo.md\"]\nowner = \"planner\"\n",
        clean()
    );
    let text = lint_finds(
        &bad,
        &[
            // Two territories of one owner: where the first is written, naming the second's line.
            "loopward.toml:16: territory:builder and builder-extra (loopward.toml:20): redundant: `src/main.rs` adds nothing, `src/**` already claims it for the same owners",
            "what to do: merge the two [[territory]] tables",
            // Two globs of one territory.
            "loopward.toml:25: notes: redundant: `notes/todo.md` adds nothing, `notes/**` already claims it",
            "loopward.toml:20: builder-extra: `lib\\util.rs` uses `\\`, which escapes the next character rather than separating folders: it matches `libutil.rs`",
            "loopward.toml:20: builder-extra: `docs//a.md` has an empty folder name (`//`)",
            "4 finding(s)",
        ],
    );
    // A territory's trailing `/` is dropped: `tests/` covers tests/a.rs.
    assert!(!text.contains("`tests/`"), "{text}");
}

/// A team whose review gate, stop-gates and one agent cannot do what they seem to.
const GATES: &str = include_str!("policies/gates-that-cannot-fire.toml");

#[test]
fn lint_finds_gates_that_cannot_fire_and_agents_named_nowhere() {
    let (_d, root) = project(GATES);
    std::fs::create_dir(root.join("docs")).unwrap();
    let (code, text) = loopward(&root, &["policy", "lint"]);
    assert_eq!(code, Some(1), "{text}");
    for (line, said) in [
        ("loopward.toml:24: review:builder->planner: when `src/` ends in `/`", "write `dir/**`"),
        ("loopward.toml:24: review:builder->planner: when `.loopward/**` lies in loopward's control files", "remove it"),
        ("loopward.toml:24: review:builder->planner: when `docs` names the folder docs", "write \"docs/**\""),
        ("loopward.toml:29: stopgate tool:deploy: tool = \"deploy\" cannot fire: there is no loopward tool of that name", "name a tool an agent lists"),
        ("loopward.toml:34: stopgate handoff:builder: a handoff to builder cannot happen: no other agent has the handoff tool", "add \"handoff\""),
        ("loopward.toml:39: stopgate write:runs/**: glob `runs/**` lies in loopward's control files", "remove it"),
        ("loopward.toml:12: agent scribe is named nowhere: it owns no territory, and no review gate, stop-gate or run.first names it: it may write every path no territory claims", "give scribe a [[territory]] of its own"),
    ] {
        let at = text.find(line).unwrap_or_else(|| panic!("{line}\n{text}"));
        let fix = text[at..].lines().nth(1).unwrap_or_default();
        assert!(fix.contains(said), "{line}: {fix}\n{text}");
    }
    // `src/**` arms the gate; a tool an agent lists can be gated.
    assert!(
        !text.contains("`src/**`") && !text.contains("stopgate tool:write_file"),
        "{text}"
    );
    assert_says(&text, "7 finding(s)");
}

#[test]
fn lint_leaves_to_the_load_what_never_loads() {
    for (bad, named) in [
        (CONFIG.replace("plans/**", "./plans/**"), "./plans/**"),
        (CONFIG.replace("plans/**", "/plans/**"), "/plans/**"),
        (CONFIG.replace("plans/**", "plans/../x"), "plans/../x"),
        (CONFIG.replace("plans/**", ""), "territory[0]"),
        (
            CONFIG.replace("owner = \"planner\"", "owner = \"nobody\""),
            "no agent named nobody",
        ),
    ] {
        let (code, text) = lint(&bad);
        assert_ne!(code, Some(0), "{bad}\n{text}");
        assert!(text.contains(named), "{named}: {text}");
        assert!(!text.contains("finding"), "{text}");
    }
}

/// The records of kind `kind` in a ledger.
fn records(ledger: &Path, kind: &str) -> Vec<serde_json::Value> {
    std::fs::read_to_string(ledger)
        .unwrap_or_else(|e| panic!("{}: {e}", ledger.display()))
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|r| r["kind"] == kind)
        .collect()
}

/// A decision records the rule that made it — `loopward.toml:<line>` of its `[[territory]]` —
/// in a run's ledger and in a hook session's alike, each after the version of the policy it was
/// made under (the version `policy explain` shows); a changed config is another version.
#[test]
fn a_run_and_a_hook_record_the_rule_line_and_the_policy_version() {
    let config = CONFIG.replace("first = \"planner\"", "first = \"builder\"");
    let (_d, root) = project(&config);
    let (_, explained) = explain(&root, "builder", &["--write", "plans/a.md"]);
    let v1 = version(&explained);
    // The runner: the builder writes into the planner's territory (line 12) and is refused.
    std::fs::write(
        root.join("s.toml"),
        "[[agents.builder]]\ntool_calls = [{ name = \"write_file\", arguments = { path = \"plans/a.md\", content = \"x\" } }]\n[[agents.builder]]\ntext = \"That is the planner's.\"\n",
    )
    .unwrap();
    let (code, text) = loopward(
        &root,
        &[
            "run", "--script", "s.toml", "--id", "r1", "--task", "plan it",
        ],
    );
    assert_eq!(code, Some(0), "{text}");
    // The hook: Claude Code's main agent writes there too.
    let event = serde_json::json!({
        "session_id": "s1", "transcript_path": "/t.jsonl", "cwd": root,
        "hook_event_name": "PreToolUse", "tool_name": "Write", "tool_use_id": "toolu_1",
        "tool_input": {"file_path": root.join("plans/a.md"), "content": "x"},
    });
    let hook = |root: &Path| {
        let out = crate::support::with_stdin(
            Command::new(env!("CARGO_BIN_EXE_loopward"))
                .args(["hook", "claude-code", "--config"])
                .arg(root.join("loopward.toml"))
                .env("XDG_STATE_HOME", root.with_file_name("state")),
            event.to_string().as_bytes(),
        );
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("\"deny\""),
            "{out:?}"
        );
    };
    hook(&root);
    for ledger in ["runs/r1/events.jsonl", "runs/claude-code-s1/events.jsonl"] {
        let ledger = root.join(ledger);
        let denials: Vec<_> = records(&ledger, "gate_decision")
            .into_iter()
            .filter(|r| r["data"]["gate"] == "territory:planner")
            .collect();
        assert_eq!(denials.len(), 1, "{denials:?}");
        assert_eq!(
            denials[0]["data"]["source"], "loopward.toml:12",
            "{denials:?}"
        );
        let versions: Vec<_> = records(&ledger, "layer_decision")
            .into_iter()
            .filter(|r| r["data"]["layer"] == "policy")
            .map(|r| r["data"]["detail"]["version"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(versions, std::slice::from_ref(&v1), "{}", ledger.display());
    }
    // Another rule is another version, noted in the session before its next decision.
    std::fs::write(
        root.join("loopward.toml"),
        config.replace("plans/**", "plans/*.md"),
    )
    .unwrap();
    hook(&root);
    let versions: Vec<_> = records(
        &root.join("runs/claude-code-s1/events.jsonl"),
        "layer_decision",
    )
    .into_iter()
    .filter(|r| r["data"]["layer"] == "policy")
    .map(|r| r["data"]["detail"]["version"].as_str().unwrap().to_string())
    .collect();
    assert_eq!(versions.len(), 2, "{versions:?}");
    assert_eq!(versions[0], v1);
    assert_ne!(versions[1], v1);
}
