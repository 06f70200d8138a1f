//! The team every worker serves: a builder that appends to `effects.log` with the shell (reading
//! it back each time, under a repeat bound of one identical call per run, and writing a note
//! each time, under the sprawl gate's default threshold of three units of work) and hands off,
//! and a reviewer behind an interactive turn stop-gate. The model is scripted and stateless
//! (its reply depends only on the agent and how many replies that agent already has), so any
//! worker gives the same reply at the same point of the run.

use super::scripted::{call, scripted, step};
use loopward_core::{AgentId, ToolCall, Usage};
use loopward_restate::{JournaledModelLayer, JournaledToolLayer};
use loopward_runner::gates::{Policy, PolicyConfig, PolicyLayer};
use loopward_runner::model::{BoxModelService, ChatRequest};
use loopward_runner::tool::{BoxToolService, ToolExecutor};
use loopward_runner::{tools, BoxTurnService, LlmAgent, Runner, Workspace};
use serde_json::json;
use std::path::{Path, PathBuf};
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
    let stack = super::restate_stack(
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
    );
    let ws = Workspace::new(workspace).unwrap();
    // The sprawl gate is on by default (the third unit of work needs a plan): before the
    // kill the builder touches out/effects.log and out/u1.md; after it, on another worker,
    // out/u2.md is the third unit only if that worker's tracker holds the first two, which
    // it read back from the ledger, not from calls it ran.
    let policy = Policy::from_config(&PolicyConfig::default(), ws.clone()).unwrap();
    // The three lines that put a team on Restate: the model step, the tool step, the approver.
    let ctl = ctl.to_path_buf();
    let usage = Usage {
        input_tokens: 10,
        output_tokens: 5,
        ..Usage::default()
    };
    let model = scripted(move |req| reply(ctl.clone(), req), usage);
    let model = stack.model_step(model, |s| {
        BoxModelService::new(JournaledModelLayer.layer(s))
    });
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

fn shell(line: &str) -> Vec<ToolCall> {
    let command = json!({"command": format!("echo {line} >> out/effects.log")});
    vec![call("c1", "shell", command)]
}

/// The shell call, then the same read of `out/effects.log` each time, then a note written to
/// `out/<note>.md`: one more unit of work for the sprawl gate.
fn shell_read_and_note(line: &str, note: &str) -> Vec<ToolCall> {
    let mut calls = shell(line);
    calls.push(call("c2", "read_file", json!({"path": "out/effects.log"})));
    let write = json!({"path": format!("out/{note}.md"), "content": note});
    calls.push(call("c3", "write_file", write));
    calls
}

/// The builder's and the reviewer's replies; each live call is counted in `ctl`.
async fn reply(ctl: PathBuf, req: ChatRequest) -> (String, Vec<ToolCall>) {
    let step = step(&req);
    let who = req.agent.as_str().to_string();
    let line = format!("{who} {step} {}\n", std::process::id());
    append(&ctl.join(CALLS), &line);
    match (who.as_str(), step) {
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
        ("builder", 3) => {
            let to = json!({"to": "reviewer", "message": "two lines are in out/effects.log"});
            (String::new(), vec![call("c1", "handoff", to)])
        }
        ("reviewer", 1) => (String::new(), shell("three")),
        _ => (
            "Reviewed: out/effects.log has its three lines.".to_string(),
            vec![],
        ),
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
