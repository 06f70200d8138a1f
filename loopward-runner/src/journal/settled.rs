//! What a layer of the embedding application rebuilds its state from on `run --resume`, as the
//! built-in layers do: the decisions it recorded in the settled part of the run.
//!
//! A custom layer that counts something per run records a [`LayerDecision`] under its own
//! [`LayerId`] each time it decides (it must, to be on the ledger). On resume, the first time it
//! runs in the run, it reads its own settled decisions back with [`settled_decisions`] and
//! starts from their count instead of from zero. The unfinished turn's decisions are not
//! among them: that turn runs again, and its decisions are taken again.
//!
//! ```
//! use loopward_core::{AgentId, LayerId, RunId};
//! use loopward_runner::{audit::MemorySink, journal, RunContext, SystemClock, Workspace};
//! use std::sync::Arc;
//! let dir = tempfile::tempdir().unwrap();
//! let run = RunContext::new(RunId::new("r").unwrap(), vec![AgentId::new("a").unwrap()],
//!     Workspace::new(dir.path()).unwrap(), Arc::new(MemorySink::default()), Arc::new(SystemClock));
//! // A run that was not resumed has nothing settled: a layer starts from zero.
//! assert!(journal::settled_decisions(&run, &LayerId::from("turns_per_agent")).is_empty());
//! ```
//!
//! `examples/custom_layer.rs` shows a whole layer doing it.
//!
//! [`LayerDecision`]: loopward_core::AuditEvent::LayerDecision

use super::Resumed;
use crate::context::RunContext;
use loopward_core::{AgentId, CallId, LayerId, LayerVerdict};

/// A layer decision the run had settled before it was resumed.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct SettledDecision {
    /// The agent whose turn (or call) it was taken in.
    pub agent: AgentId,
    /// The tool call it was taken on, when it was taken inside one.
    pub call_id: Option<CallId>,
    /// What was decided.
    pub verdict: LayerVerdict,
    /// Its figures, as recorded.
    pub detail: serde_json::Value,
}

/// `layer`'s settled decisions in the resumed run `run`, in ledger order; empty when the run was
/// not resumed.
pub fn settled_decisions(run: &RunContext, layer: &LayerId) -> Vec<SettledDecision> {
    let Some(resumed) = Resumed::of(run) else {
        return Vec::new();
    };
    resumed
        .decisions(layer)
        .map(|d| SettledDecision {
            agent: d.agent.clone(),
            call_id: d.call.clone(),
            verdict: d.decision.decision,
            detail: d.decision.detail.to_json().into_owned(),
        })
        .collect()
}
