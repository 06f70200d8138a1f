//! The swimlane model of one run: lanes, turn bars, handoff arrows and markers, folded from the
//! run's records alone (nothing is read from runner state).

use loopward_core::{
    Action, AuditEvent, Decision, EffectStatus, LayerDetail, LayerId, LayerVerdict, ToolName,
};
use loopward_runner::audit::Record;

/// What a marker stands for. The CSS class of each marker is [`MarkerKind::class`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum MarkerKind {
    /// A tool call that left a standing change.
    Write,
    /// A gate or layer refused an action.
    Refusal,
    /// An advisory gate warned and let the action run.
    Warning,
    /// A consumed override let the action run.
    Override,
    /// A forbidden change was caught after the fact.
    Violation,
    /// A stop-gate verdict (approved, denied, requested …).
    StopGate,
    /// A class-jump counter moved (retry, jump, exhausted).
    ClassJump,
    /// A cap, budget or timeout was hit.
    Cap,
}

impl MarkerKind {
    /// Every kind, in legend order.
    pub(crate) const ALL: [MarkerKind; 8] = [
        Self::Write,
        Self::Refusal,
        Self::Warning,
        Self::Override,
        Self::Violation,
        Self::StopGate,
        Self::ClassJump,
        Self::Cap,
    ];

    /// The CSS class (also what the browser test counts).
    pub(crate) fn class(self) -> &'static str {
        match self {
            Self::Write => "write",
            Self::Refusal => "refusal",
            Self::Warning => "warning",
            Self::Override => "override",
            Self::Violation => "violation",
            Self::StopGate => "stopgate",
            Self::ClassJump => "classjump",
            Self::Cap => "cap",
        }
    }

    /// In words, for the legend.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Self::Write => "write",
            Self::Refusal => "refusal",
            Self::Warning => "advisory warning",
            Self::Override => "override",
            Self::Violation => "violation",
            Self::StopGate => "stop-gate",
            Self::ClassJump => "class-jump",
            Self::Cap => "cap / budget / timeout",
        }
    }
}

/// One turn: a bar in its agent's lane from its first to its last record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TurnBar {
    /// The lane (index into [`Timeline::lanes`]).
    pub(crate) lane: usize,
    /// The turn number, when recorded.
    pub(crate) turn: Option<u64>,
    /// The `turn_started` record.
    pub(crate) start: u64,
    /// The `turn_ended` record, or the last record of the turn when it has none.
    pub(crate) end: u64,
    /// How it ended (`done`, `handoff`, …; `open` without a `turn_ended`).
    pub(crate) finish: String,
    /// The model's last visible text in the turn.
    pub(crate) said: String,
}

/// A handoff: solid when it stood, dashed when it was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Arrow {
    /// The record it links to.
    pub(crate) seq: u64,
    /// From this lane …
    pub(crate) from: usize,
    /// … to this one.
    pub(crate) to: usize,
    /// Where the next turn of the target starts (the seq itself for a refused one).
    pub(crate) land: u64,
    /// Registered (true) or refused (false).
    pub(crate) stood: bool,
    /// What the tooltip says.
    pub(crate) title: String,
}

/// One marker on a lane.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Marker {
    /// The record it links to.
    pub(crate) seq: u64,
    /// The lane.
    pub(crate) lane: usize,
    /// What it is.
    pub(crate) kind: MarkerKind,
    /// The tooltip: what happened, the reason and what to do.
    pub(crate) title: String,
}

/// The swimlane model of a run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Timeline {
    /// Agents, in order of first appearance.
    pub(crate) lanes: Vec<String>,
    /// The last sequence number.
    pub(crate) span: u64,
    /// Turns.
    pub(crate) turns: Vec<TurnBar>,
    /// Handoffs.
    pub(crate) arrows: Vec<Arrow>,
    /// Markers.
    pub(crate) markers: Vec<Marker>,
}

impl Timeline {
    /// Folds records (in ledger order) into lanes, bars, arrows and markers.
    pub(crate) fn from_records(records: &[Record]) -> Self {
        let mut t = Timeline {
            span: records.last().map_or(0, |r| r.seq),
            ..Self::default()
        };
        let mut open: Option<TurnBar> = None;
        // Registered handoffs wait for the target's next turn to know where they land.
        let mut pending: Vec<usize> = Vec::new();
        for r in records {
            let Ok(event) = r.event() else { continue };
            let lane = r.agent.as_ref().map(|a| t.lane(a.as_str()));
            if let Some(bar) = open.as_mut() {
                bar.end = bar.end.max(r.seq);
            }
            match &event {
                AuditEvent::RunStarted { agent, .. } => {
                    t.lane(agent.as_str());
                }
                AuditEvent::TurnStarted { agent } => {
                    if let Some(mut bar) = open.take() {
                        bar.end = r.seq.saturating_sub(1).max(bar.start);
                        t.turns.push(bar);
                    }
                    let lane = t.lane(agent.as_str());
                    pending.retain(|&i| {
                        let a = &mut t.arrows[i];
                        if a.to == lane {
                            a.land = r.seq;
                            false
                        } else {
                            true
                        }
                    });
                    open = Some(TurnBar {
                        lane,
                        turn: r.turn.map(|n| u64::from(n.0)),
                        start: r.seq,
                        end: r.seq,
                        finish: "open".into(),
                        said: String::new(),
                    });
                }
                AuditEvent::TurnEnded { finish, .. } => {
                    if let Some(mut bar) = open.take() {
                        bar.end = r.seq;
                        bar.finish = word(finish);
                        t.turns.push(bar);
                    }
                }
                AuditEvent::RunEnded { .. } | AuditEvent::RunResumed { .. } => {
                    if let Some(mut bar) = open.take() {
                        bar.end = r.seq.saturating_sub(1).max(bar.start);
                        t.turns.push(bar);
                    }
                }
                AuditEvent::ModelReply { text, .. } if !text.trim().is_empty() => {
                    if let Some(bar) = open.as_mut() {
                        bar.said.clone_from(text);
                    }
                }
                AuditEvent::HandoffRegistered(h) => {
                    let (from, to) = (t.lane(h.from.as_str()), t.lane(h.to.as_str()));
                    pending.push(t.arrows.len());
                    t.arrows.push(Arrow {
                        seq: r.seq,
                        from,
                        to,
                        land: r.seq,
                        stood: true,
                        title: format!("handoff {} → {}: {}", h.from, h.to, h.message),
                    });
                }
                AuditEvent::HandoffRefused { to, standing } => {
                    let to_lane = t.lane(to.as_str());
                    // The gate's refusal of the same handoff already drew its arrow.
                    let drawn = t
                        .arrows
                        .last()
                        .is_some_and(|a| !a.stood && Some(a.from) == lane && a.to == to_lane);
                    if let (Some(from), false) = (lane, drawn) {
                        t.arrows.push(Arrow {
                            seq: r.seq,
                            from,
                            to: to_lane,
                            land: r.seq,
                            stood: false,
                            title: format!(
                                "second handoff to {to} refused: the handoff to {standing} stands"
                            ),
                        });
                    }
                }
                _ => {}
            }
            if let (Some(lane), Some((kind, title))) = (lane, marker(&event)) {
                if let AuditEvent::GateDecision {
                    action: Action::Handoff(target),
                    decision: Decision::Deny(rf),
                    ..
                } = &event
                {
                    let to = t.lane(target.as_str());
                    t.arrows.push(Arrow {
                        seq: r.seq,
                        from: lane,
                        to,
                        land: r.seq,
                        stood: false,
                        title: format!("handoff to {target} refused by {}: {}", rf.gate, rf.reason),
                    });
                }
                t.markers.push(Marker {
                    seq: r.seq,
                    lane,
                    kind,
                    title,
                });
            }
        }
        if let Some(bar) = open.take() {
            t.turns.push(bar);
        }
        t
    }

    fn lane(&mut self, agent: &str) -> usize {
        match self.lanes.iter().position(|l| l == agent) {
            Some(i) => i,
            None => {
                self.lanes.push(agent.to_string());
                self.lanes.len() - 1
            }
        }
    }

    /// How many markers of `kind`.
    pub(crate) fn count(&self, kind: MarkerKind) -> usize {
        self.markers.iter().filter(|m| m.kind == kind).count()
    }
}

/// The marker an event makes, if any, with its tooltip.
fn marker(event: &AuditEvent) -> Option<(MarkerKind, String)> {
    match event {
        AuditEvent::GateDecision {
            gate,
            action,
            path,
            decision,
            ..
        } => {
            let on = path
                .as_deref()
                .map_or_else(|| action.to_string(), str::to_string);
            match decision {
                Decision::Allow => None,
                Decision::Deny(rf) => Some((
                    MarkerKind::Refusal,
                    format!(
                        "{gate} refused {on}: {}\nwhat to do: {}",
                        rf.reason, rf.hint
                    ),
                )),
                Decision::Warn(rf) => Some((
                    MarkerKind::Warning,
                    format!("{gate} (advisory) warned on {on}: {}", rf.reason),
                )),
                Decision::Override { id, reason } => Some((
                    MarkerKind::Override,
                    format!("{gate}: override {id} let {on} through; reason: {reason}"),
                )),
            }
        }
        AuditEvent::ToolFinished {
            tool,
            is_error: false,
            effects,
            ..
        } => {
            let paths: Vec<&str> = effects
                .iter()
                .filter(|e| e.status == EffectStatus::Ok)
                .map(|e| e.path.as_str())
                .collect();
            (!paths.is_empty()).then(|| {
                (
                    MarkerKind::Write,
                    format!("{tool} wrote {}", paths.join(", ")),
                )
            })
        }
        AuditEvent::Violation {
            path,
            remedy,
            reason,
        } => Some((
            MarkerKind::Violation,
            format!("violation on {path}: {reason}\nremedy: {remedy}"),
        )),
        AuditEvent::LayerDecision {
            layer,
            decision,
            detail,
        } => layer_marker(layer, *decision, detail),
        _ => None,
    }
}

fn layer_marker(
    layer: &LayerId,
    decision: LayerVerdict,
    detail: &LayerDetail,
) -> Option<(MarkerKind, String)> {
    if matches!(decision, LayerVerdict::Allow | LayerVerdict::Admitted) {
        return None;
    }
    // A detail no typed form holds (an older ledger's) is shown as it was written.
    let written = || {
        if detail.is_null() {
            format!("{layer}: {decision}")
        } else {
            format!("{layer}: {decision} {detail}")
        }
    };
    let unknown = || "?".to_string();
    match layer {
        LayerId::StopGate => {
            let Some(gate) = detail.as_stop_gate() else {
                return Some((MarkerKind::StopGate, written()));
            };
            let who = gate.by.as_deref().map_or_else(
                || {
                    if decision == LayerVerdict::AutoApproved {
                        " (auto)".to_string()
                    } else {
                        String::new()
                    }
                },
                |b| format!(" by {b}"),
            );
            let why = gate
                .reason
                .as_deref()
                .map_or_else(String::new, |r| format!(": {r}"));
            Some((
                MarkerKind::StopGate,
                format!(
                    "stop-gate {} {decision}{who} on {}{why}",
                    gate.gate, gate.action
                ),
            ))
        }
        LayerId::ClassJump => {
            // A refused report names its subtask and strategy, not the counts.
            let (failures, allowed, strategy, subtask) =
                match (detail.as_class_jump(), detail.as_class_jump_refused()) {
                    (Some(j), _) => (
                        j.failures.to_string(),
                        j.allowed.to_string(),
                        j.strategy.to_string(),
                        j.subtask.to_string(),
                    ),
                    (None, Some(r)) => {
                        (unknown(), unknown(), r.strategy.clone(), r.subtask.clone())
                    }
                    (None, None) => return Some((MarkerKind::ClassJump, written())),
                };
            Some((
                MarkerKind::ClassJump,
                format!(
                    "class-jump {decision}: {failures} failure(s) of {allowed} allowed with strategy {strategy} on {subtask}",
                ),
            ))
        }
        LayerId::Repeat => {
            // Sessions without progress count sessions, not one tool's calls.
            let (tool, count, limit) = match (detail.as_repeat(), detail.as_no_progress()) {
                (Some(r), _) => (r.tool.clone(), r.count.to_string(), r.limit.to_string()),
                (None, Some(p)) => (ToolName::default(), unknown(), p.limit.to_string()),
                (None, None) => return Some((MarkerKind::Refusal, written())),
            };
            Some((
                MarkerKind::Refusal,
                format!("repeat refused {tool}: {count} of {limit} identical calls"),
            ))
        }
        _ => Some((MarkerKind::Cap, written())),
    }
}

fn word<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}
