//! The governance figures of one run, folded from its ledger records alone.
//!
//! Definitions (the report and `audit.json` use exactly these):
//! - **Gate figures**: every `gate_decision` counts once under its gate, as `allowed`, `denied`,
//!   `overridden` (a consumed override permitted it) or `warned` (an advisory gate would have
//!   denied; the action was allowed to run).
//! - **Advisory compliance**: a warned tool call (one or more `warn` decisions on the same call)
//!   was *ignored* when the agent went ahead: its `tool_finished` says no error and it left a
//!   standing (`ok`) effect, or it has no effects at all. It was *heeded* otherwise: the call
//!   did not finish, finished as an error, or everything it changed was reverted or failed.
//! - **Layer figures**: every `layer_decision` counts once under its layer, by what its verdict
//!   did ([`LayerVerdict::effect`](loopward_core::LayerVerdict::effect)): `allowed`, `refused`
//!   (the run went on), `stopped` (the run stopped or paused) or `noted`.
//! - **Unauthorised writes**: (a) each `ok` effect of a call on which a territory gate
//!   (`gate_kind` `territory`) said `warn` (a write inside a territory by a non-owner, let through by an advisory gate, with no
//!   consumed override), plus (b) each `violation` whose remedy is not [`Remedy::Reverted`](loopward_core::Remedy). Under
//!   enforcement both are 0.
//! - **Turns** count `turn_started`; **handoffs** count `handoff_registered`; **tokens** add up
//!   `model_call` usage; **cost** adds up `model_call` costs and the costs CLI agents' sessions
//!   reported (`budget` decisions with `reported_cost_micros`), or takes `run_ended`'s when no
//!   call carries one.

use super::record::Record;
use loopward_core::LayerId;
use loopward_core::{
    AuditEvent, CallId, Decision, EffectStatus, GateKind, Handoff, RunStatus, TurnNumber, Usage,
    VerdictEffect,
};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// Decisions of one gate.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct GateFigures {
    /// The gate's kind (`None` only in a default, before any decision was counted).
    pub kind: Option<GateKind>,
    /// Allowed.
    pub allowed: u64,
    /// Denied.
    pub denied: u64,
    /// Allowed because an override was consumed.
    pub overridden: u64,
    /// Advisory would-be denials (allowed with a warning).
    pub warned: u64,
}

impl std::ops::AddAssign for GateFigures {
    fn add_assign(&mut self, o: Self) {
        self.kind = self.kind.or(o.kind);
        self.allowed += o.allowed;
        self.denied += o.denied;
        self.overridden += o.overridden;
        self.warned += o.warned;
    }
}

/// Whether agents went ahead with warned actions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct AdvisoryCompliance {
    /// Tool calls that got at least one advisory warning.
    pub warned_calls: u64,
    /// Of those, calls the agent did not go ahead with.
    pub heeded: u64,
    /// Of those, calls the agent went ahead with.
    pub ignored: u64,
}

impl std::ops::AddAssign for AdvisoryCompliance {
    fn add_assign(&mut self, o: Self) {
        self.warned_calls += o.warned_calls;
        self.heeded += o.heeded;
        self.ignored += o.ignored;
    }
}

/// Decisions of one layer (stop-gates, caps, repeats, rate limits, …), by what they did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct LayerFigures {
    /// Let the action go ahead.
    pub allowed: u64,
    /// Refused the action; the run went on.
    pub refused: u64,
    /// Stopped (or paused) the run.
    pub stopped: u64,
    /// Recorded for the census only (a class-jump step, an observed event).
    pub noted: u64,
}

impl LayerFigures {
    fn count(&mut self, effect: VerdictEffect) {
        match effect {
            VerdictEffect::Allowed => self.allowed += 1,
            VerdictEffect::Refused => self.refused += 1,
            VerdictEffect::Stopped => self.stopped += 1,
            VerdictEffect::Noted => self.noted += 1,
        }
    }
}

impl std::ops::AddAssign for LayerFigures {
    fn add_assign(&mut self, o: Self) {
        self.allowed += o.allowed;
        self.refused += o.refused;
        self.stopped += o.stopped;
        self.noted += o.noted;
    }
}

/// A consumed override.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct OverrideUse {
    /// The run.
    pub run: String,
    /// The record's sequence number.
    pub seq: u64,
    /// The sentinel's id.
    pub id: String,
    /// The agent it was granted to.
    pub agent: String,
    /// The path it covered.
    pub path: String,
    /// Why it was granted.
    pub reason: String,
}

/// A write that the rules forbid and that stands.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct UnauthorisedWrite {
    /// The run.
    pub run: String,
    /// The sequence number of the `tool_finished` or `violation` record.
    pub seq: u64,
    /// The agent, when known.
    pub agent: Option<String>,
    /// The path written.
    pub path: String,
    /// `advisory_warned` or `violation`.
    pub via: &'static str,
}

/// What sandboxed commands asked of the egress proxy (`egress_decided`, `egress_closed`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct EgressFigures {
    /// Connections allowed.
    pub allowed: u64,
    /// Connections refused.
    pub refused: u64,
    /// Bytes received from allowed hosts.
    pub bytes_in: u64,
    /// Bytes sent to allowed hosts.
    pub bytes_out: u64,
}

impl EgressFigures {
    /// Whether no connection was asked for.
    pub fn is_empty(&self) -> bool {
        self.allowed == 0 && self.refused == 0
    }

    /// Adds `other`'s counts.
    pub fn add(&mut self, other: &Self) {
        self.allowed += other.allowed;
        self.refused += other.refused;
        self.bytes_in += other.bytes_in;
        self.bytes_out += other.bytes_out;
    }
}

/// Everything one run's ledger says, as figures.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RunFigures {
    /// The run.
    pub run: String,
    /// The task, from `run_started`.
    pub task: String,
    /// How it ended (`None`: no `run_ended`, the run did not finish).
    pub status: Option<RunStatus>,
    /// Turns started.
    pub turns: u64,
    /// Handoffs registered, in order.
    pub handoffs: Vec<Handoff>,
    /// Tokens of all model calls.
    pub usage: Usage,
    /// Cost in micro-dollars, when known.
    pub cost_micros: Option<u64>,
    /// Decisions per gate.
    pub gates: BTreeMap<String, GateFigures>,
    /// Decisions per layer (`layer_decision` records), beside the gates'.
    pub layers: BTreeMap<String, LayerFigures>,
    /// Advisory compliance.
    pub advisory: AdvisoryCompliance,
    /// Consumed overrides with their reasons.
    pub overrides: Vec<OverrideUse>,
    /// Unauthorised writes that stand.
    pub unauthorised_writes: Vec<UnauthorisedWrite>,
    /// `violation` records (reverted or not).
    pub violations: u64,
    /// `ledger_recovered` records (reopenings after a crash).
    pub recoveries: u64,
    /// The egress proxy's decisions and bytes (left out of JSON when there were none).
    #[serde(skip_serializing_if = "EgressFigures::is_empty")]
    pub egress: EgressFigures,
}

type CallKey = (Option<TurnNumber>, CallId);

impl RunFigures {
    /// Folds a run's records (in ledger order) into its figures.
    pub fn from_records(records: &[Record]) -> Self {
        let mut f = RunFigures {
            run: records
                .first()
                .map(|r| r.run.to_string())
                .unwrap_or_default(),
            ..Self::default()
        };
        let mut call_cost: Option<u64> = None;
        let mut end_cost: Option<u64> = None;
        let mut warned: BTreeSet<CallKey> = BTreeSet::new();
        let mut territory_warned: BTreeSet<CallKey> = BTreeSet::new();
        let mut finished: BTreeMap<CallKey, (u64, Option<String>, AuditEvent)> = BTreeMap::new();
        for r in records {
            let Ok(event) = r.event() else { continue };
            match &event {
                AuditEvent::RunStarted { task, .. } => f.task.clone_from(task),
                AuditEvent::TurnStarted { .. } => f.turns += 1,
                AuditEvent::ModelCall {
                    usage, cost_micros, ..
                } => {
                    f.usage += *usage;
                    if let Some(c) = cost_micros {
                        call_cost = Some(call_cost.unwrap_or(0) + c);
                    }
                }
                AuditEvent::GateDecision {
                    call_id,
                    gate,
                    decision,
                    ..
                } => {
                    let g = f.gates.entry(gate.name.to_string()).or_default();
                    g.kind.get_or_insert(gate.kind);
                    match decision {
                        Decision::Allow => g.allowed += 1,
                        Decision::Deny(_) => g.denied += 1,
                        Decision::Override { .. } => g.overridden += 1,
                        Decision::Warn(_) => {
                            g.warned += 1;
                            if let Some(id) = call_id {
                                warned.insert((r.turn, id.clone()));
                                if gate.kind == GateKind::Territory {
                                    territory_warned.insert((r.turn, id.clone()));
                                }
                            }
                        }
                    }
                }
                AuditEvent::LayerDecision {
                    layer,
                    decision,
                    detail,
                } => {
                    // What a CLI agent's session reported it cost (`budget::charge_reported`).
                    if *layer == LayerId::Budget {
                        if let Some(c) = detail.as_reported_cost() {
                            call_cost = Some(call_cost.unwrap_or(0) + c.reported_cost_micros);
                        }
                    }
                    f.layers
                        .entry(layer.to_string())
                        .or_default()
                        .count(decision.effect());
                }
                AuditEvent::OverrideConsumed {
                    id,
                    agent,
                    path,
                    reason,
                } => f.overrides.push(OverrideUse {
                    run: f.run.clone(),
                    seq: r.seq,
                    id: id.clone(),
                    agent: agent.to_string(),
                    path: path.clone(),
                    reason: reason.clone(),
                }),
                AuditEvent::ToolFinished { call_id, .. } => {
                    let agent = r.agent.as_ref().map(ToString::to_string);
                    finished.insert((r.turn, call_id.clone()), (r.seq, agent, event.clone()));
                }
                AuditEvent::Violation { path, remedy, .. } => {
                    f.violations += 1;
                    if !remedy.is_reverted() {
                        f.unauthorised_writes.push(UnauthorisedWrite {
                            run: f.run.clone(),
                            seq: r.seq,
                            agent: r.agent.as_ref().map(ToString::to_string),
                            path: path.clone(),
                            via: "violation",
                        });
                    }
                }
                AuditEvent::HandoffRegistered(h) => f.handoffs.push(h.clone()),
                AuditEvent::LedgerRecovered { .. } => f.recoveries += 1,
                AuditEvent::EgressDecided { allowed: true, .. } => f.egress.allowed += 1,
                AuditEvent::EgressDecided { allowed: false, .. } => f.egress.refused += 1,
                AuditEvent::EgressClosed {
                    bytes_in,
                    bytes_out,
                    ..
                } => {
                    f.egress.bytes_in += bytes_in;
                    f.egress.bytes_out += bytes_out;
                }
                AuditEvent::RunEnded {
                    status,
                    cost_micros,
                    ..
                } => {
                    f.status = Some(status.clone());
                    end_cost = *cost_micros;
                }
                _ => {}
            }
        }
        f.cost_micros = call_cost.or(end_cost);
        for key in &warned {
            f.advisory.warned_calls += 1;
            let went_ahead = matches!(finished.get(key), Some((_, _, AuditEvent::ToolFinished { is_error: false, effects, .. }))
                if effects.is_empty() || effects.iter().any(|e| e.status == EffectStatus::Ok));
            if went_ahead {
                f.advisory.ignored += 1;
            } else {
                f.advisory.heeded += 1;
            }
        }
        for key in &territory_warned {
            if let Some((seq, agent, AuditEvent::ToolFinished { effects, .. })) = finished.get(key)
            {
                for e in effects.iter().filter(|e| e.status == EffectStatus::Ok) {
                    f.unauthorised_writes.push(UnauthorisedWrite {
                        run: f.run.clone(),
                        seq: *seq,
                        agent: agent.clone(),
                        path: e.path.clone(),
                        via: "advisory_warned",
                    });
                }
            }
        }
        f.unauthorised_writes.sort_by_key(|w| w.seq);
        f
    }
}
