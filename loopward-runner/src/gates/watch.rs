//! The shell watch: a command is judged by what it changed. The workspace is recorded before
//! and after (see [`Snapshot`]); each change is judged like a file tool's write (links made into
//! a territory are writes there); forbidden changes are reverted and recorded as violations, and
//! the call's effects are the diff.

use super::layer::{audit, record, refused, unused_override, Verdict};
use super::policy::{Gates, Policy, SANDBOX_GATE, SHELL_GATE};
use super::snapshot::{Change, Snapshot};
use super::sprawl::{Epochs, SprawlState};
use crate::context::TurnContext;
use crate::sandbox::{
    kernel_support, Confinement, ConfinementSlot, Planned, Protected, SandboxError, SandboxMode,
};
use crate::tool::{ToolError, ToolInvocation, ToolOutput};
use loopward_core::{
    AgentId, AuditEvent, Decision, Effect, EffectKind, EffectStatus, GateMode, Refusal,
};
use std::collections::BTreeSet;
use tower::ServiceExt;

impl Policy {
    /// Shell: snapshot, run, compare, revert what the caller may not change.
    pub(super) async fn run_exec<S>(
        &self,
        gates: &Gates,
        inner: S,
        inv: ToolInvocation,
    ) -> Result<ToolOutput, ToolError>
    where
        S: tower::Service<ToolInvocation, Response = ToolOutput, Error = ToolError>
            + Send
            + 'static,
        S::Future: Send + 'static,
    {
        let turn = inv.turn.clone();
        let call_id = inv.call.id.clone();
        let action = format!("tool:{}", inv.call.name);
        let agent = turn.agent().clone();
        let planned = match self.confine(gates, &agent).await {
            Ok(p) => p,
            Err(why) => {
                let v = Verdict {
                    gate: SANDBOX_GATE.into(),
                    mode: GateMode::Enforce,
                    path_raw: None,
                    path: None,
                    decision: Decision::Deny(Refusal::new(
                        SANDBOX_GATE,
                        format!("not run: {why}"),
                        "use the file tools instead; a person can fix the sandbox as the reason says",
                    )),
                    needs: None,
                };
                record(&turn, &call_id, &action, &v)?;
                return Err(refused(v));
            }
        };
        record(
            &turn,
            &call_id,
            &action,
            &Verdict {
                gate: SANDBOX_GATE.into(),
                mode: match planned {
                    Planned::Confined(_) => GateMode::Enforce,
                    _ => GateMode::Advisory,
                },
                path_raw: None,
                path: None,
                decision: match planned {
                    Planned::Confined(_) => Decision::Allow,
                    _ => Decision::Warn(Refusal::new(
                        SANDBOX_GATE,
                        "watch-only: this command runs without a kernel sandbox; its changes are only compared and reverted afterwards",
                        "remove `sandbox = \"watch-only\"` from [gates.shell] to contain commands",
                    )),
                },
                needs: None,
            },
        )?;
        let before = self.snapshot(gates, &agent).await;
        let before = match before {
            Ok(s) => s,
            Err(why) => {
                let v = Verdict {
                    gate: SHELL_GATE.into(),
                    mode: GateMode::Enforce,
                    path_raw: None,
                    path: None,
                    decision: Decision::Deny(Refusal::new(
                        SHELL_GATE,
                        format!("not run: the workspace could not be recorded before the command, so its changes could not be checked ({why})"),
                        "use the file tools instead, or ask a person to list big generated folders under [gates.shell] skip",
                    )),
                    needs: None,
                };
                record(&turn, &call_id, &action, &v)?;
                return Err(refused(v));
            }
        };
        record(
            &turn,
            &call_id,
            &action,
            &Verdict {
                gate: SHELL_GATE.into(),
                mode: GateMode::Enforce,
                path_raw: None,
                path: None,
                decision: Decision::Allow,
                needs: None,
            },
        )?;
        let slot = turn.extensions().get_or_default::<ConfinementSlot>();
        slot.put(planned);
        let result = inner.oneshot(inv).await;
        // A tool that did not take it (not the shell tool) must not leave it to the next call.
        slot.take();
        if let Err(e) = &result {
            if e.is_fatal() {
                return result;
            }
        }
        let after = match self.snapshot(gates, &agent).await {
            Ok(s) => s,
            Err(why) => {
                turn.record(&AuditEvent::Violation {
                    path: String::new(),
                    remedy: "none: the workspace could not be compared".into(),
                    reason: why.clone(),
                })
                .map_err(audit)?;
                return Err(ToolError::Failed(format!(
                    "the command ran, but the workspace could not be compared afterwards ({why}); its changes are unchecked and were reported"
                )));
            }
        };
        let changes = before.diff(&after);
        let epochs = turn.run().extensions().get_or_default::<Epochs>();
        let mut verdicts = Vec::new();
        for c in &changes {
            let mut v = self.judge_path(gates, &agent, turn.run().clock(), None, &c.path);
            if !v.denies() && c.kind != EffectKind::Delete {
                // A link the command made into a territory is a write there.
                if let Some(mut w) = self.judge_link(gates, &agent, &turn, &after, &c.path) {
                    w.path = Some(c.path.clone());
                    v = w;
                }
            }
            if v.needs.is_some() {
                self.consume(&turn, &agent, &mut v)?;
            }
            record(&turn, &call_id, &action, &v)?;
            verdicts.push(v);
        }
        let mut effects = Vec::new();
        let mut reverted = Vec::new();
        let mut failures = Vec::new();
        let mut first_refusal: Option<Refusal> = None;
        for (c, v) in changes.iter().zip(&verdicts) {
            let status = if let Decision::Deny(r) = &v.decision {
                let remedy = match before.revert(self.inner.workspace.root(), c) {
                    Ok(()) => {
                        reverted.push(c.path.clone());
                        crate::audit::REMEDY_REVERTED.to_string()
                    }
                    Err(e) => {
                        failures.push(format!("{}: {e}", c.path));
                        format!("not reverted: {e}")
                    }
                };
                turn.record(&AuditEvent::Violation {
                    path: c.path.clone(),
                    remedy,
                    reason: r.reason.clone(),
                })
                .map_err(audit)?;
                first_refusal.get_or_insert_with(|| r.clone());
                EffectStatus::Reverted
            } else {
                EffectStatus::Ok
            };
            effects.push(Effect {
                path: c.path.clone(),
                kind: c.kind.clone(),
                status,
            });
        }
        let kept: Vec<&Change> = changes
            .iter()
            .zip(&effects)
            .filter(|(_, e)| e.status == EffectStatus::Ok)
            .map(|(c, _)| c)
            .collect();
        if let Some(sg) = &gates.sprawl {
            let mut keys = BTreeSet::new();
            let mut files = BTreeSet::new();
            let plan = self.plan_rel(sg);
            for c in &kept {
                let is_dir = after_is_dir(self.inner.workspace.root(), &c.path);
                if Some(c.path.as_str()) != plan.as_deref() && !is_dir {
                    keys.insert(sg.unit_key(&c.path));
                    files.insert(c.path.clone());
                }
            }
            turn.run()
                .extensions()
                .get_or_default::<SprawlState>()
                .touch(&agent, &epochs, keys, files);
        }
        self.note_plan(gates, &epochs, &effects);
        let mut out = match result {
            Ok(o) => o,
            Err(e) => ToolOutput {
                content: e.to_string(),
                is_error: true,
                effects: vec![],
            },
        };
        out.effects = effects;
        if let Some(r) = first_refusal {
            out.is_error = true;
            let mut text = format!(
                "{}\n\nrefused by {}: the command changed paths you may not change, and those changes were reverted: {}. {}",
                out.content,
                r.gate,
                reverted.join(", "),
                r.reason
            );
            if !failures.is_empty() {
                text.push_str(&format!(
                    " Some could not be reverted and were reported: {}.",
                    failures.join("; ")
                ));
            }
            text.push_str(&format!("\nWhat to do: {}", r.hint));
            out.content = text;
        }
        Ok(out)
    }

    /// When `path` is (after the command) a symbolic or hard link whose other end the caller may
    /// not write, the denial that other end gets.
    fn judge_link(
        &self,
        gates: &Gates,
        agent: &AgentId,
        turn: &TurnContext,
        after: &Snapshot,
        path: &str,
    ) -> Option<Verdict> {
        let mut ends = after.hard_links_of(path);
        if after.is_link(path) {
            if let Ok(p) = self.inner.workspace.resolve(path) {
                ends.push(p.rel().to_string());
            }
        }
        ends.into_iter()
            .filter(|end| end != path)
            .map(|end| {
                let mut v = self.judge_path(gates, agent, turn.run().clock(), None, &end);
                unused_override(
                    &mut v,
                    "the link rule (a link is not the write an override authorises)",
                );
                v
            })
            .find(Verdict::denies)
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
        tokio::task::spawn_blocking(move || Confinement::plan(&ws, &protected))
            .await
            .map_err(|e| format!("the sandbox planning task failed: {e}"))?
            .map(Planned::Confined)
            .map_err(|e| e.to_string())
    }

    async fn snapshot(&self, gates: &Gates, agent: &AgentId) -> Result<Snapshot, String> {
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
            Snapshot::take(&root, &skip, max, &keep).map_err(|e| e.to_string())
        })
        .await
        .map_err(|e| format!("the snapshot task failed: {e}"))?
    }
}

fn after_is_dir(root: &std::path::Path, rel: &str) -> bool {
    std::fs::symlink_metadata(root.join(rel)).is_ok_and(|m| m.is_dir())
}
