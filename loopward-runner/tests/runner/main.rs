//! The outer loop and the inner model ↔ tools loop, on the scripted fake backend: handoffs,
//! caps and failures ([`turns`]), what replies cost and end ([`replies`]), a person's words and
//! stop requests ([`person`]).

#[path = "../one_agent/mod.rs"]
mod one_agent;
mod person;
mod replies;
mod turns;

use loopward_core::{AgentId, AuditEvent, Message, Person, RunId, RunStatus};
use loopward_runner::audit::MemorySink;
use loopward_runner::inbox::HumanInbox;
use loopward_runner::model::fake::{FakeModel, Script, ScriptedCall, ScriptedReply};
use loopward_runner::model::{BoxModelService, ChatRequest, ChatResponse, ModelError};
use loopward_runner::stop::StopRequests;
use loopward_runner::{tools, BoxTurnService, LlmAgent, RunReport, Runner, Workspace};
use one_agent::{scripted, Agents, Steps};
use serde_json::json;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

fn id(s: &str) -> AgentId {
    AgentId::new(s).unwrap()
}

/// Wraps a model and keeps every request it saw, so tests can read what the model was shown.
#[derive(Clone)]
struct Recording {
    inner: FakeModel,
    seen: Arc<Mutex<Vec<ChatRequest>>>,
}

impl tower::Service<ChatRequest> for Recording {
    type Response = ChatResponse;
    type Error = ModelError;
    type Future = <FakeModel as tower::Service<ChatRequest>>::Future;
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), ModelError>> {
        self.inner.poll_ready(cx)
    }
    fn call(&mut self, req: ChatRequest) -> Self::Future {
        self.seen.lock().unwrap().push(req.clone());
        self.inner.call(req)
    }
}

struct Team {
    dir: tempfile::TempDir,
    runner: Runner,
    sink: Arc<MemorySink>,
    seen: Arc<Mutex<Vec<ChatRequest>>>,
}

fn team(names: &[&str], script: Script, max_steps: u32) -> Team {
    team_with(names, script, max_steps, None)
}

/// `team`, whose runs read people's messages from `inbox`.
fn team_inbox(names: &[&str], script: Script, inbox: HumanInbox) -> Team {
    team_with(names, script, 8, Some(inbox))
}

fn team_with(names: &[&str], script: Script, max_steps: u32, inbox: Option<HumanInbox>) -> Team {
    team_stops(names, script, max_steps, inbox, None)
}

/// `team_with`, whose runs honour a person's stop requests from `stops`.
fn team_stops(
    names: &[&str],
    script: Script,
    max_steps: u32,
    inbox: Option<HumanInbox>,
    stops: Option<StopRequests>,
) -> Team {
    let dir = tempfile::tempdir().unwrap();
    let members: Vec<AgentId> = names.iter().map(|n| id(n)).collect();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let model = BoxModelService::new(Recording {
        inner: FakeModel::new(script),
        seen: seen.clone(),
    });
    let mut b = Runner::builder(Workspace::new(dir.path()).unwrap()).agents(&members, |m| {
        let agent = LlmAgent::builder(m.clone(), model.clone())
            .system(format!("You are {m}."))
            .tools(tools::builtin(&members))
            .max_steps(max_steps)
            .build();
        BoxTurnService::new(agent)
    });
    if let Some(inbox) = inbox {
        b = b.inbox(inbox);
    }
    if let Some(stops) = stops {
        b = b.stops(stops);
    }
    Team {
        dir,
        runner: b.build().unwrap(),
        sink: Arc::new(MemorySink::default()),
        seen,
    }
}

impl Team {
    async fn run(&self, first: &str) -> RunReport {
        let spec = one_agent::spec("test-run", &id(first), "do the thing", self.sink.clone());
        self.runner.run(spec).await
    }

    /// The tool results the model was shown, in order.
    fn tool_results_seen(&self) -> Vec<(String, bool)> {
        let seen = self.seen.lock().unwrap();
        let last = seen.last().unwrap();
        last.messages
            .iter()
            .filter_map(|m| match m {
                Message::Tool(r) => Some((r.content.clone(), r.is_error)),
                _ => None,
            })
            .collect()
    }
}
