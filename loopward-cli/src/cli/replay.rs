//! `loopward replay <run-dir>`: re-runs a recorded run offline, through the same stack, feeding
//! the model outputs the ledger recorded, and fails if any decision comes out differently.
//!
//! The model's replies are rebuilt from the ledger: each `model_call` record says how many tool
//! calls the reply made, and the `tool_requested` records that follow it are those calls, with
//! their ids and arguments. The replay runs in an empty scratch workspace, with the config the
//! run was made with (copied into the run folder by `loopward run`). A run that was paused and
//! resumed is replayed segment by segment; before each, what a person did is put back in place:
//! the overrides the segment consumed are granted again and its pending approvals answered as
//! they were. Files the workspace held before the run are not recorded, so a run that read them
//! may replay differently.

use anyhow::{bail, Context, Result};
use loopward::config::{Config, CONFIG_FILE};
use loopward::ledger;
use loopward::team;
use loopward_core::{AgentId, AuditEvent, AuditSink, RunId, Scope};
use loopward_runner::audit::MemorySink;
use loopward_runner::layers::stopgate::{self, pending_dir};
use loopward_runner::model::fake::{FakeModel, Script, ScriptedCall, ScriptedReply};
use loopward_runner::model::BoxModelService;
use loopward_runner::{ManualClock, RunSpec};
use loopward_term::render::{Printer, Tone};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

/// Re-run a recorded run offline and compare its decisions.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Example:
  loopward replay runs/run-20261130T052616Z-123

Exit status: 0 every gate, approval and handoff decision came out the same; 1 one differed (the
first difference is shown).")]
pub struct Args {
    /// The recorded run's folder.
    pub run_dir: PathBuf,
    /// The config to replay with (default: the copy in the run folder).
    #[arg(long)]
    pub config: Option<PathBuf>,
}

/// The model replies a ledger recorded, per agent, in order.
pub fn script_from_ledger(records: &[(Scope, AuditEvent)]) -> Script {
    let mut script = Script::default();
    let mut open: Option<(AgentId, usize)> = None; // the reply being filled and calls still due
    for (scope, event) in records {
        match event {
            AuditEvent::ModelCall { tool_calls, .. } => {
                let Some(agent) = scope.agent.clone() else {
                    continue;
                };
                // Until its model_reply record (older ledgers have none), a placeholder keeps a
                // text answer from replaying as an empty one (which fails a run).
                script.push(
                    &agent,
                    ScriptedReply {
                        text: "(reply text not in the ledger)".into(),
                        tool_calls: vec![],
                    },
                );
                let due = usize::try_from(*tool_calls).unwrap_or(usize::MAX);
                open = (due > 0).then_some((agent, due));
            }
            AuditEvent::ModelReply { text, .. } => {
                if let Some(reply) = scope
                    .agent
                    .as_ref()
                    .and_then(|a| script.agents.get_mut(a))
                    .and_then(|r| r.last_mut())
                {
                    reply.text.clone_from(text);
                }
            }
            AuditEvent::ToolRequested {
                call_id,
                tool,
                arguments,
            } => {
                if let Some((agent, due)) = &mut open {
                    if let Some(reply) = script.agents.get_mut(agent).and_then(|r| r.last_mut()) {
                        reply.tool_calls.push(ScriptedCall {
                            id: Some(call_id.clone()),
                            name: tool.clone(),
                            arguments: arguments.clone(),
                        });
                    }
                    *due -= 1;
                    if *due == 0 {
                        open = None;
                    }
                }
            }
            _ => {}
        }
    }
    script
}

/// The decisions of a run, as comparable lines: gate, approval and handoff decisions,
/// override consumptions, violations, and the run's end.
pub fn decisions(records: &[(Scope, AuditEvent)]) -> Vec<String> {
    records
        .iter()
        .filter_map(|(scope, e)| {
            let who = scope.agent.as_ref().map_or("-", AgentId::as_str);
            let turn = scope.turn.map_or(0, |t| t.0);
            let line = match e {
                AuditEvent::GateDecision {
                    gate,
                    action,
                    path,
                    decision,
                    ..
                } => format!(
                    "{gate} {} {action} {}",
                    decision.label(),
                    path.as_deref().unwrap_or("")
                ),
                AuditEvent::LayerDecision {
                    layer, decision, ..
                } => format!("{layer} {decision}"),
                AuditEvent::OverrideConsumed { agent, path, .. } => {
                    format!("override consumed {agent} {path}")
                }
                AuditEvent::HandoffRegistered(h) => format!("handoff {} → {}", h.from, h.to),
                AuditEvent::HandoffRefused { to, standing } => {
                    format!("handoff refused → {to} (standing {standing})")
                }
                AuditEvent::Violation { path, remedy, .. } => format!("violation {path} {remedy}"),
                AuditEvent::RunEnded { status, .. } => format!("run ended {}", status.label()),
                _ => return None,
            };
            Some(format!("turn {turn} {who}: {line}"))
        })
        .collect()
}

/// A recorded run split where it was started (again): each `run_started` begins a segment.
fn segments(records: &[(Scope, AuditEvent)]) -> Vec<&[(Scope, AuditEvent)]> {
    let starts: Vec<usize> = records
        .iter()
        .enumerate()
        .filter(|(_, (_, e))| matches!(e, AuditEvent::RunStarted { .. }))
        .map(|(i, _)| i)
        .collect();
    starts
        .iter()
        .enumerate()
        .map(|(k, &i)| &records[i..starts.get(k + 1).copied().unwrap_or(records.len())])
        .collect()
}

/// Puts in place, in the scratch workspace, what a person did before a segment: the overrides
/// it consumed are granted, and the pending approvals it consumed or was refused are answered.
fn setup_segment(
    ws: &std::path::Path,
    cfg: &Config,
    segment: &[(Scope, AuditEvent)],
    clock: &ManualClock,
) -> Result<()> {
    let pending = pending_dir(ws);
    for (_, e) in segment {
        match e {
            AuditEvent::OverrideConsumed {
                agent,
                path,
                reason,
                ..
            } => {
                let ttl = cfg.overrides.max_ttl;
                team::grant_override(ws, agent.as_str(), path, reason, ttl, ttl, clock)?;
            }
            AuditEvent::LayerDecision {
                layer,
                decision,
                detail,
            } if layer == "stopgate" => {
                let Some(id) = detail.get("id").and_then(serde_json::Value::as_str) else {
                    continue;
                };
                if !pending.join(format!("{id}.json")).is_file() {
                    continue;
                }
                match decision.as_str() {
                    "approval_consumed" => drop(stopgate::approve(&pending, id)),
                    "denied" => drop(stopgate::deny(&pending, id)),
                    _ => {}
                }
            }
            _ => {}
        }
    }
    Ok(())
}

pub(super) async fn run(args: Args) -> Result<ExitCode> {
    // A replay compares against the recorded decisions, so they must be the ones recorded.
    loopward_runner::audit::verify(&args.run_dir, None).map_err(|e| {
        anyhow::anyhow!("cannot replay a ledger that does not verify: {e}\nwhat to do: `loopward verify` names what is wrong; replay an intact run")
    })?;
    let recorded = ledger::events(&args.run_dir)?;
    let config_path = args
        .config
        .clone()
        .unwrap_or_else(|| args.run_dir.join(CONFIG_FILE));
    let cfg = Config::load(&config_path).with_context(|| {
        format!(
            "replay needs the config the run was made with; {} has none — pass --config",
            args.run_dir.display()
        )
    })?;
    let run = recorded
        .first()
        .map(|(s, _)| s.run.clone())
        .or_else(|| RunId::new("replay"))
        .context("run id")?;
    let parts = segments(&recorded);
    if parts.is_empty() {
        bail!(
            "{}: the ledger has no run_started record",
            args.run_dir.display()
        );
    }
    let scratch = tempfile::tempdir().context("cannot create a scratch workspace")?;
    let clock = Arc::new(ManualClock::new(0));
    let mut replayed: Vec<(Scope, AuditEvent)> = Vec::new();
    for part in &parts {
        let Some((task, first)) = part.iter().find_map(|(_, e)| match e {
            AuditEvent::RunStarted { task, agent } => Some((task.clone(), agent.clone())),
            _ => None,
        }) else {
            continue;
        };
        setup_segment(scratch.path(), &cfg, part, &clock)?;
        let model = BoxModelService::new(FakeModel::new(script_from_ledger(part)));
        let runner = team::build(
            &cfg,
            scratch.path(),
            model,
            team::Options {
                clock: clock.clone(),
                ..team::Options::default()
            },
        )?;
        let sink = Arc::new(MemorySink::default());
        runner
            .run(RunSpec {
                id: run.clone(),
                task,
                first,
                audit: sink.clone() as Arc<dyn AuditSink>,
                audit_location: None,
            })
            .await;
        replayed.extend(sink.events());
    }
    let want = decisions(&recorded);
    let got = decisions(&replayed);
    let mut out = Printer::stdout();
    let first_diff = want
        .iter()
        .zip(got.iter())
        .position(|(a, b)| a != b)
        .or_else(|| (want.len() != got.len()).then(|| want.len().min(got.len())));
    match first_diff {
        None => {
            out.line(
                Tone::Ok,
                format!("replay of {run}: {} decisions, all the same", want.len()),
            );
            Ok(ExitCode::SUCCESS)
        }
        Some(i) => {
            out.line(
                Tone::Refusal,
                format!("replay of {run}: decision {} differs", i + 1),
            );
            out.line(
                Tone::Plain,
                format!(
                    "  recorded: {}",
                    want.get(i).map_or("(none)", String::as_str)
                ),
            );
            out.line(
                Tone::Plain,
                format!(
                    "  replayed: {}",
                    got.get(i).map_or("(none)", String::as_str)
                ),
            );
            Ok(ExitCode::FAILURE)
        }
    }
}
