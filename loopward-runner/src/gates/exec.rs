//! The runner's `shell` tool under the shell watch ([`ShellWatch`](super::ShellWatch)): the
//! sandbox planned in this process and left for the tool in the turn's [`ConfinementSlot`], the
//! kept contents in memory for the length of the call, a blinded call's baseline in the run's
//! memory.

use super::layer::audit;
use super::policy::Policy;
use super::snapshot::MemoryStore;
use super::sprawl::RunSprawl;
use super::unchecked::{RunUnchecked, Unchecked};
use super::watch::Contained;
use crate::layers::from_fn::NextTool;
use crate::sandbox::{Confinement, ConfinementSlot, Planned, Protected};
use crate::tool::{ToolError, ToolInvocation, ToolOutput};
use loopward_core::{Action, AgentId, CallId};
use std::sync::Arc;

impl Policy {
    /// Shell: contain, record, run, compare, put back what the caller may not change.
    pub(super) async fn run_exec(
        &self,
        next: NextTool,
        inv: ToolInvocation,
    ) -> Result<ToolOutput, ToolError> {
        let turn = inv.turn.clone();
        let call_id = inv.call.id.clone();
        let action = Action::tool(inv.call.name.clone());
        let agent = turn.agent().clone();
        let watch = self.shell_watch(&agent, &call_id, &action);
        let mut record = |e: &loopward_core::AuditEvent| turn.record(e);
        // Planned before the watch decides (it may block on the disk); asked for only when
        // the config wants the kernel.
        let plan = if watch.wants_kernel() {
            Some(self.plan_sandbox(&agent).await)
        } else {
            None
        };
        let planned = match watch
            .contain(|| plan.unwrap_or(Err(String::new())), &mut record)
            .map_err(audit)?
        {
            Ok(Contained::Kernel(plan)) => {
                if *plan.network() == crate::sandbox::Network::Host {
                    watch.network_open(&mut record).map_err(audit)?;
                }
                Planned::Confined(plan)
            }
            Ok(Contained::WatchOnly) => Planned::WatchOnly,
            Err(r) => return Err(ToolError::Refused(r)),
        };
        // The contents the watch may have to put back, for this call only.
        let store = Arc::new(MemoryStore::default());
        let kept = Arc::clone(&store);
        let taken = blocking(
            move |w| w.take_before(&*kept),
            self,
            &agent,
            &call_id,
            &action,
        )
        .await;
        let before = match watch.record_before(taken, &mut record).map_err(audit)? {
            Ok(s) => s,
            Err(r) => return Err(ToolError::Refused(r)),
        };
        let slot = turn.extensions().get_or_default::<ConfinementSlot>();
        slot.put(planned);
        let tool_name = inv.call.name.clone();
        let result = next.run(inv).await;
        // A tool that did not take it (not the shell tool) must not leave it to the next call.
        slot.take();
        if let Err(e) = &result {
            if e.is_fatal() {
                return result;
            }
        }
        let after = match blocking(move |w| w.after(), self, &agent, &call_id, &action).await {
            Ok(s) => s,
            Err(why) => {
                // Blinded: the record from before stays the baseline (see `unchecked.rs`).
                let unchecked = Unchecked {
                    before,
                    call_id: call_id.clone(),
                    agent: agent.clone(),
                    tool: tool_name,
                    path: why.path().to_string(),
                    why: why.to_string(),
                };
                turn.record_owned(unchecked.violation()).map_err(audit)?;
                RunUnchecked::of(&turn).put(unchecked, store);
                return Err(ToolError::Failed(watch.blinded(&why.to_string())));
            }
        };
        let judged = watch
            .judge(
                &before,
                &after,
                &before.diff(&after),
                &*store,
                turn.run().clock(),
                &mut record,
            )
            .map_err(audit)?;
        {
            let sprawl = RunSprawl::of(turn.run(), self);
            let mut tracker = sprawl.lock();
            tracker.touch(&agent, judged.judgement.work);
            self.note_plan(&judged.outcome.effects, &mut tracker);
        }
        let mut out = match result {
            Ok(o) => o,
            Err(e) => ToolOutput {
                content: e.to_string(),
                is_error: true,
                effects: vec![],
            },
        };
        out.effects = judged.outcome.effects;
        if let Some(text) = judged.outcome.message {
            out.is_error = true;
            out.content = format!("{}\n\n{text}", out.content);
        }
        Ok(out)
    }

    /// Plans the kernel sandbox of `agent`'s command, or says why there can be none.
    async fn plan_sandbox(&self, agent: &AgentId) -> Result<Confinement, String> {
        let ws = self.inner.workspace.clone();
        let gates = self.gates();
        let protected = Protected::for_agent(self.inner.control.clone(), &gates.territories, agent);
        let unreadable = self.inner.unreadable.clone();
        let reach = self.inner.reach.clone();
        tokio::task::spawn_blocking(move || Confinement::plan(&ws, &protected))
            .await
            .map_err(|e| format!("the sandbox planning task failed: {e}"))?
            .map(|plan| {
                unreadable
                    .into_iter()
                    .fold(plan.with_reach(reach), Confinement::with_unreadable)
            })
            .map_err(|e| e.to_string())
    }
}

/// Runs a step of the watch that reads the whole workspace off the async threads.
pub(super) async fn blocking<T: Send + 'static>(
    step: impl FnOnce(super::ShellWatch<'_>) -> T + Send + 'static,
    policy: &Policy,
    agent: &AgentId,
    call_id: &CallId,
    action: &Action,
) -> T {
    let (policy, agent, call_id, action) = (
        policy.clone(),
        agent.clone(),
        call_id.clone(),
        action.clone(),
    );
    let run = move || step(policy.shell_watch(&agent, &call_id, &action));
    match tokio::task::spawn_blocking(run).await {
        Ok(t) => t,
        Err(e) => std::panic::resume_unwind(e.into_panic()),
    }
}
