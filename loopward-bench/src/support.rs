//! Fixtures the parts share: a no-op tool, a counting audit sink, the benchmark's layer
//! configuration, and a stateless scripted team model.

use futures::future::BoxFuture;
use loopward_core::{AgentId, AuditError, AuditEvent, AuditSink, Message, Scope, ToolCall, Usage};
use loopward_runner::layers::stack::{LayersConfig, Stack};
use loopward_runner::model::{BoxModelService, ChatRequest, ChatResponse, ModelError};
use loopward_runner::tool::{
    Access, BoxToolService, Tool, ToolError, ToolExecutor, ToolInvocation, ToolOutput, ToolSet,
};
use loopward_runner::tools::HandoffTool;
use loopward_runner::{BoxTurnService, LlmAgent, Runner, TurnContext, Workspace};
use serde_json::json;
use std::path::Path;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

/// The recommended stack as the benchmarks configure it: caps, a stop-gate in `auto` mode
/// before every turn of `a`/`planner`/`builder` and before the `noop` tool, a rate limit with a
/// generous quota (per backend and per agent), and a token budget. No timeouts.
pub const STACK_TOML: &str = r#"
[limits]
turns_per_run = 10000

[[stopgate]]
point = "turn"
agent = "a"
mode = "auto"

[[stopgate]]
point = "turn"
agent = "planner"
mode = "auto"

[[stopgate]]
point = "turn"
agent = "builder"
mode = "auto"

[[stopgate]]
point = "tool"
tool = "noop"
mode = "auto"

[rate.backend]
requests = 1000000
tokens = 1000000000

[rate.per_agent]
requests = 1000000
tokens = 1000000000

[budget]
max_tokens = 1000000000000
"#;

/// The team (planner and builder, each with the [`Noop`] and handoff tools) behind the part 2
/// stack ([`STACK_TOML`]), its model `model`, acting in `ws`; and its first agent (the planner).
pub fn team_runner(ws: &Path, model: TeamModel) -> anyhow::Result<(Runner, AgentId)> {
    let config: LayersConfig = toml::from_str(STACK_TOML)?;
    let stack = Stack::new(&config)?;
    let team = vec![agent("planner"), agent("builder")];
    let model = stack.model(BoxModelService::new(model));
    let tools = ToolSet::new()
        .with(Noop)
        .with(HandoffTool::new(team.clone()));
    let mut runner = Runner::builder(Workspace::new(ws)?).max_turns(64);
    for name in &team {
        let agent = LlmAgent::builder(name.clone(), model.clone())
            .tools(tools.clone())
            .tool_stack(stack.tools(BoxToolService::new(ToolExecutor)))
            .max_steps(stack.steps_per_turn())
            .build();
        runner = runner.agent(name.clone(), stack.turn(BoxTurnService::new(agent)))?;
    }
    Ok((runner.build()?, team[0].clone()))
}

/// A tool that touches nothing and answers `ok`.
#[derive(Clone, Copy, Debug, Default)]
pub struct Noop;

impl Tool for Noop {
    fn spec(&self) -> loopward_core::ToolSpec {
        loopward_core::ToolSpec {
            name: "noop".into(),
            description: "Does nothing and answers ok.".into(),
            parameters: json!({"type": "object", "properties": {}}),
        }
    }

    fn accesses(
        &self,
        _arguments: &serde_json::Value,
        _turn: &TurnContext,
    ) -> Result<Vec<Access>, ToolError> {
        Ok(vec![])
    }

    fn call(&self, _inv: ToolInvocation) -> BoxFuture<'static, Result<ToolOutput, ToolError>> {
        Box::pin(futures::future::ready(Ok(ToolOutput::text("ok"))))
    }
}

/// An audit sink that keeps nothing and counts what it was given, to take the ledger out of a
/// measurement.
#[derive(Debug, Default)]
pub struct CountingSink {
    events: AtomicU64,
    decisions: AtomicU64,
}

impl CountingSink {
    /// Events recorded so far.
    pub fn count(&self) -> u64 {
        self.events.load(Ordering::Relaxed)
    }

    /// Of those, the decisions ([`AuditEvent::is_decision`]).
    pub fn decisions(&self) -> u64 {
        self.decisions.load(Ordering::Relaxed)
    }
}

impl AuditSink for CountingSink {
    fn record(&self, _scope: &Scope, event: &AuditEvent) -> Result<(), AuditError> {
        self.events.fetch_add(1, Ordering::Relaxed);
        if event.is_decision() {
            self.decisions.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }
}

/// Holds every run's first model call until released, so that many runs can be observed idle
/// at once.
#[derive(Debug)]
pub struct Hold {
    arrived: AtomicUsize,
    open: tokio::sync::watch::Sender<bool>,
}

impl Default for Hold {
    fn default() -> Self {
        Self {
            arrived: AtomicUsize::new(0),
            open: tokio::sync::watch::channel(false).0,
        }
    }
}

impl Hold {
    /// Runs waiting at the hold.
    pub fn arrived(&self) -> usize {
        self.arrived.load(Ordering::SeqCst)
    }

    /// Lets every waiting (and later) call through.
    pub fn release(&self) {
        self.open.send_replace(true);
    }

    async fn wait(&self) {
        let mut rx = self.open.subscribe();
        self.arrived.fetch_add(1, Ordering::SeqCst);
        // The sender lives in `self`, so the channel cannot close while we wait.
        let _ = rx.wait_for(|open| *open).await;
    }
}

/// How many turns the builder takes before it says it is done (the planner takes as many).
pub const TEAM_ROUNDS: usize = 3;

/// A scripted two-agent team whose replies follow from the conversation alone, so one model
/// serves any number of concurrent runs deterministically: each turn calls `noop`, then the
/// planner hands off to the builder and the builder back to the planner, until the builder's
/// [`TEAM_ROUNDS`]th turn (or [`TeamModel::rounds`]), where it says it is done. Every run takes
/// `2 × TEAM_ROUNDS` turns.
#[derive(Clone, Debug)]
pub struct TeamModel {
    hold: Option<Arc<Hold>>,
    rounds: usize,
}

impl Default for TeamModel {
    fn default() -> Self {
        Self {
            hold: None,
            rounds: TEAM_ROUNDS,
        }
    }
}

impl TeamModel {
    /// A team model whose runs wait at `hold` before their first model call.
    pub fn held(hold: Arc<Hold>) -> Self {
        Self {
            hold: Some(hold),
            ..Self::default()
        }
    }

    /// A team model whose builder is done at its `rounds`th turn (`2 × rounds` turns a run).
    pub fn rounds(rounds: usize) -> Self {
        Self {
            rounds,
            ..Self::default()
        }
    }

    fn reply(rounds: usize, req: &ChatRequest) -> ChatResponse {
        let last_was_noop =
            matches!(req.messages.last(), Some(Message::Tool(r)) if r.name == "noop");
        let call = |name: &str, arguments: serde_json::Value| ToolCall::new("c1", name, arguments);
        let (content, tool_calls) = if !last_was_noop {
            (String::new(), vec![call("noop", json!({}))])
        } else if req.agent.as_str() == "planner" {
            let to = json!({"to": "builder", "message": "your turn"});
            (String::new(), vec![call("handoff", to)])
        } else {
            let handed = req
                .messages
                .iter()
                .filter(|m| matches!(m, Message::Notice { .. }))
                .count();
            // The builder's first notice repeats the task; each of its turns adds one more.
            if handed > rounds {
                ("Done.".to_string(), vec![])
            } else {
                let to = json!({"to": "planner", "message": "back to you"});
                (String::new(), vec![call("handoff", to)])
            }
        };
        ChatResponse {
            content,
            tool_calls,
            usage: Usage {
                input_tokens: 10,
                output_tokens: 5,
                cached_tokens: 0,
                calls: 1,
            },
            model: "team".into(),
            ..ChatResponse::default()
        }
    }
}

loopward_runner::leaf_service!(TeamModel: ChatRequest => Result<ChatResponse, ModelError>, |model, req| {
    let (hold, rounds) = (model.hold.clone(), model.rounds);
    Box::pin(async move {
        let first = matches!(req.messages.as_slice(), [Message::Human(_)]);
        if let (true, Some(hold)) = (first, hold) {
            hold.wait().await;
        }
        Ok(Self::reply(rounds, &req))
    })
});

/// The agent names the parts use.
pub fn agent(name: &str) -> AgentId {
    // The names used here are constants that satisfy AgentId's rules.
    AgentId::new(name).unwrap_or_else(|e| panic!("bad agent name {name:?}: {e}"))
}

/// A run id from a name the benchmarks make up (letters, digits, dashes).
pub fn run_id(id: String) -> anyhow::Result<loopward_core::RunId> {
    loopward_core::RunId::new(id.clone()).ok_or_else(|| anyhow::anyhow!("bad run id {id:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use loopward_core::Person;
    use loopward_core::ToolResult;
    use loopward_runner::model::TurnSlot;

    fn ask(agent: &str, messages: Vec<Message>) -> ChatResponse {
        TeamModel::reply(
            TEAM_ROUNDS,
            &ChatRequest {
                agent: super::agent(agent),
                messages,
                tools: vec![],
                max_tokens: None,
                turn: TurnSlot::empty(),
            },
        )
    }

    fn noop_result() -> Message {
        Message::Tool(ToolResult {
            call_id: "c1".into(),
            name: "noop".into(),
            content: "ok".into(),
            is_error: false,
        })
    }

    #[test]
    fn team_calls_noop_then_hands_off_until_the_builders_last_round() {
        let first = ask(
            "planner",
            vec![Message::human(Person::at_the_keyboard().says("go"))],
        );
        assert_eq!(first.tool_calls[0].name, "noop");
        let then = ask(
            "planner",
            vec![
                Message::human(Person::at_the_keyboard().says("go")),
                noop_result(),
            ],
        );
        assert_eq!(then.tool_calls[0].arguments["to"], "builder");
        let mut builder = vec![Message::notice("task"), Message::notice("handed")];
        builder.push(noop_result());
        assert_eq!(
            ask("builder", builder.clone()).tool_calls[0].arguments["to"],
            "planner"
        );
        builder.extend([
            Message::notice("handed"),
            Message::notice("handed"),
            noop_result(),
        ]);
        let last = ask("builder", builder);
        assert!(last.tool_calls.is_empty());
        assert_eq!(last.content, "Done.");
    }
}
