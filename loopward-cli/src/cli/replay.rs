//! `loopward replay <run-dir>`: re-judges a recorded run offline, through the same stack, and
//! fails if any decision comes out differently. Nothing runs on the host: no model is called and
//! no tool is executed.
//!
//! The model's replies come from the ledger's `model_reply` records; every tool call that got
//! past its gates returns the result the ledger recorded (`tool_finished`), and the changes it
//! recorded (its effects, and the writes the shell watch reverted) are made again in an empty
//! scratch workspace with placeholder content, so the gates and the watch judge the same paths.
//! The config is the one the run was made with (copied into the run folder by `loopward run`).
//! A run that was paused or killed and resumed is replayed part by part: the first part is
//! started, each later part is resumed from the journal of the records before it, exactly as
//! `loopward run --resume` did; before each part, what a person did is put back in place (the
//! overrides it consumed are granted again, its pending approvals answered as they were, an
//! interactive approval given as recorded). Files the workspace held before the run are not
//! recorded, so a run whose decisions depended on them may replay differently.

use anyhow::{bail, Context, Result};
use loopward::config::{Config, CONFIG_FILE};
use loopward::ledger;
use loopward::team;
use loopward_core::{AgentId, AuditEvent, LayerId, LayerVerdict, Person, RunId, Scope};
use loopward_runner::audit::MemorySink;
use loopward_runner::inbox::{HumanInbox, Taken};
use loopward_runner::journal::Journal;
use loopward_runner::layers::stopgate::{self, pending_dir};
use loopward_runner::model::fake::{FakeModel, Script, ScriptedCall, ScriptedReply};
use loopward_runner::model::BoxModelService;
use loopward_runner::stop::{RecordedStop, StopRequest, StopRequests};
use loopward_runner::tool::BoxToolService;
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
    /// A ledger key file the run may be chained under (beyond the state directory's keys).
    #[arg(long = "key", value_name = "FILE")]
    pub keys: Vec<PathBuf>,
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
                        ..ScriptedReply::default()
                    },
                );
                let due = usize::try_from(*tool_calls).unwrap_or(usize::MAX);
                open = (due > 0).then_some((agent, due));
            }
            AuditEvent::ModelReply { text, stop, .. } => {
                if let Some(reply) = scope
                    .agent
                    .as_ref()
                    .and_then(|a| script.agents.get_mut(a))
                    .and_then(|r| r.last_mut())
                {
                    reply.text.clone_from(text);
                    reply.stop = *stop;
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
/// override consumptions, violations, and the run's end (not where a rule is written, nor the
/// policy's version: a replay judges with the config as it is now).
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
                // The policy's version is noted, not decided: a replay judges with the config
                // as it is now, and older ledgers never noted one.
                AuditEvent::LayerDecision {
                    layer: LayerId::Policy,
                    ..
                } => return None,
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

/// What people said into a part of a run, per turn boundary the part reached live (after each
/// `turn_ended` it recorded), so the replay hears each message where the run did.
fn heard_in(part: &[(Scope, AuditEvent)]) -> Vec<Taken> {
    let mut boundaries: Vec<Taken> = vec![];
    for (_, e) in part {
        match e {
            AuditEvent::TurnEnded { .. } => boundaries.push(Taken::default()),
            AuditEvent::HumanMessage { content } => {
                if let Some(last) = boundaries.last_mut() {
                    last.said.push(content.to_string());
                }
            }
            // A file the inbox refused (a forged seal, a link…) is refused again where it was.
            AuditEvent::LayerDecision { layer, detail, .. } if *layer == LayerId::Inbox => {
                if let (Some(last), Some(refused)) =
                    (boundaries.last_mut(), detail.as_inbox_refused())
                {
                    last.refused.push(refused.into_owned().why);
                }
            }
            _ => {}
        }
    }
    boundaries
}

/// The stop requests a part of a run took (a person's kill switch), each where the run took it:
/// after as many turns as its record says.
fn stops_in(run: &RunId, part: &[(Scope, AuditEvent)]) -> Vec<RecordedStop> {
    part.iter()
        .filter_map(|(_, e)| match e {
            AuditEvent::LayerDecision {
                layer: LayerId::Stop,
                decision,
                detail,
            } => {
                let (after_turns, outcome) = if *decision == LayerVerdict::Stopped {
                    let d = detail.as_stopped()?.into_owned();
                    let request = StopRequest {
                        run: run.clone(),
                        by: d.by,
                        reason: d.reason,
                        at_ms: 0,
                        seal: None,
                    };
                    (d.turns, Ok(request))
                } else {
                    let d = detail.as_stop_refused()?.into_owned();
                    (d.turns, Err(d.why))
                };
                Some(RecordedStop {
                    after_turns,
                    outcome,
                })
            }
            _ => None,
        })
        .collect()
}

/// A recorded run split where it was started or resumed: (where the part begins, the part).
fn segments(records: &[(Scope, AuditEvent)]) -> Vec<(usize, &[(Scope, AuditEvent)])> {
    let starts: Vec<usize> = records
        .iter()
        .enumerate()
        .filter(|(_, (_, e))| {
            matches!(
                e,
                AuditEvent::RunStarted { .. } | AuditEvent::RunResumed { .. }
            )
        })
        .map(|(i, _)| i)
        .collect();
    starts
        .iter()
        .enumerate()
        .map(|(k, &i)| {
            (
                i,
                &records[i..starts.get(k + 1).copied().unwrap_or(records.len())],
            )
        })
        .collect()
}

/// The model replies a part of a run recorded (`model_reply`), per agent, in order; a part
/// recorded before replies were journaled falls back to [`script_from_ledger`].
fn script_of(part: &[(Scope, AuditEvent)]) -> Script {
    let journaled = part
        .iter()
        .any(|(_, e)| matches!(e, AuditEvent::ModelReply { .. }));
    if !journaled {
        return script_from_ledger(part);
    }
    let mut script = Script::default();
    for (scope, e) in part {
        if let (
            AuditEvent::ModelReply {
                text,
                tool_calls,
                stop,
            },
            Some(agent),
        ) = (e, &scope.agent)
        {
            script.push(
                agent,
                ScriptedReply {
                    text: text.clone(),
                    tool_calls: tool_calls
                        .iter()
                        .map(|c| ScriptedCall {
                            id: Some(c.id.clone()),
                            name: c.name.clone(),
                            arguments: c.arguments.clone(),
                        })
                        .collect(),
                    stop: *stop,
                },
            );
        }
    }
    script
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
                team::grant_override(ws, None, agent.as_str(), path, reason, ttl, ttl, clock)?;
            }
            AuditEvent::LayerDecision {
                layer,
                decision,
                detail,
            } if *layer == LayerId::StopGate => {
                let Some(id) = detail.as_stop_gate().and_then(|g| g.id.clone()) else {
                    continue;
                };
                let id = id.as_str();
                if !pending.join(format!("{id}.json")).is_file() {
                    continue;
                }
                match decision {
                    LayerVerdict::ApprovalConsumed => drop(stopgate::approve(&pending, id)),
                    LayerVerdict::Denied => drop(stopgate::deny(&pending, id)),
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
    // (A re-judgement, not evidence: keyless and paused runs replay too; keyed ones must verify
    // under the state directory's keys.)
    let runs_dir = args
        .run_dir
        .canonicalize()
        .ok()
        .and_then(|d| d.parent().map(std::path::Path::to_path_buf))
        .unwrap_or_else(|| std::path::PathBuf::from("."));
    let opts =
        super::state::history_options(std::path::Path::new(CONFIG_FILE), &runs_dir, &args.keys)?;
    loopward_runner::audit::verify(&args.run_dir, &opts).map_err(|e| {
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
    if !matches!(parts.first(), Some((_, p)) if matches!(p.first(), Some((_, AuditEvent::RunStarted { .. }))))
    {
        bail!(
            "{}: the ledger has no run_started record",
            args.run_dir.display()
        );
    }
    // A loop over a coding agent is re-judged with its own runner over its recorded sessions.
    let looped = super::loop_cmd::recorded_loop(&args.run_dir)?;
    let scratch = tempfile::tempdir().context("cannot create a scratch workspace")?;
    let clock = Arc::new(ManualClock::new(0));
    super::recorded::prepare_folders(scratch.path(), &recorded);
    let (mut want, mut got) = (Vec::new(), Vec::new());
    for (start, part) in &parts {
        setup_segment(scratch.path(), &cfg, part, &clock)?;
        // Only the calls this part started return results. A part killed between a reply and
        // its calls' starts replays past its last record (truncated below), and must not take
        // the results of the calls the resumed part ran: their changes would land in the scratch
        // workspace early, and the resumed part's replay would find no result to judge.
        let outputs = super::recorded::RecordedTools::from_records(part);
        let model = BoxModelService::new(FakeModel::new(script_of(part)).ignoring_conversation());
        let runner = match &looped {
            Some(a) => {
                let heard = HumanInbox::recorded(heard_in(part));
                super::loop_cmd::replay_runner(&cfg, a, scratch.path(), clock.clone(), part, heard)?
            }
            None => team::build(
                &cfg,
                scratch.path(),
                model,
                team::Options {
                    clock: clock.clone(),
                    approver: Some(Arc::new(super::recorded::RecordedApprovals::from_records(
                        part,
                    ))),
                    executor: Some(BoxToolService::new(outputs)),
                    inbox: Some(HumanInbox::recorded(heard_in(part))),
                    stops: Some(StopRequests::recorded(stops_in(&run, part))),
                    cli_agents: Some(Arc::new(super::mcp::Serving(
                        super::loop_cmd::RecordedCliAgents(Arc::new(
                            loopward_runner::cli_agent::RecordedSessions::from_records(part),
                        )),
                    ))),
                    ..team::Options::default()
                },
            )?,
        };
        let sink = Arc::new(MemorySink::default());
        // The task is the recorded `run_started` record's: a person's words when the run began.
        let spec = |task: String, first: AgentId| {
            RunSpec::new(
                run.clone(),
                Person::at_the_keyboard().says(task),
                first,
                sink.clone(),
            )
        };
        match part.first().map(|(_, e)| e) {
            Some(AuditEvent::RunStarted { task, agent }) => {
                runner.run(spec(task.clone(), agent.clone())).await;
            }
            _ => {
                let journal = Journal::from_records(&recorded[..*start]).with_context(|| {
                    format!(
                        "cannot replay the part that resumed at record {}",
                        start + 1
                    )
                })?;
                runner
                    .resume(spec(String::new(), journal.first().clone()), &journal)
                    .await?;
            }
        }
        let (w, mut g) = (decisions(part), decisions(&sink.events()));
        // A part killed before its end is compared as far as it was recorded: the replay
        // has no replies beyond that point and stops there.
        let killed = !part
            .iter()
            .any(|(_, e)| matches!(e, AuditEvent::RunEnded { .. }));
        if killed {
            g.truncate(w.len());
        }
        want.extend(w);
        got.extend(g);
    }
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
