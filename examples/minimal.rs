//! A minimal embedded runner: two scripted agents, one handoff, every event in an audit sink.
//!
//! Run it with `cargo run -p loopward-examples --example minimal`.
#![allow(clippy::print_stdout)]

use loopward_core::{AgentId, Person, RunId, RunStatus};
use loopward_runner::audit::MemorySink;
use loopward_runner::model::{
    fake::{FakeModel, Script},
    BoxModelService,
};
use loopward_runner::{tools, BoxTurnService, LlmAgent, RunSpec, Runner, Workspace};
use serde_json::json;
use std::sync::Arc;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let planner = AgentId::new("planner")?;
    let builder = AgentId::new("builder")?;
    let team = [planner.clone(), builder.clone()];

    // What each agent's model says, in order. Swap FakeModel for a real backend to go live.
    let mut script = Script::default();
    script
        .call(
            &planner,
            "write_file",
            json!({"path": "plan.md", "content": "# Plan\n1. greet"}),
        )
        .call(
            &planner,
            "handoff",
            json!({"to": "builder", "message": "plan.md has it"}),
        )
        .call(
            &builder,
            "write_file",
            json!({"path": "hello.txt", "content": "hello"}),
        )
        .say(&builder, "Done: hello.txt says hello.");
    let model = BoxModelService::new(FakeModel::new(script));

    let mut runner = Runner::builder(Workspace::new(dir.path())?);
    for name in &team {
        let agent = LlmAgent::builder(name.clone(), model.clone())
            .tools(tools::builtin(&team))
            .build();
        runner = runner.agent(name.clone(), BoxTurnService::new(agent))?;
    }
    let sink = Arc::new(MemorySink::default());
    let id = RunId::new("minimal").ok_or("run id")?;
    let task = Person::at_the_keyboard().says("say hello");
    let report = runner
        .build()?
        .run(RunSpec::new(id, task, planner, sink.clone()))
        .await;

    println!("{} after {} turns", report.status.label(), report.turns);
    for h in &report.handoffs {
        println!("  ↪ handoff {} → {}", h.from, h.to);
    }
    println!("{} audit events: {:?}", sink.events().len(), sink.kinds());
    println!("final: {}", report.final_text);
    assert_eq!(report.status, RunStatus::Completed);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("hello.txt"))?,
        "hello"
    );
    Ok(())
}
