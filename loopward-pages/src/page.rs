//! `audit.html`: one run at a glance.

use super::{events, matrix, shell, swimlane, timeline::Timeline, LedgerState};
use loopward_runner::audit::{cost_text, status_text};
use loopward_runner::audit::{GateFigures, RunFigures};
use loopward_runner::audit::{Record, GENESIS};
use maud::{html, Markup};
use std::collections::BTreeMap;

/// Renders a run's page from its records.
pub(crate) fn render(records: &[Record], ledger: &LedgerState) -> String {
    let f = RunFigures::from_records(records);
    let t = Timeline::from_records(records);
    let m = matrix::fold(records);
    let said = events::sayings(records);
    let title = format!("Run {}", f.run);
    let body = html! {
        h1 { (title) " " (status_badge(&f)) }
        @if !f.task.is_empty() { p.task { "Task: " (f.task) } }
        (figures(&f, records, ledger))
        @if !said.is_empty() {
            h2 { "Said to you" }
            p.none { "What agents told the people watching this run (their say calls). The run went on: nothing here asked or approved anything." }
            ul.said { @for (seq, s) in &said {
                li { a href=(format!("#seq-{seq}")) { "#" (seq) } " " (s) }
            } }
        }
        h2 { "Timeline" }
        (swimlane::full(&t))
        (swimlane::legend())
        h2 { "Files × agents" }
        (matrix::table(&m, &t.lanes))
        (gates("Gate decisions", &f.gates))
        @if !f.overrides.is_empty() {
            h2 { "Overrides" }
            ul { @for o in &f.overrides {
                li { a href=(format!("#seq-{}", o.seq)) { "#" (o.seq) } " " code { (o.id) } " for " (o.agent)
                     " on " code { (o.path) } " — reason: " (o.reason) }
            } }
        }
        h2 { "Events" }
        p.none { "Pass-through verdicts (a gate's allow, a layer's allow or admission) are folded; open them to see each one." }
        (events::table(records, &said))
    };
    shell(&title, body)
}

/// The gate decisions table, under the heading `title`; nothing when no gate decided.
pub(crate) fn gates(title: &str, gates: &BTreeMap<String, GateFigures>) -> Markup {
    html! {
        @if !gates.is_empty() {
            h2 { (title) }
            table.gates {
                thead { tr { th { "gate" } th.num { "allowed" } th.num { "denied" } th.num { "overridden" } th.num { "warned" } } }
                tbody { @for (name, g) in gates {
                    tr { td { (name) } td.num { (g.allowed) } td.num { (g.denied) } td.num { (g.overridden) } td.num { (g.warned) } }
                } }
            }
        }
    }
}

fn status_badge(f: &RunFigures) -> Markup {
    let class = match f.status.as_ref().map(|s| s.label()) {
        Some("completed") => "badge ok",
        None => "badge warn",
        _ => "badge bad",
    };
    html! { span class=(class) { (status_text(f.status.as_ref())) } }
}

fn figures(f: &RunFigures, records: &[Record], ledger: &LedgerState) -> Markup {
    let final_hash = records.last().map_or(GENESIS, |r| r.hash.as_str());
    let unauth = f.unauthorised_writes.len();
    html! {
        dl.figures {
            div { dt { "turns · handoffs" } dd { (f.turns) " · " (f.handoffs.len()) } }
            div { dt { "tokens (in / out, calls)" } dd { (f.usage.input_tokens) " / " (f.usage.output_tokens) " (" (f.usage.calls) ")" } }
            div { dt { "cost" } dd { (cost_text(f.cost_micros)) } }
            div { dt { "unauthorised writes" } dd {
                span class=(if unauth == 0 { "badge ok" } else { "badge bad" }) { (unauth) }
                " · violations " (f.violations) } }
            div { dt { "advisory warnings" } dd { (f.advisory.warned_calls) " warned call(s): "
                (f.advisory.heeded) " heeded, " (f.advisory.ignored) " went ahead" } }
            div { dt { "overrides consumed" } dd { (f.overrides.len()) } }
            div { dt { "ledger" } dd { (ledger_badge(ledger)) " " (records.len()) " records, " (ledger.mac)
                @if let Some(id) = &ledger.key_id { " key " code { (id) } } } }
            div { dt { "final hash" } dd.hash { (final_hash) } }
            @if f.recoveries > 0 { div { dt { "crash recoveries" } dd { (f.recoveries) } } }
            @if !f.egress.is_empty() { div { dt { "egress (allowed / refused)" } dd {
                span class=(if f.egress.refused == 0 { "badge ok" } else { "badge warn" }) {
                    (f.egress.allowed) " / " (f.egress.refused) }
                " · " (f.egress.bytes_out) " bytes out, " (f.egress.bytes_in) " in" } } }
        }
    }
}

/// The ledger's state as a badge.
pub(crate) fn ledger_badge(ledger: &LedgerState) -> Markup {
    match (&ledger.problem, ledger.anchored) {
        (Some(p), _) => html! { span.badge.bad title=(p) { "did not verify" } },
        (None, true) => html! { span.badge.ok { "verified, anchored" } },
        (None, false) => {
            html! { span.badge.ok title="the chain verifies; the anchor is appended after this page is written" { "verified" } }
        }
    }
}
