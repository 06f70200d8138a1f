//! Syncs per run and whole-run time: the scripted team of part 4 (planner ⇄ builder, a `noop`
//! call and a handoff each turn, behind the part 2 stack) run once into a real ledger under
//! each durability, counting the ledger's syncs through its fault hook.

use crate::support::{agent, Noop, TeamModel, STACK_TOML};
use anyhow::Result;
use loopward_core::{AuditEvent, Person, RunStatus};
use loopward_runner::audit::{Durability, Ledger, LedgerOp, LedgerOptions};
use loopward_runner::layers::stack::{LayersConfig, Stack};
use loopward_runner::model::BoxModelService;
use loopward_runner::tool::{BoxToolService, ToolExecutor, ToolSet};
use loopward_runner::tools::HandoffTool;
use loopward_runner::{LlmAgent, Runner, Workspace};
use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// One run's figures.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct TeamRun {
    /// Records written.
    pub records: u64,
    /// Decision records among them ([`AuditEvent::is_decision`]).
    pub decisions: u64,
    /// `fdatasync`s the ledger made, the one at finish included.
    pub syncs: u64,
    /// Seconds from the run's start to its ledger finished.
    pub seconds: f64,
}

/// Runs the team once into a fresh ledger under `runs_dir` with `durability`.
pub async fn team_run(
    runs_dir: &std::path::Path,
    id: &str,
    durability: Durability,
) -> Result<TeamRun> {
    let ws = tempfile::tempdir()?;
    let config: LayersConfig = toml::from_str(STACK_TOML)?;
    let stack = Stack::new(&config)?;
    let (planner, builder) = (agent("planner"), agent("builder"));
    let team = vec![planner.clone(), builder.clone()];
    let model = stack.model(BoxModelService::new(TeamModel::default()));
    let tools = ToolSet::new()
        .with(Noop)
        .with(HandoffTool::new(team.clone()));
    let mut runner = Runner::builder(Workspace::new(ws.path())?).max_turns(64);
    for name in &team {
        let agent = LlmAgent::builder(name.clone(), model.clone())
            .tools(tools.clone())
            .tool_stack(stack.tools(BoxToolService::new(ToolExecutor)))
            .max_steps(stack.steps_per_turn())
            .build();
        runner = runner.agent(
            name.clone(),
            stack.turn(loopward_runner::BoxTurnService::new(agent)),
        )?;
    }
    let runner = runner.build()?;
    let syncs = Arc::new(AtomicU64::new(0));
    let counted = syncs.clone();
    let opts = LedgerOptions {
        durability,
        fault: Some(Arc::new(move |op: LedgerOp<'_>| {
            if matches!(op, LedgerOp::Sync { .. }) {
                counted.fetch_add(1, Ordering::Relaxed);
            }
            Ok(())
        })),
        ..LedgerOptions::default()
    };
    let start = Instant::now();
    let ledger = Ledger::create(runs_dir, &crate::support::run_id(id.into())?, opts)?;
    let report = runner
        .run(ledger.run_spec(Person::at_the_keyboard().says("build it"), planner))
        .await;
    anyhow::ensure!(
        report.status == RunStatus::Completed,
        "the team run ended {:?}",
        report.status
    );
    let done = ledger.finish()?;
    let seconds = start.elapsed().as_secs_f64();
    let text = std::fs::read_to_string(ledger.run_dir().join("events.jsonl"))?;
    let mut decisions = 0;
    for line in text.lines() {
        let (record, _) = loopward_runner::audit::Record::parse_line(line.as_bytes())
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        let event: AuditEvent = record.event().map_err(|e| anyhow::anyhow!("{e}"))?;
        decisions += u64::from(event.is_decision());
    }
    Ok(TeamRun {
        records: done.final_seq,
        decisions,
        syncs: syncs.load(Ordering::Relaxed),
        seconds,
    })
}
