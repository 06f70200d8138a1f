//! Shared by the audit tests: a scripted team on the fake backend, wired to a real ledger, and a
//! tiny stand-in gate that records decisions the way real gates do (before the action runs).
#![allow(dead_code, unreachable_pub)]

#[path = "../one_agent/mod.rs"]
mod one_agent;

use futures::future::BoxFuture;
use loopward_core::{AgentId, AuditEvent, Decision, GateMode, HumanWords, RunId, Scope};
use loopward_runner::audit::{Finished, Ledger, LedgerOptions};
use loopward_runner::model::fake::{FakeModel, Script};
use loopward_runner::model::BoxModelService;
use loopward_runner::tool::{BoxToolService, ToolError, ToolExecutor, ToolInvocation, ToolOutput};
use loopward_runner::{
    tools, BoxTurnService, Clock, LlmAgent, ManualClock, RunReport, Runner, Workspace,
};
use std::path::Path;
use std::sync::Arc;
use tower::ServiceExt;

use one_agent::Agents;
pub(crate) use one_agent::Steps;

pub fn id(s: &str) -> AgentId {
    AgentId::new(s).unwrap()
}

/// The scope of run `run` itself: no turn, no agent.
pub fn run_scope(run: &str) -> Scope {
    Scope {
        run: RunId::new(run).unwrap(),
        turn: None,
        agent: None,
    }
}

/// Decides on one call: (agent, tool, path argument) → decision, or `None` to stay silent.
pub type Rule = Arc<dyn Fn(&str, &str, Option<&str>) -> Option<Decision> + Send + Sync>;

/// A stand-in gate named `territory` in front of `inner`: records its decision (and a consumed
/// override) before the call runs, refuses on `Deny`, and stops the call when the ledger cannot
/// record.
pub fn test_gate(mode: GateMode, rule: Rule, inner: BoxToolService) -> BoxToolService {
    BoxToolService::new(tower::service_fn(move |inv: ToolInvocation| {
        let (rule, inner) = (rule.clone(), inner.clone());
        async move {
            let path = inv.call.arguments.get("path").and_then(|p| p.as_str());
            let decision = rule(inv.turn.agent().as_str(), inv.call.name.as_str(), path);
            if let Some(decision) = decision {
                if let Decision::Override { id, reason } = &decision {
                    inv.turn
                        .record(&AuditEvent::OverrideConsumed {
                            id: id.clone(),
                            agent: inv.turn.agent().clone(),
                            path: path.unwrap_or_default().into(),
                            reason: reason.clone(),
                        })
                        .map_err(ToolError::Audit)?;
                }
                inv.turn
                    .record(&AuditEvent::GateDecision {
                        call_id: Some(inv.call.id.clone()),
                        gate: loopward_core::GateId::of(loopward_core::GateKind::Territory),
                        mode,
                        action: loopward_core::Action::tool(inv.call.name.clone()),
                        path_raw: path.map(Into::into),
                        source: None,
                        path: path.map(Into::into),
                        decision: decision.clone(),
                    })
                    .map_err(ToolError::Audit)?;
                if let Decision::Deny(r) = decision {
                    return Err(ToolError::Refused(r));
                }
            }
            inner.oneshot(inv).await
        }
    }))
}

/// A team on the fake backend over `workspace`, every agent's tool calls going through `gate`.
pub fn team(
    workspace: &Path,
    names: &[&str],
    script: Script,
    clock: Arc<dyn Clock>,
    gate: Option<(GateMode, Rule)>,
) -> Runner {
    let members: Vec<AgentId> = names.iter().map(|n| id(n)).collect();
    let model = BoxModelService::new(FakeModel::new(script));
    let stack = match gate {
        Some((mode, rule)) => test_gate(mode, rule, BoxToolService::new(ToolExecutor)),
        None => BoxToolService::new(ToolExecutor),
    };
    let b = Runner::builder(Workspace::new(workspace).unwrap())
        .clock(clock)
        .agents(&members, |m| {
            let agent = LlmAgent::builder(m.clone(), model.clone())
                .tools(tools::builtin(&members))
                .tool_stack(stack.clone())
                .max_steps(8)
                .build();
            BoxTurnService::new(agent)
        });
    b.build().unwrap()
}

/// A clock fixed at 2026-01-01T00:00:00Z that moves 250 ms every time it is read, so ledgers
/// have distinct, reproducible times.
#[derive(Debug, Default)]
pub struct SteppingClock(ManualClock);

impl SteppingClock {
    pub fn new() -> Arc<Self> {
        Arc::new(Self(ManualClock::new(1_767_225_600_000)))
    }
}

impl Clock for SteppingClock {
    fn now_millis(&self) -> u64 {
        let t = self.0.now_millis();
        self.0.advance_millis(250);
        t
    }
}

/// Runs `runner` on `task` into a new ledger under `runs_dir`, and finishes the ledger.
pub async fn run_to_ledger(
    runner: &Runner,
    runs_dir: &Path,
    run: &str,
    task: HumanWords,
    first: &str,
    opts: LedgerOptions,
) -> (
    RunReport,
    Result<Finished, loopward_runner::audit::LedgerError>,
) {
    let ledger = Ledger::create(runs_dir, &RunId::new(run).unwrap(), opts).unwrap();
    let report = runner.run(ledger.run_spec(task, id(first))).await;
    let finished = ledger.finish();
    (report, finished)
}

/// The standard run: [`plan_and_build_script`] by planner and builder in `workspace` on a person
/// saying "say hello", planner first, tool calls through `gate`, recorded as `run` under
/// `runs_dir` through `opts`; the ledger finished.
pub async fn plan_and_build(
    workspace: &Path,
    runs_dir: &Path,
    run: &str,
    clock: Arc<dyn Clock>,
    gate: Option<(GateMode, Rule)>,
    opts: LedgerOptions,
) -> (
    RunReport,
    Result<Finished, loopward_runner::audit::LedgerError>,
) {
    let names = ["planner", "builder"];
    let runner = team(workspace, &names, plan_and_build_script(), clock, gate);
    let task = loopward_core::Person::at_the_keyboard().says("say hello");
    run_to_ledger(&runner, runs_dir, run, task, "planner", opts).await
}

/// [`plan_and_build`] ungated, in folders dropped after it, for tests that watch what a run
/// emits rather than what it records; asserts that it completed and its ledger finished.
pub async fn unrecorded_plan_and_build() -> RunReport {
    let ws = tempfile::tempdir().unwrap();
    let runs = tempfile::tempdir().unwrap();
    let clock = SteppingClock::new();
    let opts = LedgerOptions::default();
    let (report, finished) = plan_and_build(ws.path(), runs.path(), "r1", clock, None, opts).await;
    assert_eq!(report.status, loopward_core::RunStatus::Completed);
    finished.unwrap();
    report
}

/// The standard two-agent script: planner writes the plan and hands off; builder writes
/// hello.txt, tries to overwrite plan.md (planner's territory), edits plan.md, and finishes.
pub fn plan_and_build_script() -> Script {
    let mut s = Script::default();
    s.write(&id("planner"), "plan.md", "# Plan\n1. greet")
        .handoff(&id("planner"), "builder", "plan is in plan.md")
        .write(&id("builder"), "hello.txt", "hello")
        .write(&id("builder"), "plan.md", "# Plan\n1. greet\n2. done")
        .call(
            &id("builder"),
            "edit_file",
            serde_json::json!({"path": "plan.md", "old": "1. greet", "new": "1. greet the world"}),
        )
        .say(&id("builder"), "Done.");
    s
}

/// A tool called `note` that pushes `ran <path>` to a shared log when its effect runs, to see
/// where the effect falls among the ledger's writes and syncs.
pub struct NotingTool {
    pub log: Arc<std::sync::Mutex<Vec<String>>>,
}

impl loopward_runner::tool::Tool for NotingTool {
    fn spec(&self) -> loopward_core::ToolSpec {
        loopward_core::ToolSpec {
            name: "note".into(),
            description: "Notes that it ran.".into(),
            parameters: serde_json::json!({"type": "object"}),
        }
    }

    fn accesses(
        &self,
        _arguments: &serde_json::Value,
        _turn: &loopward_runner::TurnContext,
    ) -> Result<Vec<loopward_runner::tool::Access>, ToolError> {
        Ok(vec![])
    }

    fn call(&self, inv: ToolInvocation) -> BoxFuture<'static, Result<ToolOutput, ToolError>> {
        let path = inv.call.arguments["path"]
            .as_str()
            .unwrap_or("?")
            .to_string();
        self.log.lock().unwrap().push(format!("ran {path}"));
        Box::pin(futures::future::ready(Ok(ToolOutput::text("noted"))))
    }
}

/// One agent on the fake backend whose only tool is `tool`, behind `gate`.
pub fn team_with_tool(
    workspace: &Path,
    name: &str,
    script: Script,
    tool: Arc<dyn loopward_runner::tool::Tool>,
    gate: (GateMode, Rule),
) -> Runner {
    let mut set = loopward_runner::tool::ToolSet::new();
    set.insert(tool);
    let stack = test_gate(gate.0, gate.1, BoxToolService::new(ToolExecutor));
    let agent = LlmAgent::builder(id(name), BoxModelService::new(FakeModel::new(script)))
        .tools(set)
        .tool_stack(stack)
        .max_steps(8)
        .build();
    Runner::builder(Workspace::new(workspace).unwrap())
        .clock(SteppingClock::new())
        .agent(id(name), BoxTurnService::new(agent))
        .unwrap()
        .build()
        .unwrap()
}
