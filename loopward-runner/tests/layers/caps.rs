//! Anti-loop caps and repeat detection, end to end through the runner.

use super::support;
use loopward_core::{AgentId, LayerId, RunStatus, ToolCall, Usage};
use loopward_runner::audit::MemorySink;
use loopward_runner::layers::caps::{CapsConfig, CapsLayer, OnCap};
use loopward_runner::layers::repeat::{RepeatConfig, RepeatLayer};
use loopward_runner::layers::testing::Probe;
use loopward_runner::model::{BoxModelService, ChatRequest, ChatResponse, ModelError};
use loopward_runner::tool::{BoxToolService, ToolExecutor, ToolSet};
use loopward_runner::{tools, BoxTurnService, Clock, LlmAgent, RunReport, Runner, Workspace};
use serde_json::json;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tower::Layer;

/// A model that answers every call with the same tool call, forever.
fn forever(tool: &'static str, args: serde_json::Value) -> BoxModelService {
    let n = Arc::new(AtomicU32::new(0));
    BoxModelService::new(tower::service_fn(move |_req: ChatRequest| {
        let id = n.fetch_add(1, Ordering::SeqCst);
        let args = args.clone();
        async move {
            Ok::<_, ModelError>(ChatResponse {
                content: String::new(),
                tool_calls: vec![ToolCall::new(format!("c{id}"), tool, args)],
                usage: Usage::default(),
                model: "forever".into(),
                ..Default::default()
            })
        }
    }))
}

/// A model that always hands off to the other of `a`/`b`, forever.
fn ping_pong() -> BoxModelService {
    BoxModelService::new(tower::service_fn(|req: ChatRequest| async move {
        let to = if req.agent.as_str() == "a" { "b" } else { "a" };
        Ok::<_, ModelError>(ChatResponse {
            content: String::new(),
            tool_calls: vec![ToolCall::new(
                "h",
                "handoff",
                json!({"to": to, "message": "yours"}),
            )],
            usage: Usage::default(),
            model: "ping-pong".into(),
            ..Default::default()
        })
    }))
}

/// The run stopped at `cap` (its name and limit, as the report says it).
#[track_caller]
fn assert_capped(report: &RunReport, cap: &str) {
    let want = RunStatus::CapReached { cap: cap.into() };
    assert_eq!(report.status, want);
}

/// The builder, as `agent`, under `caps`: a run from "go", its report and ledger.
async fn builder_under(caps: CapsConfig, agent: LlmAgent) -> (RunReport, Arc<MemorySink>) {
    let dir = tempfile::tempdir().unwrap();
    let builder = AgentId::new("builder").unwrap();
    let turn = BoxTurnService::new(CapsLayer::new(caps).unwrap().layer(agent));
    let runner = support::one_agent(dir.path(), &builder, turn);
    support::run(&runner, &builder, "go").await
}

fn decisions(sink: &MemorySink, layer: LayerId, decision: &str) -> Vec<serde_json::Value> {
    crate::details(sink, layer, decision)
}

#[tokio::test]
async fn a_model_repeating_one_call_forever_stops_exactly_at_the_step_cap() {
    let builder = AgentId::new("builder").unwrap();
    let probe = Probe::new("probe");
    let caps = CapsConfig {
        steps_per_turn: 7,
        ..CapsConfig::default()
    };
    let tool_stack = BoxToolService::new(
        RepeatLayer::new(RepeatConfig { max_identical: 3 })
            .unwrap()
            .layer(ToolExecutor),
    );
    let agent = LlmAgent::builder(builder, forever("probe", json!({"x": 1})))
        .tools(ToolSet::new().with(probe.clone()))
        .tool_stack(tool_stack)
        .max_steps(caps.steps_per_turn)
        .build();
    let (report, sink) = builder_under(caps, agent).await;
    assert_capped(&report, "steps_per_turn (7)");
    assert_eq!(report.turns, 1);
    assert_eq!(probe.calls(), 3, "the call ran max_identical times");
    assert_eq!(decisions(&sink, LayerId::Repeat, "refused").len(), 4);
    let requested = sink
        .kinds()
        .iter()
        .filter(|k| **k == "tool_requested")
        .count();
    assert_eq!(requested, 7, "exactly steps_per_turn calls were made");
    let cap = decisions(&sink, LayerId::Caps, "cap_reached");
    assert_eq!(
        cap,
        vec![json!({"cap": "steps_per_turn", "limit": 7, "value": 7})]
    );
}

#[tokio::test]
async fn an_agent_stopped_by_its_own_lower_step_cap_is_recorded_with_that_limit() {
    let builder = AgentId::new("builder").unwrap();
    let probe = Probe::new("probe");
    let agent = LlmAgent::builder(builder, forever("probe", json!({"x": 1})))
        .tools(ToolSet::new().with(probe.clone()))
        .max_steps(2)
        .build();
    let caps = CapsConfig {
        steps_per_turn: 16,
        ..CapsConfig::default()
    };
    let (report, sink) = builder_under(caps, agent).await;
    assert_capped(&report, "steps_per_turn (2)");
    assert_eq!(
        decisions(&sink, LayerId::Caps, "cap_reached"),
        vec![json!({"cap": "steps_per_turn", "limit": 2, "value": 2})]
    );
}

/// Agents `a` and `b` handing the work to each other through `model` under `caps`, on `clock`
/// (the system's when `None`), until a cap stops them: the report and the ledger.
async fn ping_pong_under(
    caps: CapsConfig,
    model: BoxModelService,
    clock: Option<Arc<dyn Clock>>,
) -> (RunReport, Arc<MemorySink>) {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (AgentId::new("a").unwrap(), AgentId::new("b").unwrap());
    let layer = CapsLayer::new(caps).unwrap();
    let mut runner = Runner::builder(Workspace::new(dir.path()).unwrap()).max_turns(1000);
    if let Some(clock) = clock {
        runner = runner.clock(clock);
    }
    for name in [&a, &b] {
        let agent = LlmAgent::builder(name.clone(), model.clone())
            .tools(tools::builtin(&[a.clone(), b.clone()]))
            .build();
        runner = runner
            .agent(name.clone(), BoxTurnService::new(layer.layer(agent)))
            .unwrap();
    }
    support::run(&runner.build().unwrap(), &a, "go").await
}

/// [`ping_pong_under`] the [`ping_pong`] model on the system's clock.
async fn ping_pong_capped(caps: CapsConfig) -> (RunReport, Arc<MemorySink>) {
    ping_pong_under(caps, ping_pong(), None).await
}

#[tokio::test]
async fn endless_handoffs_stop_exactly_at_the_turn_cap() {
    let (report, sink) = ping_pong_capped(CapsConfig {
        turns_per_run: 5,
        ..CapsConfig::default()
    })
    .await;
    assert_capped(&report, "turns_per_run (5)");
    assert_eq!(report.handoffs.len(), 5);
    assert_eq!(decisions(&sink, LayerId::Caps, "allow").len(), 5);
    let model_calls = sink.kinds().iter().filter(|k| **k == "model_call").count();
    assert_eq!(
        model_calls, 5,
        "the refused sixth turn never reached the model"
    );
}

#[tokio::test]
async fn per_agent_and_hop_caps_name_the_cap_that_fired() {
    let (report, _) = ping_pong_capped(CapsConfig {
        turns_per_agent: Some(2),
        ..CapsConfig::default()
    })
    .await;
    assert_capped(&report, "turns_per_agent (2)");
    assert_eq!(report.handoffs.len(), 4); // a, b, a, b ran; a's third turn was refused

    let (report, _) = ping_pong_capped(CapsConfig {
        handoff_hops: Some(2),
        ..CapsConfig::default()
    })
    .await;
    assert_capped(&report, "handoff_hops (2)");
    assert_eq!(report.handoffs.len(), 3);
}

#[tokio::test]
async fn wrap_up_grants_one_turn_without_tools_then_stops() {
    let (report, sink) = ping_pong_capped(CapsConfig {
        turns_per_run: 2,
        steps_per_turn: 1,
        on_cap: OnCap::WrapUp,
        ..CapsConfig::default()
    })
    .await;
    assert_capped(&report, "turns_per_run (2)");
    assert_eq!(report.turns, 3, "two turns and one wrap-up turn");
    assert_eq!(
        report.handoffs.len(),
        2,
        "the wrap-up turn could not hand off"
    );
    assert_eq!(decisions(&sink, LayerId::Caps, "wrap_up").len(), 1);
    // The wrap-up turn's handoff attempt was answered "tools are disabled".
    crate::assert_tool_failed(&sink, "tools are disabled");
}

#[test]
fn zero_or_absurd_caps_are_refused_naming_the_field() {
    let bad = [
        (
            CapsConfig {
                turns_per_agent: Some(0),
                ..CapsConfig::default()
            },
            "limits.turns_per_agent",
        ),
        (
            CapsConfig {
                steps_per_turn: 1_000_000,
                ..CapsConfig::default()
            },
            "limits.steps_per_turn",
        ),
        (
            CapsConfig {
                wall_time: Some(Duration::ZERO),
                ..CapsConfig::default()
            },
            "limits.wall_time",
        ),
    ];
    for (config, field) in bad {
        assert_eq!(CapsLayer::new(config).unwrap_err().field, field);
    }
    let parsed: Result<CapsConfig, _> = toml::from_str("turns_per_run = 3\nturn_cap = 4\n");
    assert!(parsed.unwrap_err().to_string().contains("turn_cap"));
}

#[tokio::test]
async fn wall_time_is_measured_on_the_run_clock() {
    use loopward_runner::ManualClock;
    let clock = Arc::new(ManualClock::new(1_000_000));
    // Each model call takes ten seconds of the run's clock.
    let ticking = {
        let clock = clock.clone();
        let inner = ping_pong();
        BoxModelService::new(tower::service_fn(move |req: ChatRequest| {
            clock.advance_millis(10_000);
            tower::ServiceExt::oneshot(inner.clone(), req)
        }))
    };
    let caps = CapsConfig {
        wall_time: Some(Duration::from_secs(25)),
        ..CapsConfig::default()
    };
    let (report, _) = ping_pong_under(caps, ticking, Some(clock as Arc<dyn Clock>)).await;
    assert_capped(&report, "wall_time (25s)");
    assert_eq!(
        report.handoffs.len(),
        3,
        "turns at 0 s, 10 s and 20 s ran; 30 s did not"
    );
}

#[tokio::test]
async fn a_ledger_that_cannot_record_the_decision_stops_the_call() {
    use loopward_runner::layers::testing::{run as run_ctx, turn};
    use loopward_runner::tool::ToolError;
    use tower::ServiceExt;
    let dir = tempfile::tempdir().unwrap();
    let (r, sink) = run_ctx(dir.path(), "r1");
    sink.fail_after(0);
    let probe = Probe::new("probe");
    let svc = RepeatLayer::new(RepeatConfig::default())
        .unwrap()
        .layer(ToolExecutor);
    let out = svc
        .oneshot(probe.invocation(&turn(&r, "builder", 1), json!({})))
        .await;
    assert!(matches!(out, Err(ToolError::Audit(_))));
    assert_eq!(probe.calls(), 0);
}
