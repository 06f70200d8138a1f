//! The team every worker serves: a builder that appends to `effects.log` with the shell (reading
//! it back each time, under a repeat bound of one identical call per run, and writing a note
//! each time, under the sprawl gate's default threshold of three units of work) and hands off,
//! and a reviewer behind an interactive turn stop-gate. The model is scripted and stateless
//! (its reply depends only on the agent and how many replies that agent already has), so any
//! worker gives the same reply at the same point of the run.

use futures::future::BoxFuture;
use loopward_core::{AgentId, Message, ToolCall, Usage};
use loopward_restate::{JournaledModelLayer, JournaledToolLayer, RestateApprover};
use loopward_runner::gates::{Policy, PolicyConfig, PolicyLayer};
use loopward_runner::layers::stack::{LayersConfig, Stack};
use loopward_runner::model::{BoxModelService, ChatRequest, ChatResponse, ModelError};
use loopward_runner::tool::{BoxToolService, ToolExecutor};
use loopward_runner::{tools, BoxTurnService, LlmAgent, Runner, Workspace};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tower::Layer;

/// The file the model writes its process id to while it holds the builder's second reply.
pub(crate) const HOLDING: &str = "holding";
/// The file that lets it go on.
pub(crate) const RELEASE: &str = "release";
/// The file each model reply is counted in (one line per live call, with the worker's pid).
pub(crate) const CALLS: &str = "model-calls.log";

pub(crate) fn runner(workspace: &Path, ctl: &Path) -> Runner {
    let builder = AgentId::new("builder").unwrap();
    let reviewer = AgentId::new("reviewer").unwrap();
    let team = [builder.clone(), reviewer.clone()];
    let config: LayersConfig = toml::from_str(
        r#"
        [[stopgate]]
        point = "turn"
        agent = "reviewer"
        mode = "interactive"
        ask_timeout = "24h"

        # The builder reads out/effects.log back once before the kill and once after it, on
        # another worker: the second read is refused only if that worker's repeat layer counts
        # the first, which it read back from Restate's journal and never ran.
        [repeat]
        max_identical = 1
        "#,
    )
    .unwrap();
    let stack = Stack::new(&config)
        .unwrap()
        .with_approver(Arc::new(RestateApprover));
    let ws = Workspace::new(workspace).unwrap();
    // The sprawl gate is on by default (the third unit of work needs a plan): before the
    // kill the builder touches out/effects.log and out/u1.md; after it, on another worker,
    // out/u2.md is the third unit only if that worker's tracker holds the first two, which
    // it read back from the ledger, not from calls it ran.
    let policy = Policy::from_config(&PolicyConfig::default(), ws.clone()).unwrap();
    // The three lines that put a team on Restate: the model step, the tool step, the approver.
    let model = stack.model_step(
        BoxModelService::new(ScriptedModel {
            ctl: ctl.to_path_buf(),
        }),
        |s| BoxModelService::new(JournaledModelLayer.layer(s)),
    );
    let tool_stack = BoxToolService::new(
        JournaledToolLayer
            .layer(PolicyLayer::new(policy).wrap(stack.tools(BoxToolService::new(ToolExecutor)))),
    );
    let mut runner = Runner::builder(ws);
    for name in &team {
        let agent = LlmAgent::builder(name.clone(), model.clone())
            .tools(tools::builtin(&team))
            .tool_stack(tool_stack.clone())
            .max_steps(stack.steps_per_turn())
            .build();
        runner = runner
            .agent(name.clone(), stack.turn(BoxTurnService::new(agent)))
            .unwrap();
    }
    runner.build().unwrap()
}

#[derive(Clone)]
struct ScriptedModel {
    ctl: PathBuf,
}

fn shell(line: &str) -> Vec<ToolCall> {
    vec![ToolCall {
        id: "c1".into(),
        name: "shell".into(),
        arguments: json!({"command": format!("echo {line} >> out/effects.log")}),
    }]
}

/// The shell call, then the same read of `out/effects.log` each time, then a note written to
/// `out/<note>.md`: one more unit of work for the sprawl gate.
fn shell_read_and_note(line: &str, note: &str) -> Vec<ToolCall> {
    let mut calls = shell(line);
    calls.push(ToolCall {
        id: "c2".into(),
        name: "read_file".into(),
        arguments: json!({"path": "out/effects.log"}),
    });
    calls.push(ToolCall {
        id: "c3".into(),
        name: "write_file".into(),
        arguments: json!({"path": format!("out/{note}.md"), "content": note}),
    });
    calls
}

impl tower::Service<ChatRequest> for ScriptedModel {
    type Response = ChatResponse;
    type Error = ModelError;
    type Future = BoxFuture<'static, Result<ChatResponse, ModelError>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), ModelError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: ChatRequest) -> Self::Future {
        let ctl = self.ctl.clone();
        Box::pin(async move {
            let step = 1 + req
                .messages
                .iter()
                .filter(|m| matches!(m, Message::Model { .. }))
                .count();
            let who = req.agent.as_str().to_string();
            let line = format!("{who} {step} {}\n", std::process::id());
            append(&ctl.join(CALLS), &line);
            let (content, tool_calls) = match (who.as_str(), step) {
                ("builder", 1) => (String::new(), shell_read_and_note("one", "u1")),
                ("builder", 2) => {
                    // Mid-turn: hold here until the test has killed this worker and let go.
                    if !ctl.join(RELEASE).exists() {
                        std::fs::write(ctl.join(HOLDING), std::process::id().to_string()).unwrap();
                        while !ctl.join(RELEASE).exists() {
                            tokio::time::sleep(Duration::from_millis(50)).await;
                        }
                    }
                    (String::new(), shell_read_and_note("two", "u2"))
                }
                ("builder", 3) => (
                    String::new(),
                    vec![ToolCall {
                        id: "c1".into(),
                        name: "handoff".into(),
                        arguments: json!({"to": "reviewer", "message": "two lines are in out/effects.log"}),
                    }],
                ),
                ("reviewer", 1) => (String::new(), shell("three")),
                _ => (
                    "Reviewed: out/effects.log has its three lines.".to_string(),
                    vec![],
                ),
            };
            Ok(ChatResponse {
                content,
                tool_calls,
                usage: Usage {
                    input_tokens: 10,
                    output_tokens: 5,
                    ..Usage::default()
                },
                model: "scripted".into(),
                ..Default::default()
            })
        })
    }
}

pub(crate) fn append(path: &Path, line: &str) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    f.write_all(line.as_bytes()).unwrap();
}
