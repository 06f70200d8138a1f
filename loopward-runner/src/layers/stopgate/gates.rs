//! The set of stop-gates of a stack and how one gate reaches its verdict.

use super::action::GatedAction;
use super::approval::{Answer, Approval, ApprovalRequest, Approver, Granted};
use super::config::{Fixed, Gate, Point, StopGateConfig, StopMode};
use super::durable::{self, ApprovalStore, DurableError, PendingApproval, PendingState};
use crate::context::TurnContext;
use crate::layers::{record, ConfigError};
use crate::tool::ToolInvocation;
use crate::turn::TurnError;
use loopward_core::{AuditError, LayerDetail, LayerVerdict, RunStatus, StopGateDetail};
use loopward_core::{LayerId, ToolName};
use std::sync::{Arc, Mutex};

/// The stop-gates of a stack. Cheap to clone; build the turn and tool layers from it with
/// [`StopGates::turn_layer`] and [`StopGates::tool_layer`] (use both: a tool gate that waits
/// for a durable approval pauses the run through the turn layer).
#[derive(Clone)]
pub struct StopGates {
    inner: Arc<Inner>,
}

struct Inner {
    gates: Vec<Gate>,
    approver: Option<Arc<dyn Approver>>,
    store: Option<ApprovalStore>,
}

impl std::fmt::Debug for StopGates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StopGates")
            .field(
                "gates",
                &self.inner.gates.iter().map(|g| &g.name).collect::<Vec<_>>(),
            )
            .field("approver", &self.inner.approver.is_some())
            .finish()
    }
}

/// A gate's verdict on one action.
pub(super) enum Verdict {
    Approved(Approval),
    Denied(String),
    Pending(String),
}

/// The pending approval this run waits for, kept in the run's extensions.
#[derive(Default)]
pub(super) struct Awaiting(pub(super) Mutex<Option<String>>);

impl StopGates {
    /// Validates the `[[stopgate]]` tables; the error names the bad field.
    pub fn new(configs: &[StopGateConfig]) -> Result<Self, ConfigError> {
        let gates = configs
            .iter()
            .enumerate()
            .map(|(i, c)| Gate::from_config(i, c))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            inner: Arc::new(Inner {
                gates,
                approver: None,
                store: None,
            }),
        })
    }

    /// The approver `interactive` gates ask (without one they deny).
    pub fn with_approver(self, approver: Arc<dyn Approver>) -> Self {
        Self {
            inner: Arc::new(Inner {
                gates: self.inner.gates.clone(),
                approver: Some(approver),
                store: self.inner.store.clone(),
            }),
        }
    }

    /// Where `durable` gates keep their records, and the keys they are sealed under. Without
    /// one, records go to the workspace's keyless `.loopward/pending/`.
    pub fn with_store(self, store: ApprovalStore) -> Self {
        Self {
            inner: Arc::new(Inner {
                gates: self.inner.gates.clone(),
                approver: self.inner.approver.clone(),
                store: Some(store),
            }),
        }
    }

    /// The gates' names, in configuration order.
    pub fn names(&self) -> Vec<&str> {
        self.inner.gates.iter().map(|g| &*g.name).collect()
    }

    /// Asks every gate standing before `phase`. Returns their approvals (empty when the phase is
    /// not gated); present each to [`Approval::authorise`] before entering the phase. A denial
    /// ends the run `Stopped`, a durable gate without a decision `AwaitingApproval`.
    pub async fn before_phase(
        &self,
        turn: &TurnContext,
        phase: &str,
    ) -> Result<Vec<Approval>, TurnError> {
        let gates = self
            .inner
            .gates
            .iter()
            .filter(|g| matches!(&g.point, Point::Phase(p) if p == phase));
        self.clear_or_stop(turn, gates).await
    }

    pub(super) async fn before_turn(&self, turn: &TurnContext) -> Result<Vec<Approval>, TurnError> {
        let gates = self
            .inner
            .gates
            .iter()
            .filter(|g| matches!(&g.point, Point::Turn(a) if a == turn.agent()));
        self.clear_or_stop(turn, gates).await
    }

    /// Asks turn or phase gates, each about the one action it stands before.
    async fn clear_or_stop<'a>(
        &self,
        turn: &TurnContext,
        gates: impl Iterator<Item = &'a Gate>,
    ) -> Result<Vec<Approval>, TurnError> {
        let mut approvals = vec![];
        for gate in gates {
            let Some(fixed) = &gate.fixed else {
                unreachable!("turn and phase gates have their action made at configuration")
            };
            match self.decide(turn, gate, fixed).await? {
                Verdict::Approved(a) => approvals.push(a),
                Verdict::Denied(reason) => {
                    return Err(TurnError::Stop(RunStatus::Stopped {
                        reason: format!("stop-gate {} denied: {reason}", gate.name),
                    }))
                }
                Verdict::Pending(id) => {
                    return Err(TurnError::Stop(RunStatus::AwaitingApproval { pending: id }))
                }
            }
        }
        Ok(approvals)
    }

    /// The requests the `interactive` gates standing before this tool call would put to their
    /// approver, without asking or recording anything. A durable-execution engine asks them
    /// before the call's journaled step (a person cannot be waited for inside one) and has its
    /// approver answer the gates inside the step from the verdicts given.
    ///
    /// ```
    /// use loopward_runner::layers::stopgate::{StopGateConfig, StopGates, StopMode};
    /// let gates = StopGates::new(&[StopGateConfig::tool("shell", StopMode::Interactive)]).unwrap();
    /// # let _ = gates;
    /// // gates.asks_for(&invocation): one request for a `shell` call, none for another tool.
    /// ```
    pub fn asks_for(&self, inv: &ToolInvocation) -> Vec<ApprovalRequest> {
        let action = GatedAction::tool(inv.call.name.clone(), &inv.call.arguments);
        self.tool_gates(inv)
            .into_iter()
            .filter(|g| g.mode == StopMode::Interactive)
            .map(|g| ApprovalRequest {
                run: inv.turn.run().run().clone(),
                agent: inv.turn.agent().clone(),
                gate: g.name.to_string(),
                action: action.clone(),
                summary: super::service::summary(inv),
                why: g.point.why(),
                turn: inv.turn.clone(),
            })
            .collect()
    }

    /// The gates standing before this tool call.
    pub(super) fn tool_gates(&self, inv: &ToolInvocation) -> Vec<&Gate> {
        let written: Vec<&str> = inv
            .accesses
            .iter()
            .flat_map(|a| a.written_paths())
            .map(|p| p.rel())
            .collect();
        self.call_gates(&inv.call.name, &inv.call.arguments, &written)
    }

    /// The gates standing before a call of `tool` with `arguments` that writes `written`
    /// (workspace-relative paths).
    fn call_gates(
        &self,
        tool: &ToolName,
        arguments: &serde_json::Value,
        written: &[&str],
    ) -> Vec<&Gate> {
        self.inner
            .gates
            .iter()
            .filter(|g| match &g.point {
                Point::Tool(t) => t == tool,
                Point::Write(glob) => written.iter().any(|p| glob.is_match(p)),
                Point::Handoff(to) => {
                    tool == "handoff"
                        && arguments.get("to").and_then(|v| v.as_str()) == Some(to.as_str())
                }
                Point::Turn(_) | Point::Phase(_) => false,
            })
            .collect()
    }

    /// The gates a recorded call would meet, as (name, mode, why): for `loopward-calibrate`.
    pub fn met_by_call(
        &self,
        tool: &ToolName,
        arguments: &serde_json::Value,
        written: &[&str],
    ) -> Vec<(&str, StopMode, String)> {
        let gates = self.call_gates(tool, arguments, written);
        gates
            .into_iter()
            .map(|g| (&*g.name, g.mode, g.point.why()))
            .collect()
    }

    /// The gates a recorded turn of `agent` would meet, as (name, mode, why): for
    /// `loopward-calibrate`.
    pub fn met_by_turn(&self, agent: &str) -> Vec<(&str, StopMode, String)> {
        self.inner
            .gates
            .iter()
            .filter(|g| matches!(&g.point, Point::Turn(a) if a.as_str() == agent))
            .map(|g| (&*g.name, g.mode, g.point.why()))
            .collect()
    }

    /// One gate's verdict on `action`. Every verdict is recorded before it takes effect; an
    /// error to record stops the action.
    pub(super) async fn decide(
        &self,
        turn: &TurnContext,
        gate: &Gate,
        fixed: &Fixed,
    ) -> Result<Verdict, AuditError> {
        let action = &fixed.action;
        if let Some(granted) = recorded_approval(turn, gate, action) {
            return Ok(Verdict::Approved(Approval::mint(
                &gate.name, action, granted,
            )));
        }
        let note = |decision: LayerVerdict, extra: Extra| {
            let detail = StopGateDetail {
                action: fixed.key.clone(),
                by: extra.by,
                dir: extra.dir,
                gate: gate.name.clone(),
                id: extra.id,
                mode: gate.mode.as_str(),
                reason: extra.reason,
                summary: fixed.summary.clone(),
            };
            record::decision(
                turn,
                LayerId::StopGate,
                decision,
                LayerDetail::StopGate(detail),
            )
        };
        match gate.mode {
            StopMode::Auto => {
                note(LayerVerdict::AutoApproved, Extra::default())?;
                Ok(Verdict::Approved(Approval::mint(
                    &gate.name,
                    action,
                    Granted::Auto,
                )))
            }
            StopMode::Deny => {
                let reason = format!("gate {} always denies this action", gate.name);
                note(LayerVerdict::Denied, Extra::reason(reason.clone()))?;
                Ok(Verdict::Denied(reason))
            }
            StopMode::Interactive => {
                let answer = match &self.inner.approver {
                    None => Answer::Deny {
                        reason: "no approver is configured for this interactive gate".into(),
                    },
                    Some(approver) => {
                        let request = ApprovalRequest {
                            run: turn.run().run().clone(),
                            agent: turn.agent().clone(),
                            gate: gate.name.to_string(),
                            action: (**action).clone(),
                            summary: fixed.summary.to_string(),
                            why: gate.point.why(),
                            turn: turn.clone(),
                        };
                        tokio::time::timeout(gate.ask_timeout, approver.ask(request))
                            .await
                            .unwrap_or_else(|_| Answer::Deny {
                                reason: format!(
                                    "no answer within {}",
                                    crate::duration::format(gate.ask_timeout)
                                ),
                            })
                    }
                };
                match answer {
                    Answer::Approve { by } => {
                        let extra = Extra {
                            by: Some(by.clone()),
                            ..Extra::default()
                        };
                        note(LayerVerdict::Approved, extra)?;
                        Ok(Verdict::Approved(Approval::mint(
                            &gate.name,
                            action,
                            Granted::Person { by },
                        )))
                    }
                    Answer::Deny { reason } => {
                        note(LayerVerdict::Denied, Extra::reason(reason.clone()))?;
                        Ok(Verdict::Denied(reason))
                    }
                }
            }
            StopMode::Durable => self.durable(turn, gate, fixed, note),
        }
    }

    fn durable(
        &self,
        turn: &TurnContext,
        gate: &Gate,
        fixed: &Fixed,
        note: impl Fn(LayerVerdict, Extra) -> Result<(), AuditError>,
    ) -> Result<Verdict, AuditError> {
        let (action, summary) = (&fixed.action, &*fixed.summary);
        let run = turn.run();
        let store = self
            .inner
            .store
            .clone()
            .unwrap_or_else(|| ApprovalStore::for_workspace(turn.workspace().root()));
        let where_ = if store.is_keyed() {
            durable::KEYED_PENDING_DIR
        } else {
            durable::PENDING_DIR
        };
        let id = durable::record_id(run.run(), &gate.name, action);
        let now = run.clock().now_millis();
        let deny = |why: String| -> Result<Verdict, AuditError> {
            let extra = Extra {
                id: Some(id.clone()),
                reason: Some(why.clone()),
                ..Extra::default()
            };
            note(LayerVerdict::Denied, extra)?;
            Ok(Verdict::Denied(why))
        };
        let pending = |state: LayerVerdict| -> Result<Verdict, AuditError> {
            let extra = Extra {
                id: Some(id.clone()),
                dir: Some(where_),
                ..Extra::default()
            };
            note(state, extra)?;
            let awaiting = run.extensions().get_or_default::<Awaiting>();
            *awaiting.0.lock().unwrap_or_else(|p| p.into_inner()) = Some(id.clone());
            Ok(Verdict::Pending(id.clone()))
        };
        let existing = match store.read(&id) {
            Ok(r) => r,
            // Not loopward's record, or damaged: refused (recorded by `deny`) and moved aside, so
            // the next attempt asks a person afresh.
            Err(e @ (DurableError::Forged { .. } | DurableError::Malformed { .. })) => {
                let moved = match store.reject(&id, now) {
                    Ok(()) => "moved to rejected/; the next attempt asks again".to_string(),
                    Err(m) => format!("could not be moved aside: {m}"),
                };
                return deny(format!("the pending record cannot be used ({e}); {moved}"));
            }
            Err(e) => return deny(format!("the pending record cannot be used ({e})")),
        };
        match existing {
            Some(r) if r.action != **action || r.run != *run.run() || *r.gate != *gate.name => {
                deny(format!(
                    "pending record {id} names another action; it was not honoured"
                ))
            }
            Some(r) if r.state == PendingState::Pending => pending(LayerVerdict::StillPending),
            Some(r) => match store.consume(&id, now) {
                Ok(true) if r.state == PendingState::Approved => {
                    // Who approved goes into the ledger with the approval it consumed.
                    let extra = Extra {
                        id: Some(id.clone()),
                        by: r.decided.as_ref().map(|d| d.by.clone()),
                        ..Extra::default()
                    };
                    note(LayerVerdict::ApprovalConsumed, extra)?;
                    Ok(Verdict::Approved(Approval::mint(
                        &gate.name,
                        action,
                        Granted::Durable {
                            pending: id.clone(),
                        },
                    )))
                }
                Ok(true) => deny(format!(
                    "a person denied pending approval {id} ({})",
                    r.decision_text()
                )),
                Ok(false) => {
                    self.request(&store, turn, gate, action, summary, &id, now, pending, deny)
                }
                Err(e) => deny(format!("the approval could not be consumed ({e})")),
            },
            None => self.request(&store, turn, gate, action, summary, &id, now, pending, deny),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn request(
        &self,
        store: &ApprovalStore,
        turn: &TurnContext,
        gate: &Gate,
        action: &GatedAction,
        summary: &str,
        id: &str,
        now: u64,
        pending: impl Fn(LayerVerdict) -> Result<Verdict, AuditError>,
        deny: impl Fn(String) -> Result<Verdict, AuditError>,
    ) -> Result<Verdict, AuditError> {
        let mut record = PendingApproval {
            id: id.into(),
            run: turn.run().run().clone(),
            agent: turn.agent().clone(),
            gate: gate.name.to_string(),
            action: action.clone(),
            summary: summary.into(),
            requested_at_ms: now,
            state: PendingState::Pending,
            decided: None,
            seal: None,
        };
        match store.request(&mut record) {
            Ok(true) => pending(LayerVerdict::ApprovalRequested),
            // Another process asked for the same action a moment ago: its record stands.
            Ok(false) => pending(LayerVerdict::StillPending),
            Err(e) => deny(format!("the pending record could not be written ({e})")),
        }
    }
}

/// What a verdict's record adds to the gate, action and summary.
#[derive(Default)]
pub(super) struct Extra {
    by: Option<String>,
    dir: Option<&'static str>,
    id: Option<String>,
    reason: Option<String>,
}

impl Extra {
    fn reason(reason: String) -> Self {
        Self {
            reason: Some(reason),
            ..Self::default()
        }
    }
}

/// In a turn resumed from its journal, the approval this gate gave `action` before the process
/// ended: it stands (it was recorded, and a durable one was consumed) and is not asked again.
fn recorded_approval(turn: &TurnContext, gate: &Gate, action: &GatedAction) -> Option<Granted> {
    let feed = turn.extensions().get::<crate::journal::TurnFeed>()?;
    let d = feed.take_decision(&LayerId::StopGate, |decision, detail| {
        decision.approves()
            && detail.as_stop_gate().is_some_and(|sg| {
                sg.gate == gate.name
                    && sg.action.parse::<GatedAction>().ok().as_ref() == Some(action)
            })
    })?;
    let sg = d.detail.as_stop_gate()?;
    Some(match d.decision {
        LayerVerdict::AutoApproved => Granted::Auto,
        LayerVerdict::Approved => Granted::Person {
            by: sg.by.clone().unwrap_or_default(),
        },
        _ => Granted::Durable {
            pending: sg.id.clone().unwrap_or_default(),
        },
    })
}
