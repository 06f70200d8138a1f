//! `cargo run -p loopward-demo`: loopward's story, offline, on the scripted fake backend.

#![allow(clippy::print_stdout, clippy::print_stderr)]

use anyhow::{Context, Result};
use loopward_core::{AgentId, RunId};
use loopward_runner::audit::MemorySink;
use loopward_runner::model::fake::{FakeModel, Script};
use loopward_runner::model::BoxModelService;
use loopward_runner::{tools, BoxTurnService, LlmAgent, RunSpec, Runner, Workspace};
use serde_json::json;
use std::sync::Arc;

fn agent(name: &str) -> AgentId {
    AgentId::new(name).expect("demo agent names are valid")
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<()> {
    let scratch = tempfile::tempdir().context("could not create a scratch workspace")?;
    let (planner, builder, reviewer) = (agent("planner"), agent("builder"), agent("reviewer"));
    let team = vec![planner.clone(), builder.clone(), reviewer.clone()];

    let mut script = Script::default();
    script
        .call(&planner, "write_file", json!({"path": "plan.md", "content": "# Plan\n1. add greet()\n"}))
        .call(&planner, "handoff", json!({"to": "builder", "message": "plan.md has the plan"}))
        .call(&builder, "write_file", json!({"path": "src/greet.rs", "content": "pub fn greet() -> &'static str { \"hello\" }\n"}))
        .call(&builder, "handoff", json!({"to": "reviewer", "message": "greet() is in src/greet.rs"}))
        .call(&reviewer, "read_file", json!({"path": "src/greet.rs"}))
        .say(&reviewer, "Looks right. Done.");
    let model = BoxModelService::new(FakeModel::new(script));

    let mut runner = Runner::builder(Workspace::new(scratch.path())?);
    for name in &team {
        let a = LlmAgent::builder(name.clone(), model.clone())
            .tools(tools::builtin(&team))
            .build();
        runner = runner.agent(name.clone(), BoxTurnService::new(a))?;
    }
    let runner = runner.build()?;
    let sink = Arc::new(MemorySink::default());
    println!("loopward demo — a scripted team on the offline fake backend\n");
    let report = runner
        .run_observed(
            RunSpec {
                id: RunId::new("demo").context("run id")?,
                task: "add a greet() function".into(),
                first: planner,
                audit: sink.clone(),
                audit_location: None,
            },
            |ev| match ev.outcome {
                Ok(o) => {
                    println!("turn {} · {}", ev.turn, ev.agent);
                    for e in &o.effects {
                        println!("    wrote {}", e.path);
                    }
                    if let Some(h) = &o.handoff {
                        println!("  ↪ handoff → {}", h.to);
                    }
                }
                Err(status) => println!(
                    "turn {} · {} stopped: {}",
                    ev.turn,
                    ev.agent,
                    status.label()
                ),
            },
        )
        .await;
    println!(
        "\nrun {}: {} after {} turns, {} handoffs, {} audit events",
        report.run,
        report.status.label(),
        report.turns,
        report.handoffs.len(),
        sink.events().len()
    );
    Ok(())
}
