//! The printed remedy, and parallel subagents that keep their own writes.

use super::*;

/// The team's config with a `builder`, who alone writes `src/`.
fn team_config() -> String {
    format!(
        r#"{CONFIG}
[[agent]]
name = "builder"
tools = ["read_file", "write_file", "edit_file", "shell"]

[[territory]]
paths = ["src/**"]
owner = "builder"
"#
    )
}

/// A Claude Code subagent definition.
fn subagent(root: &Path, name: &str) {
    let dir = root.join(".claude/agents");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join(format!("{name}.md")),
        format!("---\nname: {name}\ndescription: The {name}. Use it for {name} work.\ntools: Read, Write, Edit, Bash\n---\nYou are the {name}.\n"),
    )
    .unwrap();
}

/// The remedy a territory refusal prints in Claude Code (delegate to the owner's subagent) is
/// followed and works; two subagents delegated at once write their own territories at the
/// same time and both writes stand, with no violation; one of them then writing the other's
/// territory is refused, and the ledger names that one.
#[test]
fn the_printed_remedy_works_and_parallel_subagents_keep_their_own_writes() {
    let Some(claude) = Client::ClaudeCode.find() else {
        return;
    };
    let (_dir, root, home) = project_with(&team_config());
    std::fs::create_dir_all(root.join("src")).unwrap();
    subagent(&root, "planner");
    subagent(&root, "builder");
    let p = |rel: &str| root.join(rel).to_str().unwrap().to_string();
    let agent = |who: &str, prompt: &str| Block::ToolUse {
        name: "Agent".into(),
        input: json!({"subagent_type": who, "description": format!("{who} work"), "prompt": prompt}),
    };
    let script = vec![
        // The main agent writes the planner's file: refused, with the remedy for this host.
        Reply::write(p("plans/roadmap.md"), "# Roadmap v2\n"),
        // It follows the remedy, and delegates the code to the builder in the same breath.
        Reply(vec![
            agent("planner", "[lane:planner] Update the roadmap to v2."),
            agent("builder", "[lane:builder] Write the program."),
        ]),
        Reply::text("All done."),
    ];
    let lanes = vec![
        (
            "[lane:planner]",
            vec![
                Reply::write(p("plans/roadmap.md"), "# Roadmap v2\n"),
                Reply::text("Roadmap updated."),
            ],
        ),
        (
            "[lane:builder]",
            vec![
                Reply::write(p("src/main.rs"), "fn main() {}\n"),
                // Then the builder writes into the planner's territory.
                Reply::write(p("plans/mine.md"), "the builder's plan\n"),
                Reply::text("Program written."),
            ],
        ),
    ];
    let (port, server) = anthropic_server::start_with_lanes(script, lanes);
    let (ok, stdout, stderr) = session(
        &claude,
        &root,
        &home,
        port,
        "Update the roadmap and build",
        "bypassPermissions",
        &[],
    );
    let results = server.tool_results();
    let records = ledger(&root);
    eprintln!("tool results: {results:#?}");
    for r in &records {
        eprintln!("{r}");
    }
    assert!(ok, "claude failed\nstdout: {stdout}\nstderr: {stderr}");

    // The refusal the main agent read names the move that exists in Claude Code.
    let (_, denied, text) = &results[0];
    assert!(
        *denied && text.contains("subagent_type \"planner\""),
        "{text}"
    );
    // Following it worked, and both subagents' writes stand.
    crate::support::assert_file(&root, "plans/roadmap.md", "# Roadmap v2\n");
    crate::support::assert_file(&root, "src/main.rs", "fn main() {}\n");
    assert!(
        !root.join("plans/mine.md").exists(),
        "the builder wrote the planner's territory"
    );
    let kind = |r: &Value, k: &str| r["kind"] == k;
    assert!(
        !records.iter().any(|r| kind(r, "violation")),
        "no violation is recorded"
    );
    let decision = |agent: &str, path: &str, verdict: &str| {
        records.iter().any(|r| {
            kind(r, "gate_decision")
                && r["agent"] == agent
                && r["data"]["path"] == path
                && r["data"]["decision"]["decision"] == verdict
        })
    };
    // The client's notices that the background subagents finished are not the person.
    let humans: Vec<&Value> = records
        .iter()
        .filter(|r| kind(r, "human_message"))
        .collect();
    assert_eq!(humans.len(), 1, "{humans:#?}");
    assert!(decision("root", "plans/roadmap.md", "deny"));
    assert!(decision("planner", "plans/roadmap.md", "allow"));
    assert!(decision("builder", "src/main.rs", "allow"));
    assert!(decision("builder", "plans/mine.md", "deny"));
    assert!(!decision("planner", "plans/mine.md", "deny"));
}
