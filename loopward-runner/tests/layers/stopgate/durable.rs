//! Durable approvals across restarts: used once, denied, tampered with, raced, and a durable
//! turn gate.

use super::*;
use std::path::PathBuf;

fn gated_runner(dir: &Path) -> (Runner, AgentId) {
    let builder = AgentId::new("builder").unwrap();
    let mut script = Script::default();
    script.write(&builder, "release/notes.md", "v1");
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

/// The pending approval the run of `report` waits on.
#[track_caller]
fn awaited(report: &RunReport) -> String {
    let RunStatus::AwaitingApproval { pending } = &report.status else {
        panic!("expected AwaitingApproval, got {:?}", report.status);
    };
    pending.clone()
}

/// Asserts that the run of `report` stopped for a reason that says `why`, and that the release
/// notes in `dir` were not written.
#[track_caller]
fn assert_stopped_unwritten(dir: &Path, report: &RunReport, why: &str) {
    assert!(
        matches!(&report.status, RunStatus::Stopped { reason } if reason.contains(why)),
        "{:?}",
        report.status
    );
    assert!(!dir.join("release/notes.md").exists());
}

/// The first run in a fresh folder, paused on the durable approval of its write.
struct Paused {
    dir: tempfile::TempDir,
    /// Where `dir` keeps its pending approvals.
    pdir: PathBuf,
    first: RunReport,
    sink: Arc<MemorySink>,
    /// The id of the approval the run waits on.
    pending: String,
}

async fn paused() -> Paused {
    let dir = tempfile::tempdir().unwrap();
    let pdir = pending_dir(dir.path());
    let (first, sink) = start(dir.path()).await;
    let pending = awaited(&first);
    Paused {
        dir,
        pdir,
        first,
        sink,
        pending,
    }
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
    let Paused {
        dir,
        pdir,
        first,
        sink: sink1,
        pending,
    } = paused().await;
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
    let Paused {
        dir, pdir, pending, ..
    } = paused().await;
    deny(&pdir, &pending).unwrap();
    assert!(
        approve(&pdir, &pending).is_err(),
        "a decision cannot be changed"
    );
    let (second, sink) = start(dir.path()).await;
    // A person's "no" ends the reply at the call and the run after the turn: stopped, not
    // completed.
    assert_stopped_unwritten(dir.path(), &second, "a person denied pending approval");
    crate::assert_tool_failed(&sink, "stopgate:write:release/*");
}

#[tokio::test]
async fn a_tampered_pending_record_is_not_honoured() {
    let Paused {
        dir, pdir, pending, ..
    } = paused().await;
    let path = pdir.join(format!("{pending}.json"));
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(
        &path,
        text.replace("\"pending\"", "\"approved\"")
            .replace("}", ",\"x\":1}"),
    )
    .unwrap();
    let (second, sink) = start(dir.path()).await;
    assert_stopped_unwritten(dir.path(), &second, "cannot be used");
    assert_eq!(decisions(&sink), vec!["denied"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_restarts_consume_one_durable_approval_exactly_once() {
    let args = json!({"env": "prod"});
    let DurableDeploy {
        tools, deploy, dir, ..
    } = DurableDeploy::approved(&args).await;
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
        let turn = BoxTurnService::new(gates.turn_layer().layer(agent));
        let runner = crate::support::one_agent(dir.path(), &builder, turn);
        crate::support::run_as(&runner, "r2", &builder, "build").await
    };
    let (first, sink) = start().await;
    let pending = awaited(&first);
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
