//! Timeouts under paused time: a slow call becomes an error at exactly its limit.

use loopward_core::RunStatus;
use loopward_runner::layers::testing::{run, turn, Probe};
use loopward_runner::layers::timeout::{TimeoutConfig, Timeouts};
use loopward_runner::model::{ChatRequest, ChatResponse, ModelError};
use loopward_runner::tool::{ToolError, ToolExecutor};
use loopward_runner::{TurnError, TurnOutcome, TurnRequest};
use std::time::Duration;
use tokio::time::Instant;
use tower::{Layer, Service, ServiceExt};

fn timeouts() -> Timeouts {
    Timeouts::new(TimeoutConfig {
        model: Some(Duration::from_secs(30)),
        tool: Some(Duration::from_secs(10)),
        turn: Some(Duration::from_secs(120)),
    })
    .unwrap()
}

/// Sends `req` once through `layer` wrapped around `inner`.
async fn through<L, S, R>(
    layer: L,
    inner: S,
    req: R,
) -> Result<<L::Service as Service<R>>::Response, <L::Service as Service<R>>::Error>
where
    L: Layer<S>,
    L::Service: Service<R>,
{
    layer.layer(inner).oneshot(req).await
}

#[tokio::test(start_paused = true)]
async fn a_slow_model_call_times_out_at_its_limit() {
    let slow = tower::service_fn(|_req: ChatRequest| async {
        tokio::time::sleep(Duration::from_secs(3600)).await;
        Ok::<_, ModelError>(ChatResponse::default())
    });
    let start = Instant::now();
    let err = through(timeouts().model_layer(), slow, crate::request("a"))
        .await
        .unwrap_err();
    assert_eq!(err, ModelError::Timeout(Duration::from_secs(30)));
    assert_eq!(start.elapsed(), Duration::from_secs(30));
}

#[tokio::test(start_paused = true)]
async fn a_slow_tool_call_is_an_error_result_not_a_hang() {
    let dir = tempfile::tempdir().unwrap();
    let (r, sink) = run(dir.path(), "r1");
    let slow = tower::service_fn(|_inv| async {
        tokio::time::sleep(Duration::from_secs(3600)).await;
        ToolExecutor.oneshot(_inv).await
    });
    let inv = Probe::new("shell").invocation(&turn(&r, "builder", 1), serde_json::json!({}));
    let err = through(timeouts().tool_layer(), slow, inv)
        .await
        .unwrap_err();
    assert_eq!(err, ToolError::Timeout { secs: 10 });
    assert!(err.to_string().contains("longer than 10s"));
    assert!(!err.is_fatal());
    assert_eq!(sink.kinds(), vec!["layer_decision"]);
    // A fast call passes untouched.
    let probe = Probe::new("read_file");
    let inv = probe.invocation(&turn(&r, "builder", 1), serde_json::json!({}));
    through(timeouts().tool_layer(), ToolExecutor, inv)
        .await
        .unwrap();
    assert_eq!(probe.calls(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_turn_that_runs_too_long_ends_the_run_at_a_named_cap() {
    let dir = tempfile::tempdir().unwrap();
    let (r, _) = run(dir.path(), "r1");
    let slow = tower::service_fn(|_req: TurnRequest| async {
        tokio::time::sleep(Duration::from_secs(3600)).await;
        Err::<TurnOutcome, _>(TurnError::Stop(RunStatus::Completed))
    });
    let req = TurnRequest {
        turn: turn(&r, "builder", 1),
        messages: vec![],
    };
    let err = through(timeouts().turn_layer(), slow, req)
        .await
        .unwrap_err();
    assert_eq!(
        err.status(),
        RunStatus::CapReached {
            cap: "timeout.turn (2m)".into()
        }
    );
}

#[test]
fn zero_or_absurd_timeouts_are_refused_naming_the_field() {
    let err = Timeouts::new(TimeoutConfig {
        tool: Some(Duration::ZERO),
        ..TimeoutConfig::default()
    })
    .unwrap_err();
    assert_eq!(err.field, "timeout.tool");
    let err = Timeouts::new(TimeoutConfig {
        turn: Some(Duration::from_secs(10_000_000)),
        ..TimeoutConfig::default()
    })
    .unwrap_err();
    assert_eq!(err.field, "timeout.turn");
}
