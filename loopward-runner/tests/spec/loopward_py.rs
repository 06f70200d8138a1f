//! The behaviours the Python loopward's test suite specifies (`test_anti_loop`,
//! `test_stop_gate`, `test_orchestrator`, `test_llm_wrapper`) that this loopward also claims,
//! in this loopward's words. Differences are in ARCHITECTURE.md ("Where loopward differs from
//! its peers").

use super::one_agent::{spec, Steps};
use loopward_core::{AgentId, RunStatus};
use loopward_runner::audit::MemorySink;
use loopward_runner::layers::classjump::{Attempt, ClassJump, ClassJumpConfig, VerdictKind};
use loopward_runner::layers::stopgate::{StopGateConfig, StopGates, StopMode};
use loopward_runner::layers::testing::{run, turn};
use loopward_runner::model::fake::{FakeModel, Script};
use loopward_runner::model::BoxModelService;
use loopward_runner::{tools, BoxTurnService, LlmAgent, Runner, TurnContext, Workspace};
use std::sync::Arc;
use tower::Layer;

fn tracker(failures: u32) -> ClassJump {
    ClassJump::new(ClassJumpConfig {
        strategies: vec!["regex".into(), "json".into()],
        failures_per_strategy: failures,
        count_failed_tools: vec![],
    })
    .unwrap()
}

/// A [`tracker`] allowing `failures`, and the reviewer's first turn of a run in a fresh
/// workspace (the folder, kept while the turn is used).
fn reviewing(failures: u32) -> (ClassJump, TurnContext, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let (r, _) = run(dir.path(), "r1");
    (tracker(failures), turn(&r, "reviewer", 1), dir)
}

#[test]
fn spec_retries_until_the_threshold_then_forces_a_class_jump() {
    let (cj, t, _dir) = reviewing(3);
    let kinds: Vec<_> = (0..3)
        .map(|_| {
            cj.report(&t, "parse-findings", "regex", Attempt::Failed)
                .unwrap()
                .kind()
        })
        .collect();
    assert_eq!(
        kinds,
        [VerdictKind::Retry, VerdictKind::Retry, VerdictKind::Jump]
    );
}

#[test]
fn spec_counts_are_per_subtask() {
    let (cj, t, _dir) = reviewing(2);
    cj.report(&t, "a", "regex", Attempt::Failed).unwrap();
    let b = cj.report(&t, "b", "regex", Attempt::Failed).unwrap();
    assert_eq!(b.kind(), VerdictKind::Retry);
    assert_eq!(b.failures(), (1, 2));
}

#[test]
fn spec_an_allowance_below_one_is_refused() {
    let err = ClassJump::new(ClassJumpConfig {
        strategies: vec!["regex".into()],
        failures_per_strategy: 0,
        count_failed_tools: vec![],
    })
    .unwrap_err();
    assert_eq!(err.field, "class_jump.failures_per_strategy");
}

#[test]
fn spec_when_every_strategy_fails_the_run_is_exhausted_at_a_known_bound() {
    let (cj, t, _dir) = reviewing(1);
    assert_eq!(cj.max_failures(), 2);
    cj.report(&t, "p", "regex", Attempt::Failed).unwrap();
    let last = cj.report(&t, "p", "json", Attempt::Failed).unwrap();
    assert_eq!(last.kind(), VerdictKind::Exhausted);
    assert!(cj.is_exhausted(t.run()));
}

#[tokio::test]
async fn spec_stop_gate_auto_approves_and_deny_refuses_each_audited() {
    let dir = tempfile::tempdir().unwrap();
    let (r, sink) = run(dir.path(), "r1");
    let auto = StopGates::new(&[StopGateConfig::phase("verify", StopMode::Auto)]).unwrap();
    let approvals = auto
        .before_phase(&turn(&r, "orchestrator", 1), "verify")
        .await
        .unwrap();
    assert_eq!(approvals.len(), 1);
    let deny = StopGates::new(&[StopGateConfig::phase("verify", StopMode::Deny)]).unwrap();
    let err = deny
        .before_phase(&turn(&r, "orchestrator", 1), "verify")
        .await
        .unwrap_err();
    assert!(matches!(err.status(), RunStatus::Stopped { .. }));
    let decisions: Vec<String> = sink
        .events()
        .into_iter()
        .filter_map(|(_, e)| match e {
            loopward_core::AuditEvent::LayerDecision {
                layer: loopward_core::LayerId::StopGate,
                decision,
                ..
            } => Some(decision.to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(decisions, ["auto_approved", "denied"]);
}

/// A one-agent run of `script` behind `gates`.
async fn one_agent(script: Script, gates: &StopGates) -> loopward_runner::RunReport {
    let a = AgentId::new("reviewer").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let agent = LlmAgent::builder(a.clone(), BoxModelService::new(FakeModel::new(script)))
        .tools(tools::builtin(std::slice::from_ref(&a)))
        .tool_stack(loopward_runner::tool::BoxToolService::new(
            gates
                .tool_layer()
                .layer(loopward_runner::tool::ToolExecutor),
        ))
        .build();
    Runner::builder(Workspace::new(dir.path()).unwrap())
        .agent(
            a.clone(),
            BoxTurnService::new(gates.turn_layer().layer(agent)),
        )
        .unwrap()
        .build()
        .unwrap()
        .run(spec(
            "r1",
            &a,
            "review the diff",
            Arc::new(MemorySink::default()),
        ))
        .await
}

#[tokio::test]
async fn spec_a_denied_gate_stops_the_run_before_the_gated_action() {
    let a = AgentId::new("reviewer").unwrap();
    let mut script = Script::default();
    script.write(&a, "verified.txt", "ok");
    script.say(&a, "Verification was not approved.");
    let gates = StopGates::new(&[StopGateConfig::tool("write_file", StopMode::Deny)]).unwrap();
    let report = one_agent(script, &gates).await;
    // The peer ends `gate_denied`; here the run ends Stopped (exit 6 from the CLI).
    assert!(
        matches!(report.status, RunStatus::Stopped { .. }),
        "{:?}",
        report.status
    );
}

#[tokio::test]
async fn spec_an_empty_completion_is_an_error_not_a_result() {
    let a = AgentId::new("reviewer").unwrap();
    let mut script = Script::default();
    script.say(&a, "");
    let report = one_agent(script, &StopGates::new(&[]).unwrap()).await;
    assert!(
        matches!(report.status, RunStatus::Failed { .. }),
        "{:?}",
        report.status
    );
}
