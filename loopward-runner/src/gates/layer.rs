//! The tower layer that runs the policy's gates in the tool stack, before anything executes.
//!
//! For every call: control files, then territories (consuming a one-shot override where one is
//! needed and valid), then the sprawl gate; for `handoff` calls the review gates; around `shell`
//! calls a workspace comparison that reverts forbidden changes. Every decision is recorded
//! before the action runs; a record that fails stops the call ([`ToolError::Audit`]).

use super::control::CONTROL_GATE;
use super::overrides::{OverrideError, Sentinel};
use super::policy::{Gates, Policy, POLICY_GATE};
use super::sprawl::{Epochs, SprawlGate, SprawlState, SprawlVerdict};
use super::territory::Territory;
use crate::clock::Clock;
use crate::context::TurnContext;
use crate::tool::{Access, BoxToolService, ToolError, ToolInvocation, ToolOutput};
use futures::future::BoxFuture;
use loopward_core::{
    AgentId, AuditEvent, Decision, Effect, EffectKind, EffectStatus, GateMode, Refusal,
};
use std::collections::BTreeSet;
use std::task::{Context, Poll};
use tower::ServiceExt;

/// Wraps a tool stack with the policy gates.
///
/// ```
/// use loopward_runner::gates::{Policy, PolicyConfig, PolicyLayer};
/// use loopward_runner::tool::{BoxToolService, ToolExecutor};
/// use loopward_runner::Workspace;
/// use tower::Layer;
/// let dir = tempfile::tempdir().unwrap();
/// let policy = Policy::from_config(&PolicyConfig::default(), Workspace::new(dir.path()).unwrap()).unwrap();
/// let stack: BoxToolService = BoxToolService::new(PolicyLayer::new(policy).layer(ToolExecutor));
/// # let _ = stack;
/// ```
#[derive(Clone, Debug)]
pub struct PolicyLayer {
    policy: Policy,
}

impl PolicyLayer {
    /// A layer running `policy`'s gates.
    pub fn new(policy: Policy) -> Self {
        Self { policy }
    }

    /// Wraps a boxed stack, returning a boxed stack.
    pub fn wrap(&self, inner: BoxToolService) -> BoxToolService {
        BoxToolService::new(tower::Layer::layer(self, inner))
    }
}

impl<S> tower::Layer<S> for PolicyLayer {
    type Service = PolicyService<S>;
    fn layer(&self, inner: S) -> Self::Service {
        PolicyService {
            policy: self.policy.clone(),
            inner,
        }
    }
}

/// The service [`PolicyLayer`] builds.
#[derive(Clone, Debug)]
pub struct PolicyService<S> {
    policy: Policy,
    inner: S,
}

impl<S> tower::Service<ToolInvocation> for PolicyService<S>
where
    S: tower::Service<ToolInvocation, Response = ToolOutput, Error = ToolError>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    type Response = ToolOutput;
    type Error = ToolError;
    type Future = BoxFuture<'static, Result<ToolOutput, ToolError>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), ToolError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, inv: ToolInvocation) -> Self::Future {
        let policy = self.policy.clone();
        let inner = self.inner.clone();
        Box::pin(async move { policy.run_call(inner, inv).await })
    }
}

/// One gate's verdict on one path of one call.
pub(super) struct Verdict {
    pub(super) gate: String,
    pub(super) mode: GateMode,
    pub(super) path_raw: Option<String>,
    pub(super) path: Option<String>,
    pub(super) decision: Decision,
    pub(super) needs: Option<Sentinel>,
}

impl Verdict {
    pub(super) fn denies(&self) -> bool {
        !self.decision.permits()
    }
}

pub(super) fn audit(e: loopward_core::AuditError) -> ToolError {
    ToolError::Audit(e.0)
}

pub(super) fn record(
    turn: &TurnContext,
    call_id: &str,
    action: &str,
    v: &Verdict,
) -> Result<(), ToolError> {
    turn.record(&AuditEvent::GateDecision {
        call_id: Some(call_id.into()),
        gate: v.gate.clone(),
        mode: v.mode,
        action: action.into(),
        path_raw: v.path_raw.clone(),
        path: v.path.clone(),
        decision: v.decision.clone(),
    })
    .map_err(audit)
}

impl Policy {
    async fn run_call<S>(&self, inner: S, inv: ToolInvocation) -> Result<ToolOutput, ToolError>
    where
        S: tower::Service<ToolInvocation, Response = ToolOutput, Error = ToolError>
            + Send
            + 'static,
        S::Future: Send + 'static,
    {
        let gates = self.gates();
        if inv.accesses.iter().any(|a| matches!(a, Access::Exec)) {
            return self.run_exec(&gates, inner, inv).await;
        }
        if inv.call.name == "handoff" {
            self.judge_handoff(&gates, &inv)?;
            return inner.oneshot(inv).await;
        }
        let turn = inv.turn.clone();
        let call_id = inv.call.id.clone();
        let action = format!("tool:{}", inv.call.name);
        let agent = turn.agent().clone();
        let targets = match self.targets(&inv.accesses) {
            Ok(t) => t,
            Err(why) => {
                let v = Verdict {
                    gate: POLICY_GATE.into(),
                    mode: GateMode::Enforce,
                    path_raw: None,
                    path: None,
                    decision: Decision::Deny(Refusal::new(
                        POLICY_GATE,
                        format!("could not tell what this call would change: {why}"),
                        "act on fewer paths at once, or on files rather than large folders",
                    )),
                    needs: None,
                };
                record(&turn, &call_id, &action, &v)?;
                return Err(refused(v));
            }
        };
        if targets.is_empty() {
            return inner.oneshot(inv).await;
        }
        let mut verdicts: Vec<Verdict> = targets
            .iter()
            .map(|(raw, rel)| self.judge_path(&gates, &agent, turn.run().clock(), raw.clone(), rel))
            .collect();
        if let Some(i) = verdicts.iter().position(Verdict::denies) {
            let by = verdicts[i].gate.clone();
            for v in &mut verdicts {
                unused_override(v, &by);
                record(&turn, &call_id, &action, v)?;
            }
            return Err(refused(verdicts.swap_remove(i)));
        }
        // The sprawl gate: counted on the paths this call writes.
        let epochs = turn.run().extensions().get_or_default::<Epochs>();
        let sprawl_state = turn.run().extensions().get_or_default::<SprawlState>();
        let (keys, files) = self.unit_keys(&gates, &inv, &targets);
        if let Some(sg) = &gates.sprawl {
            match sprawl_state.judge(sg, &agent, &epochs, &keys, true) {
                SprawlVerdict::Pass => {}
                SprawlVerdict::Refuse { touched, n } => {
                    let refusal = self.sprawl_refusal(&gates, sg, &agent, &touched, &files, n);
                    let decision = match sg.config().mode {
                        GateMode::Enforce => Decision::Deny(refusal),
                        GateMode::Advisory => Decision::Warn(refusal),
                    };
                    let v = Verdict {
                        gate: "sprawl".into(),
                        mode: sg.config().mode,
                        path_raw: None,
                        path: files.iter().next().cloned(),
                        decision,
                        needs: None,
                    };
                    if v.denies() {
                        for x in &mut verdicts {
                            unused_override(x, "sprawl");
                            record(&turn, &call_id, &action, x)?;
                        }
                        record(&turn, &call_id, &action, &v)?;
                        return Err(refused(v));
                    }
                    verdicts.push(v);
                }
            }
        }
        // Every gate allows: consume the overrides this call needs, logged before it runs.
        for v in &mut verdicts {
            self.consume(&turn, &agent, v)?;
        }
        if let Some(i) = verdicts.iter().position(Verdict::denies) {
            for v in &verdicts {
                record(&turn, &call_id, &action, v)?;
            }
            return Err(refused(verdicts.swap_remove(i)));
        }
        for v in &verdicts {
            record(&turn, &call_id, &action, v)?;
        }
        let out = inner.oneshot(inv).await?;
        if !out.is_error {
            sprawl_state.touch(&agent, &epochs, keys, files);
            self.note_plan(&gates, &epochs, &out.effects);
        }
        Ok(out)
    }

    /// Control, then territories (finding an override where one is needed). Decides, consumes
    /// nothing.
    pub(super) fn judge_path(
        &self,
        gates: &Gates,
        agent: &AgentId,
        clock: &dyn Clock,
        raw: Option<String>,
        rel: &str,
    ) -> Verdict {
        let mk = |gate: &str, mode, decision, needs| Verdict {
            gate: gate.into(),
            mode,
            path_raw: raw.clone(),
            path: Some(rel.to_string()),
            decision,
            needs,
        };
        if self.inner.control.covers(rel) {
            return mk(
                CONTROL_GATE,
                GateMode::Enforce,
                Decision::Deny(Refusal::new(
                    CONTROL_GATE,
                    format!("{} is a control file: .loopward/, the config file and the runs directory are never writable by agents, with or without an override", show(rel)),
                    "leave it unchanged; if it must change, say so in your reply and a person will do it",
                )),
                None,
            );
        }
        let mut covering: Vec<&Territory> =
            gates.territories.iter().filter(|t| t.covers(rel)).collect();
        covering.sort_by(|a, b| a.name().cmp(b.name()));
        let foreign: Vec<&&Territory> = covering.iter().filter(|t| !t.owned_by(agent)).collect();
        let enforced: Vec<&&&Territory> = foreign
            .iter()
            .filter(|t| t.mode() == GateMode::Enforce)
            .collect();
        if let Some(t) = enforced.first() {
            return match self.inner.overrides.find(agent, rel, clock) {
                Ok(s) => mk(t.name(), GateMode::Enforce, Decision::Allow, Some(s)),
                Err(e) => mk(
                    t.name(),
                    GateMode::Enforce,
                    Decision::Deny(territory_refusal(
                        t,
                        agent,
                        rel,
                        Some(&e),
                        self.inner.overrides.ttl_limit(),
                    )),
                    None,
                ),
            };
        }
        if let Some(t) = foreign.first() {
            return mk(
                t.name(),
                GateMode::Advisory,
                Decision::Warn(territory_refusal(
                    t,
                    agent,
                    rel,
                    None,
                    self.inner.overrides.ttl_limit(),
                )),
                None,
            );
        }
        let gate = covering.first().map_or("territory", |t| t.name());
        mk(gate, GateMode::Enforce, Decision::Allow, None)
    }

    /// Takes the override a verdict needs; on failure the verdict becomes a denial.
    pub(super) fn consume(
        &self,
        turn: &TurnContext,
        agent: &AgentId,
        v: &mut Verdict,
    ) -> Result<(), ToolError> {
        let Some(s) = v.needs.take() else {
            return Ok(());
        };
        let path = v.path.clone().unwrap_or_default();
        match self.inner.overrides.take(agent, &path, turn.run().clock()) {
            Ok(taken) => {
                turn.record(&AuditEvent::OverrideConsumed {
                    id: taken.id.clone(),
                    agent: agent.clone(),
                    path: taken.path.clone(),
                    reason: taken.reason.clone(),
                })
                .map_err(audit)?;
                v.decision = Decision::Override {
                    id: taken.id,
                    reason: taken.reason,
                };
            }
            Err(e) => {
                let _ = s;
                let gates = self.gates();
                let t = gates.territories.iter().find(|t| t.name() == v.gate);
                v.decision = Decision::Deny(match t {
                    Some(t) => territory_refusal(
                        t,
                        agent,
                        &path,
                        Some(&e),
                        self.inner.overrides.ttl_limit(),
                    ),
                    None => Refusal::new(v.gate.clone(), e.to_string(), ""),
                });
            }
        }
        Ok(())
    }
}

pub(super) fn refused(v: Verdict) -> ToolError {
    match v.decision {
        Decision::Deny(r) => ToolError::Refused(r),
        _ => ToolError::Refused(Refusal::new(v.gate, "refused", "")),
    }
}

/// A path that would have gone through on an override, in a call another gate refused: the
/// override is left for the next try, and the census says so.
pub(super) fn unused_override(v: &mut Verdict, refused_by: &str) {
    if let Some(s) = v.needs.take() {
        v.decision = Decision::Deny(Refusal::new(
            v.gate.clone(),
            format!(
                "{} needs override {}, which was not used because {refused_by} refused the call",
                v.path.as_deref().unwrap_or(""),
                s.id
            ),
            "",
        ));
    }
}

fn show(rel: &str) -> &str {
    if rel.is_empty() {
        "the workspace root"
    } else {
        rel
    }
}

fn territory_refusal(
    t: &Territory,
    agent: &AgentId,
    rel: &str,
    why_no_override: Option<&OverrideError>,
    ttl: std::time::Duration,
) -> Refusal {
    let mut reason = format!(
        "{} belongs to {} ({}); {agent} does not own it",
        show(rel),
        t.owner_list(),
        t.name()
    );
    if let Some(OverrideError::NoneValid { rejections, .. }) = why_no_override {
        for r in rejections {
            reason.push_str(&format!("; override {} refused: {}", r.file, r.why));
        }
    }
    let owner = t.owners().first().map_or("its owner", AgentId::as_str);
    Refusal::new(
        t.name(),
        reason,
        format!(
            "hand the change to {owner} with the handoff tool, saying exactly what to change and why; or ask a person for a one-shot override (loopward override grant --agent {agent} --path {} --reason \"<why>\" --ttl {}) and make the same call again",
            show(rel),
            humantime::format_duration(ttl.min(std::time::Duration::from_secs(600)))
        ),
    )
}

impl Policy {
    /// The unit keys and files a call touches, for the sprawl gate. The plan itself is not work.
    fn unit_keys(
        &self,
        gates: &Gates,
        inv: &ToolInvocation,
        targets: &[(Option<String>, String)],
    ) -> (BTreeSet<String>, BTreeSet<String>) {
        let Some(sg) = &gates.sprawl else {
            return Default::default();
        };
        let mut keys = BTreeSet::new();
        let mut files = BTreeSet::new();
        // Resolved once per call (a link may move where the plan lands), not once per path.
        let plan = self.plan_rel(sg);
        for (_, rel) in targets {
            if Some(rel.as_str()) == plan.as_deref() {
                continue;
            }
            keys.insert(sg.unit_key(rel));
            files.insert(rel.clone());
        }
        if inv.call.name == "edit_file" && !keys.is_empty() {
            let old = inv.call.arguments.get("old").and_then(|v| v.as_str());
            let new = inv.call.arguments.get("new").and_then(|v| v.as_str());
            if let (Some(old), Some(new)) = (old, new) {
                keys.insert(format!("replace:{old}\u{0}{new}"));
            }
        }
        (keys, files)
    }

    fn sprawl_refusal(
        &self,
        gates: &Gates,
        sg: &SprawlGate,
        agent: &AgentId,
        touched: &[String],
        files: &BTreeSet<String>,
        n: usize,
    ) -> Refusal {
        let c = sg.config();
        let plan = &c.plan_path;
        let owner = gates
            .territories
            .iter()
            .find(|t| t.covers(plan) && !t.owned_by(agent) && t.mode() == GateMode::Enforce);
        let way = match owner {
            Some(t) => format!(
                "{plan} is in {}'s territory, so hand off to {} and ask for a plan there (its first line must start with {:?}); a plan written after the last human message clears this gate",
                t.owner_list(),
                t.owners().first().map_or("its owner", AgentId::as_str),
                c.marker
            ),
            None => format!(
                "write your plan to {plan} with write_file; its first line must start with {:?}. A plan written after the last human message clears this gate; then make this call again",
                c.marker
            ),
        };
        Refusal::new(
            "sprawl",
            format!(
                "this call would start unit of work #{n} this turn ({}) with no plan since the last human message; files touched so far: {}",
                files.iter().cloned().collect::<Vec<_>>().join(", "),
                touched.join(", ")
            ),
            format!("{way}. This gate refuses once per turn."),
        )
    }

    /// Where the plan lands (the configured path, links followed).
    pub(super) fn plan_rel(&self, sg: &SprawlGate) -> Option<String> {
        self.inner
            .workspace
            .resolve(&sg.config().plan_path)
            .ok()
            .map(|p| p.rel().to_string())
    }

    /// A successful write of the plan file whose first line has the marker counts as a plan,
    /// ordered after every human message recorded so far.
    pub(super) fn note_plan(&self, gates: &Gates, epochs: &Epochs, effects: &[Effect]) {
        let Some(sg) = &gates.sprawl else { return };
        let Some(plan) = self.plan_rel(sg) else {
            return;
        };
        let wrote = effects.iter().any(|e| {
            e.status == EffectStatus::Ok && e.path == *plan && !matches!(e.kind, EffectKind::Delete)
        });
        if !wrote {
            return;
        }
        let Ok(p) = self.inner.workspace.resolve(&plan) else {
            return;
        };
        if std::fs::symlink_metadata(p.abs()).is_ok_and(|m| m.is_file()) {
            if let Ok(text) = std::fs::read_to_string(p.abs()) {
                if sg.is_plan(&text) {
                    epochs.plan();
                }
            }
        }
    }

    /// Review gates on a `handoff` call.
    fn judge_handoff(&self, gates: &Gates, inv: &ToolInvocation) -> Result<(), ToolError> {
        let turn = &inv.turn;
        let agent = turn.agent();
        if turn.state().handoff.is_some() {
            // One handoff per turn decides first: the tool refuses it, naming the one that stands.
            return Ok(());
        }
        let effects = turn.effects();
        let to = inv.call.arguments.get("to").and_then(|v| v.as_str());
        if to.is_some_and(|to| {
            to == agent.as_str() || !turn.run().team().iter().any(|a| a.as_str() == to)
        }) {
            // Not a handoff a review gate judges: the tool refuses an unknown target or the
            // caller itself, and that is not a review decision.
            return Ok(());
        }
        let action = format!("handoff:{}", to.unwrap_or("?"));
        let verdicts: Vec<Verdict> =
            super::review::judge_handoff(&gates.reviews, agent, &effects, to)
                .into_iter()
                .map(|v| Verdict {
                    gate: v.gate.name().into(),
                    mode: v.gate.mode(),
                    path_raw: None,
                    path: None,
                    decision: v.decision,
                    needs: None,
                })
                .collect();
        for v in &verdicts {
            record(turn, &inv.call.id, &action, v)?;
        }
        match verdicts.into_iter().find(Verdict::denies) {
            Some(v) => Err(refused(v)),
            None => Ok(()),
        }
    }
}
