//! Shadow judging by the runner's layers: caps, repeat limits, stop-gates and class-jump
//! thresholds re-judged on a recorded run, with their own decision code (the caps' counts, the
//! repeat digest, the stop-gates' points, the class-jump step) and the run going on as it
//! happened.
//!
//! These gates stand in the runner's stack, so only loopward ledgers are judged by them: a
//! Claude Code session goes through the hook, which has none of them. Not judged: the wall-time
//! cap's `on_cap = "wrap_up"` turn (the cap is judged, the wrap-up text cannot be), `phase`
//! stop-gates (a phase is the embedding application's, not in the ledger), and rate limits,
//! budgets and timeouts (they depend on the backend's timing and prices, not on the actions).

use super::shadow::{Act, Judged, Verdict};
use super::source::{Outcome, Session, Step};
use super::Assessment;
use loopward_core::{AgentId, Decision, LayerId, Refusal, RefusedBy, RunStatus};
use loopward_runner::layers::caps::{CapsConfig, Counts};
use loopward_runner::layers::classjump::{ClassJump, Sub, VerdictKind};
use loopward_runner::layers::stack::LayersConfig;
use loopward_runner::layers::stopgate::{StopGates, StopMode};
use loopward_runner::layers::{call_digest, ConfigError};
use serde_json::Value;
use std::collections::HashMap;

/// The layer settings of one config, validated.
pub(crate) struct Layers {
    caps: CapsConfig,
    repeat: u32,
    stopgates: StopGates,
    class_jump: Option<ClassJump>,
}

impl Layers {
    /// Validates the layer tables (as [`Stack::new`](loopward_runner::layers::stack::Stack::new) does).
    pub(crate) fn new(cfg: &LayersConfig) -> Result<Self, ConfigError> {
        cfg.limits.validate()?;
        loopward_runner::layers::repeat::RepeatLayer::new(cfg.repeat.clone())?;
        Ok(Self {
            caps: cfg.limits.clone(),
            repeat: cfg.repeat.max_identical,
            stopgates: StopGates::new(&cfg.stopgate)?,
            class_jump: cfg.class_jump.clone().map(ClassJump::new).transpose()?,
        })
    }
}

/// Whether the recorded run ended well (`None`: it did not end, or a transcript).
pub(super) fn completed(session: &Session) -> Option<bool> {
    session
        .ended
        .as_ref()
        .map(|s| matches!(s, RunStatus::Completed))
}

/// What a stop of the whole run at this point would have cut short: a run that went on to
/// complete (a possible false positive), or one that did not complete anyway (agreed).
fn run_stop(session: &Session) -> Assessment {
    match completed(session) {
        Some(true) => Assessment::LikelyFalse,
        Some(false) => Assessment::Agreed,
        None => Assessment::Unclear,
    }
}

/// Re-judges a ledger session's turns and tool calls by the layers.
pub(crate) fn judge_layers(layers: &Layers, session: &Session) -> Vec<Judged> {
    if session.kind != "ledger" {
        return vec![];
    }
    let mut out = Vec::new();
    let mut turn = 0u64;
    let mut counts = Counts::default();
    let mut capped = false;
    let mut steps = 0u32;
    let mut seen: HashMap<String, (u32, usize)> = HashMap::new();
    // Stood writes and effects so far: a repeat after the workspace changed may see new results.
    let mut changes = 0usize;
    let mut subtasks: HashMap<String, Sub> = HashMap::new();
    let mut evidence: HashMap<String, Sub> = HashMap::new();
    let deny = |by: RefusedBy, reason: String, hint: &str| {
        (
            by.to_string(),
            Decision::Deny(Refusal::new(by, reason, hint)),
        )
    };
    for (step, s) in session.steps.iter().enumerate() {
        let mut decisions: Vec<(String, Decision)> = Vec::new();
        let mut fixed: Vec<(String, Assessment)> = Vec::new();
        let act = match s {
            Step::Human => {
                turn += 1;
                continue;
            }
            Step::Turn(who, at) => {
                turn = turn.max(1);
                steps = 0;
                let Ok(id) = AgentId::new(who.clone()) else {
                    continue;
                };
                let now = at.unwrap_or(0);
                if !capped {
                    counts.started_ms.get_or_insert(now);
                    if let Some(hit) = counts.check(&layers.caps, &id, now) {
                        capped = true;
                        let cap = hit.cap.split(' ').next().unwrap_or("");
                        let by = RefusedBy::layer_instance(&LayerId::Caps, cap);
                        fixed.push((by.to_string(), run_stop(session)));
                        decisions.push(deny(
                            by,
                            format!("the run would have stopped here: cap {} reached", hit.cap),
                            "raise the cap in [limits], or set on_cap = \"wrap_up\"",
                        ));
                    }
                    counts.turns += 1;
                    *counts.per_agent.entry(id).or_insert(0) += 1;
                }
                for (name, mode, why) in layers.stopgates.met_by_turn(who) {
                    let (gate, d) = stop(name, mode, &why);
                    fixed.push((gate.clone(), Assessment::Unknown));
                    decisions.push((gate, d));
                }
                Act {
                    agent: who.clone(),
                    action: format!("turn of {who}"),
                    file: None,
                    outcome: Outcome::Unknown,
                    flagged: false,
                }
            }
            Step::Write(_) | Step::Call(_) => {
                turn = turn.max(1);
                let (call, file) = match s {
                    Step::Write(w) => (&w.call, w.rel.clone()),
                    Step::Call(c) => (c, None),
                    _ => continue,
                };
                let (who, tool, args) = (&call.agent, &call.tool, &call.arguments);
                let (outcome, refused_by) = (call.outcome, &call.refused_by);
                steps += 1;
                if !capped && steps > layers.caps.steps_per_turn {
                    capped = true;
                    let by = RefusedBy::layer_instance(&LayerId::Caps, "steps_per_turn");
                    fixed.push((by.to_string(), run_stop(session)));
                    decisions.push(deny(
                        by,
                        format!(
                            "the run would have stopped here: cap steps_per_turn ({}) reached",
                            layers.caps.steps_per_turn
                        ),
                        "raise limits.steps_per_turn, or split the work over turns",
                    ));
                }
                // Repeat: the same call (tool + canonical arguments) more than the limit.
                let digest = call_digest(tool.as_str(), args);
                let entry = seen.entry(digest).or_insert((0, changes));
                entry.0 += 1;
                let changed_since = entry.1 != changes;
                entry.1 = changes;
                if entry.0 > layers.repeat {
                    decisions.push(deny(
                        RefusedBy::from(&LayerId::Repeat),
                        format!(
                            "this exact call ({tool} with the same arguments) was already made {} times in this run; repeating it will not give a different result",
                            layers.repeat
                        ),
                        "change the arguments, try a different approach, or finish and report what blocks you",
                    ));
                    // A repeat after the workspace changed may well give a new result.
                    let a = match (outcome, changed_since) {
                        (Outcome::Refused, _) => Assessment::Agreed,
                        (_, true) => Assessment::LikelyFalse,
                        (Outcome::Kept, false) => Assessment::Unclear,
                        _ => Assessment::Unknown,
                    };
                    fixed.push((LayerId::Repeat.to_string(), a));
                }
                let written: Vec<&str> = file.as_deref().into_iter().collect();
                for (name, mode, why) in layers.stopgates.met_by_call(tool, args, &written) {
                    let (gate, d) = stop(name, mode, &why);
                    fixed.push((gate.clone(), Assessment::Unknown));
                    decisions.push((gate, d));
                }
                if let Some(cj) = &layers.class_jump {
                    let all = cj.strategies().len();
                    let allowed = cj.config().failures_per_strategy;
                    let sub = if tool == "report_attempt" {
                        let name = args.get("subtask").and_then(Value::as_str).unwrap_or("");
                        let failed = args.get("outcome").and_then(Value::as_str) == Some("failed");
                        let sub = subtasks.entry(name.to_string()).or_default();
                        if !failed && sub.ended.is_none() {
                            sub.ended = Some("done");
                        }
                        (failed && sub.ended.is_none()).then_some((name.to_string(), sub))
                    } else if cj.counts(tool) && outcome == Outcome::Refused && refused_by.is_none()
                    {
                        let sub = evidence.entry(who.clone()).or_default();
                        (sub.ended.is_none()).then(|| (format!("{who}'s failed {tool} calls"), sub))
                    } else {
                        None
                    };
                    if let Some((name, sub)) = sub {
                        match sub.fail(all, allowed) {
                            VerdictKind::Jump => {
                                fixed.push((LayerId::ClassJump.to_string(), run_stop(session)));
                                decisions.push((
                                LayerId::ClassJump.to_string(),
                                Decision::Warn(Refusal::new(
                                    &LayerId::ClassJump,
                                    format!("class-jump: the strategy failed {allowed} times on {name}; the next one would have been forced"),
                                    "use the next strategy",
                                )),
                            ));
                            }
                            VerdictKind::Exhausted => {
                                fixed.push((LayerId::ClassJump.to_string(), run_stop(session)));
                                decisions.push(deny(
                                    RefusedBy::from(&LayerId::ClassJump),
                                    format!("every strategy for {name} would have been spent here; the run would have ended Exhausted"),
                                    "report what you tried in your reply",
                                ));
                            }
                            _ => {}
                        }
                    }
                }
                if outcome != Outcome::Refused {
                    changes += 1;
                }
                Act {
                    agent: who.clone(),
                    action: match &file {
                        Some(f) => format!("{tool} {f}"),
                        None => tool.to_string(),
                    },
                    file,
                    outcome,
                    flagged: false,
                }
            }
        };
        if matches!(s, Step::Call(c) if c.tool == "handoff" && c.outcome == Outcome::Kept) {
            counts.hops += 1;
        }
        if decisions.is_empty() {
            continue;
        }
        out.push(Judged {
            step,
            act,
            turn,
            plan_followed: false,
            verdict: Verdict { decisions },
            fixed,
        });
    }
    out
}

/// A stop-gate's verdict in shadow: `auto` approves; every other mode stops the action for a
/// person's decision (or denies it).
fn stop(name: &str, mode: StopMode, why: &str) -> (String, Decision) {
    let gate = RefusedBy::layer_instance(&LayerId::StopGate, name);
    let d = match mode {
        StopMode::Auto => Decision::Allow,
        StopMode::Deny => Decision::Deny(Refusal::new(
            gate.clone(),
            format!("would have been denied here: {why}"),
            "the gate's mode is deny",
        )),
        m => Decision::Deny(Refusal::new(
            gate.clone(),
            format!(
                "would have stopped here for a person ({}): {why}",
                m.as_str()
            ),
            "a person approves or denies",
        )),
    };
    (gate.to_string(), d)
}
