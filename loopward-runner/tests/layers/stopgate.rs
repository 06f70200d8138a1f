//! Stop-gates: approvals bound to one action, durable approvals across restarts, modes.

use super::support;
use loopward_core::{AgentId, AuditEvent, Person, RunId, RunStatus};
use loopward_runner::audit::MemorySink;
use loopward_runner::layers::stopgate::{
    approve, deny, list_pending, pending_dir, Answer, ApprovalRequest, GatedAction, StopGateConfig,
    StopGates, StopMode,
};
use loopward_runner::layers::testing::{run, turn, Probe};
use loopward_runner::model::{
    fake::{FakeModel, Script},
    BoxModelService,
};
use loopward_runner::tool::{BoxToolService, ToolError, ToolExecutor};
use loopward_runner::{tools, BoxTurnService, LlmAgent, RunReport, RunSpec, Runner, Workspace};
use serde_json::json;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tower::{Layer, ServiceExt};

fn decisions(sink: &MemorySink) -> Vec<String> {
    sink.events()
        .into_iter()
        .filter_map(|(_, e)| match e {
            AuditEvent::LayerDecision {
                layer: loopward_core::LayerId::StopGate,
                decision,
                ..
            } => Some(decision.to_string()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn an_approval_for_one_phase_does_not_authorise_another() {
    let approver = |_: &ApprovalRequest| Answer::Approve { by: "ana".into() };
    let gates = StopGates::new(&[StopGateConfig::phase("deploy", StopMode::Interactive)])
        .unwrap()
        .with_approver(Arc::new(approver));
    let dir = tempfile::tempdir().unwrap();
    let (r, sink) = run(dir.path(), "r1");
    let mut approvals = gates
        .before_phase(&turn(&r, "builder", 1), "deploy")
        .await
        .unwrap();
    assert_eq!(approvals.len(), 1);
    let approval = approvals.remove(0);
    let release = GatedAction::Phase {
        name: "release".into(),
    };
    let err = approval.authorise(&release).unwrap_err();
    assert_eq!(err.approved, "phase:deploy");
    assert_eq!(err.attempted, "phase:release");
    assert_eq!(decisions(&sink), vec!["approved"]);
    // An ungated phase needs no approval.
    assert!(gates
        .before_phase(&turn(&r, "builder", 1), "release")
        .await
        .unwrap()
        .is_empty());
}

#[tokio::test]
async fn a_durable_approval_for_call_a_is_not_honoured_for_call_b() {
    let gates = StopGates::new(&[StopGateConfig::tool("deploy", StopMode::Durable)]).unwrap();
    let tools = gates.tool_layer().layer(ToolExecutor);
    let deploy = Probe::new("deploy");
    let dir = tempfile::tempdir().unwrap();
    let pdir = pending_dir(dir.path());
    let (r, _) = run(dir.path(), "r1");
    let t = turn(&r, "builder", 1);
    let a = json!({"env": "staging"});
    let b = json!({"env": "prod"});
    assert!(tools
        .clone()
        .oneshot(deploy.invocation(&t, a.clone()))
        .await
        .is_err());
    let pending = list_pending(&pdir).unwrap();
    approve(&pdir, &pending[0].id).unwrap();

    let (r, sink) = run(dir.path(), "r1");
    let t = turn(&r, "builder", 1);
    let out = tools.clone().oneshot(deploy.invocation(&t, b)).await;
    assert!(
        matches!(out, Err(ToolError::Refused(ref r)) if r.reason.contains("waits for a person's approval"))
    );
    assert_eq!(deploy.calls(), 0, "B did not run on A's approval");
    assert_eq!(
        list_pending(&pdir).unwrap().len(),
        1,
        "B asked for its own approval"
    );
    // A's approval is still there, unconsumed, and runs A.
    tools
        .clone()
        .oneshot(deploy.invocation(&t, a))
        .await
        .unwrap();
    assert_eq!(deploy.calls(), 1);
    assert_eq!(
        decisions(&sink),
        vec!["approval_requested", "approval_consumed"]
    );
}

fn gated_runner(dir: &Path) -> (Runner, AgentId) {
    let builder = AgentId::new("builder").unwrap();
    let mut script = Script::default();
    script.call(
        &builder,
        "write_file",
        json!({"path": "release/notes.md", "content": "v1"}),
    );
    script.say(&builder, "Done.");
    let gates = StopGates::new(&[StopGateConfig::write("release/*", StopMode::Durable)]).unwrap();
    let tool_stack = BoxToolService::new(gates.tool_layer().layer(ToolExecutor));
    let agent = LlmAgent::builder(
        builder.clone(),
        BoxModelService::new(FakeModel::new(script)),
    )
    .tools(tools::builtin(std::slice::from_ref(&builder)))
    .tool_stack(tool_stack)
    .build();
    let runner = support::one_agent(
        dir,
        &builder,
        BoxTurnService::new(gates.turn_layer().layer(agent)),
    );
    (runner, builder)
}

/// Starts run `r1` in a fresh runner (a restart: no state but the files).
async fn start(dir: &Path) -> (RunReport, Arc<MemorySink>) {
    let (runner, builder) = gated_runner(dir);
    let (report, sink) = support::run(&runner, &builder, "write the release notes").await;
    (report, sink)
}

fn writes_done(sink: &MemorySink) -> usize {
    sink.events()
        .into_iter()
        .filter(|(_, e)| {
            matches!(e, AuditEvent::ToolFinished { tool, is_error: false, .. } if tool == "write_file")
        })
        .count()
}

#[tokio::test]
async fn a_durable_approval_survives_a_restart_and_runs_the_action_once() {
    let dir = tempfile::tempdir().unwrap();
    let pdir = pending_dir(dir.path());
    let (first, sink1) = start(dir.path()).await;
    let RunStatus::AwaitingApproval { pending } = first.status.clone() else {
        panic!("expected AwaitingApproval, got {:?}", first.status);
    };
    assert!(!dir.path().join("release/notes.md").exists());
    assert!(pdir.join(format!("{pending}.json")).is_file());
    // Starting again before anyone decided pauses again, on the same record.
    let (again, _) = start(dir.path()).await;
    assert_eq!(again.status, first.status);

    approve(&pdir, &pending).unwrap();
    let (second, sink2) = start(dir.path()).await;
    assert_eq!(second.status, RunStatus::Completed);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("release/notes.md")).unwrap(),
        "v1"
    );
    assert_eq!(std::fs::read_dir(pdir.join("consumed")).unwrap().count(), 1);

    // The approval was used up: a third start asks again instead of writing again.
    let (third, sink3) = start(dir.path()).await;
    assert!(matches!(third.status, RunStatus::AwaitingApproval { .. }));
    let runs = [&sink1, &sink2, &sink3].map(|s| writes_done(s));
    assert_eq!(runs, [0, 1, 0], "the approved write ran exactly once");
    assert_eq!(decisions(&sink2), vec!["approval_consumed"]);
}

#[tokio::test]
async fn a_denied_durable_approval_refuses_the_call_and_the_model_reads_why() {
    let dir = tempfile::tempdir().unwrap();
    let pdir = pending_dir(dir.path());
    let (first, _) = start(dir.path()).await;
    let RunStatus::AwaitingApproval { pending } = first.status else {
        panic!("expected AwaitingApproval");
    };
    deny(&pdir, &pending).unwrap();
    assert!(
        approve(&pdir, &pending).is_err(),
        "a decision cannot be changed"
    );
    let (second, sink) = start(dir.path()).await;
    // A person's "no" ends the reply at the call and the run after the turn: stopped, not
    // completed.
    assert!(
        matches!(&second.status, RunStatus::Stopped { reason } if reason.contains("a person denied pending approval")),
        "{:?}",
        second.status
    );
    assert!(!dir.path().join("release/notes.md").exists());
    let refused = sink.events().into_iter().any(|(_, e)| {
        matches!(e, AuditEvent::ToolFinished { is_error: true, summary, .. }
            if summary.contains("stopgate:write:release/*"))
    });
    assert!(refused);
}

#[tokio::test]
async fn a_tampered_pending_record_is_not_honoured() {
    let dir = tempfile::tempdir().unwrap();
    let pdir = pending_dir(dir.path());
    let (first, _) = start(dir.path()).await;
    let RunStatus::AwaitingApproval { pending } = first.status else {
        panic!("expected AwaitingApproval");
    };
    let path = pdir.join(format!("{pending}.json"));
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(
        &path,
        text.replace("\"pending\"", "\"approved\"")
            .replace("}", ",\"x\":1}"),
    )
    .unwrap();
    let (second, sink) = start(dir.path()).await;
    assert!(
        matches!(&second.status, RunStatus::Stopped { reason } if reason.contains("cannot be used")),
        "{:?}",
        second.status
    );
    assert!(!dir.path().join("release/notes.md").exists());
    assert_eq!(decisions(&sink), vec!["denied"]);
}

#[tokio::test(start_paused = true)]
async fn interactive_gates_deny_without_an_approver_or_an_answer_in_time() {
    let dir = tempfile::tempdir().unwrap();
    let (r, sink) = run(dir.path(), "r1");
    let t = turn(&r, "builder", 1);
    let shell = Probe::new("shell");

    let no_approver =
        StopGates::new(&[StopGateConfig::tool("shell", StopMode::Interactive)]).unwrap();
    let out = no_approver
        .tool_layer()
        .layer(ToolExecutor)
        .oneshot(shell.invocation(&t, json!({})))
        .await;
    assert!(matches!(out, Err(ToolError::Refused(ref r)) if r.reason.contains("no approver")));

    struct Silent;
    impl loopward_runner::layers::stopgate::Approver for Silent {
        fn ask(&self, _: ApprovalRequest) -> futures::future::BoxFuture<'static, Answer> {
            Box::pin(futures::future::pending())
        }
    }
    let mut config = StopGateConfig::tool("shell", StopMode::Interactive);
    config.ask_timeout = Some(Duration::from_secs(30));
    let silent = StopGates::new(&[config])
        .unwrap()
        .with_approver(Arc::new(Silent));
    let out = silent
        .tool_layer()
        .layer(ToolExecutor)
        .oneshot(shell.invocation(&t, json!({})))
        .await;
    assert!(
        matches!(out, Err(ToolError::Refused(ref r)) if r.reason.contains("no answer within 30s"))
    );

    let yes = StopGates::new(&[StopGateConfig::tool("shell", StopMode::Interactive)])
        .unwrap()
        .with_approver(Arc::new(|r: &ApprovalRequest| {
            assert!(r.summary.starts_with("shell {"));
            // The person is told who acts, what exactly, and why it is gated.
            assert_eq!(r.agent.as_str(), "builder");
            assert_eq!(r.why, "every shell call needs a person's approval");
            Answer::Approve { by: "ana".into() }
        }));
    yes.tool_layer()
        .layer(ToolExecutor)
        .oneshot(shell.invocation(&t, json!({})))
        .await
        .unwrap();
    assert_eq!(shell.calls(), 1);
    assert_eq!(decisions(&sink), vec!["denied", "denied", "approved"]);
}

#[tokio::test]
async fn turn_and_handoff_gates_stop_or_refuse() {
    let dir = tempfile::tempdir().unwrap();
    let (planner, builder) = (
        AgentId::new("planner").unwrap(),
        AgentId::new("builder").unwrap(),
    );
    let team = [planner.clone(), builder.clone()];
    let mut script = Script::default();
    script.call(
        &planner,
        "handoff",
        json!({"to": "builder", "message": "go"}),
    );
    script.say(&planner, "I could not hand off.");
    let model = BoxModelService::new(FakeModel::new(script));
    let build = |gates: &StopGates| {
        let mut runner = Runner::builder(Workspace::new(dir.path()).unwrap());
        for name in &team {
            let agent = LlmAgent::builder(name.clone(), model.clone())
                .tools(tools::builtin(&team))
                .tool_stack(BoxToolService::new(gates.tool_layer().layer(ToolExecutor)))
                .build();
            runner = runner
                .agent(
                    name.clone(),
                    BoxTurnService::new(gates.turn_layer().layer(agent)),
                )
                .unwrap();
        }
        runner.build().unwrap()
    };
    let spec = || RunSpec {
        id: RunId::new("r1").unwrap(),
        task: Person::at_the_keyboard().says("t"),
        first: planner.clone(),
        audit: Arc::new(MemorySink::default()),
        audit_location: None,
    };
    let turn_gate = StopGates::new(&[StopGateConfig::turn("planner", StopMode::Deny)]).unwrap();
    let report = build(&turn_gate).run(spec()).await;
    assert_eq!(
        report.status,
        RunStatus::Stopped {
            reason: "stop-gate turn:planner denied: gate turn:planner always denies this action"
                .into()
        }
    );
    let handoff_gate =
        StopGates::new(&[StopGateConfig::handoff("builder", StopMode::Deny)]).unwrap();
    let report = build(&handoff_gate).run(spec()).await;
    // A denied handoff stops the run as a denied turn does (exit 6 from the CLI), with the
    // agent's last words kept.
    assert!(
        matches!(&report.status, RunStatus::Stopped { reason } if reason.starts_with("stop-gate handoff:builder denied handoff")),
        "{:?}",
        report.status
    );
    assert!(report.handoffs.is_empty());
    assert_eq!(report.final_text, "I could not hand off.");
}

#[test]
fn bad_gate_settings_are_refused_naming_the_field() {
    let parse = |text: &str| -> Vec<StopGateConfig> {
        #[derive(serde::Deserialize)]
        struct File {
            stopgate: Vec<StopGateConfig>,
        }
        toml::from_str::<File>(text).unwrap().stopgate
    };
    let err = StopGates::new(&parse("[[stopgate]]\npoint = \"tool\"\ntool = \"shell\"\nmode = \"auto\"\n[[stopgate]]\npoint = \"before_lunch\"\nmode = \"deny\"\n")).unwrap_err();
    assert_eq!(err.field, "stopgate[1].point");
    assert!(err
        .why
        .contains("expected one of turn, phase, tool, write, handoff"));
    let err =
        StopGates::new(&parse("[[stopgate]]\npoint = \"write\"\nmode = \"deny\"\n")).unwrap_err();
    assert_eq!(err.field, "stopgate[0].glob");
    let err = StopGates::new(&parse(
        "[[stopgate]]\npoint = \"write\"\nglob = \"src/[\"\nmode = \"deny\"\n",
    ))
    .unwrap_err();
    assert_eq!(err.field, "stopgate[0].glob");
    let err = StopGates::new(&parse(
        "[[stopgate]]\npoint = \"tool\"\ntool = \"shell\"\nto = \"x\"\nmode = \"deny\"\n",
    ))
    .unwrap_err();
    assert_eq!(err.field, "stopgate[0].to");
    let bad_mode =
        toml::from_str::<StopGateConfig>("point = \"tool\"\ntool = \"shell\"\nmode = \"maybe\"\n");
    assert!(bad_mode.unwrap_err().to_string().contains("maybe"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_restarts_consume_one_durable_approval_exactly_once() {
    let gates = StopGates::new(&[StopGateConfig::tool("deploy", StopMode::Durable)]).unwrap();
    let tools = gates.tool_layer().layer(ToolExecutor);
    let deploy = Probe::new("deploy");
    let dir = tempfile::tempdir().unwrap();
    let pdir = pending_dir(dir.path());
    let args = json!({"env": "prod"});
    let (r, _) = run(dir.path(), "r1");
    assert!(tools
        .clone()
        .oneshot(deploy.invocation(&turn(&r, "builder", 1), args.clone()))
        .await
        .is_err());
    approve(&pdir, &list_pending(&pdir).unwrap()[0].id).unwrap();
    let racers: Vec<_> = (0..8)
        .map(|_| {
            let (r, _) = run(dir.path(), "r1");
            let inv = deploy.invocation(&turn(&r, "builder", 1), args.clone());
            tokio::spawn(tools.clone().oneshot(inv))
        })
        .collect();
    let mut ran = 0;
    for r in racers {
        if r.await.unwrap().is_ok() {
            ran += 1;
        }
    }
    assert_eq!((ran, deploy.calls()), (1, 1));
}

#[tokio::test]
async fn a_durable_turn_gate_pauses_before_the_agent_runs_and_lets_one_turn_through() {
    let dir = tempfile::tempdir().unwrap();
    let pdir = pending_dir(dir.path());
    let builder = AgentId::new("builder").unwrap();
    let start = || async {
        let mut script = Script::default();
        script.say(&builder, "Built.");
        let gates = StopGates::new(&[StopGateConfig::turn("builder", StopMode::Durable)]).unwrap();
        let agent = LlmAgent::builder(
            builder.clone(),
            BoxModelService::new(FakeModel::new(script)),
        )
        .build();
        let runner = Runner::builder(Workspace::new(dir.path()).unwrap())
            .agent(
                builder.clone(),
                BoxTurnService::new(gates.turn_layer().layer(agent)),
            )
            .unwrap()
            .build()
            .unwrap();
        let sink = Arc::new(MemorySink::default());
        let report = runner
            .run(RunSpec {
                id: RunId::new("r2").unwrap(),
                task: Person::at_the_keyboard().says("build"),
                first: builder.clone(),
                audit: sink.clone(),
                audit_location: None,
            })
            .await;
        (report, sink)
    };
    let (first, sink) = start().await;
    let RunStatus::AwaitingApproval { pending } = first.status else {
        panic!("expected AwaitingApproval, got {:?}", first.status);
    };
    assert!(
        !sink.kinds().contains(&"model_call"),
        "the agent did not run"
    );
    let found =
        loopward_runner::layers::stopgate::find_pending(&pdir, "r2", "turn:builder").unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].id, pending);
    approve(&pdir, &pending).unwrap();
    let (second, _) = start().await;
    assert_eq!(second.status, RunStatus::Completed);
    assert_eq!(second.final_text, "Built.");
}

// ---- keyed stores: records sealed under the ledger key ----

use loopward_runner::audit::{KeyRing, LedgerKey};
use loopward_runner::layers::stopgate::{ApprovalStore, DurableError, PendingState};

fn ring() -> KeyRing {
    KeyRing::single(LedgerKey::from_bytes(vec![21u8; 32]).unwrap())
}

/// A keyed store in a folder of its own (the state directory, for `loopward`).
fn keyed_store(state: &Path) -> ApprovalStore {
    ApprovalStore::new(state.join("pending")).keyed(ring())
}

/// One attempt at the gated `deploy` call through a keyed store; returns the outcome, the
/// sink and the call count.
async fn deploy_once(
    ws: &Path,
    store: &ApprovalStore,
    deploy: &Probe,
) -> (Result<(), ToolError>, Arc<MemorySink>) {
    let gates = StopGates::new(&[StopGateConfig::tool("deploy", StopMode::Durable)])
        .unwrap()
        .with_store(store.clone());
    let tools = gates.tool_layer().layer(ToolExecutor);
    let (r, sink) = run(ws, "r1");
    let out = tools
        .oneshot(deploy.invocation(&turn(&r, "builder", 1), json!({"env": "prod"})))
        .await
        .map(|_| ());
    (out, sink)
}

fn denial_notes(sink: &MemorySink) -> Vec<String> {
    sink.events()
        .into_iter()
        .filter_map(|(_, e)| match e {
            AuditEvent::LayerDecision {
                layer,
                decision,
                detail,
            } if layer == loopward_core::LayerId::StopGate && decision.as_str() == "denied" => {
                Some(
                    detail.to_json()["reason"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                )
            }
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_keyed_approval_runs_the_action_once_and_names_who_approved() {
    let (ws, state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let store = keyed_store(state.path());
    let deploy = Probe::new("deploy");
    assert!(deploy_once(ws.path(), &store, &deploy).await.0.is_err());
    let waiting = store.list_pending();
    assert_eq!(waiting.len(), 1);
    assert!(waiting[0].seal.is_some(), "the gate seals its request");
    let decided = store
        .approve(&waiting[0].id, "ana", 1_700_000_000_000)
        .unwrap();
    assert_eq!(
        decided.decision_text(),
        "approved by ana at 2023-11-14T22:13:20.000Z"
    );
    deploy_once(ws.path(), &store, &deploy).await.0.unwrap();
    assert_eq!(deploy.calls(), 1);
    // Nothing was written into the workspace.
    assert!(!pending_dir(ws.path()).exists());
}

#[tokio::test]
async fn a_pending_record_flipped_to_approved_by_another_process_is_refused_and_recorded() {
    let (ws, state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let store = keyed_store(state.path());
    let deploy = Probe::new("deploy");
    assert!(deploy_once(ws.path(), &store, &deploy).await.0.is_err());
    let id = store.list_pending()[0].id.clone();
    let path = store.dir().join(format!("{id}.json"));
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replace("\"pending\"", "\"approved\"")).unwrap();
    let (out, sink) = deploy_once(ws.path(), &store, &deploy).await;
    assert!(out.is_err());
    assert_eq!(deploy.calls(), 0, "no person approved it");
    let notes = denial_notes(&sink);
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(notes[0].contains("forged or edited"), "{}", notes[0]);
    assert!(notes[0].contains("moved to rejected/"), "{}", notes[0]);
    assert_eq!(
        std::fs::read_dir(store.dir().join("rejected"))
            .unwrap()
            .count(),
        1
    );
    // The way out works: the next attempt asks a person afresh.
    let (out, _) = deploy_once(ws.path(), &store, &deploy).await;
    assert!(out.is_err());
    assert_eq!(store.list_pending().len(), 1);
}

#[tokio::test]
async fn a_hand_written_approved_record_is_refused() {
    let (ws, state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let store = keyed_store(state.path());
    let deploy = Probe::new("deploy");
    // Learn the id the gate uses, then forge an approved record for it from scratch.
    assert!(deploy_once(ws.path(), &store, &deploy).await.0.is_err());
    let mut record = store.list_pending().remove(0);
    record.state = PendingState::Approved;
    record.seal = None;
    let path = store.dir().join(format!("{}.json", record.id));
    std::fs::write(&path, serde_json::to_string(&record).unwrap()).unwrap();
    assert!(
        matches!(store.read(&record.id), Err(DurableError::Forged { ref why, .. }) if why.contains("no seal"))
    );
    let (out, sink) = deploy_once(ws.path(), &store, &deploy).await;
    assert!(out.is_err());
    assert_eq!(deploy.calls(), 0);
    assert!(denial_notes(&sink)[0].contains("carries no seal"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_approve_and_deny_decide_exactly_once_and_the_losers_are_told_who_won() {
    for round in 0..5 {
        let (ws, state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let store = keyed_store(state.path());
        assert!(deploy_once(ws.path(), &store, &Probe::new("deploy"))
            .await
            .0
            .is_err());
        let id = store.list_pending()[0].id.clone();
        let results: Vec<Result<_, DurableError>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..16)
                .map(|i| {
                    let (store, id) = (&store, &id);
                    s.spawn(move || {
                        let who = format!("person{i}");
                        if i % 2 == 0 {
                            store.approve(id, &who, 1_000)
                        } else {
                            store.deny(id, &who, 1_000)
                        }
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let winners: Vec<_> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
        assert_eq!(winners.len(), 1, "round {round}: exactly one decision");
        let won = winners[0].decision_text();
        for r in &results {
            if let Err(e) = r {
                assert!(matches!(e, DurableError::AlreadyDecided { .. }), "{e}");
                assert!(
                    e.to_string().contains(&format!("already decided: {won}")),
                    "{e}"
                );
            }
        }
        // What is on disk is the winner's decision, sealed and readable.
        assert_eq!(store.read(&id).unwrap().unwrap().decision_text(), won);
        // No temporary file was left behind.
        let tmp = std::fs::read_dir(store.dir())
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .ends_with(".tmp")
            })
            .count();
        assert_eq!(tmp, 0);
    }
}

#[tokio::test]
async fn a_malformed_pending_record_is_skipped_and_reported_never_blocking_others() {
    let (ws, state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let store = keyed_store(state.path());
    let deploy = Probe::new("deploy");
    assert!(deploy_once(ws.path(), &store, &deploy).await.0.is_err());
    std::fs::write(store.dir().join("r9-garbage.json"), "{ not json").unwrap();
    std::os::unix::fs::symlink("/etc/passwd", store.dir().join("r9-link.json")).unwrap();
    let scan = store.scan();
    assert_eq!(scan.records.len(), 1);
    let skipped: Vec<&str> = scan.skipped.iter().map(|s| s.file.as_str()).collect();
    assert_eq!(skipped, ["r9-garbage.json", "r9-link.json"]);
    assert!(
        scan.skipped[1].why.contains("symbolic link"),
        "{}",
        scan.skipped[1].why
    );
    // The good record can still be decided and used.
    let id = &store.list_pending()[0].id;
    store.approve(id, "ana", 5).unwrap();
    deploy_once(ws.path(), &store, &deploy).await.0.unwrap();
    assert_eq!(deploy.calls(), 1);
}
