//! A runner of one agent over a fresh workspace, and a run of it into memory: shared by the layer,
//! runner and HTTP backend tests (`#[path]`-included, as `audit_support` is).
#![allow(dead_code)]

use loopward_core::{AgentId, Person, RunId};
use loopward_runner::audit::MemorySink;
use loopward_runner::{BoxTurnService, RunReport, RunSpec, Runner, Workspace};
use std::path::Path;
use std::sync::Arc;

/// A runner over the workspace `dir` whose one agent, `name`, takes its turns through `turn`.
pub(crate) fn one_agent(dir: &Path, name: &AgentId, turn: BoxTurnService) -> Runner {
    Runner::builder(Workspace::new(dir).unwrap())
        .agent(name.clone(), turn)
        .unwrap()
        .build()
        .unwrap()
}

/// Runs `r1` on `runner` from `first`, with `task` as the person's words, into a memory sink.
pub(crate) async fn run(
    runner: &Runner,
    first: &AgentId,
    task: &str,
) -> (RunReport, Arc<MemorySink>) {
    run_as(runner, "r1", first, task).await
}

/// [`run`], as run `id`.
pub(crate) async fn run_as(
    runner: &Runner,
    id: &str,
    first: &AgentId,
    task: &str,
) -> (RunReport, Arc<MemorySink>) {
    let sink = Arc::new(MemorySink::default());
    let report = runner
        .run(RunSpec {
            id: RunId::new(id).unwrap(),
            task: Person::at_the_keyboard().says(task),
            first: first.clone(),
            audit: sink.clone(),
            audit_location: None,
        })
        .await;
    (report, sink)
}
