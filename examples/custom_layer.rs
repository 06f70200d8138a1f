//! A custom turn layer: a `tower::Layer` around each agent's turns that ends the run once one
//! agent has taken N turns, recording its decision in the ledger like the built-in layers do.
//!
//! Run it with `cargo run -p loopward-examples --example custom_layer`.
#![allow(clippy::print_stdout)]

use futures::future::BoxFuture;
use loopward_core::{AgentId, AuditEvent, RunId, RunStatus};
use loopward_runner::audit::MemorySink;
use loopward_runner::model::{
    fake::{FakeModel, Script},
    BoxModelService,
};
use loopward_runner::{
    tools, BoxTurnService, LlmAgent, RunSpec, Runner, TurnError, TurnOutcome, TurnRequest,
    Workspace,
};
use serde_json::json;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

/// Ends the run `Stopped` before an agent's turn number `limit + 1`.
#[derive(Clone)]
struct TurnsPerAgent {
    limit: u32,
}

impl<S> tower::Layer<S> for TurnsPerAgent {
    type Service = TurnsPerAgentService<S>;
    fn layer(&self, inner: S) -> Self::Service {
        TurnsPerAgentService {
            limit: self.limit,
            inner,
        }
    }
}

/// Turns taken per agent, kept on the run (not the service), so one stack serves many runs.
#[derive(Default)]
struct Taken(Mutex<HashMap<AgentId, u32>>);

#[derive(Clone)]
struct TurnsPerAgentService<S> {
    limit: u32,
    inner: S,
}

impl<S> tower::Service<TurnRequest> for TurnsPerAgentService<S>
where
    S: tower::Service<TurnRequest, Response = TurnOutcome, Error = TurnError>
        + Clone
        + Send
        + 'static,
    S::Future: Send,
{
    type Response = TurnOutcome;
    type Error = TurnError;
    type Future = BoxFuture<'static, Result<TurnOutcome, TurnError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), TurnError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: TurnRequest) -> Self::Future {
        let taken = req.turn.run().extensions().get_or_default::<Taken>();
        let n = {
            let mut map = taken.0.lock().unwrap_or_else(|p| p.into_inner());
            let n = map.entry(req.turn.agent().clone()).or_insert(0);
            *n += 1;
            *n
        };
        let limit = self.limit;
        let turn = req.turn.clone();
        // Take the service that was made ready, leave a fresh clone behind (tower's idiom).
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        Box::pin(async move {
            let decision = if n > limit { "stopped" } else { "allow" };
            // Record before acting: a decision the ledger cannot hold is not taken.
            turn.record(&AuditEvent::LayerDecision {
                layer: "turns_per_agent".into(),
                decision: decision.into(),
                detail: json!({"agent": turn.agent().as_str(), "turn": n, "limit": limit}),
            })?;
            if n > limit {
                return Err(TurnError::Stop(RunStatus::Stopped {
                    reason: format!("{} took its {limit} turns", turn.agent()),
                }));
            }
            inner.call(req).await
        })
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let (a, b) = (AgentId::new("ping")?, AgentId::new("pong")?);
    let team = [a.clone(), b.clone()];
    // Two agents that would hand the work back and forth for ever.
    let mut script = Script::default();
    for _ in 0..10 {
        script.call(&a, "handoff", json!({"to": "pong", "message": "your turn"}));
        script.call(&b, "handoff", json!({"to": "ping", "message": "yours"}));
    }
    let model = BoxModelService::new(FakeModel::new(script));
    let layer = TurnsPerAgent { limit: 2 };
    let mut runner = Runner::builder(Workspace::new(dir.path())?);
    for name in &team {
        let agent = LlmAgent::builder(name.clone(), model.clone())
            .tools(tools::builtin(&team))
            .build();
        let stacked = tower::Layer::layer(&layer, agent);
        runner = runner.agent(name.clone(), BoxTurnService::new(stacked))?;
    }
    let sink = Arc::new(MemorySink::default());
    let report = runner
        .build()?
        .run(RunSpec {
            id: RunId::new("ping-pong").ok_or("run id")?,
            task: "play".into(),
            first: a,
            audit: sink.clone(),
            audit_location: None,
        })
        .await;
    println!("{:?} after {} turns", report.status, report.turns);
    let decisions: Vec<String> = sink
        .events()
        .into_iter()
        .filter_map(|(_, e)| match e {
            AuditEvent::LayerDecision {
                decision, detail, ..
            } => Some(format!("{decision} {detail}")),
            _ => None,
        })
        .collect();
    println!("decisions:\n  {}", decisions.join("\n  "));
    assert!(matches!(report.status, RunStatus::Stopped { .. }));
    assert_eq!(report.turns, 5);
    Ok(())
}
