//! The event table: every record with an anchor (`#seq-N`), pass-through verdicts folded into
//! `<details>` so the decisions that mattered stand out.

use loopward_core::{AuditEvent, Decision, EffectStatus, LayerVerdict};
use loopward_runner::audit::Record;
use loopward_runner::audit::{AgentSaid, Sayings};
use maud::{html, Markup};
use std::collections::BTreeMap;

/// Whether a record is a verdict that let something through without comment (a gate's `allow`,
/// a layer's `allow` or `admitted`): folded away by default.
pub(crate) fn is_pass_through(event: &AuditEvent) -> bool {
    match event {
        AuditEvent::GateDecision { decision, .. } => matches!(decision, Decision::Allow),
        AuditEvent::LayerDecision { decision, .. } => {
            matches!(decision, LayerVerdict::Allow | LayerVerdict::Admitted)
        }
        _ => false,
    }
}

/// What agents said to the people watching, by the sequence number of the record that ends
/// each `say` call.
pub(crate) fn sayings(records: &[Record]) -> BTreeMap<u64, AgentSaid> {
    let mut sayings = Sayings::default();
    records
        .iter()
        .filter(|r| Sayings::concerns(&r.kind))
        .filter_map(|r| {
            let e = r.event().ok()?;
            Some((r.seq, sayings.fold(r.agent.as_ref(), &e)?))
        })
        .collect()
}

/// The table of all records.
pub(crate) fn table(records: &[Record], said: &BTreeMap<u64, AgentSaid>) -> Markup {
    let mut groups: Vec<(bool, Vec<&Record>)> = Vec::new();
    for r in records {
        let folded = r.event().is_ok_and(|e| is_pass_through(&e));
        match groups.last_mut() {
            Some((f, rows)) if *f == folded => rows.push(r),
            _ => groups.push((folded, vec![r])),
        }
    }
    html! {
        table.events {
            thead { tr { th { "#" } th { "time" } th { "turn" } th { "agent" } th { "event" } th { "detail" } } }
            tbody {
                @for (folded, rows) in &groups {
                    @if *folded {
                        tr.folded {
                            td colspan="6" {
                                details {
                                    summary { (rows.len()) " pass-through verdict(s), #" (rows[0].seq)
                                        @if rows.len() > 1 { "–" (rows[rows.len() - 1].seq) } }
                                    table.events.inner { tbody { @for r in rows { (row(r, None)) } } }
                                }
                            }
                        }
                    } @else {
                        @for r in rows { (row(r, said.get(&r.seq))) }
                    }
                }
            }
        }
    }
}

/// One record's row; the end of a `say` call shows what was said (`said`).
fn row(r: &Record, said: Option<&AgentSaid>) -> Markup {
    let event = r.event();
    let class = match (&event, said) {
        (_, Some(_)) => "said",
        (Ok(e), None) => tone(e),
        (Err(_), None) => "bad",
    };
    html! {
        tr id=(format!("seq-{}", r.seq)) class=(class) {
            td.seq { a href=(format!("#seq-{}", r.seq)) { (r.seq) } }
            td.time { (r.time.get(11..23).unwrap_or(&r.time)) }
            td { @if let Some(t) = r.turn { (t) } }
            td { @if let Some(a) = &r.agent { (a) } }
            td.kind { (r.kind) }
            td.detail { @match &event {
                _ if said.is_some() => (said.map(ToString::to_string).unwrap_or_default()),
                Ok(e) => (describe(e)),
                Err(e) => { "unreadable event: " (e.0) },
            } }
        }
    }
}

fn tone(e: &AuditEvent) -> &'static str {
    match e {
        AuditEvent::GateDecision { decision, .. } => match decision {
            Decision::Allow => "pass",
            Decision::Deny(_) => "deny",
            Decision::Warn(_) => "warn",
            Decision::Override { .. } => "override",
        },
        AuditEvent::Violation { .. } => "deny",
        AuditEvent::HandoffRefused { .. } => "deny",
        AuditEvent::OverrideConsumed { .. } => "override",
        AuditEvent::HumanMessage { .. } | AuditEvent::RunStarted { .. } => "human",
        AuditEvent::TurnStarted { .. }
        | AuditEvent::RunEnded { .. }
        | AuditEvent::RunResumed { .. } => "edge",
        AuditEvent::ModelReply { .. } => "model",
        AuditEvent::EgressDecided { allowed: false, .. } => "deny",
        _ => "",
    }
}

/// One record in words, as the run's page shows it (model-controlled text goes into the page as
/// text, escaped by the template).
pub fn describe(e: &AuditEvent) -> String {
    match e {
        AuditEvent::RunStarted { task, agent } => format!("run started with {agent}: {task}"),
        AuditEvent::HumanMessage { content } => format!("human: {content}"),
        AuditEvent::TurnStarted { agent } => format!("turn of {agent} started"),
        AuditEvent::ModelCall {
            model,
            usage,
            tool_calls,
            ..
        } => format!(
            "model {model}: {} in / {} out tokens, {tool_calls} tool call(s)",
            usage.input_tokens, usage.output_tokens
        ),
        AuditEvent::ModelReply {
            text,
            tool_calls,
            stop,
        } => {
            let calls: Vec<&str> = tool_calls.iter().map(|c| c.name.as_str()).collect();
            let said = match (text.trim().is_empty(), calls.is_empty()) {
                (false, true) => format!("says: {text}"),
                (false, false) => format!("says: {text} — calls {}", calls.join(", ")),
                (true, _) => format!("calls {}", calls.join(", ")),
            };
            if stop.is_cut_off() {
                format!("{said} (cut off at the token limit)")
            } else {
                said
            }
        }
        AuditEvent::ToolStarted { call_id, tool } => format!("{tool} ({call_id}) started"),
        AuditEvent::RunResumed {
            previous,
            replayed_turns,
            interrupted,
        } => format!(
            "run resumed after {}; {replayed_turns} turn(s) fed back from the ledger{}",
            loopward_runner::audit::status_text(previous.as_ref()),
            listed("; interrupted calls: ", interrupted, "")
        ),
        AuditEvent::ToolRequested {
            call_id,
            tool,
            arguments,
        } => format!("{tool} ({call_id}) {arguments}"),
        AuditEvent::GateDecision {
            gate,
            action,
            path,
            decision,
            ..
        } => {
            let on = path
                .as_ref()
                .map_or_else(|| action.to_string(), |p| format!("{action} {p}"));
            match decision {
                Decision::Allow => format!("{gate}: allow {on}"),
                Decision::Deny(rf) => {
                    format!("{gate}: DENY {on} — {}; what to do: {}", rf.reason, rf.hint)
                }
                Decision::Warn(rf) => format!("{gate}: WARN {on} — {}", rf.reason),
                Decision::Override { id, reason } => {
                    format!("{gate}: OVERRIDE {on} — {id}, reason: {reason}")
                }
            }
        }
        AuditEvent::OverrideConsumed {
            id,
            agent,
            path,
            reason,
        } => format!("override {id} consumed for {agent} on {path} — reason: {reason}"),
        AuditEvent::ToolFinished {
            tool,
            is_error,
            effects,
            summary,
            ..
        } => {
            let fx: Vec<String> = effects
                .iter()
                .map(|f| {
                    let st = match f.status {
                        EffectStatus::Ok => "",
                        EffectStatus::Failed => " (failed)",
                        EffectStatus::Reverted => " (reverted)",
                    };
                    format!("{}{st}", f.path)
                })
                .collect();
            format!(
                "{tool} {}{}: {summary}",
                if *is_error { "failed" } else { "ok" },
                listed(" [", &fx, "]")
            )
        }
        AuditEvent::Violation {
            path,
            remedy,
            reason,
        } => format!("VIOLATION {path}: {reason} — remedy: {remedy}"),
        AuditEvent::HandoffRegistered(h) => format!("handoff → {}: {}", h.to, h.message),
        AuditEvent::HandoffRefused { to, standing } => {
            format!("second handoff to {to} refused (handoff to {standing} stands)")
        }
        AuditEvent::TurnEnded { finish, usage, .. } => format!(
            "turn ended ({}), {} in / {} out tokens",
            serde_json::to_value(finish)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default(),
            usage.input_tokens,
            usage.output_tokens
        ),
        AuditEvent::LayerDecision {
            layer,
            decision,
            detail,
        } => {
            if detail.is_null() {
                format!("{layer}: {decision}")
            } else {
                format!("{layer}: {decision} {detail}")
            }
        }
        AuditEvent::GateChanged { by, change, gate } => {
            format!("gate changed by {by}: {change} {gate}")
        }
        AuditEvent::LedgerRecovered { truncated_bytes } => {
            format!("ledger reopened after a crash; {truncated_bytes} torn byte(s) cut")
        }
        AuditEvent::EgressDecided {
            allowed,
            host,
            port,
            reason,
            ..
        } => format!(
            "egress to {host}:{port} {}: {reason}",
            if *allowed { "allowed" } else { "refused" }
        ),
        AuditEvent::EgressClosed {
            host,
            port,
            bytes_in,
            bytes_out,
            ..
        } => format!("egress to {host}:{port} closed: {bytes_out} bytes out, {bytes_in} in"),
        AuditEvent::RunEnded { status, .. } => {
            format!(
                "run ended: {}",
                loopward_runner::audit::status_text(Some(status))
            )
        }
        other => other.kind().to_string(),
    }
}

/// `items` joined by ", " between `before` and `after`; nothing when there are none.
fn listed<S: std::borrow::Borrow<str>>(before: &str, items: &[S], after: &str) -> String {
    if items.is_empty() {
        String::new()
    } else {
        format!("{before}{}{after}", items.join(", "))
    }
}
