//! `runs/index.html`: one row per run with a mini swimlane, its status, counts and compliance;
//! runs whose ledgers did not verify are listed and marked, never left out.

use super::timeline::{MarkerKind, Timeline};
use super::{page, page::ledger_badge, shell, swimlane, LedgerState};
use loopward_runner::audit::cost_text;
use loopward_runner::audit::RunFigures;
use loopward_runner::audit::VerifyOptions;
use loopward_runner::audit::{scan_runs, Report, ReportError};
use maud::{html, Markup};
use std::path::Path;

/// One row of the index.
struct Row {
    name: String,
    ledger: LedgerState,
    run: Option<(RunFigures, Timeline)>,
}

/// Reads every run under `runs_dir` (verifying each ledger) and renders the index, with
/// `extra` sections (the calibration report) after the runs.
pub(crate) fn render_dir(
    runs_dir: &Path,
    opts: &VerifyOptions,
    extra: Option<Markup>,
) -> Result<String, ReportError> {
    let mut rows = Vec::new();
    let mut report = Report::default();
    scan_runs(runs_dir, opts, |scanned| match scanned.outcome {
        Ok((records, ok)) => {
            let f = RunFigures::from_records(&records);
            report.add(f.clone(), &ok);
            rows.push(Row {
                name: scanned.name,
                ledger: LedgerState {
                    mac: ok.mac.to_string(),
                    key_id: ok.key.as_ref().map(ToString::to_string),
                    anchored: ok.anchored,
                    problem: None,
                },
                run: Some((f, Timeline::from_records(&records))),
            });
        }
        Err(error) => {
            report.invalid.push(loopward_runner::audit::InvalidRun {
                run: scanned.name.clone(),
                error: error.clone(),
            });
            rows.push(Row {
                name: scanned.name,
                ledger: LedgerState {
                    mac: String::new(),
                    key_id: None,
                    anchored: false,
                    problem: Some(error),
                },
                run: None,
            });
        }
    })?;
    Ok(render(&rows, &report, extra))
}

fn render(rows: &[Row], report: &Report, extra: Option<Markup>) -> String {
    let u = &report.unauthorised_writes;
    let a = &report.advisory;
    let body = html! {
        h1 { "Runs" }
        dl.figures {
            div { dt { "runs verified · left out" } dd { (report.runs) " · "
                span class=(if report.invalid.is_empty() { "badge ok" } else { "badge bad" }) { (report.invalid.len()) } } }
            div { dt { "unauthorised writes" } dd { span class=(if u.total == 0 { "badge ok" } else { "badge bad" }) { (u.total) }
                " (" (u.advisory_warned) " advisory, " (u.unreverted_violations) " unreverted violations)" } }
            div { dt { "advisory compliance" } dd { (a.heeded) " of " (a.warned_calls) " warned calls heeded, " (a.ignored) " went ahead" } }
            div { dt { "overrides · violations" } dd { (report.overrides.len()) " · " (report.violations) } }
            div { dt { "turns · handoffs" } dd { (report.turns) " · " (report.handoffs) } }
            div { dt { "tokens · cost" } dd { (report.usage.total()) " · " (if report.runs_without_cost == report.runs { cost_text(None) } else { cost_text(Some(report.cost_micros)) }) } }
        }
        table.runs {
            thead { tr {
                th { "run" } th { "timeline" } th { "status" } th.num { "turns" } th.num { "handoffs" }
                th.num { "writes" } th.num { "refusals" } th.num { "warnings" } th.num { "overrides" }
                th.num { "violations" } th.num { "unauth." } th { "ledger" }
            } }
            tbody { @for row in rows { (run_row(row)) } }
        }
        (swimlane::legend())
        (page::gates("Gate decisions over all runs", &report.gates))
        @if let Some(extra) = extra { (extra) }
    };
    shell("Runs", body)
}

fn run_row(row: &Row) -> Markup {
    let Some((f, t)) = &row.run else {
        return html! {
            tr.invalid data-run=(row.name) {
                td.name { (row.name) }
                td colspan="10" { strong { "LEFT OUT: the ledger did not verify — " }
                    (row.ledger.problem.as_deref().unwrap_or_default()) }
                td { (ledger_badge(&row.ledger)) }
            }
        };
    };
    let status = f.status.as_ref().map_or("unfinished", |s| s.label());
    html! {
        tr.run data-run=(row.name) {
            td.name { a href=(format!("{}/audit.html", row.name)) { (row.name) } }
            td { a href=(format!("{}/audit.html", row.name)) { (swimlane::mini(t)) } }
            td { span class=(if status == "completed" { "badge ok" } else if status == "unfinished" { "badge warn" } else { "badge bad" }) { (status) } }
            td.num { (f.turns) } td.num { (f.handoffs.len()) }
            td.num { (t.count(MarkerKind::Write)) } td.num { (t.count(MarkerKind::Refusal)) }
            td.num { (t.count(MarkerKind::Warning)) } td.num { (f.overrides.len()) }
            td.num { (f.violations) } td.num { (f.unauthorised_writes.len()) }
            td { (ledger_badge(&row.ledger))
                @if let Some(id) = &row.ledger.key_id { " " code.key title="the key that verified it" { (id) } } }
        }
    }
}
