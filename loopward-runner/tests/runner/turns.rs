//! Turns and steps: handoffs to the end, the caps, refused and failed calls, audit failures,
//! determinism, scripts.

use super::*;

#[tokio::test]
async fn runner_follows_handoffs_to_the_end() {
    let mut s = Script::default();
    s.handoff(&id("planner"), "builder", "go")
        .write(&id("builder"), "out.txt", "x")
        .handoff(&id("builder"), "reviewer", "check out.txt")
        .say(&id("reviewer"), "fine");
    let t = team(&["planner", "builder", "reviewer"], s, 8);
    let report = t.run("planner").await;
    assert_eq!(report.status, RunStatus::Completed);
    assert_eq!(report.turns, 3);
    let hops: Vec<_> = report.handoffs.iter().map(|h| h.to.as_str()).collect();
    assert_eq!(hops, ["builder", "reviewer"]);
    assert_eq!(report.last_agent, Some(id("reviewer")));
    assert_eq!(report.final_text, "fine");
    assert_eq!(
        std::fs::read_to_string(t.dir.path().join("out.txt")).unwrap(),
        "x"
    );
    // The reviewer was told who handed off and why, as a notice (not as a human message).
    let seen = t.seen.lock().unwrap();
    let reviewer = seen.iter().find(|r| r.agent == id("reviewer")).unwrap();
    assert!(reviewer.messages.iter().any(|m| !m.is_human()
        && m.text()
            .contains("builder handed the work to you: check out.txt")));
    assert!(!reviewer.messages.iter().any(Message::is_human));
}

#[tokio::test]
async fn inner_loop_stops_at_its_step_cap() {
    let mut s = Script::default();
    for i in 0..10 {
        s.call(
            &id("builder"),
            "list_dir",
            json!({"path": format!("./{}", "." .repeat(i % 2))}),
        );
    }
    let t = team(&["builder"], s, 3);
    let report = t.run("builder").await;
    assert_eq!(report.status, RunStatus::Completed);
    let finished = t
        .sink
        .kinds()
        .iter()
        .filter(|k| **k == "tool_finished")
        .count();
    assert_eq!(finished, 3, "exactly three tool calls ran before the cap");
    assert!(t.sink.events().iter().any(|(_, e)| matches!(
        e,
        AuditEvent::TurnEnded {
            finish: loopward_core::FinishReason::StepCap,
            ..
        }
    )));
}

#[tokio::test]
async fn a_second_handoff_in_one_turn_is_refused_and_the_first_stands() {
    let mut s = Script::default();
    s.push(
        &id("root"),
        ScriptedReply {
            text: String::new(),
            tool_calls: vec![
                scripted("handoff", json!({"to": "planner", "message": "plan it"})),
                scripted("handoff", json!({"to": "builder", "message": "build it"})),
            ],
            ..Default::default()
        },
    )
    .say(&id("planner"), "planned");
    let t = team(&["root", "planner", "builder"], s, 8);
    let report = t.run("root").await;
    assert_eq!(report.status, RunStatus::Completed);
    assert_eq!(report.handoffs.len(), 1);
    assert_eq!(report.handoffs[0].to, id("planner"));
    assert!(t.sink.events().iter().any(|(_, e)| matches!(
        e,
        AuditEvent::HandoffRefused { to, standing } if to.as_str() == "builder" && standing.as_str() == "planner"
    )));
}

#[tokio::test]
async fn tool_errors_reach_the_model_in_the_same_turn() {
    let mut s = Script::default();
    s.call(&id("builder"), "read_file", json!({"path": "missing.txt"}))
        .call(&id("builder"), "no_such_tool", json!({}))
        .call(&id("builder"), "write_file", json!("not an object"))
        .call(&id("builder"), "write_file", json!({"path": "a.txt"}))
        .write(&id("builder"), "../escape.txt", "x")
        .call(
            &id("builder"),
            "write_file",
            json!({"path": "a.txt", "content": "x", "mode": 7}),
        )
        .say(&id("builder"), "I see the errors.");
    let t = team(&["builder"], s, 16);
    let report = t.run("builder").await;
    assert_eq!(report.status, RunStatus::Completed);
    assert_eq!(report.turns, 1);
    let results = t.tool_results_seen();
    assert_eq!(results.len(), 6);
    assert!(results.iter().all(|(_, is_error)| *is_error));
    let texts: Vec<&str> = results.iter().map(|(t, _)| t.as_str()).collect();
    assert!(
        texts[0].contains("could not read missing.txt"),
        "{}",
        texts[0]
    );
    assert!(
        texts[1].contains("no tool named \"no_such_tool\"") && texts[1].contains("write_file"),
        "{}",
        texts[1]
    );
    assert!(texts[2].contains("must be a JSON object"), "{}", texts[2]);
    assert!(texts[3].contains("missing field `content`"), "{}", texts[3]);
    assert!(texts[4].contains("outside the workspace"), "{}", texts[4]);
    assert!(texts[5].contains("unknown field `mode`"), "{}", texts[5]);
    // Nothing was written, inside or outside.
    assert!(!t.dir.path().join("a.txt").exists());
    assert!(!t.dir.path().parent().unwrap().join("escape.txt").exists());
}

#[tokio::test]
async fn duplicate_call_ids_in_one_reply_do_not_run_twice() {
    let call = |content: &str| ScriptedCall {
        id: Some("same".into()),
        name: "write_file".into(),
        arguments: json!({"path": "a.txt", "content": content}),
    };
    let mut s = Script::default();
    s.push(
        &id("builder"),
        ScriptedReply {
            text: String::new(),
            tool_calls: vec![call("first"), call("second")],
            ..Default::default()
        },
    )
    .say(&id("builder"), "ok");
    let t = team(&["builder"], s, 8);
    t.run("builder").await;
    assert_eq!(
        std::fs::read_to_string(t.dir.path().join("a.txt")).unwrap(),
        "first"
    );
    let results = t.tool_results_seen();
    assert!(results[1].1 && results[1].0.contains("already used"));
}

#[tokio::test]
async fn an_exhausted_script_fails_the_run_naming_agent_and_step() {
    let mut s = Script::default();
    s.call(&id("builder"), "list_dir", json!({}));
    let t = team(&["builder"], s, 8);
    let report = t.run("builder").await;
    let RunStatus::Failed { error } = &report.status else {
        panic!("expected a failed run, got {:?}", report.status);
    };
    assert!(
        error.contains("no reply for agent builder at step 2"),
        "{error}"
    );
    assert_eq!(t.sink.kinds().last(), Some(&"run_ended"));
}

#[tokio::test]
async fn an_audit_failure_stops_the_run_before_the_action() {
    let mut s = Script::default();
    s.write(&id("builder"), "a.txt", "x")
        .say(&id("builder"), "done");
    let t = team(&["builder"], s, 8);
    // run_started, human_message, turn_started, model_call, then tool_requested fails.
    t.sink.fail_after(4);
    let report = t.run("builder").await;
    assert!(
        matches!(report.status, RunStatus::AuditFailed { .. }),
        "{:?}",
        report.status
    );
    assert!(!t.dir.path().join("a.txt").exists());
}

#[tokio::test]
async fn the_runner_refuses_an_unknown_first_agent() {
    let t = team(&["builder"], Script::default(), 8);
    let report = t.run("nobody").await;
    assert!(
        matches!(&report.status, RunStatus::Failed { error } if error.contains("not on the team"))
    );
}

#[tokio::test]
async fn same_script_gives_the_same_events() {
    let script = || {
        let mut s = Script::default();
        s.write(&id("a"), "f.txt", "1")
            .handoff(&id("a"), "b", "m")
            .call(&id("b"), "read_file", json!({"path": "f.txt"}))
            .say(&id("b"), "done");
        s
    };
    let one = team(&["a", "b"], script(), 8);
    let two = team(&["a", "b"], script(), 8);
    one.run("a").await;
    two.run("a").await;
    assert_eq!(one.sink.events(), two.sink.events());
}

#[test]
fn public_services_are_send_and_sync() {
    fn assert_send_sync<T: Send + Sync + 'static>() {}
    assert_send_sync::<LlmAgent>();
    assert_send_sync::<BoxTurnService>();
    assert_send_sync::<BoxModelService>();
    assert_send_sync::<loopward_runner::tool::BoxToolService>();
    assert_send_sync::<FakeModel>();
    assert_send_sync::<Runner>();
    assert_send_sync::<loopward_runner::RunContext>();
    assert_send_sync::<loopward_runner::TurnContext>();
}

#[tokio::test]
async fn a_ping_pong_team_stops_at_max_turns() {
    let mut s = Script::default();
    for _ in 0..50 {
        s.handoff(&id("a"), "b", "yours")
            .handoff(&id("b"), "a", "no, yours");
    }
    let dir = tempfile::tempdir().unwrap();
    let members = [id("a"), id("b")];
    let model = BoxModelService::new(FakeModel::new(s));
    let b = Runner::builder(Workspace::new(dir.path()).unwrap())
        .max_turns(7)
        .agents(&members, |m| {
            let agent = LlmAgent::builder(m.clone(), model.clone())
                .tools(tools::builtin(&members))
                .build();
            BoxTurnService::new(agent)
        });
    let (report, sink) = one_agent::run_as(&b.build().unwrap(), "pingpong", &id("a"), "t").await;
    assert!(
        matches!(&report.status, RunStatus::CapReached { cap } if cap.contains("max_turns (7)"))
    );
    assert_eq!(report.turns, 7);
    assert_eq!(
        sink.kinds()
            .iter()
            .filter(|k| **k == "turn_started")
            .count(),
        7
    );
}

#[test]
fn scripts_load_from_toml_and_json_and_reject_unknown_keys() {
    let toml = r#"
        [[agents.planner]]
        text = "hi"
        tool_calls = [{ name = "list_dir" }]
    "#;
    let s = Script::from_toml(toml).unwrap();
    assert_eq!(s.agents[&id("planner")][0].tool_calls[0].name, "list_dir");
    let j = Script::from_json(r#"{"agents": {"planner": [{"text": "hi"}]}}"#).unwrap();
    assert_eq!(j.agents[&id("planner")][0].text, "hi");
    let err = Script::from_toml("[[agents.planner]]\ntxt = \"typo\"\n").unwrap_err();
    assert!(err.to_string().contains("unknown field `txt`"), "{err}");
    let err = Script::from_json(r#"{"agents": {"Bad Name": []}}"#).unwrap_err();
    assert!(err.to_string().contains("invalid agent name"), "{err}");
}
