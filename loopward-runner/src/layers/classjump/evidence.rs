//! The tool layer that counts failed tool results toward class-jump, reported or not.

use super::tracker::ClassJump;
use crate::layers::from_fn::{from_fn, layer_fn, FromFn, FromFnLayer, NextTool};
use crate::tool::{ToolError, ToolInvocation, ToolOutput};

/// Counts each failed result (an error result, a failure, a timeout) of a counted tool as a
/// failed attempt of the caller's current strategy, and tells the model the verdict in the
/// same result. Refusals by gates are not attempts and are not counted. The layer is its
/// policy (see [`from_fn`](crate::layers::from_fn)).
pub type EvidenceLayer = FromFnLayer<EvidencePolicy>;

impl ClassJump {
    /// The tool layer that counts failed results of the configured tools
    /// (`count_failed_tools`).
    pub fn evidence_layer(&self) -> EvidenceLayer {
        from_fn(EvidencePolicy {
            tracker: self.clone(),
        })
    }
}

/// See [`EvidenceLayer`].
pub type EvidenceService<S> = FromFn<EvidencePolicy, S>;

/// The evidence layer's policy: after a counted tool's call, a failed result is a failed
/// attempt of the caller's strategy, and the verdict is added to the result.
#[derive(Clone, Debug)]
pub struct EvidencePolicy {
    tracker: ClassJump,
}

layer_fn!(EvidencePolicy, tool_call(ToolInvocation) -> Result<ToolOutput, ToolError>);

impl EvidencePolicy {
    async fn tool_call(self, inv: ToolInvocation, next: NextTool) -> Result<ToolOutput, ToolError> {
        let Self { tracker } = self;
        let turn = inv.turn.clone();
        let tool = inv.call.name.clone();
        let result = next.run(inv).await;
        if !tracker.counts(&tool) {
            return result;
        }
        let failed = match &result {
            Ok(out) => out.is_error,
            Err(ToolError::Failed(_) | ToolError::Timeout { .. }) => true,
            Err(_) => false,
        };
        if !failed {
            return result;
        }
        let verdict = tracker
            .observe_failure(&turn, &tool)
            .map_err(ToolError::Audit)?;
        let note = format!(
            "\n[class-jump, counted from this failed result] {}",
            verdict.message()
        );
        match result {
            Ok(mut out) => {
                out.content.push_str(&note);
                Ok(out)
            }
            Err(e) => Err(ToolError::Failed(format!("{e}{note}"))),
        }
    }
}
