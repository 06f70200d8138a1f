//! `write_data` checked against a re-serialisation through `serde_json::Value` for every event.

use super::*;
use crate::model::StopReason;
use crate::{
    Action, AgentId, CallId, CapsAllowDetail, ClassJumpDetail, Decision, Effect, EffectKind,
    EffectStatus, FinishReason, GateChange, GateDefinition, GateId, GateKind, GateMode, Handoff,
    LayerDetail, LayerVerdict, RateLimitDetail, Refusal, Remedy, RepeatDetail, RunStatus,
    StopGateDetail, ToolCall, ToolName, Usage,
};
use serde_json::json;

/// `value` without its tag, the old way: through a `serde_json::Value`, whose maps sort.
fn via_value<T: Serialize>(value: &T) -> Vec<u8> {
    let mut v = serde_json::to_value(value).unwrap();
    v.as_object_mut().unwrap().remove("kind");
    serde_json::to_vec(&v).unwrap()
}

fn agent(name: &str) -> AgentId {
    AgentId::new(name).unwrap()
}

/// One detail of each typed kind, with and without its optional keys.
fn typed_details() -> Vec<LayerDetail> {
    let gate = |by: Option<&str>, id: Option<&str>, reason: Option<&str>, dir| {
        LayerDetail::StopGate(StopGateDetail {
            action: "tool:shell:00".into(),
            by: by.map(Into::into),
            dir,
            gate: "tool:shell".into(),
            id: id.map(Into::into),
            mode: "durable",
            reason: reason.map(Into::into),
            summary: "shell {\"cmd\":\"ls\"}".into(),
        })
    };
    vec![
        LayerDetail::ClassJump(ClassJumpDetail {
            allowed: 3,
            failures: 2,
            next: Some("b".into()),
            source: None,
            strategy: "a".into(),
            subtask: "fix it".into(),
            tool: None,
        }),
        LayerDetail::ClassJump(ClassJumpDetail {
            allowed: 3,
            failures: 3,
            next: None,
            source: Some("evidence"),
            strategy: "a".into(),
            subtask: "b's failed shell calls".into(),
            tool: Some("shell".into()),
        }),
        gate(None, None, None, None),
        gate(
            Some("ann"),
            Some("p1"),
            Some("no"),
            Some(".loopward/pending"),
        ),
        LayerDetail::CapsAllow(CapsAllowDetail {
            hops: 1,
            turn: 2,
            turns_per_run: 40,
        }),
        LayerDetail::RateLimit(RateLimitDetail {
            agent: agent("a"),
            reason: Some("over".into()),
            tokens: 7,
            waited_ms: None,
        }),
        LayerDetail::RateLimit(RateLimitDetail {
            agent: agent("a"),
            reason: None,
            tokens: 7,
            waited_ms: Some(12),
        }),
        LayerDetail::Repeat(RepeatDetail {
            call_id: "c1".into(),
            count: 2,
            digest: "0f".into(),
            limit: 3,
            tool: "write_file".into(),
        }),
    ]
}

/// A string that needs escaping.
fn odd() -> String {
    "quote \" backslash \\ newline \n tab \t nul \u{0} é ☃ 😀".into()
}

fn usage() -> Usage {
    Usage {
        input_tokens: u64::MAX,
        output_tokens: 2,
        cached_tokens: 3,
        calls: 4,
    }
}

fn every_status() -> Vec<RunStatus> {
    vec![
        RunStatus::Completed,
        RunStatus::CapReached { cap: odd() },
        RunStatus::Exhausted,
        RunStatus::BudgetExceeded {
            budget: "tokens".into(),
        },
        RunStatus::Stopped { reason: odd() },
        RunStatus::AwaitingApproval {
            pending: "p1".into(),
        },
        RunStatus::AuditFailed {
            error: "disk full".into(),
        },
        RunStatus::Failed { error: odd() },
    ]
}

fn every_decision() -> Vec<Decision> {
    let refusal = Refusal::new(GateKind::Territory, odd(), "ask the planner");
    vec![
        Decision::Allow,
        Decision::Override {
            id: "o1".into(),
            reason: odd(),
        },
        Decision::Warn(refusal.clone()),
        Decision::Deny(refusal),
    ]
}

fn every_effect() -> Vec<Effect> {
    vec![
        Effect::ok("a.txt", EffectKind::Create),
        Effect::ok("b.txt", EffectKind::Modify),
        Effect {
            path: "c.txt".into(),
            kind: EffectKind::Delete,
            status: EffectStatus::Failed,
        },
        Effect {
            path: "d.txt".into(),
            kind: EffectKind::Rename { from: odd() },
            status: EffectStatus::Reverted,
        },
        Effect::ok("e", EffectKind::Link),
    ]
}

/// Examples of the variant `of` is: every optional field set and unset, every nested enum's
/// variants. The match is exhaustive, so a new variant does not compile until it has some.
fn examples_like(of: &AuditEvent) -> Vec<AuditEvent> {
    let args = json!({"z": [1, 2.5, {"y": null, "b": true}], "a": "x", "m": {"k2": 1, "k1": -1}});
    match of {
        AuditEvent::RunStarted { .. } => vec![AuditEvent::RunStarted {
            agent: agent("planner"),
            task: odd(),
        }],
        AuditEvent::HumanMessage { .. } => vec![AuditEvent::HumanMessage {
            content: (&crate::Person::at_the_keyboard().says(odd())).into(),
        }],
        AuditEvent::TurnStarted { .. } => vec![AuditEvent::TurnStarted {
            agent: agent("builder"),
        }],
        AuditEvent::ModelCall { .. } => [None, Some(7)]
            .into_iter()
            .map(|cost_micros| AuditEvent::ModelCall {
                cost_micros,
                model: "m".into(),
                tool_calls: 2,
                usage: usage(),
            })
            .collect(),
        AuditEvent::ModelReply { .. } => {
            let calls = vec![
                ToolCall::new("c1", "write_file", args.clone()),
                ToolCall::new("c2", "read_file", json!("not an object")),
            ];
            let mut out = Vec::new();
            for stop in [StopReason::Finished, StopReason::TokenLimit] {
                for tool_calls in [Vec::new(), calls.clone()] {
                    out.push(AuditEvent::ModelReply {
                        stop,
                        text: odd(),
                        tool_calls,
                    });
                }
            }
            out
        }
        AuditEvent::ToolRequested { .. } => vec![AuditEvent::ToolRequested {
            arguments: args,
            call_id: "c1".into(),
            tool: "write_file".into(),
        }],
        AuditEvent::ToolStarted { .. } => vec![AuditEvent::ToolStarted {
            call_id: "c1".into(),
            tool: "shell".into(),
        }],
        AuditEvent::GateDecision { .. } => {
            let mut out = Vec::new();
            for decision in every_decision() {
                for some in [false, true] {
                    out.push(AuditEvent::GateDecision {
                        action: Action::Handoff(agent("auditor")),
                        call_id: some.then(|| "c1".into()),
                        decision: decision.clone(),
                        gate: GateId::new(GateKind::Territory, "territory:planner"),
                        mode: GateMode::Advisory,
                        path: some.then(|| "src/a.rs".into()),
                        path_raw: some.then(|| "./src/a.rs".into()),
                        source: some.then(|| "loopward.toml:12".into()),
                    });
                }
            }
            out
        }
        AuditEvent::OverrideConsumed { .. } => vec![AuditEvent::OverrideConsumed {
            agent: agent("builder"),
            id: "o1".into(),
            path: "src/a.rs".into(),
            reason: odd(),
        }],
        AuditEvent::ToolFinished { .. } => [false, true]
            .into_iter()
            .map(|some| AuditEvent::ToolFinished {
                call_id: "c1".into(),
                effects: if some { every_effect() } else { Vec::new() },
                is_error: !some,
                output: some.then(odd),
                summary: odd(),
                tool: "write_file".into(),
            })
            .collect(),
        AuditEvent::Violation { .. } => [
            Remedy::Reverted,
            Remedy::NotReverted { why: odd() },
            Remedy::Unremedied { why: "gone".into() },
        ]
        .into_iter()
        .map(|remedy| AuditEvent::Violation {
            path: "x".into(),
            reason: odd(),
            remedy,
        })
        .collect(),
        AuditEvent::HandoffRegistered(_) => vec![AuditEvent::HandoffRegistered(Handoff {
            from: agent("planner"),
            message: odd(),
            to: agent("builder"),
        })],
        AuditEvent::HandoffRefused { .. } => vec![AuditEvent::HandoffRefused {
            standing: agent("builder"),
            to: agent("auditor"),
        }],
        AuditEvent::TurnEnded { .. } => {
            let finishes = [
                FinishReason::Done,
                FinishReason::Handoff,
                FinishReason::StepCap,
                FinishReason::Stopped,
                FinishReason::Unverified,
            ];
            let ends = std::iter::once(None).chain(every_status().into_iter().map(Some));
            ends.zip(finishes.into_iter().cycle())
                .map(|(ends_run, finish)| AuditEvent::TurnEnded {
                    ends_run,
                    finish,
                    usage: usage(),
                })
                .collect()
        }
        AuditEvent::LayerDecision { .. } => [json!({}), json!(null), args]
            .into_iter()
            .map(LayerDetail::from)
            .chain(typed_details())
            .map(|detail| AuditEvent::LayerDecision {
                decision: LayerVerdict::ClassJump,
                detail,
                layer: "anti_loop".into(),
            })
            .collect(),
        AuditEvent::GateChanged { .. } => [
            json!({"name": "g", "kind": "territory", "allow": ["src/**"]}),
            json!({"mode": "enforce", "name": "g", "spec": {"kind": "territory",
                "mode": "enforce", "owner": "planner", "paths": ["src/**"]}}),
            json!({"enabled": true, "kind": "sprawl", "marker": "# Plan", "mode": "enforce",
                "plan_path": "plan.md", "siblings": [], "threshold": 3}),
            json!({"gate": "review: builder hands off via auditor", "kind": "review"}),
        ]
        .into_iter()
        .map(|gate| AuditEvent::GateChanged {
            by: "person".into(),
            change: GateChange::Add,
            gate: GateDefinition::read(gate),
        })
        .collect(),
        AuditEvent::EgressDecided { .. } => [true, false]
            .into_iter()
            .map(|allowed| AuditEvent::EgressDecided {
                allowed,
                call_id: allowed.then(|| "c1".into()),
                host: "example.com".into(),
                port: 443,
                reason: "listed".into(),
            })
            .collect(),
        AuditEvent::EgressClosed { .. } => vec![AuditEvent::EgressClosed {
            bytes_in: 10,
            bytes_out: 2,
            call_id: Some("c1".into()),
            host: "example.com".into(),
            port: 443,
        }],
        AuditEvent::LedgerRecovered { .. } => vec![AuditEvent::LedgerRecovered {
            truncated_bytes: 17,
        }],
        AuditEvent::RunResumed { .. } => {
            let previous = std::iter::once(None).chain(every_status().into_iter().map(Some));
            previous
                .enumerate()
                .map(|(i, previous)| AuditEvent::RunResumed {
                    interrupted: if i % 2 == 0 {
                        vec!["c1".into(), "c2".into()]
                    } else {
                        Vec::new()
                    },
                    previous,
                    replayed_turns: 3,
                })
                .collect()
        }
        AuditEvent::RunEnded { .. } => every_status()
            .into_iter()
            .flat_map(|status| {
                [None, Some(9)].map(|cost_micros| AuditEvent::RunEnded {
                    cost_micros,
                    status: status.clone(),
                    usage: usage(),
                })
            })
            .collect(),
    }
}

/// The examples of every variant (a seed of each, expanded by `examples_like`).
fn every_example() -> Vec<AuditEvent> {
    let seeds = [
        AuditEvent::RunStarted {
            agent: agent("a"),
            task: String::new(),
        },
        AuditEvent::HumanMessage {
            content: (&crate::Person::at_the_keyboard().says(String::new())).into(),
        },
        AuditEvent::TurnStarted { agent: agent("a") },
        AuditEvent::ModelCall {
            cost_micros: None,
            model: String::new(),
            tool_calls: 0,
            usage: Usage::default(),
        },
        AuditEvent::ModelReply {
            stop: StopReason::Finished,
            text: String::new(),
            tool_calls: Vec::new(),
        },
        AuditEvent::ToolRequested {
            arguments: json!(null),
            call_id: CallId::default(),
            tool: ToolName::default(),
        },
        AuditEvent::ToolStarted {
            call_id: CallId::default(),
            tool: ToolName::default(),
        },
        AuditEvent::GateDecision {
            action: Action::tool("t"),
            call_id: None,
            decision: Decision::Allow,
            gate: GateId::of(GateKind::Custom),
            mode: GateMode::Enforce,
            path: None,
            path_raw: None,
            source: None,
        },
        AuditEvent::OverrideConsumed {
            agent: agent("a"),
            id: String::new(),
            path: String::new(),
            reason: String::new(),
        },
        AuditEvent::ToolFinished {
            call_id: CallId::default(),
            effects: Vec::new(),
            is_error: false,
            output: None,
            summary: String::new(),
            tool: ToolName::default(),
        },
        AuditEvent::Violation {
            path: String::new(),
            reason: String::new(),
            remedy: Remedy::Reverted,
        },
        AuditEvent::HandoffRegistered(Handoff {
            from: agent("a"),
            message: String::new(),
            to: agent("b"),
        }),
        AuditEvent::HandoffRefused {
            standing: agent("a"),
            to: agent("b"),
        },
        AuditEvent::TurnEnded {
            ends_run: None,
            finish: FinishReason::Done,
            usage: Usage::default(),
        },
        AuditEvent::LayerDecision {
            decision: LayerVerdict::Allow,
            detail: json!(null).into(),
            layer: "".into(),
        },
        AuditEvent::GateChanged {
            by: String::new(),
            change: GateChange::Add,
            gate: GateDefinition::Unlisted,
        },
        AuditEvent::EgressDecided {
            allowed: false,
            call_id: None,
            host: String::new(),
            port: 0,
            reason: String::new(),
        },
        AuditEvent::EgressClosed {
            bytes_in: 0,
            bytes_out: 0,
            call_id: None,
            host: String::new(),
            port: 0,
        },
        AuditEvent::LedgerRecovered { truncated_bytes: 0 },
        AuditEvent::RunResumed {
            interrupted: Vec::new(),
            previous: None,
            replayed_turns: 0,
        },
        AuditEvent::RunEnded {
            cost_micros: None,
            status: RunStatus::Completed,
            usage: Usage::default(),
        },
    ];
    seeds.iter().flat_map(examples_like).collect()
}

/// Every kind serde knows, read from the error it gives for an unknown one (`unknown variant
/// `x`, expected one of `run_started`, …`): a list no one has to keep up to date.
fn every_kind() -> std::collections::BTreeSet<String> {
    let err = serde_json::from_str::<AuditEvent>(r#"{"kind":"no_such_kind"}"#).unwrap_err();
    let text = err.to_string();
    let list = text
        .split("expected one of")
        .nth(1)
        .expect("serde lists the variants");
    let kinds: std::collections::BTreeSet<String> = list
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect();
    assert!(
        kinds.contains("run_started") && kinds.contains("run_ended"),
        "{text}"
    );
    kinds
}

#[test]
fn every_variant_writes_the_bytes_a_sorted_value_writes() {
    let examples = every_example();
    let covered: std::collections::BTreeSet<String> =
        examples.iter().map(|e| e.kind().to_string()).collect();
    assert_eq!(
        covered,
        every_kind(),
        "every variant has examples: add a seed"
    );
    assert!(examples.len() > 60, "{} examples", examples.len());
    for ev in &examples {
        let mut out = b"[".to_vec();
        ev.write_data(&mut out).unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out[1..]),
            String::from_utf8_lossy(&via_value(ev)),
            "{}",
            ev.kind()
        );
        assert_eq!(out[0], b'[', "what was in the buffer stays");
        // And it reads back as the event.
        let mut v: serde_json::Value = serde_json::from_slice(&out[1..]).unwrap();
        v.as_object_mut()
            .unwrap()
            .insert("kind".into(), ev.kind().into());
        assert_eq!(&serde_json::from_value::<AuditEvent>(v).unwrap(), ev);
    }
}

#[derive(Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Unsorted {
    Thing { zebra: u32, apple: u32 },
    Bare {},
}

#[test]
fn a_field_out_of_sorted_order_is_caught_by_the_comparison() {
    let ev = Unsorted::Thing { zebra: 1, apple: 2 };
    let mut out = Vec::new();
    write_untagged(&ev, "thing", &mut out).unwrap();
    assert_eq!(out, br#"{"zebra":1,"apple":2}"#);
    assert_ne!(out, via_value(&ev), "the sorted re-serialisation differs");
    assert_eq!(via_value(&ev), br#"{"apple":2,"zebra":1}"#);
}

#[test]
fn a_variant_without_fields_writes_an_empty_object() {
    let mut out = Vec::new();
    write_untagged(&Unsorted::Bare {}, "bare", &mut out).unwrap();
    assert_eq!(out, b"{}");
}

#[test]
fn a_value_without_the_tag_first_is_refused_and_nothing_is_appended() {
    let mut out = b"keep".to_vec();
    let err = write_untagged(&Unsorted::Bare {}, "thing", &mut out).unwrap_err();
    assert!(err.to_string().contains("\"kind\":\"thing\""), "{err}");
    assert!(write_untagged(&json!({"a": 1}), "a", &mut out).is_err());
    assert!(write_untagged(&json!("kind"), "kind", &mut out).is_err());
    assert_eq!(out, b"keep");
}
