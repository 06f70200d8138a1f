//! The layers, end to end through the runner: one test binary for the area (budgets, caps and
//! repeats, class-jump, rate limits, stop-gates, timeouts), sharing its fixtures.
#![allow(clippy::unwrap_used)] // helpers of tests, not only #[test] fns

mod budget;
mod caps;
mod classjump;
mod ratelimit;
mod stopgate;
#[path = "../one_agent/mod.rs"]
mod support;
mod timeout;

use loopward_core::{AgentId, AuditEvent, LayerId};
use loopward_runner::audit::MemorySink;
use loopward_runner::model::{ChatRequest, TurnSlot};
use serde_json::Value;

/// A model request from `agent` with no messages, no tools and no turn.
fn request(agent: &str) -> ChatRequest {
    ChatRequest {
        agent: AgentId::new(agent).unwrap(),
        messages: vec![],
        tools: vec![],
        max_tokens: None,
        turn: TurnSlot::empty(),
    }
}

/// Each decision `layer` recorded in `sink`, in order: its name and its detail.
fn decided(sink: &MemorySink, layer: LayerId) -> Vec<(String, Value)> {
    sink.events()
        .into_iter()
        .filter_map(|(_, e)| match e {
            AuditEvent::LayerDecision {
                layer: l,
                decision,
                detail,
            } if l == layer => Some((decision.to_string(), detail.into_json())),
            _ => None,
        })
        .collect()
}

/// Asserts that `sink` recorded a tool call that failed with a summary saying `says`.
#[track_caller]
fn assert_tool_failed(sink: &MemorySink, says: &str) {
    let failed = sink.events().into_iter().any(|(_, e)| {
        matches!(e, AuditEvent::ToolFinished { is_error: true, summary, .. } if summary.contains(says))
    });
    assert!(failed, "no failed tool call says {says:?}");
}

/// The names of the decisions `layer` recorded in `sink`, in order.
fn verdicts(sink: &MemorySink, layer: LayerId) -> Vec<String> {
    decided(sink, layer).into_iter().map(|(d, _)| d).collect()
}

/// The details of the decisions named `decision` that `layer` recorded in `sink`, in order.
fn details(sink: &MemorySink, layer: LayerId, decision: &str) -> Vec<Value> {
    let named = decided(sink, layer)
        .into_iter()
        .filter(|(d, _)| d == decision);
    named.map(|(_, detail)| detail).collect()
}
