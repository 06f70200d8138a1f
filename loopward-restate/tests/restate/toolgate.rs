//! A stop-gate on a tool, on Restate: the run waits for a person outside the tool's step, no
//! worker holds it meanwhile, `loopward approve --restate` approves it with no worker running,
//! and the call runs once on the worker started next.

use super::scripted::{call, scripted, step};
use super::server::Server;
use super::worker::Worker;
use loopward_core::{AgentId, AuditEvent, RunId, RunStatus, ToolCall, Usage};
use loopward_restate::ingress::Ingress;
use loopward_restate::{JournaledModelLayer, JournaledToolLayer, LoopwardRunService, StartRun};
use loopward_runner::audit::{LedgerOptions, Record, EVENTS_FILE};
use loopward_runner::gates::{Policy, PolicyConfig, PolicyLayer};
use loopward_runner::model::{BoxModelService, ChatRequest};
use loopward_runner::tool::{BoxToolService, ToolExecutor};
use loopward_runner::{tools, BoxTurnService, LlmAgent, Runner, Workspace};
use restate_sdk::prelude::Endpoint;
use serde_json::json;
use std::path::Path;
use tower::Layer;

fn runner(ws: &Path) -> Runner {
    let builder = AgentId::new("builder").unwrap();
    let stack = super::restate_stack(
        r#"
        [[stopgate]]
        name = "shell-needs-a-person"
        point = "tool"
        tool = "shell"
        mode = "interactive"
        ask_timeout = "24h"
        "#,
    );
    let ws = Workspace::new(ws).unwrap();
    let policy = Policy::from_config(&PolicyConfig::default(), ws.clone()).unwrap();
    let model = stack.model_step(scripted(reply, Usage::default()), |s| {
        BoxModelService::new(JournaledModelLayer.layer(s))
    });
    // The tool step asks the stack's interactive tool gates before it runs.
    let tool_stack = BoxToolService::new(
        JournaledToolLayer
            .asking(stack.gates().clone())
            .layer(PolicyLayer::new(policy).wrap(stack.tools(BoxToolService::new(ToolExecutor)))),
    );
    let agent = LlmAgent::builder(builder.clone(), model)
        .tools(tools::builtin(std::slice::from_ref(&builder)))
        .tool_stack(tool_stack)
        .max_steps(stack.steps_per_turn())
        .build();
    Runner::builder(ws)
        .agent(builder, stack.turn(BoxTurnService::new(agent)))
        .unwrap()
        .build()
        .unwrap()
}

/// `worker-gated <workspace> <runs> <ctl> <port>`: serves the gated team until killed.
pub(crate) fn worker(args: &[String]) {
    super::worker::serve("worker-gated", args, |ws, runs, _ctl| {
        let service = LoopwardRunService::new(runner(ws), runs, LedgerOptions::default());
        Endpoint::builder().bind(service).build()
    });
}

/// One shell call behind the gate, then done.
async fn reply(req: ChatRequest) -> (String, Vec<ToolCall>) {
    if step(&req) == 1 {
        let command = json!({"command": "echo gated >> out/effects.log"});
        (String::new(), vec![call("c1", "shell", command)])
    } else {
        ("done".to_string(), vec![])
    }
}

/// Starts `run` of the gated team (one shell call behind the gate).
pub(crate) async fn start(restate: &Ingress, run: &RunId) -> Result<(), String> {
    let start = StartRun {
        task: "Append a line to out/effects.log.".into(),
        first: AgentId::new("builder").unwrap(),
    };
    restate.start(run, &start).await.map_err(|e| e.to_string())
}

/// A Restate server for `dir`, its ingress, and the gated worker `name` registered with it: the
/// worker and the port it serves on (a later worker serves the same deployment there).
pub(crate) async fn serve_gated(
    dir: &Path,
    name: &'static str,
) -> Result<(Server, Ingress, Worker, u16), String> {
    let server = Server::start(dir)?;
    let ingress = Ingress::new(&server.ingress, &server.admin).map_err(|e| e.to_string())?;
    let port = super::server::free_port();
    let worker = Worker::start_as("worker-gated", name, dir, port)?;
    server.register(port).await?;
    Ok((server, ingress, worker, port))
}

pub(crate) async fn scenario(dir: &Path) -> Result<String, String> {
    for d in ["ws/out", "runs", "ctl"] {
        std::fs::create_dir_all(dir.join(d)).map_err(|e| e.to_string())?;
    }
    let (server, ingress, a, port) = serve_gated(dir, "gated-a").await?;
    let run = RunId::new("gated-1").unwrap();
    start(&ingress, &run).await?;
    let pending = super::wait_for("the tool gate's pending approval", 90, || async {
        ingress.pending(&run).await.ok().flatten()
    })
    .await?;
    if pending.gate != "shell-needs-a-person" {
        return Err(format!("unexpected pending approval {pending:?}"));
    }
    // No worker holds the run while the person thinks.
    a.kill();
    let effects = dir.join("ws/out/effects.log");
    if effects.exists() {
        return Err("the gated command ran before it was approved".into());
    }
    super::approve_with_cli(&server, &run, &pending.gate).await?;
    let _b = Worker::start_as("worker-gated", "gated-b", dir, port)?;
    let summary = super::outcome(&ingress, &run, 120).await?;
    if summary.status != RunStatus::Completed {
        return Err(format!("the run ended {:?}", summary.status));
    }
    let text = std::fs::read_to_string(&effects).map_err(|e| format!("effects.log: {e}"))?;
    if text != "gated\n" {
        return Err(format!(
            "effects.log is {text:?}, expected the gated line once"
        ));
    }
    let run_dir = dir.join("runs").join(run.as_str());
    loopward_runner::audit::verify(
        &run_dir,
        &loopward_runner::audit::VerifyOptions::keyless().unfinished(true),
    )
    .map_err(|e| format!("verify: {e}"))?;
    let bytes = std::fs::read(run_dir.join(EVENTS_FILE)).map_err(|e| e.to_string())?;
    let approved = bytes
        .split_inclusive(|b| *b == b'\n')
        .filter_map(|l| Record::parse_line(l).ok()?.0.event().ok())
        .filter(|e| {
            matches!(e, AuditEvent::LayerDecision { layer, decision, .. }
                if *layer == loopward_core::LayerId::StopGate && decision.as_str() == "approved")
        })
        .count();
    if approved != 1 {
        return Err(format!("the ledger holds {approved} approvals, expected 1"));
    }
    Ok(format!(
        "restate: a tool stop-gate waited outside the step, approved with no worker running; the command ran once ({} records)",
        summary.records
    ))
}
