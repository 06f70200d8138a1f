//! The shell watch: a command is judged by what it changed. The workspace is recorded before
//! and after (see [`Snapshot`]); the engine judges the changes ([`Policy::judge_changes`]: links
//! made into a territory are writes there); forbidden changes are reverted and recorded as
//! violations, and the call's effects are the diff.

use super::engine::{ChangedPath, ShellAsk};
use super::layer::{audit, record_all};
use super::policy::{Gates, Policy, SANDBOX_GATE};
use super::refusals;
use super::snapshot::{MemoryStore, Snapshot};
use super::sprawl::RunSprawl;
use crate::layers::from_fn::NextTool;
use crate::sandbox::{
    kernel_support, Confinement, ConfinementSlot, Planned, Protected, SandboxError, SandboxMode,
};
use crate::tool::{ToolError, ToolInvocation, ToolOutput};
use loopward_core::{
    Action, AgentId, AuditEvent, Decision, GateId, GateKind, GateMode, Refusal, Remedy,
};
use std::sync::Arc;

impl Policy {
    /// Shell: snapshot, run, compare, revert what the caller may not change.
    pub(super) async fn run_exec(
        &self,
        next: NextTool,
        inv: ToolInvocation,
    ) -> Result<ToolOutput, ToolError> {
        let gates = self.gates();
        let turn = inv.turn.clone();
        // Made once: the command's decisions share them.
        let call_id: Arc<str> = inv.call.id.as_str().into();
        let action = Action::tool(inv.call.name.as_str());
        let agent = turn.agent().clone();
        let decision = |gate: GateKind, mode, d| AuditEvent::GateDecision {
            call_id: Some(Arc::clone(&call_id)),
            gate: GateId::of(gate),
            mode,
            action: action.clone(),
            path_raw: None,
            path: None,
            decision: d,
        };
        let planned = match self.confine(&gates, &agent).await {
            Ok(p) => p,
            Err(why) => {
                let r = Refusal::new(
                    SANDBOX_GATE,
                    format!("not run: {why}"),
                    "use the file tools instead; a person can fix the sandbox as the reason says",
                );
                let d = decision(
                    GateKind::Sandbox,
                    GateMode::Enforce,
                    Decision::Deny(r.clone()),
                );
                record_all(&turn, &[d])?;
                return Err(ToolError::Refused(r));
            }
        };
        let confined = match &planned {
            Planned::Confined(plan) if *plan.network() == crate::sandbox::Network::Host => decision(
                GateKind::Sandbox,
                GateMode::Advisory,
                Decision::Warn(Refusal::new(
                    SANDBOX_GATE,
                    "network: this command reaches any host; its connections are neither limited nor recorded",
                    "remove `isolate = false` from [net] to send commands out only through the egress proxy",
                )),
            ),
            Planned::Confined(_) => decision(GateKind::Sandbox, GateMode::Enforce, Decision::Allow),
            _ => decision(
                GateKind::Sandbox,
                GateMode::Advisory,
                Decision::Warn(Refusal::new(
                    SANDBOX_GATE,
                    "watch-only: this command runs without a kernel sandbox; its changes are only compared and reverted afterwards",
                    "remove `sandbox = \"watch-only\"` from [gates.shell] to contain commands",
                )),
            ),
        };
        record_all(&turn, &[confined])?;
        // The contents the watch may have to put back, for this call only.
        let store = Arc::new(MemoryStore::default());
        let before = match self.snapshot(&gates, &agent, &store).await {
            Ok(s) => s,
            Err(why) => {
                let r = refusals::unwatchable(&why);
                record_all(
                    &turn,
                    &[decision(
                        GateKind::ShellWatch,
                        GateMode::Enforce,
                        Decision::Deny(r.clone()),
                    )],
                )?;
                return Err(ToolError::Refused(r));
            }
        };
        record_all(
            &turn,
            &[decision(
                GateKind::ShellWatch,
                GateMode::Enforce,
                Decision::Allow,
            )],
        )?;
        let slot = turn.extensions().get_or_default::<ConfinementSlot>();
        slot.put(planned);
        let result = next.run(inv).await;
        // A tool that did not take it (not the shell tool) must not leave it to the next call.
        slot.take();
        if let Err(e) = &result {
            if e.is_fatal() {
                return result;
            }
        }
        let after = match self.snapshot(&gates, &agent, &store).await {
            Ok(s) => s,
            Err(why) => {
                turn.record_owned(AuditEvent::Violation {
                    path: String::new(),
                    remedy: Remedy::Unremedied {
                        why: "the workspace could not be compared".into(),
                    },
                    reason: why.clone(),
                })
                .map_err(audit)?;
                return Err(ToolError::Failed(format!(
                    "the command ran, but the workspace could not be compared afterwards ({why}); its changes are unchecked and were reported"
                )));
            }
        };
        let diff = before.diff(&after);
        let changes: Vec<ChangedPath> = diff
            .iter()
            .map(|c| {
                // The other ends of a link the command made, as the snapshot saw them.
                let mut ends = after.hard_links_of(&c.path);
                if after.is_link(&c.path) {
                    if let Ok(p) = self.inner.workspace.resolve(&c.path) {
                        ends.push(p.rel().to_string());
                    }
                }
                ChangedPath {
                    path: c.path.clone(),
                    kind: c.kind.clone(),
                    dir: after_is_dir(self.inner.workspace.root(), &c.path),
                    ends: Ok(ends),
                }
            })
            .collect();
        let judgement = self.judge_changes(&ShellAsk {
            agent: &agent,
            call_id: Some(&*call_id),
            action: &action,
            changes: &changes,
            clock: turn.run().clock(),
        });
        record_all(&turn, &judgement.events)?;
        let remedies: Vec<Option<Remedy>> = diff
            .iter()
            .zip(&judgement.refusals)
            .map(|(c, r)| {
                r.as_ref().map(
                    |_| match before.revert(self.inner.workspace.root(), c, &*store) {
                        Ok(()) => Remedy::Reverted,
                        Err(e) => Remedy::NotReverted { why: e.to_string() },
                    },
                )
            })
            .collect();
        let outcome = judgement.outcome(&changes, &remedies);
        record_all(&turn, &outcome.violations)?;
        {
            let sprawl = RunSprawl::of(turn.run(), self);
            let mut tracker = sprawl.lock();
            tracker.touch(&agent, judgement.work.clone());
            self.note_plan(&outcome.effects, &mut tracker);
        }
        let mut out = match result {
            Ok(o) => o,
            Err(e) => ToolOutput {
                content: e.to_string(),
                is_error: true,
                effects: vec![],
            },
        };
        out.effects = outcome.effects;
        if let Some(text) = outcome.message {
            out.is_error = true;
            out.content = format!("{}\n\n{text}", out.content);
        }
        Ok(out)
    }

    /// Plans the sandbox of `agent`'s command, or says why there can be none.
    async fn confine(&self, gates: &Gates, agent: &AgentId) -> Result<Planned, String> {
        if self.inner.shell.sandbox == SandboxMode::WatchOnly {
            return Ok(Planned::WatchOnly);
        }
        if let Some(why) = kernel_support().missing.clone() {
            return Err(SandboxError::Unsupported { why }.to_string());
        }
        let ws = self.inner.workspace.clone();
        let protected = Protected::for_agent(self.inner.control.clone(), &gates.territories, agent);
        let unreadable = self.inner.unreadable.clone();
        let reach = self.inner.reach.clone();
        tokio::task::spawn_blocking(move || Confinement::plan(&ws, &protected))
            .await
            .map_err(|e| format!("the sandbox planning task failed: {e}"))?
            .map(|plan| {
                let plan = unreadable
                    .into_iter()
                    .fold(plan.with_reach(reach), Confinement::with_unreadable);
                Planned::Confined(plan)
            })
            .map_err(|e| e.to_string())
    }

    async fn snapshot(
        &self,
        gates: &Gates,
        agent: &AgentId,
        store: &Arc<MemoryStore>,
    ) -> Result<Snapshot, String> {
        let store = store.clone();
        let root = self.inner.workspace.root().to_path_buf();
        // loopward's own ledgers are appended to while the command runs: never compared, never
        // put back (the sandbox keeps commands out of them; `verify` checks them).
        let mut skip = self.inner.shell.skip.clone();
        skip.extend(self.inner.control.runs_dir().map(str::to_string));
        let max = self.inner.shell.max_snapshot_bytes;
        let control = self.inner.control.clone();
        let territories = gates.territories.clone();
        let agent = agent.clone();
        tokio::task::spawn_blocking(move || {
            let keep = |p: &str| {
                control.covers(p)
                    || territories
                        .iter()
                        .any(|t| t.covers(p) && !t.owned_by(&agent))
            };
            Snapshot::take(&root, &skip, max, &keep, &*store).map_err(|e| e.to_string())
        })
        .await
        .map_err(|e| format!("the snapshot task failed: {e}"))?
    }
}

fn after_is_dir(root: &std::path::Path, rel: &str) -> bool {
    std::fs::symlink_metadata(root.join(rel)).is_ok_and(|m| m.is_dir())
}
