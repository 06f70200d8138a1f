//! The runner's adapter to the policy engine: a tower layer in the tool stack. Each call is an
//! [`Ask`] (its agent and declared accesses); the judgement's events are recorded before the
//! call runs, and a denial becomes the refused tool result the model reads. Shell calls
//! (`Access::Exec`) go to the watch ([`Policy::judge_changes`] on what they changed). A record
//! that fails stops the call ([`ToolError::Audit`]).

use super::engine::Ask;
use super::policy::Policy;
use super::sprawl::RunSprawl;
use crate::context::{RunContext, TurnContext};
use crate::layers::from_fn::{from_fn, FromFn, FromFnLayer, LayerFn, NextTool};
use crate::tool::{Access, BoxToolService, ToolError, ToolInvocation, ToolOutput};
use futures::future::BoxFuture;
use loopward_core::{Action, AuditEvent, LayerId, LayerVerdict};
use std::sync::{Arc, Mutex, PoisonError};

/// Wraps a tool stack with the policy gates; the layer is its policy (see
/// [`from_fn`](crate::layers::from_fn)).
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
pub type PolicyLayer = FromFnLayer<Policy>;

impl PolicyLayer {
    /// A layer running `policy`'s gates.
    pub fn new(policy: Policy) -> Self {
        from_fn(policy)
    }

    /// Wraps a boxed stack, returning a boxed stack.
    pub fn wrap(&self, inner: BoxToolService) -> BoxToolService {
        BoxToolService::new(tower::Layer::layer(self, inner))
    }
}

/// The service [`PolicyLayer`] builds: the [`Policy`] is the layer's policy.
pub type PolicyService<S> = FromFn<Policy, S>;

impl LayerFn<ToolInvocation, ToolOutput, ToolError> for Policy {
    type Future = BoxFuture<'static, Result<ToolOutput, ToolError>>;

    fn call(&mut self, inv: ToolInvocation, next: NextTool) -> Self::Future {
        let policy = self.clone();
        Box::pin(async move { policy.run_call(next, inv).await })
    }
}

pub(super) fn audit(e: loopward_core::AuditError) -> ToolError {
    ToolError::Audit(e)
}

/// Records `events` in order in `turn`'s ledger; the first failure stops the call.
pub(super) fn record_all(turn: &TurnContext, events: &[AuditEvent]) -> Result<(), ToolError> {
    events
        .iter()
        .try_for_each(|e| turn.record(e).map_err(audit))
}

/// The policy version a run's ledger last noted.
#[derive(Default)]
struct NotedVersion(Mutex<Option<Arc<str>>>);

/// Seeds the version a run's ledger last noted from its `records`, for a run another process
/// takes up (Restate's replay on another worker): the version is noted again only if it
/// changed, so a replayed call makes the records the first execution made, and no other.
pub(crate) fn seed_noted_version(run: &RunContext, records: &[(loopward_core::Scope, AuditEvent)]) {
    let last = records.iter().rev().find_map(|(_, e)| match e {
        AuditEvent::LayerDecision {
            layer: LayerId::Policy,
            detail,
            ..
        } => detail
            .as_policy_version()
            .map(|p| Arc::from(p.version.as_str())),
        _ => None,
    });
    run.extensions()
        .get_or_insert_with(|| NotedVersion(Mutex::new(last)));
}

impl Policy {
    /// Notes the policy's version in the run's ledger before the first call it judges in this
    /// process, and again whenever it changed: every decision after it was made under it (a
    /// `layer_decision` of layer `policy`, `{"version": …}`, as a hook session records it).
    fn note_version(&self, run: &RunContext) -> Result<(), ToolError> {
        let version = self.version();
        let noted = run.extensions().get_or_insert_with(NotedVersion::default);
        let mut last = noted.0.lock().unwrap_or_else(PoisonError::into_inner);
        if last.as_deref() == Some(&*version) {
            return Ok(());
        }
        run.record_owned(AuditEvent::LayerDecision {
            layer: LayerId::Policy,
            decision: LayerVerdict::Observed,
            detail: loopward_core::LayerDetail::PolicyVersion(loopward_core::PolicyVersionDetail {
                version: version.to_string(),
            }),
        })
        .map_err(audit)?;
        *last = Some(version);
        Ok(())
    }

    async fn run_call(&self, next: NextTool, inv: ToolInvocation) -> Result<ToolOutput, ToolError> {
        self.note_version(inv.turn.run())?;
        // A blinded command's changes are judged before anything else can write.
        if inv
            .accesses
            .iter()
            .any(|a| matches!(a, Access::Exec) || !a.written_paths().is_empty())
        {
            let action = Action::tool(inv.call.name.clone());
            self.settle_unchecked(&inv.turn, &inv.call.id, &action)
                .await?;
        }
        if inv.accesses.iter().any(|a| matches!(a, Access::Exec)) {
            // A command can change any link, also while it runs.
            super::plan_cache::links_may_have_changed();
            let out = self.run_exec(next, inv).await;
            super::plan_cache::links_may_have_changed();
            return out;
        }
        let turn = inv.turn.clone();
        let agent = turn.agent().clone();
        // Made once: every decision on the call shares it.
        let action = Action::tool(inv.call.name.clone());
        // The turn's effects arm the review gates, which judge handoffs only: copied for one.
        let hands_off = inv
            .accesses
            .iter()
            .any(|a| matches!(a, Access::Handoff { .. }));
        let effects = if hands_off {
            turn.effects()
        } else {
            Vec::new()
        };
        let ask = Ask {
            agent: &agent,
            call_id: Some(&inv.call.id),
            action: &action,
            accesses: &inv.accesses,
            effects: &effects,
            handoff_stands: turn.state().handoff.is_some(),
            team: turn.run().team(),
            clock: turn.run().clock(),
        };
        let sprawl = RunSprawl::of(turn.run(), self);
        let mut judgement = self.judge(&ask, &mut sprawl.lock());
        for e in std::mem::take(&mut judgement.events) {
            turn.record_owned(e).map_err(audit)?;
        }
        if let Some(r) = judgement.denial {
            return Err(ToolError::Refused(r));
        }
        let moves_plan = self.may_move_plan(&inv.accesses);
        let out = next.run(inv).await;
        if moves_plan {
            super::plan_cache::links_may_have_changed();
        }
        let out = out?;
        if !out.is_error {
            let mut tracker = sprawl.lock();
            tracker.touch(&agent, judgement.work);
            self.note_plan(&out.effects, &mut tracker);
        }
        Ok(out)
    }
}
