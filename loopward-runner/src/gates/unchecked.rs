//! When the watch is blinded: a call whose changes could not be compared moves no baseline.
//!
//! The watch compares a record taken before a call with one taken after. [`Snapshot::take`] is
//! built not to be blinded by what an agent can make in a free folder: a file too big for the
//! byte budget, unreadable or growing while it is read is compared by its size, inode, mode and
//! times instead of its content, and watched files (territories, control files) are read
//! first, so a huge file elsewhere cannot leave a territory file unchecked. What still blinds it
//! is what leaves it unable to know the workspace at all: a folder that cannot be listed, more
//! than [`MAX_SNAPSHOT_PATHS`](super::MAX_SNAPSHOT_PATHS) paths (and, before a call, a watched
//! file too big or unreadable to keep — the call is then refused, naming it).
//!
//! When the record after a call fails, the record from before it stays the baseline, with the
//! call's id and agent ([`Unchecked`]): the runner keeps it in the run's memory, the hook in the
//! session folder. A violation names the path that blinded it and says what is unchecked. The
//! next call that can write (a command or a file tool; in the hook, any watched call) first
//! compares the workspace with that baseline: each change is judged as the blinded call's,
//! put back from the baseline's kept contents when it may not stand, and recorded. Until that
//! comparison can be made, every such call is refused, naming the path that still blinds the
//! watch: a person (or the agent, removing what it made) must act. So nothing a blinded call did
//! becomes the normal state unjudged: a changed mode, a link into a territory, a rewritten file.
//!
//! What this leaves: between the blinded call and the next comparison the changes stand (the
//! kernel sandbox still kept the command out of other agents' territories and loopward's
//! files); and a change the blinded call made that a person then undoes is never seen.

use super::layer::record_all;
use super::policy::Policy;
use super::snapshot::{MemoryStore, Snapshot};
use crate::context::TurnContext;
use crate::tool::ToolError;
use loopward_core::{
    Action, AgentId, AuditEvent, CallId, Decision, GateId, GateKind, GateMode, Refusal, Remedy,
    ToolName,
};
use serde::{Deserialize, Serialize};
use std::sync::{Arc, Mutex};

/// How many watched paths a violation names before it counts the rest.
const NAMED: usize = 8;

/// A call whose changes could not be compared, and the record from before it, which stays the
/// baseline until the workspace can be compared with it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Unchecked {
    /// The record taken before the call (its kept contents are in the adapter's store).
    pub before: Snapshot,
    /// The call's id.
    pub call_id: CallId,
    /// Whose call it was.
    pub agent: AgentId,
    /// Its tool (`shell`, `Bash`, `Write`, …).
    pub tool: ToolName,
    /// The workspace path that made the comparison fail (`.`: the workspace itself).
    pub path: String,
    /// Why it failed.
    pub why: String,
}

impl Unchecked {
    /// The violation recorded when the call's changes could not be compared: it names the
    /// path that blinded the watch and the watched paths left unchecked.
    pub fn violation(&self) -> AuditEvent {
        let watched: Vec<&str> = self.before.kept_paths().collect();
        let named = match watched.len() {
            0 => "every path a territory or control file covers (none existed before the call)"
                .to_string(),
            n if n <= NAMED => format!(
                "every path a territory or control file covers: {}",
                watched.join(", ")
            ),
            n => format!(
                "every path a territory or control file covers: {}, … ({n} in all)",
                watched[..NAMED].join(", ")
            ),
        };
        AuditEvent::Violation {
            path: self.path.clone(),
            remedy: Remedy::Unremedied {
                why: format!(
                    "the changes of call {} could not be compared; the record from before it stays the baseline, and the workspace is compared with it (what may not stand put back) as soon as it can be",
                    self.call_id
                ),
            },
            reason: format!("{}; unchecked until then: {named}", self.why),
        }
    }

    /// What a call that would write is told while the workspace still cannot be compared with
    /// this baseline (`why`: what blinds the watch now).
    pub fn refusal(&self, why: &str) -> Refusal {
        Refusal::new(
            loopward_core::GateKind::ShellWatch,
            format!(
                "not run: the changes of an earlier call ({} by {}) are still unchecked, and the workspace cannot be compared yet ({why})",
                self.call_id, self.agent
            ),
            "a person must fix what the reason names (commands and writes are refused until then; reads still run)",
        )
    }
}

/// The run's blinded call, if any, with the contents its baseline kept (the runner's side).
#[derive(Debug, Default)]
pub(crate) struct RunUnchecked(Mutex<Option<(Unchecked, Arc<MemoryStore>)>>);

impl RunUnchecked {
    /// The slot of the run `turn` belongs to.
    pub(crate) fn of(turn: &TurnContext) -> Arc<Self> {
        turn.run().extensions().get_or_default::<Self>()
    }

    /// Keeps `unchecked` (and the store of its baseline) until it is compared.
    pub(crate) fn put(&self, unchecked: Unchecked, store: Arc<MemoryStore>) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = Some((unchecked, store));
    }

    fn take(&self) -> Option<(Unchecked, Arc<MemoryStore>)> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

impl Policy {
    /// Before a call that can write (`call_id`, `action`): when an earlier call of the run was
    /// blinded, compares the workspace with the baseline it left and judges what changed as that
    /// call's (put back what may not stand, recorded under its id). While the workspace still
    /// cannot be compared, the call is refused and the baseline kept.
    pub(super) async fn settle_unchecked(
        &self,
        turn: &TurnContext,
        call_id: &CallId,
        action: &Action,
    ) -> Result<(), ToolError> {
        // Looked up, not made: a run that was never blinded pays one map lookup a call.
        let Some(slot) = turn.run().extensions().get::<RunUnchecked>() else {
            return Ok(());
        };
        let Some((unchecked, store)) = slot.take() else {
            return Ok(());
        };
        let action_of = Action::tool(unchecked.tool.clone());
        let watch = self.shell_watch(&unchecked.agent, &unchecked.call_id, &action_of);
        let (agent, id) = (unchecked.agent.clone(), unchecked.call_id.clone());
        let now = super::exec::blocking(|w| w.after(), self, &agent, &id, &action_of).await;
        let now = match now {
            Ok(s) => s,
            Err(why) => {
                let r = unchecked.refusal(&why.to_string());
                slot.put(unchecked, store);
                record_all(
                    turn,
                    &[AuditEvent::GateDecision {
                        call_id: Some(call_id.clone()),
                        gate: GateId::of(GateKind::ShellWatch),
                        mode: GateMode::Enforce,
                        action: action.clone(),
                        path_raw: None,
                        source: None,
                        path: None,
                        decision: Decision::Deny(r.clone()),
                    }],
                )?;
                return Err(ToolError::Refused(r));
            }
        };
        let before = &unchecked.before;
        watch
            .judge(
                before,
                &now,
                &before.diff(&now),
                &*store,
                turn.run().clock(),
                &mut |e| turn.record(e),
            )
            .map_err(super::layer::audit)?;
        Ok(())
    }
}
