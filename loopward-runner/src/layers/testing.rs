//! Small fixtures for the layers' examples and tests: a run over a memory sink, a turn, and a
//! probe tool that counts its calls. Not part of the stable API.

use crate::audit::MemorySink;
use crate::clock::ManualClock;
use crate::context::{RunContext, TurnContext};
use crate::tool::{Access, Tool, ToolError, ToolInvocation, ToolOutput};
use crate::workspace::Workspace;
use futures::future::BoxFuture;
use loopward_core::{AgentId, RunId, ToolCall, ToolName, ToolSpec, TurnNumber};
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

/// A run over the workspace at `dir` (which must exist) recording into a fresh [`MemorySink`],
/// with a [`ManualClock`] at 0 and the team `a`, `b`, `builder`, `planner`.
///
/// # Panics
/// If `dir` is not a usable workspace or `id` is not a valid run id.
pub fn run(dir: &Path, id: &str) -> (RunContext, Arc<MemorySink>) {
    let sink = Arc::new(MemorySink::default());
    let team = ["a", "b", "builder", "planner"]
        .iter()
        .filter_map(|n| AgentId::new(*n).ok())
        .collect();
    #[allow(clippy::expect_used)]
    let ctx = RunContext::new(
        RunId::new(id).expect("a valid run id"),
        team,
        Workspace::new(dir).expect("an existing directory"),
        sink.clone(),
        Arc::new(ManualClock::new(0)),
    );
    (ctx, sink)
}

/// Turn `n` of `agent` in `run`.
///
/// # Panics
/// If `agent` is not a valid agent name.
pub fn turn(run: &RunContext, agent: &str, n: u32) -> TurnContext {
    #[allow(clippy::expect_used)]
    let agent = AgentId::new(agent).expect("a valid agent name");
    TurnContext::new(run.clone(), agent, TurnNumber(n))
}

/// A tool that answers "ok" and counts its calls. Clones share the count.
#[derive(Clone, Debug)]
pub struct Probe {
    name: ToolName,
    calls: Arc<AtomicU32>,
}

impl Probe {
    /// A probe tool called `name`.
    pub fn new(name: &str) -> Self {
        Self {
            name: name.into(),
            calls: Arc::default(),
        }
    }

    /// How many times it ran.
    pub fn calls(&self) -> u32 {
        self.calls.load(Ordering::SeqCst)
    }

    /// An invocation of this probe in `turn` with `arguments` (no declared accesses).
    pub fn invocation(&self, turn: &TurnContext, arguments: serde_json::Value) -> ToolInvocation {
        let n = self.calls.load(Ordering::SeqCst);
        ToolInvocation {
            call: ToolCall::new(
                format!("call-{}-{n}", self.name),
                self.name.clone(),
                arguments,
            ),
            tool: Arc::new(self.clone()),
            accesses: vec![],
            turn: turn.clone(),
        }
    }
}

impl Tool for Probe {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name.clone(),
            description: "A probe that answers ok.".into(),
            parameters: serde_json::json!({"type": "object"}),
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
        self.calls.fetch_add(1, Ordering::SeqCst);
        Box::pin(async { Ok(ToolOutput::text("ok")) })
    }
}
