//! A custom gate in the tool stack: only some file types may be written. It decides on the
//! paths a call declares before it runs, records every decision (allow and deny), and refuses
//! with a correctable error the model reads — stacked with the built-in territory gates.
//!
//! Run it with `cargo run -p loopward-examples --example custom_gate`.
#![allow(clippy::print_stdout)]

use futures::future::BoxFuture;
use loopward_core::{
    Action, AgentId, AuditEvent, Decision, GateId, GateKind, GateMode, Person, Refusal, RunId,
    RunStatus,
};
use loopward_runner::audit::MemorySink;
use loopward_runner::gates::{Policy, PolicyConfig, PolicyLayer};
use loopward_runner::layers::from_fn::{from_fn, FromFnLayer, NextTool};
use loopward_runner::model::{
    fake::{FakeModel, Script},
    BoxModelService,
};
use loopward_runner::tool::{
    Access, BoxToolService, ToolError, ToolExecutor, ToolInvocation, ToolOutput,
};
use loopward_runner::{tools, BoxTurnService, LlmAgent, RunSpec, Runner, Workspace};
use serde_json::json;
use std::sync::Arc;
use tower::Layer;

const GATE: &str = "file_types";

/// Allows writes only to paths ending in one of `allowed`: the gate is its policy, an async
/// function of the call and the rest of the stack (`from_fn`), and nothing else.
fn file_types(
    allowed: &'static [&'static str],
) -> FromFnLayer<impl Fn(ToolInvocation, NextTool) -> ToolFuture + Clone> {
    from_fn(move |inv: ToolInvocation, next: NextTool| -> ToolFuture {
        Box::pin(async move {
            let gate = GateId::new(GateKind::Custom, GATE);
            let written = inv.accesses.iter().flat_map(Access::written_paths);
            for p in written {
                let ok = allowed.iter().any(|ext| p.rel().ends_with(ext));
                let decision = if ok {
                    Decision::Allow
                } else {
                    Decision::Deny(Refusal::new(
                        &gate,
                        format!("{} is not a file type this team may write", p.rel()),
                        format!("write one of: {}", allowed.join(", ")),
                    ))
                };
                // The decision is on the record before anything runs (fail closed if it cannot be).
                inv.turn
                    .record(&AuditEvent::GateDecision {
                        call_id: Some(inv.call.id.clone()),
                        gate: gate.clone(),
                        mode: GateMode::Enforce,
                        action: Action::tool(inv.call.name.clone()),
                        path_raw: Some(p.raw().into()),
                        source: None,
                        path: Some(p.rel().into()),
                        decision: decision.clone(),
                    })
                    .map_err(ToolError::Audit)?;
                if let Decision::Deny(r) = decision {
                    return Err(ToolError::Refused(r));
                }
            }
            next.run(inv).await
        })
    })
}

type ToolFuture = BoxFuture<'static, Result<ToolOutput, ToolError>>;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let ws = Workspace::new(dir.path())?;
    let builder = AgentId::new("builder")?;
    let team = [builder.clone()];
    let mut script = Script::default();
    script
        .call(
            &builder,
            "write_file",
            json!({"path": "run.sh", "content": "rm -rf /"}),
        )
        .call(
            &builder,
            "write_file",
            json!({"path": "src/main.rs", "content": "fn main() {}"}),
        )
        .say(&builder, "Wrote src/main.rs instead of a script.");
    let model = BoxModelService::new(FakeModel::new(script));

    // The built-in policy (territories, control files, sprawl) outside, the custom gate inside.
    let policy = Policy::from_config(
        &PolicyConfig::from_toml("[[territory]]\npaths = [\"src/**\"]\nowner = \"builder\"")?,
        ws.clone(),
    )?;
    let custom = BoxToolService::new(file_types(&[".rs", ".md", ".toml"]).layer(ToolExecutor));
    let stack = PolicyLayer::new(policy).wrap(custom);

    let agent = LlmAgent::builder(builder.clone(), model)
        .tools(tools::builtin(&team))
        .tool_stack(stack)
        .build();
    let sink = Arc::new(MemorySink::default());
    let id = RunId::new("custom-gate").ok_or("run id")?;
    let task = Person::at_the_keyboard().says("add an entry point");
    let report = Runner::builder(ws)
        .agent(builder.clone(), BoxTurnService::new(agent))?
        .build()?
        .run(RunSpec::new(id, task, builder, sink.clone()))
        .await;
    for (_, e) in sink.events() {
        if let AuditEvent::GateDecision {
            gate,
            path,
            decision,
            ..
        } = e
        {
            println!(
                "{gate:<20} {:<12} {}",
                path.unwrap_or_default(),
                decision.label()
            );
        }
    }
    assert_eq!(report.status, RunStatus::Completed);
    assert!(!dir.path().join("run.sh").exists());
    assert!(dir.path().join("src/main.rs").exists());
    println!("run.sh refused; src/main.rs written");
    Ok(())
}
