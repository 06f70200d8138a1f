//! Recording a layer's decision in the run's ledger.

use crate::context::TurnContext;
use loopward_core::{AuditError, AuditEvent, LayerDetail, LayerId, LayerVerdict};

/// Records `LayerDecision { layer, decision, detail }` for a turn, handing the event to the
/// sink (a typed detail is serialised only if the sink writes it).
pub(crate) fn decision(
    turn: &TurnContext,
    layer: LayerId,
    decision: LayerVerdict,
    detail: impl Into<LayerDetail>,
) -> Result<(), AuditError> {
    turn.record_owned(AuditEvent::LayerDecision {
        layer,
        decision,
        detail: detail.into(),
    })
}
