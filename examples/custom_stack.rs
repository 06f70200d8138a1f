//! Embedding the runner with a custom stack of layers built from `loopward.toml` tables:
//! caps, repeat detection, a durable stop-gate on release notes, rate limits, a token budget,
//! timeouts and class-jump. The first run pauses for approval; after `approve` (what
//! `loopward approve` calls) the second start of the same run writes the notes exactly once.
//!
//! Run it with `cargo run -p loopward-examples --example custom_stack`.
#![allow(clippy::print_stdout, clippy::unwrap_used)]

use loopward_core::{AgentId, Person, RunId, RunStatus};
use loopward_runner::audit::MemorySink;
use loopward_runner::layers::stack::{LayersConfig, Stack};
use loopward_runner::layers::stopgate::{approve, pending_dir};
use loopward_runner::model::{
    fake::{FakeModel, Script},
    BoxModelService,
};
use loopward_runner::tool::{BoxToolService, ToolExecutor};
use loopward_runner::{tools, BoxTurnService, LlmAgent, RunReport, RunSpec, Runner, Workspace};
use serde_json::json;
use std::path::Path;
use std::sync::Arc;

const CONFIG: &str = r#"
[limits]
turns_per_run = 6
steps_per_turn = 8
on_cap = "wrap_up"

[repeat]
max_identical = 2

[[stopgate]]
point = "write"
glob = "release/*"
mode = "durable"

[rate.backend]
requests = 20
per = "1s"

[budget]
max_tokens = 50000

[timeout]
model = "60s"
tool = "30s"
turn = "10m"

[class_jump]
strategies = ["patch", "rewrite"]
"#;

fn script(planner: &AgentId, builder: &AgentId) -> Script {
    let mut s = Script::default();
    s.call(
        planner,
        "write_file",
        json!({"path": "plan.md", "content": "1. notes"}),
    );
    s.call(
        planner,
        "handoff",
        json!({"to": "builder", "message": "write the release notes"}),
    );
    s.call(
        builder,
        "report_attempt",
        json!({"subtask": "notes", "strategy": "patch", "outcome": "succeeded"}),
    );
    s.call(
        builder,
        "write_file",
        json!({"path": "release/notes.md", "content": "v1: hello"}),
    );
    s.say(builder, "Release notes written.");
    s
}

async fn start(dir: &Path, config: &LayersConfig) -> RunReport {
    let stack = Stack::new(config).unwrap();
    let (planner, builder) = (
        AgentId::new("planner").unwrap(),
        AgentId::new("builder").unwrap(),
    );
    let team = [planner.clone(), builder.clone()];
    let model = stack.model(BoxModelService::new(FakeModel::new(script(
        &planner, &builder,
    ))));
    let mut runner = Runner::builder(Workspace::new(dir).unwrap());
    for name in &team {
        let mut toolset = tools::builtin(&team);
        if let Some(cj) = stack.class_jump() {
            toolset = toolset.with(cj.tool());
        }
        let agent = LlmAgent::builder(name.clone(), model.clone())
            .tools(toolset)
            .tool_stack(stack.tools(BoxToolService::new(ToolExecutor)))
            .max_steps(stack.steps_per_turn())
            .build();
        runner = runner
            .agent(name.clone(), stack.turn(BoxTurnService::new(agent)))
            .unwrap();
    }
    let id = RunId::new("release-1").unwrap();
    let task = Person::at_the_keyboard().says("write the release notes");
    runner
        .build()
        .unwrap()
        .run(RunSpec::new(
            id,
            task,
            planner,
            Arc::new(MemorySink::default()),
        ))
        .await
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let config: LayersConfig = toml::from_str(CONFIG).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let first = start(dir.path(), &config).await;
    println!("first start: {:?}", first.status);
    let RunStatus::AwaitingApproval { pending } = first.status else {
        panic!("the durable gate should have paused the run");
    };
    let record = approve(&pending_dir(dir.path()), &pending).unwrap();
    println!("approved {} ({})", record.id, record.summary);
    let second = start(dir.path(), &config).await;
    println!(
        "second start: {:?} after {} turns",
        second.status, second.turns
    );
    let notes = std::fs::read_to_string(dir.path().join("release/notes.md")).unwrap();
    println!("release/notes.md: {notes}");
    assert_eq!(second.status, RunStatus::Completed);
}
