//! A custom turn layer made with `from_fn`: around each agent's turns, it ends the run once one
//! agent has taken N turns, recording its decision in the ledger like the built-in layers do,
//! and, on `run --resume`, counting on from the turns the ledger had settled
//! (`journal::settled_decisions`), as the built-in layers do.
//!
//! Run it with `cargo run -p loopward-examples --example custom_layer`.
#![allow(clippy::print_stdout)]

use futures::future::BoxFuture;
use loopward_core::{AgentId, AuditEvent, LayerId, LayerVerdict, Person, RunId, RunStatus};
use loopward_runner::audit::MemorySink;
use loopward_runner::layers::from_fn::{from_fn, FromFnLayer, NextTurn};
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

/// The layer's name in the ledger.
const LAYER: &str = "turns_per_agent";

/// Turns taken per agent, kept on the run (not the layer), so one stack serves many runs.
struct Taken(Mutex<HashMap<AgentId, u32>>);

impl Taken {
    /// From zero in a new run; in a resumed one, from the turns this layer let through before.
    fn rebuilt(run: &loopward_runner::RunContext) -> Self {
        let mut map = HashMap::new();
        for d in loopward_runner::journal::settled_decisions(run, &LayerId::from(LAYER)) {
            if d.verdict == LayerVerdict::Allow {
                *map.entry(d.agent).or_insert(0) += 1;
            }
        }
        Self(Mutex::new(map))
    }
}

/// Ends the run `Stopped` before an agent's turn number `limit + 1`: the layer is its policy,
/// written as an async function of the turn and the rest of the stack.
fn turns_per_agent(
    limit: u32,
) -> FromFnLayer<impl Fn(TurnRequest, NextTurn) -> TurnFuture + Clone> {
    from_fn(move |req: TurnRequest, next: NextTurn| -> TurnFuture {
        let run = req.turn.run();
        let taken = run.extensions().get_or_insert_with(|| Taken::rebuilt(run));
        let n = {
            let mut map = taken.0.lock().unwrap_or_else(|p| p.into_inner());
            let n = map.entry(req.turn.agent().clone()).or_insert(0);
            *n += 1;
            *n
        };
        Box::pin(async move {
            let decision = if n > limit {
                LayerVerdict::Stopped
            } else {
                LayerVerdict::Allow
            };
            // Record before acting: a decision the ledger cannot hold is not taken.
            req.turn.record(&AuditEvent::LayerDecision {
                layer: LAYER.into(),
                decision,
                detail: json!({"agent": req.turn.agent().as_str(), "turn": n, "limit": limit})
                    .into(),
            })?;
            if n > limit {
                return Err(TurnError::Stop(RunStatus::Stopped {
                    reason: format!("{} took its {limit} turns", req.turn.agent()),
                }));
            }
            next.run(req).await
        })
    })
}

type TurnFuture = BoxFuture<'static, Result<TurnOutcome, TurnError>>;

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
    let layer = turns_per_agent(2);
    let mut runner = Runner::builder(Workspace::new(dir.path())?);
    for name in &team {
        let agent = LlmAgent::builder(name.clone(), model.clone())
            .tools(tools::builtin(&team))
            .build();
        let stacked = tower::Layer::layer(&layer, agent);
        runner = runner.agent(name.clone(), BoxTurnService::new(stacked))?;
    }
    let sink = Arc::new(MemorySink::default());
    let id = RunId::new("ping-pong").ok_or("run id")?;
    let task = Person::at_the_keyboard().says("play");
    let report = runner
        .build()?
        .run(RunSpec::new(id, task, a, sink.clone()))
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
