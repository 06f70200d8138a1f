//! Inside a loop's session: the hook's refusals and their remedy, a hook that cannot reach the loop, and a wrapped command's egress in the run's ledger.

use super::*;

/// Inside a loop's session the territory refusal's remedy — delegate to the owner's subagent —
/// exists and works: the project's subagents are the session's.
#[test]
fn inside_a_loop_the_refusals_remedy_delegating_to_the_owners_subagent_works() {
    let (claude, _dir, root, home) = claude_and_project!();
    let agents = root.join(".claude/agents");
    std::fs::create_dir_all(&agents).unwrap();
    std::fs::write(
        agents.join("planner.md"),
        "---\nname: planner\ndescription: The planner. Use it for planner work.\ntools: Read, Write, Edit\n---\nYou are the planner.\n",
    )
    .unwrap();
    let p = |rel: &str| root.join(rel).to_str().unwrap().to_string();
    let roadmap = json!({"file_path": p("plans/roadmap.md"), "content": "# Roadmap v2\n"});
    let script = vec![
        Reply::tool("Write", roadmap.clone()),
        Reply::tool(
            "Agent",
            json!({"subagent_type": "planner", "description": "planner work",
                   "prompt": "[lane:planner] Update the roadmap to v2."}),
        ),
        Reply::text("The planner updated the roadmap."),
    ];
    let lanes = vec![(
        "[lane:planner]",
        vec![
            Reply::tool("Write", roadmap),
            Reply::text("Roadmap updated."),
        ],
    )];
    let (port, server) = anthropic_server::start_with_lanes(script, lanes);
    let out = run_loop(
        &claude,
        &root,
        &home,
        port,
        &task("grep -q v2 plans/roadmap.md", "deleg", &[]),
    );
    assert_eq!(out.status.code(), Some(0), "verified in one session");
    let (_, denied, text) = &server.tool_results()[0];
    assert!(
        *denied && text.contains("subagent_type \"planner\""),
        "{text}"
    );
    crate::support::assert_file(&root, "plans/roadmap.md", "# Roadmap v2\n");
    let rs = records(&root, "deleg");
    assert_eq!(sessions(&rs), 1);
    // The subagent's write, allowed by its hook, is in the run's ledger under its own name.
    assert!(kind(&rs, "gate_decision").any(|r| r["agent"] == "planner"
        && r["data"]["path"] == "plans/roadmap.md"
        && r["data"]["decision"]["decision"] == "allow"));
}

/// A session's hook whose loop does not answer (gone, or never there): the hook judges nothing
/// itself and keeps no ledger of its own; the call is blocked, naming the socket.
#[test]
fn a_loop_sessions_hook_that_cannot_reach_the_loop_blocks_the_call_and_judges_nothing_itself() {
    let (_dir, root, home) = project();
    let socket = root.join("no-loop-here.sock");
    let event = json!({
        "session_id": "s-gone", "cwd": root, "hook_event_name": "PreToolUse",
        "tool_name": "Write", "tool_use_id": "toolu_1",
        "tool_input": {"file_path": root.join("notes/a.md"), "content": "x"},
    });
    let out = support::with_stdin(
        Command::new(env!("CARGO_BIN_EXE_loopward"))
            .current_dir(&root)
            .args(["hook", "claude-code", "--config", "loopward.toml"])
            .env("HOME", &home)
            .env("LOOPWARD_SESSION", "s-gone")
            .env("LOOPWARD_SUPERVISOR", &socket),
        event.to_string().as_bytes(),
    );
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(out.stdout.is_empty(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("no-loop-here.sock") && stderr.contains("blocked"),
        "{stderr}"
    );
    assert!(!root.join("runs").join("claude-code-s-gone").exists());
}

/// A `Bash` call of a loop session connects out through its sandbox's proxy: the session has no
/// ledger of its own, so the proxy's decisions go to the loop, into the run's ledger under the
/// session's turn, before the connection is made.
#[test]
fn a_loop_sessions_wrapped_bash_connects_out_and_its_egress_decisions_are_the_runs_records() {
    let (claude, _dir, root, home) = claude_and_project!();
    let (good, hits) = support::http_server("127.0.0.2", "hello-from-allowed");
    let config = std::fs::read_to_string(root.join("loopward.toml")).unwrap().replacen(
        "tools = [\"read_file\", \"write_file\", \"edit_file\", \"shell\"]",
        "tools = [\"read_file\", \"write_file\", \"edit_file\", \"shell\"]\nnet = [\"127.0.0.2\"]",
        1,
    );
    std::fs::write(root.join("loopward.toml"), config).unwrap();
    let command = format!("curl -s -m 5 http://127.0.0.2:{good}/ > notes/done.txt");
    let (port, _server) =
        anthropic_server::start(vec![Reply::bash(command, "fetch"), Reply::text("Fetched.")]);
    let out = run_loop(
        &claude,
        &root,
        &home,
        port,
        &task("grep -q hello-from-allowed notes/done.txt", "net", &[]),
    );
    assert_eq!(out.status.code(), Some(0), "verified in one session");
    assert!(hits.load(std::sync::atomic::Ordering::SeqCst) > 0);
    let rs = records(&root, "net");
    let egress = kind(&rs, "egress_decided")
        .find(|r| r["data"]["host"] == "127.0.0.2")
        .expect("the proxy's decision is in the run's ledger");
    assert_eq!(egress["data"]["allowed"], true);
    assert_eq!(
        (&egress["turn"], &egress["agent"]),
        (&json!(1), &json!("root"))
    );
    let v = verify_run(&root, &home, "net");
    assert!(v.status.success(), "verify net: {v:?}");
}
