//! Stop-gates: approvals bound to one action, durable approvals across restarts, modes.

use super::support::{self, Agents, Steps};
use loopward_core::{AgentId, AuditEvent, RunStatus};
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
use loopward_runner::tool::{BoxToolService, ToolError, ToolExecutor, ToolOutput};
use loopward_runner::{tools, BoxTurnService, LlmAgent, RunReport, Runner, TurnContext, Workspace};
use serde_json::json;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tower::{Layer, ServiceExt};

mod durable;
mod keyed;

fn decisions(sink: &MemorySink) -> Vec<String> {
    crate::verdicts(sink, loopward_core::LayerId::StopGate)
}

/// A durable stop-gate on the `deploy` tool: the gated tool stack, the probe standing for the
/// tool, a fresh folder, and where the folder keeps its pending approvals.
struct DurableDeploy {
    tools: BoxToolService,
    deploy: Probe,
    dir: tempfile::TempDir,
    pdir: std::path::PathBuf,
}

impl DurableDeploy {
    /// The gate, after a first call with `args` (in run `r1`) waited for approval and a person
    /// approved it.
    async fn approved(args: &serde_json::Value) -> Self {
        let gates = StopGates::new(&[StopGateConfig::tool("deploy", StopMode::Durable)]).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let d = Self {
            tools: BoxToolService::new(gates.tool_layer().layer(ToolExecutor)),
            deploy: Probe::new("deploy"),
            pdir: pending_dir(dir.path()),
            dir,
        };
        let (r, _) = run(d.dir.path(), "r1");
        assert!(d.call(&turn(&r, "builder", 1), args.clone()).await.is_err());
        let pending = list_pending(&d.pdir).unwrap();
        approve(&d.pdir, &pending[0].id).unwrap();
        d
    }

    /// Calls the tool with `args` in `turn`.
    async fn call(
        &self,
        turn: &TurnContext,
        args: serde_json::Value,
    ) -> Result<ToolOutput, ToolError> {
        let inv = self.deploy.invocation(turn, args);
        self.tools.clone().oneshot(inv).await
    }
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
    let a = json!({"env": "staging"});
    let b = json!({"env": "prod"});
    let d = DurableDeploy::approved(&a).await;

    let (r, sink) = run(d.dir.path(), "r1");
    let t = turn(&r, "builder", 1);
    let out = d.call(&t, b).await;
    assert!(
        matches!(out, Err(ToolError::Refused(ref r)) if r.reason.contains("waits for a person's approval"))
    );
    assert_eq!(d.deploy.calls(), 0, "B did not run on A's approval");
    assert_eq!(
        list_pending(&d.pdir).unwrap().len(),
        1,
        "B asked for its own approval"
    );
    // A's approval is still there, unconsumed, and runs A.
    d.call(&t, a).await.unwrap();
    assert_eq!(d.deploy.calls(), 1);
    assert_eq!(
        decisions(&sink),
        vec!["approval_requested", "approval_consumed"]
    );
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
    script.handoff(&planner, "builder", "go");
    script.say(&planner, "I could not hand off.");
    let model = BoxModelService::new(FakeModel::new(script));
    let build = |gates: &StopGates| {
        let runner = Runner::builder(Workspace::new(dir.path()).unwrap()).agents(&team, |name| {
            let agent = LlmAgent::builder(name.clone(), model.clone())
                .tools(tools::builtin(&team))
                .tool_stack(BoxToolService::new(gates.tool_layer().layer(ToolExecutor)))
                .build();
            BoxTurnService::new(gates.turn_layer().layer(agent))
        });
        runner.build().unwrap()
    };
    let spec = || support::spec("r1", &planner, "t", Arc::new(MemorySink::default()));
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
