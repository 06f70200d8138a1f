use super::*;
use crate::{AgentId, Effect, EffectKind, RunId, Usage};
use serde_json::{json, Value};
use std::mem::discriminant;
use std::sync::Arc;

/// `typed` writes the bytes of `map`; `map` read back under `layer` is the same variant and
/// writes the same bytes; the same map with one key more reads back as JSON, written as read.
fn round(layer: LayerId, typed: LayerDetail, map: serde_json::Value) {
    let direct = serde_json::to_string(&typed).unwrap();
    assert_eq!(direct, serde_json::to_string(&map).unwrap());
    // Through a `Value`, as a ledger that converts first would write it.
    let via = serde_json::to_string(&serde_json::to_value(&typed).unwrap()).unwrap();
    assert_eq!(via, direct);
    assert_eq!(typed.to_string(), map.to_string());
    assert_eq!(typed, LayerDetail::Json(map.clone()));

    let read = LayerDetail::read(&layer, map.clone());
    assert_eq!(discriminant(&read), discriminant(&typed), "{layer}: {map}");
    assert_eq!(serde_json::to_string(&read).unwrap(), direct);

    let mut odd = map.clone();
    odd.as_object_mut()
        .unwrap()
        .insert("zz_extra".into(), json!(1));
    let read = LayerDetail::read(&layer, odd.clone());
    assert!(
        matches!(&read, LayerDetail::Json(v) if *v == odd),
        "{layer}: {odd}"
    );
    assert_eq!(serde_json::to_string(&read).unwrap(), odd.to_string());

    // A custom layer's detail is never typed, whatever its keys.
    let custom = LayerDetail::read(&LayerId::from("mine"), map.clone());
    assert!(matches!(custom, LayerDetail::Json(_)));
}

/// `map` with each of `keys` whose value is present: the keys a detail writes only when set.
fn with_present<const N: usize>(mut map: Value, keys: [(&str, Option<Value>); N]) -> Value {
    for (key, value) in keys {
        if let Some(v) = value {
            map[key] = v;
        }
    }
    map
}

fn agent() -> AgentId {
    AgentId::new("builder").unwrap()
}

#[test]
fn engine_details_write_their_json_maps_and_read_back_typed() {
    let sub: Arc<str> = "fix \"it\"".into();
    round(
        LayerId::ClassJump,
        LayerDetail::ClassJump(ClassJumpDetail {
            allowed: 3,
            failures: 3,
            next: None,
            source: Some(ClassJumpDetail::EVIDENCE),
            strategy: "a".into(),
            subtask: sub.clone(),
            tool: Some("shell".into()),
        }),
        json!({"source": "evidence", "tool": "shell", "subtask": &*sub, "strategy": "a",
               "failures": 3, "allowed": 3, "next": null}),
    );
    round(
        LayerId::ClassJump,
        LayerDetail::ClassJumpRefused(ClassJumpRefusedDetail {
            reason: "unknown strategy".into(),
            strategy: "z".into(),
            subtask: "s".into(),
        }),
        json!({"subtask": "s", "strategy": "z", "reason": "unknown strategy"}),
    );
    round(
        LayerId::StopGate,
        LayerDetail::StopGate(StopGateDetail {
            action: "phase:deploy".into(),
            by: None,
            dir: Some(".loopward/pending"),
            gate: "stopgate-1".into(),
            id: Some("p1".into()),
            mode: "durable",
            reason: None,
            summary: "enter phase deploy".into(),
        }),
        json!({"gate": "stopgate-1", "mode": "durable", "action": "phase:deploy",
               "summary": "enter phase deploy", "id": "p1", "dir": ".loopward/pending"}),
    );
    round(
        LayerId::StopGate,
        LayerDetail::StopGate(StopGateDetail {
            action: "turn:b".into(),
            by: Some("ann".into()),
            dir: None,
            gate: "g".into(),
            id: None,
            mode: "interactive",
            reason: Some("no".into()),
            summary: "s".into(),
        }),
        json!({"gate": "g", "mode": "interactive", "action": "turn:b", "summary": "s",
               "by": "ann", "reason": "no"}),
    );
    round(
        LayerId::Caps,
        LayerDetail::CapsAllow(CapsAllowDetail {
            hops: 2,
            turn: 7,
            turns_per_run: 40,
        }),
        json!({"turn": 7, "turns_per_run": 40, "hops": 2}),
    );
    round(
        LayerId::Caps,
        LayerDetail::CapReached(CapReachedDetail {
            cap: "turns_per_run".into(),
            limit: 3,
            value: 3,
        }),
        json!({"cap": "turns_per_run", "limit": 3, "value": 3}),
    );
    round(
        LayerId::Caps,
        LayerDetail::WallTime(WallTimeDetail {
            limit_ms: 25_000,
            value_ms: 25_013,
        }),
        json!({"cap": "wall_time", "limit_ms": 25_000, "value_ms": 25_013}),
    );
    round(
        LayerId::Caps,
        LayerDetail::WrappedUp(WrappedUpDetail {
            cap: "turns_per_run (3)".into(),
            text: "done: 2 of 3".into(),
        }),
        json!({"cap": "turns_per_run (3)", "after": "wrap_up", "text": "done: 2 of 3"}),
    );
    for (reason, waited_ms, tokens) in [(None, Some(0), 120), (Some("quota"), None, u64::MAX)] {
        let map = with_present(
            json!({"agent": agent(), "tokens": tokens}),
            [
                ("reason", reason.map(Value::from)),
                ("waited_ms", waited_ms.map(Value::from)),
            ],
        );
        round(
            LayerId::RateLimit,
            LayerDetail::RateLimit(RateLimitDetail {
                agent: agent(),
                reason: reason.map(String::from),
                tokens,
                waited_ms,
            }),
            map,
        );
    }
    round(
        LayerId::Repeat,
        LayerDetail::Repeat(RepeatDetail {
            call_id: "c\u{1}".into(),
            count: 3,
            digest: "ab".into(),
            limit: 2,
            tool: "write_file".into(),
        }),
        json!({"call_id": "c\u{1}", "tool": "write_file", "digest": "ab", "count": 3,
               "limit": 2}),
    );
}

#[test]
fn timeout_and_budget_details_write_their_json_maps_and_read_back_typed() {
    round(
        LayerId::Timeout,
        LayerDetail::Timeout(TimeoutDetail {
            agent: Some(agent()),
            call_id: None,
            limit_ms: 60_000,
            tool: None,
        }),
        json!({"agent": agent(), "limit_ms": 60_000}),
    );
    round(
        LayerId::Timeout,
        LayerDetail::Timeout(TimeoutDetail {
            agent: None,
            call_id: Some("c1".into()),
            limit_ms: 5,
            tool: Some("shell".into()),
        }),
        json!({"call_id": "c1", "tool": "shell", "limit_ms": 5}),
    );
    round(
        LayerId::Timeout,
        LayerDetail::Timeout(TimeoutDetail {
            agent: None,
            call_id: None,
            limit_ms: 1,
            tool: None,
        }),
        json!({"limit_ms": 1}),
    );
    let usage = Usage {
        input_tokens: 10,
        output_tokens: 5,
        cached_tokens: 1,
        calls: 2,
    };
    round(
        LayerId::Budget,
        LayerDetail::BudgetExceeded(BudgetExceededDetail {
            budget: "tokens".into(),
            cost_micros: 0,
            limit: 15,
            usage,
            used: 15,
        }),
        json!({"budget": "tokens", "limit": 15, "used": 15, "usage": usage, "cost_micros": 0}),
    );
    round(
        LayerId::Budget,
        LayerDetail::ReportedCost(ReportedCostDetail {
            reported_cost_micros: 7,
            reported_total_micros: 9,
        }),
        json!({"reported_cost_micros": 7, "reported_total_micros": 9}),
    );
}

#[test]
fn run_details_write_their_json_maps_and_read_back_typed() {
    round(
        LayerId::Inbox,
        LayerDetail::InboxRefused(InboxRefusedDetail {
            why: "a.json: forged".into(),
        }),
        json!({"why": "a.json: forged"}),
    );
    round(
        LayerId::Resume,
        LayerDetail::Resume(ResumeDetail {
            call_id: "c1".into(),
            tool: "shell".into(),
        }),
        json!({"call_id": "c1", "tool": "shell"}),
    );
    round(
        LayerId::Stop,
        LayerDetail::StopRefused(StopRefusedDetail {
            turns: 2,
            why: "damaged".into(),
        }),
        json!({"turns": 2, "why": "damaged"}),
    );
    round(
        LayerId::Stop,
        LayerDetail::Stopped(StoppedDetail {
            by: "ann".into(),
            reason: "enough".into(),
            requested_at: "2026-01-01T00:00:00.000Z".into(),
            turns: 4,
        }),
        json!({"by": "ann", "reason": "enough", "requested_at": "2026-01-01T00:00:00.000Z",
               "turns": 4}),
    );
    round(
        LayerId::Policy,
        LayerDetail::PolicyVersion(PolicyVersionDetail {
            version: "v3".into(),
        }),
        json!({"version": "v3"}),
    );
    for host in [LayerId::ClaudeCode, LayerId::Codex, LayerId::GeminiCli] {
        round(
            host,
            LayerDetail::HookEvent(HookEventDetail {
                event: "SessionStart".into(),
            }),
            json!({"event": "SessionStart"}),
        );
    }
}

#[test]
fn session_details_write_their_json_maps_and_read_back_typed() {
    for code in [Some(-1), Some(0), Some(2), None] {
        round(
            LayerId::Verify,
            LayerDetail::Verify(VerifyDetail {
                claimed_done: true,
                code,
                command: "cargo test".into(),
                passed: code == Some(0),
                workspace_after: "b".into(),
                workspace_before: "a".into(),
            }),
            json!({"claimed_done": true, "passed": code == Some(0), "code": code,
                   "command": "cargo test", "workspace_before": "a", "workspace_after": "b"}),
        );
    }
    round(
        LayerId::Repeat,
        LayerDetail::NoProgress(NoProgressDetail {
            evidence: "the session changed no file".into(),
            in_a_row: 2,
            limit: 3,
        }),
        json!({"evidence": "the session changed no file", "in_a_row": 2, "limit": 3}),
    );
    round(
        LayerId::Session,
        LayerDetail::SessionStarted(SessionStartedDetail {
            pid: 42,
            session: "s1".into(),
        }),
        json!({"session": "s1", "pid": 42}),
    );
    round(
        LayerId::Session,
        LayerDetail::SessionEnded(SessionEndedDetail {
            ended: true,
            left_running: true,
            marked_ended: 2,
            pid: 42,
            session: "s1".into(),
        }),
        json!({"session": "s1", "pid": 42, "left_running": true, "ended": true,
               "marked_ended": 2}),
    );
    let changed = vec![
        Effect::ok("a.txt", EffectKind::Create),
        Effect::ok(
            "b.txt",
            EffectKind::Rename {
                from: "c.txt".into(),
            },
        ),
    ];
    round(
        LayerId::Session,
        LayerDetail::SessionChanges(SessionChangesDetail {
            changed: changed.clone(),
        }),
        json!({ "changed": changed }),
    );
    let run = RunId::new("claude-code-s1").unwrap();
    for (error, final_hash, records) in [
        (None, Some("ff"), Some(3)),
        (None, None, Some(0)),
        (Some("torn"), None, None),
    ] {
        let map = with_present(
            json!({"run": run}),
            [
                ("error", error.map(Value::from)),
                ("final_hash", final_hash.map(Value::from)),
                ("records", records.map(Value::from)),
            ],
        );
        round(
            LayerId::SessionLedger,
            LayerDetail::SessionLedger(SessionLedgerDetail {
                error: error.map(String::from),
                final_hash: final_hash.map(String::from),
                records,
                run: run.clone(),
            }),
            map,
        );
    }
    round(
        LayerId::Hook,
        LayerDetail::Hook(HookDetail {
            host: "claude-code".into(),
            records: 3,
        }),
        json!({"host": "claude-code", "records": 3}),
    );
}

#[test]
fn a_detail_that_only_looks_typed_stays_json() {
    // A constant key with another value, a number out of the type's range, a float, a missing
    // always-written key: each would write other bytes, so each stays as read.
    for (layer, map) in [
        (
            LayerId::Caps,
            json!({"cap": "turns", "limit_ms": 1, "value_ms": 2}),
        ),
        (
            LayerId::Caps,
            json!({"after": "other", "cap": "c", "text": "t"}),
        ),
        (
            LayerId::Caps,
            json!({"hops": 1, "turn": 1, "turns_per_run": 1u64 << 40}),
        ),
        (LayerId::Caps, json!({"cap": "c", "limit": 1.0, "value": 1})),
        (
            LayerId::ClassJump,
            json!({"allowed": 3, "failures": 1, "strategy": "a", "subtask": "s"}),
        ),
        (
            LayerId::Verify,
            json!({"claimed_done": true, "passed": false, "command": "x",
                                 "workspace_before": "a", "workspace_after": "b"}),
        ),
        (LayerId::Policy, json!(null)),
        // A word a `'static` field does not know.
        (
            LayerId::StopGate,
            json!({"action": "a", "gate": "g", "mode": "sometimes", "summary": "s"}),
        ),
        (
            LayerId::StopGate,
            json!({"action": "a", "dir": "/tmp/p", "gate": "g", "mode": "durable",
                                   "summary": "s"}),
        ),
        (
            LayerId::ClassJump,
            json!({"allowed": 3, "failures": 1, "next": null, "source": "hearsay",
                                    "strategy": "a", "subtask": "s"}),
        ),
        (LayerId::Policy, json!("v3")),
    ] {
        let read = LayerDetail::read(&layer, map.clone());
        assert!(
            matches!(&read, LayerDetail::Json(v) if *v == map),
            "{layer}: {map}"
        );
        assert_eq!(read.to_string(), map.to_string());
    }
}

#[test]
fn accessors_type_a_json_detail_of_the_same_shape_and_only_that() {
    let verify = LayerDetail::Json(json!({"claimed_done": false, "passed": true, "code": 0,
        "command": "make", "workspace_before": "a", "workspace_after": "a"}));
    let v = verify.as_verify().unwrap();
    assert!(matches!(v, Cow::Owned(_)));
    assert_eq!((v.passed, v.code), (true, Some(0)));
    assert!(verify.as_stop_gate().is_none());

    let typed = LayerDetail::Resume(ResumeDetail {
        call_id: "c9".into(),
        tool: "shell".into(),
    });
    assert!(matches!(typed.as_resume(), Some(Cow::Borrowed(_))));
    assert!(typed.as_repeat().is_none());
    assert_eq!(typed.call_id().unwrap(), "c9");
    // A custom layer's `call_id` is its tool call too.
    assert_eq!(
        LayerDetail::Json(json!({"call_id": "c2", "n": 1})).call_id(),
        Some(CallId::from("c2"))
    );
    assert_eq!(LayerDetail::default().call_id(), None);

    let wall = LayerDetail::WallTime(WallTimeDetail {
        limit_ms: 1,
        value_ms: 2,
    });
    assert_eq!(wall.cap().as_deref(), Some("wall_time"));
    let counted = LayerDetail::Json(json!({"cap": "handoff_hops", "limit": 2, "value": 3}));
    assert_eq!(counted.cap().as_deref(), Some("handoff_hops"));
    assert_eq!(LayerDetail::Json(json!({"cap": "x"})).cap(), None);
}

#[test]
fn a_layer_decision_read_from_a_ledger_line_has_a_typed_detail() {
    let line = r#"{"kind":"layer_decision","decision":"observed","detail":{"host":"claude-code","records":2},"layer":"hook"}"#;
    let event: crate::AuditEvent = serde_json::from_str(line).unwrap();
    let crate::AuditEvent::LayerDecision { detail, .. } = &event else {
        panic!("{event:?}")
    };
    assert_eq!(detail.as_hook().unwrap().records, 2);
    assert!(matches!(detail, LayerDetail::Hook(_)));
    assert_eq!(serde_json::to_string(&event).unwrap(), line);
    // A custom layer's keeps its JSON.
    let line = line.replace(r#""layer":"hook""#, r#""layer":"mine""#);
    let event: crate::AuditEvent = serde_json::from_str(&line).unwrap();
    assert!(matches!(
        event,
        crate::AuditEvent::LayerDecision {
            detail: LayerDetail::Json(_),
            ..
        }
    ));
}

#[test]
fn a_detail_reads_back_as_json_and_defaults_to_null() {
    let d: LayerDetail = serde_json::from_str(r#"{"b":1,"a":[2]}"#).unwrap();
    assert!(matches!(&d, LayerDetail::Json(v) if v == &json!({"a": [2], "b": 1})));
    assert_eq!(d.to_json()["b"], 1);
    assert_eq!(d.to_string(), r#"{"a":[2],"b":1}"#);
    assert!(LayerDetail::default().is_null());
    assert_eq!(LayerDetail::default().into_json(), serde_json::Value::Null);
}
