//! The innermost tool service: runs the tool.

use super::{ToolError, ToolInvocation, ToolOutput};
use loopward_core::AuditEvent;

/// Runs a [`ToolInvocation`]'s tool. Every tool stack ends here.
///
/// Just before the tool runs, it records [`AuditEvent::ToolStarted`] and commits the audit sink
/// (the decisions that let the call through are on disk before its effect begins; if they
/// cannot be, the tool does not run): every gate has let the call through and its effect begins. A resumed run reads a call with that record and no end
/// as interrupted (its effect may or may not have happened); a call without it never started. A
/// tool that can release its effect later than that records the start itself
/// ([`Tool::records_own_start`](super::Tool::records_own_start)).
#[derive(Clone, Copy, Debug, Default)]
pub struct ToolExecutor;

crate::leaf_service!(ToolExecutor: ToolInvocation => Result<ToolOutput, ToolError>, |_, inv| {
    if !inv.tool.records_own_start() {
        // The start, and every decision that let the call through, are durable before the
        // effect begins: one sync for all of them.
        let started = inv
            .turn
            .record_owned(AuditEvent::ToolStarted {
                call_id: inv.call.id.clone(),
                tool: inv.call.name.clone(),
            })
            .and_then(|()| inv.turn.commit());
        if let Err(e) = started {
            return Box::pin(std::future::ready(Err(ToolError::Audit(e))));
        }
    }
    let tool = inv.tool.clone();
    tool.call(inv)
});
