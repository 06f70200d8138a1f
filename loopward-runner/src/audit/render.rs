//! `audit.json` and `audit.md`, rendered from a run's ledger records and nothing else.
//!
//! ```
//! use loopward_core::{AuditEvent, RunId, Scope};
//! use loopward_runner::audit::{render_markdown, Chain, Record, GENESIS};
//! let scope = Scope { run: RunId::new("r1").unwrap(), turn: None, agent: None };
//! let (rec, _) = Record::seal(&Chain::Sha256, 1, "2026-01-01T00:00:00.000Z", &scope,
//!     &AuditEvent::HumanMessage { content: (&loopward_core::Person::at_the_keyboard().says("say hello")).into() }, GENESIS).unwrap();
//! assert!(render_markdown(&[rec]).contains("say hello"));
//! ```

use super::figures::{GateFigures, RunFigures};
use super::record::{Record, GENESIS};
use loopward_core::{AuditEvent, Decision, Effect, EffectKind, EffectStatus, RunStatus, Usage};
use serde::Serialize;
use std::fmt::Write as _;

/// The `audit.json` envelope: the run's figures, the ledger's end, and every record.
#[derive(Serialize)]
struct Envelope<'a> {
    #[serde(flatten)]
    figures: RunFigures,
    ledger: LedgerEnd,
    events: &'a [Record],
}

#[derive(Serialize)]
struct LedgerEnd {
    records: u64,
    final_hash: String,
    mac: String,
}

/// Renders `audit.json`: the run's figures (see [`RunFigures`]), the ledger's final sequence
/// number and hash, and every record.
pub fn render_json(records: &[Record], mac: &str) -> String {
    let env = Envelope {
        figures: RunFigures::from_records(records),
        ledger: LedgerEnd {
            records: records.len() as u64,
            final_hash: records
                .last()
                .map_or_else(|| GENESIS.to_string(), |r| r.hash.clone()),
            mac: mac.into(),
        },
        events: records,
    };
    let mut s = serde_json::to_string_pretty(&env)
        .unwrap_or_else(|e| format!("{{\"error\":{:?}}}", e.to_string()));
    s.push('\n');
    s
}

/// Renders `audit.md`: a header with the run's figures, then the timeline turn by turn.
pub fn render_markdown(records: &[Record]) -> String {
    let f = RunFigures::from_records(records);
    let mut out = String::new();
    let _ = writeln!(out, "# Run {}\n", f.run);
    if !f.task.is_empty() {
        let _ = writeln!(out, "Task: {}\n", one_line(&f.task));
    }
    let _ = writeln!(out, "- Status: {}", status_text(f.status.as_ref()));
    let _ = writeln!(out, "- Turns: {} · handoffs: {}", f.turns, f.handoffs.len());
    let _ = writeln!(out, "- Usage: {}", usage_text(&f.usage));
    let _ = writeln!(out, "- Cost: {}", cost_text(f.cost_micros));
    let _ = writeln!(
        out,
        "- Unauthorised writes: {} · violations: {}",
        f.unauthorised_writes.len(),
        f.violations
    );
    if let Some(last) = records.last() {
        let chain = match records.first().and_then(|r| r.ledger.as_ref()) {
            Some(h) => match &h.key {
                Some(k) => format!("{} under key `{k}`", h.chain),
                None => format!("{} (keyless)", h.chain),
            },
            None => "sha256 (keyless, schema 1)".into(),
        };
        let _ = writeln!(
            out,
            "- Ledger: {} records, {chain}, final hash `{}`",
            records.len(),
            last.hash
        );
    }
    out.push_str("\n## Timeline\n\n");
    let mut sayings = super::Sayings::default();
    for r in records {
        let said = super::Sayings::concerns(&r.kind)
            .then(|| r.event().ok())
            .flatten()
            .and_then(|e| sayings.fold(r.agent.as_ref(), &e));
        if let Some(said) = said {
            let t = r.time.get(11..23).unwrap_or(&r.time);
            // Said to a person: whole (up to the tool's bound), on one line.
            let text = said.text.replace(['\n', '\r'], " ");
            let _ = writeln!(
                out,
                "- `{t}` #{} **{} said:** {text}",
                r.seq,
                said.speaker()
            );
        } else if let Some(line) = timeline_line(r, f.cost_micros) {
            out.push_str(&line);
        }
    }
    let appeals = appeals(records);
    if !appeals.is_empty() {
        out.push_str("\n## Replies after a refusal\n\nWhat an agent said in the turn a gate refused it (where a refusal's appeal is made).\n\n");
        for (seq, who, text) in appeals {
            let _ = writeln!(out, "- seq {seq}, {who}: {}", one_line(&text));
        }
    }
    if !f.gates.is_empty() {
        out.push_str("\n## Gate decisions\n\n| gate | allowed | denied | overridden | warned |\n|---|---:|---:|---:|---:|\n");
        for (name, g) in &f.gates {
            out.push_str(&gate_row(name, g));
        }
    }
    if !f.overrides.is_empty() {
        out.push_str("\n## Overrides\n\n");
        for o in &f.overrides {
            let _ = writeln!(
                out,
                "- seq {}: `{}` for {} on `{}` — reason: {}",
                o.seq,
                o.id,
                o.agent,
                o.path,
                one_line(&o.reason)
            );
        }
    }
    out
}

fn gate_row(name: &str, g: &GateFigures) -> String {
    format!(
        "| {name} | {} | {} | {} | {} |\n",
        g.allowed, g.denied, g.overridden, g.warned
    )
}

/// Replies with text made in a turn after a gate or layer refused something in it: where an
/// agent contests a rule "in its reply", a person finds it here.
fn appeals(records: &[Record]) -> Vec<(u64, String, String)> {
    let mut refused_in: Option<loopward_core::TurnNumber> = None;
    let mut out = vec![];
    for r in records {
        let Ok(event) = r.event() else { continue };
        match event {
            AuditEvent::GateDecision {
                decision: Decision::Deny(_),
                ..
            } => refused_in = r.turn,
            AuditEvent::TurnStarted { .. } => refused_in = None,
            AuditEvent::ModelReply { text, .. }
                if !text.trim().is_empty() && refused_in.is_some() && refused_in == r.turn =>
            {
                let who = r.agent.as_ref().map_or("?", |a| a.as_str()).to_string();
                out.push((r.seq, who, text));
            }
            _ => {}
        }
    }
    out
}

fn timeline_line(r: &Record, run_cost: Option<u64>) -> Option<String> {
    let t = r.time.get(11..23).unwrap_or(&r.time);
    let Ok(event) = r.event() else {
        return Some(format!(
            "- `{t}` #{} {} (unreadable event)\n",
            r.seq, r.kind
        ));
    };
    let s = r.seq;
    let line = match event {
        AuditEvent::RunStarted { task, agent } => {
            format!("- `{t}` #{s} run started with {agent}: {}", one_line(&task))
        }
        AuditEvent::HumanMessage { content } => {
            format!("- `{t}` #{s} human: {}", one_line(content.as_str()))
        }
        AuditEvent::TurnStarted { agent } => {
            let n = r.turn.map_or_else(String::new, |n| format!(" {n}"));
            return Some(format!(
                "\n### Turn{n} — {agent}\n\n- `{t}` #{s} turn started\n"
            ));
        }
        AuditEvent::ModelCall {
            model,
            usage,
            cost_micros,
            tool_calls,
        } => format!(
            "- `{t}` #{s} model {model}: {} in / {} out tokens, {tool_calls} tool call(s){}",
            usage.input_tokens,
            usage.output_tokens,
            cost_micros.map_or_else(String::new, |c| format!(", {}", cost_text(Some(c))))
        ),
        AuditEvent::ToolRequested {
            call_id,
            tool,
            arguments,
        } => format!(
            "- `{t}` #{s} tool {tool} requested ({call_id}){}",
            arguments
                .get("path")
                .and_then(|p| p.as_str())
                .map_or_else(String::new, |p| format!(": `{}`", one_line(p)))
        ),
        AuditEvent::GateDecision {
            gate,
            mode,
            action,
            path,
            decision,
            ..
        } => {
            let on = path.map_or(action.to_string(), |p| format!("{action} `{p}`"));
            let mode = serde_json::to_value(mode)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            match decision {
                Decision::Allow => format!("- `{t}` #{s} gate {gate} ({mode}): allow {on}"),
                Decision::Override { id, reason } => format!(
                    "- `{t}` #{s} gate {gate} ({mode}): **override** {on} — override `{id}`, reason: {}",
                    one_line(&reason)
                ),
                Decision::Warn(rf) => format!(
                    "- `{t}` #{s} gate {gate} ({mode}): **warn** {on} — {}",
                    one_line(&rf.reason)
                ),
                Decision::Deny(rf) => format!(
                    "- `{t}` #{s} gate {gate} ({mode}): **deny** {on} — {}; what to do: {}",
                    one_line(&rf.reason),
                    one_line(&rf.hint)
                ),
            }
        }
        AuditEvent::OverrideConsumed {
            id,
            agent,
            path,
            reason,
        } => format!(
            "- `{t}` #{s} override `{id}` consumed for {agent} on `{path}` — reason: {}",
            one_line(&reason)
        ),
        AuditEvent::ToolFinished {
            tool,
            is_error,
            effects,
            summary,
            ..
        } => format!(
            "- `{t}` #{s} tool {tool} {}{}{}",
            if is_error { "failed" } else { "ok" },
            effects_text(&effects),
            if summary.is_empty() {
                String::new()
            } else {
                format!(": {}", one_line(&summary))
            }
        ),
        AuditEvent::Violation {
            path,
            remedy,
            reason,
        } => format!(
            "- `{t}` #{s} **violation** `{path}`: {} — remedy: {}",
            one_line(&reason),
            one_line(&remedy.to_string())
        ),
        AuditEvent::HandoffRegistered(h) => {
            format!(
                "- `{t}` #{s} ↪ handoff → {}: {}",
                h.to,
                one_line(&h.message)
            )
        }
        AuditEvent::HandoffRefused { to, standing } => {
            format!("- `{t}` #{s} second handoff to {to} refused (handoff to {standing} stands)")
        }
        AuditEvent::TurnEnded { finish, usage, .. } => {
            let finish = serde_json::to_value(finish)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            format!("- `{t}` #{s} turn ended ({finish}), {}", usage_text(&usage))
        }
        AuditEvent::LayerDecision {
            layer,
            decision,
            detail,
        } => format!(
            "- `{t}` #{s} layer {layer}: {decision}{}",
            if detail.is_null() {
                String::new()
            } else {
                format!(" {detail}")
            }
        ),
        AuditEvent::GateChanged { by, change, gate } => {
            format!("- `{t}` #{s} gate changed by {by}: {change} {gate}")
        }
        AuditEvent::LedgerRecovered { truncated_bytes } => format!(
            "- `{t}` #{s} ledger reopened after a crash; {truncated_bytes} torn byte(s) cut"
        ),
        // The journal's mark that an effect began; the tool's requested/finished lines say it.
        AuditEvent::ToolStarted { .. } => return None,
        AuditEvent::ModelReply { text, .. } => {
            if text.trim().is_empty() {
                return None; // a reply of tool calls only: the calls have their own lines
            }
            let who = r.agent.as_ref().map_or("?", |a| a.as_str());
            let quoted: Vec<String> = text.lines().map(|l| format!("  > {l}")).collect();
            format!("- `{t}` #{s} {who} replied:\n{}", quoted.join("\n"))
        }
        AuditEvent::RunEnded {
            status,
            usage,
            cost_micros,
        } => {
            // The run's cost is the sum of its model calls' (the runner knows no prices), the
            // same figure the header shows.
            return Some(format!(
                "\n### End\n\n- `{t}` #{s} run ended: {}, {}, cost {}\n",
                status_text(Some(&status)),
                usage_text(&usage),
                cost_text(cost_micros.or(run_cost))
            ));
        }
        _ => format!("- `{t}` #{s} {}", r.kind),
    };
    Some(line + "\n")
}

fn effects_text(effects: &[Effect]) -> String {
    if effects.is_empty() {
        return String::new();
    }
    let parts: Vec<String> = effects
        .iter()
        .map(|e| {
            let kind = match &e.kind {
                EffectKind::Create => "create".to_string(),
                EffectKind::Modify => "modify".to_string(),
                EffectKind::Delete => "delete".to_string(),
                EffectKind::Rename { from } => format!("rename from {from}"),
                EffectKind::Link => "link".to_string(),
                _ => "change".to_string(),
            };
            let status = match e.status {
                EffectStatus::Ok => "",
                EffectStatus::Failed => ", failed",
                EffectStatus::Reverted => ", reverted",
            };
            format!("{kind} `{}`{status}", e.path)
        })
        .collect();
    format!(" ({})", parts.join("; "))
}

/// How a run ended, in words.
pub fn status_text(status: Option<&RunStatus>) -> String {
    let Some(status) = status else {
        return "unfinished (no run_ended record)".into();
    };
    let detail = match status {
        RunStatus::CapReached { cap } => cap.clone(),
        RunStatus::BudgetExceeded { budget } => budget.clone(),
        RunStatus::Stopped { reason } => reason.clone(),
        RunStatus::AwaitingApproval { pending } => pending.clone(),
        RunStatus::AuditFailed { error } | RunStatus::Failed { error } => error.clone(),
        _ => String::new(),
    };
    if detail.is_empty() {
        status.label().into()
    } else {
        format!("{} ({})", status.label(), one_line(&detail))
    }
}

/// Tokens, in words.
pub(crate) fn usage_text(u: &Usage) -> String {
    format!(
        "{} in / {} out tokens ({} cached, {} call(s))",
        u.input_tokens, u.output_tokens, u.cached_tokens, u.calls
    )
}

/// Micro-dollars as dollars.
pub fn cost_text(micros: Option<u64>) -> String {
    micros.map_or_else(
        || "unknown (no prices)".into(),
        |m| format!("${}.{:06}", m / 1_000_000, m % 1_000_000),
    )
}

fn one_line(s: &str) -> String {
    let flat = s.replace(['\n', '\r'], " ");
    if flat.chars().count() > 200 {
        flat.chars().take(200).collect::<String>() + "…"
    } else {
        flat
    }
}
