//! A loop's sessions as its ledger recorded them, for `loopward replay`: a [`CliAgent`] given
//! them runs no client and no verifier; it records each turn's session and verification as they
//! were, charges the cost they reported, and judges them again (verify, repeat, class-jump) with
//! the same code, so the replay compares the loop's decisions.
//!
//! [`CliAgent`]: super::CliAgent

use loopward_core::{AuditEvent, Scope};
use std::collections::BTreeMap;

/// The records of each turn that the agent made itself (its session, the model calls inside,
/// the reported cost, the hook ledger's link, the verification and its judgement), by turn.
#[derive(Debug, Default)]
pub struct RecordedSessions {
    turns: BTreeMap<u32, Vec<AuditEvent>>,
}

/// The layers whose decisions a CLI agent records itself.
const OWN_LAYERS: [&str; 5] = ["session", "session_ledger", "resume", "budget", "verify"];

impl RecordedSessions {
    /// Takes them from one part of a run's records (from its start or a resume to the next).
    pub fn from_records(records: &[(Scope, AuditEvent)]) -> Self {
        let mut turns: BTreeMap<u32, Vec<AuditEvent>> = BTreeMap::new();
        for (scope, e) in records {
            let Some(turn) = scope.turn else { continue };
            let own = match e {
                AuditEvent::ToolRequested { tool, .. }
                | AuditEvent::ToolStarted { tool, .. }
                | AuditEvent::ToolFinished { tool, .. } => {
                    tool == super::agent::TOOL || tool == super::agent::VERIFY
                }
                AuditEvent::ModelCall { .. } | AuditEvent::ModelReply { .. } => true,
                // The budget's own verdicts (spent) are the turn layer's, not the agent's.
                AuditEvent::LayerDecision { layer, detail, .. } if layer == "budget" => detail
                    .to_json()
                    .get(crate::layers::budget::REPORTED)
                    .is_some(),
                AuditEvent::LayerDecision { layer, .. } => OWN_LAYERS.contains(&layer.as_ref()),
                _ => false,
            };
            if own {
                turns.entry(turn.0).or_default().push(e.clone());
            }
        }
        Self { turns }
    }

    /// The recorded records of turn `n`, if it has any.
    pub(crate) fn turn(&self, n: u32) -> Option<&[AuditEvent]> {
        self.turns.get(&n).map(Vec::as_slice)
    }
}
