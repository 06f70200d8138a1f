//! A stop-gate on a tool, on Restate: the run waits for a person outside the tool's step, no
//! worker holds it meanwhile, `loopward approve --restate` approves it with no worker running,
//! and the call runs once on the worker started next.

use futures::future::BoxFuture;
use loopward_core::{AgentId, AuditEvent, Message, RunId, RunStatus, ToolCall, Usage};
use loopward_restate::ingress::{self, Ingress};
use loopward_restate::{
    JournaledModelLayer, JournaledToolLayer, LoopwardRunService, RestateApprover, StartRun,
};
use loopward_runner::audit::{LedgerOptions, Record, EVENTS_FILE};
use loopward_runner::gates::{Policy, PolicyConfig, PolicyLayer};
use loopward_runner::layers::stack::{LayersConfig, Stack};
use loopward_runner::model::{BoxModelService, ChatRequest, ChatResponse, ModelError, StopReason};
use loopward_runner::tool::{BoxToolService, ToolExecutor};
use loopward_runner::{tools, BoxTurnService, LlmAgent, Runner, Workspace};
use restate_sdk::prelude::{Endpoint, HttpServer};
use serde_json::json;
use std::path::Path;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tower::Layer;

fn runner(ws: &Path) -> Runner {
    let builder = AgentId::new("builder").unwrap();
    let config: LayersConfig = toml::from_str(
        r#"
        [[stopgate]]
        name = "shell-needs-a-person"
        point = "tool"
        tool = "shell"
        mode = "interactive"
        ask_timeout = "24h"
        "#,
    )
    .unwrap();
    let stack = Stack::new(&config)
        .unwrap()
        .with_approver(Arc::new(RestateApprover));
    let ws = Workspace::new(ws).unwrap();
    let policy = Policy::from_config(&PolicyConfig::default(), ws.clone()).unwrap();
    let model = stack.model_step(BoxModelService::new(Model), |s| {
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
    let [ws, runs, _ctl, port] = args else {
        panic!("worker-gated <workspace> <runs> <ctl> <port>");
    };
    let port: u16 = port.parse().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let service =
            LoopwardRunService::new(runner(Path::new(ws)), runs, LedgerOptions::default());
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .unwrap();
        HttpServer::new(Endpoint::builder().bind(service).build())
            .serve(listener)
            .await;
    });
}

/// One shell call behind the gate, then done.
#[derive(Clone)]
struct Model;

impl tower::Service<ChatRequest> for Model {
    type Response = ChatResponse;
    type Error = ModelError;
    type Future = BoxFuture<'static, Result<ChatResponse, ModelError>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), ModelError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: ChatRequest) -> Self::Future {
        Box::pin(async move {
            let first = !req
                .messages
                .iter()
                .any(|m| matches!(m, Message::Model { .. }));
            let (content, tool_calls) = if first {
                (
                    String::new(),
                    vec![ToolCall {
                        id: "c1".into(),
                        name: "shell".into(),
                        arguments: json!({"command": "echo gated >> out/effects.log"}),
                    }],
                )
            } else {
                ("done".to_string(), vec![])
            };
            Ok(ChatResponse {
                content,
                tool_calls,
                usage: Usage::default(),
                model: "scripted".into(),
                stop: StopReason::Finished,
            })
        })
    }
}

pub(crate) async fn scenario(dir: &Path) -> Result<String, String> {
    for d in ["ws/out", "runs", "ctl"] {
        std::fs::create_dir_all(dir.join(d)).map_err(|e| e.to_string())?;
    }
    let server = super::server::Server::start(dir)?;
    let ingress = Ingress::new(&server.ingress, &server.admin).map_err(|e| e.to_string())?;
    let port = super::server::free_port();
    let a = super::Worker::start_as("worker-gated", "gated-a", dir, port)?;
    ingress::register(&server.admin, &format!("http://127.0.0.1:{port}"))
        .await
        .map_err(|e| e.to_string())?;
    let run = RunId::new("gated-1").unwrap();
    ingress
        .start(
            &run,
            &StartRun {
                task: "Append a line to out/effects.log.".into(),
                first: AgentId::new("builder").unwrap(),
            },
        )
        .await
        .map_err(|e| e.to_string())?;
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
    let cli = <loopward_cli::cli::Cli as clap::Parser>::try_parse_from([
        "loopward",
        "approve",
        run.as_str(),
        pending.gate.as_str(),
        "--restate",
        server.ingress.as_str(),
        "--restate-admin",
        server.admin.as_str(),
        "--by",
        "a person, from elsewhere",
    ])
    .map_err(|e| e.to_string())?;
    let code = loopward_cli::cli::dispatch(cli)
        .await
        .map_err(|e| format!("loopward approve: {e:#}"))?;
    if code != std::process::ExitCode::SUCCESS {
        return Err(format!("loopward approve exited {code:?}"));
    }
    let _b = super::Worker::start_as("worker-gated", "gated-b", dir, port)?;
    let summary = tokio::time::timeout(Duration::from_secs(120), ingress.outcome(&run))
        .await
        .map_err(|_| "the run did not end within 120s of the approval".to_string())?
        .map_err(|e| e.to_string())?;
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
