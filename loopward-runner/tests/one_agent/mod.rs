//! A runner of one agent over a fresh workspace, a run of it into memory, the spec of a run and
//! the steps scripted agents take again and again: shared by the layer, runner, gate, spec,
//! journal, audit and HTTP backend tests (`#[path]`-included, as `audit_support` is).
#![allow(dead_code, unreachable_pub)]

use loopward_core::{AgentId, AuditSink, Person, RunId};
use loopward_runner::audit::MemorySink;
use loopward_runner::model::fake::{Script, ScriptedCall};
use loopward_runner::{BoxTurnService, RunReport, RunSpec, Runner, RunnerBuilder, Workspace};
use serde_json::{json, Value};
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

/// Agents for a runner being built, several at once.
pub(crate) trait Agents: Sized {
    /// Each of `team` as an agent, taking its turns through the service `turn` makes for it.
    fn agents(self, team: &[AgentId], turn: impl Fn(&AgentId) -> BoxTurnService) -> Self;
}

impl Agents for RunnerBuilder {
    fn agents(mut self, team: &[AgentId], turn: impl Fn(&AgentId) -> BoxTurnService) -> Self {
        for name in team {
            self = self.agent(name.clone(), turn(name)).unwrap();
        }
        self
    }
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
    let report = runner.run(spec(id, first, task, sink.clone())).await;
    (report, sink)
}

/// The spec of run `id` from `first`, with `task` as the person at the keyboard's words,
/// recording into `audit` (no ledger location).
pub(crate) fn spec(id: &str, first: &AgentId, task: &str, audit: Arc<dyn AuditSink>) -> RunSpec {
    RunSpec::new(
        RunId::new(id).unwrap(),
        Person::at_the_keyboard().says(task),
        first.clone(),
        audit,
    )
}

/// The steps scripted agents take again and again, one line each.
pub(crate) trait Steps {
    /// `from` hands the work to `to`, saying `message` (the `handoff` tool).
    fn handoff(&mut self, from: &AgentId, to: &str, message: &str) -> &mut Self;
    /// `by` writes `content` to `path` (the `write_file` tool).
    fn write(&mut self, by: &AgentId, path: &str, content: &str) -> &mut Self;
}

impl Steps for Script {
    fn handoff(&mut self, from: &AgentId, to: &str, message: &str) -> &mut Self {
        self.call(from, "handoff", json!({"to": to, "message": message}))
    }

    fn write(&mut self, by: &AgentId, path: &str, content: &str) -> &mut Self {
        self.call(by, "write_file", json!({"path": path, "content": content}))
    }
}

/// A scripted call of `tool` with `arguments`, under the fake backend's own call id.
pub(crate) fn scripted(tool: &str, arguments: Value) -> ScriptedCall {
    ScriptedCall {
        id: None,
        name: tool.into(),
        arguments,
    }
}
