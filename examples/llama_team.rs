//! A local llama team: a planner and a builder on a real GGUF model, with a deny-by-default
//! territory and the recommended layers, every tool call grammar-constrained.
//!
//! Fetch the small test model with `cargo xtask fetch-model`, then
//! `cargo run -p loopward-examples --features llama --example llama_team -- models/<file>.gguf`.
#![allow(clippy::print_stdout)]

use loopward_core::{AgentId, AuditEvent, Person, RunId, RunStatus};
use loopward_llama::{LlamaConfig, LlamaModel, ToolChoice};
use loopward_runner::audit::MemorySink;
use loopward_runner::gates::{Policy, PolicyConfig, PolicyLayer};
use loopward_runner::layers::stack::{LayersConfig, Stack};
use loopward_runner::model::BoxModelService;
use loopward_runner::tool::{BoxToolService, ToolExecutor};
use loopward_runner::{tools, BoxTurnService, LlmAgent, RunSpec, Runner, Workspace};
use std::sync::Arc;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args()
        .nth(1)
        .ok_or("usage: llama_team <model.gguf> (`cargo xtask fetch-model` downloads one)")?;
    let model = BoxModelService::new(LlamaModel::load(
        // Small models answer without acting unless steered: one tool call, then the answer.
        LlamaConfig::new(path)
            .n_ctx(4096)
            .greedy()
            .max_tokens(512)
            .tool_choice(ToolChoice::CallThenAnswer),
    )?);
    let dir = tempfile::tempdir()?;
    let ws = Workspace::new(dir.path())?;
    let (planner, builder) = (AgentId::new("planner")?, AgentId::new("builder")?);
    let team = [planner.clone(), builder.clone()];

    let policy = Policy::from_config(
        &PolicyConfig::from_toml("[[territory]]\npaths = [\"plan.md\"]\nowner = \"planner\"")?,
        ws.clone(),
    )?;
    let layers: LayersConfig = toml::from_str("[limits]\nturns_per_run = 4\nsteps_per_turn = 4")?;
    let stack = Stack::new(&layers)?;
    let tool_stack = PolicyLayer::new(policy).wrap(stack.tools(BoxToolService::new(ToolExecutor)));
    let roles = [
        (
            &planner,
            "You are the planner. Write plan.md (first line '# Plan'), then hand off to builder.",
        ),
        (
            &builder,
            "You are the builder. Write hello.txt as plan.md says. plan.md is not yours.",
        ),
    ];
    let mut runner = Runner::builder(ws);
    for (name, role) in roles {
        let agent = LlmAgent::builder(name.clone(), stack.model(model.clone()))
            .system(role)
            .tools(tools::builtin(&team))
            .tool_stack(tool_stack.clone())
            .max_steps(stack.steps_per_turn())
            .build();
        runner = runner.agent(name.clone(), stack.turn(BoxTurnService::new(agent)))?;
    }
    let sink = Arc::new(MemorySink::default());
    let id = RunId::new("llama-team").ok_or("run id")?;
    let task = Person::at_the_keyboard().says("Plan and write a hello file.");
    let report = runner
        .build()?
        .run(RunSpec::new(id, task, planner, sink.clone()))
        .await;
    println!(
        "{} after {} turns, {} handoffs",
        report.status.label(),
        report.turns,
        report.handoffs.len()
    );
    if let RunStatus::Failed { error } = &report.status {
        println!("  why: {error}");
    }
    // What the model asked for, and what the gates said about it.
    for (scope, e) in sink.events() {
        let who = scope.agent.map(|a| a.to_string()).unwrap_or_default();
        match e {
            AuditEvent::ToolRequested {
                tool, arguments, ..
            } => println!("  {who} called {tool} {arguments}"),
            AuditEvent::GateDecision {
                gate,
                path,
                decision,
                ..
            } => println!(
                "  {who}: {gate} {} {}",
                path.unwrap_or_default(),
                decision.label()
            ),
            _ => {}
        }
    }
    Ok(())
}
