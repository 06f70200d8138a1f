//! Recording a layer's decision in the run's ledger.

use crate::context::TurnContext;
use loopward_core::{AuditError, AuditEvent, LayerVerdict};

/// Records `LayerDecision { layer, decision, detail }` for a turn.
pub(crate) fn decision(
    turn: &TurnContext,
    layer: &str,
    decision: LayerVerdict,
    detail: serde_json::Value,
) -> Result<(), AuditError> {
    turn.record(&AuditEvent::LayerDecision {
        layer: layer.into(),
        decision,
        detail,
    })
}
