//! The calibration report as a section of `runs/index.html`.

use super::Calibration;
use loopward_runner::audit::{ReportError, VerifyOptions};
use maud::{html, Markup};
use std::path::Path;

/// Renders `runs/index.html` (see [`render_index`](loopward_pages::render_index)) with the
/// calibration report after the runs.
pub fn render_index_with_calibration(
    runs_dir: &Path,
    opts: &VerifyOptions,
    calibration: &Calibration,
) -> Result<String, ReportError> {
    loopward_pages::render_index_with(runs_dir, opts, section(calibration))
}

fn section(c: &Calibration) -> Markup {
    html! {
        h2 #calibration { "Calibration: the candidate config on recorded history" }
        p.none { (c.sessions) " session(s), " (c.turns) " turn(s), " (c.actions)
            " recorded action(s) re-judged in shadow mode (nothing executed); "
            (c.unjudged) " left unjudged."
            @if let Some(n) = c.changed { " Against the current config, " (n) " action(s) would be judged differently." }
            @for (by, n) in &c.verified_by { " Ledgers verified by " (by) ": " (n) "." } }
        table.calibration {
            thead { tr {
                th { "gate" } th.num { "writes" } th.num { "denied" } th.num { "warned" }
                th.num { "turns fired" } th.num { "sessions" } th.num { "rate" } th.num { "current" }
                th.num { "FP estimate" } th { "examples" }
            } }
            tbody { @for (name, g) in &c.gates {
                tr {
                    td { (name) } td.num { (g.actions) } td.num { (g.denied) } td.num { (g.warned) }
                    td.num { (g.turns_fired) " of " (c.turns) } td.num { (g.sessions_fired) }
                    td.num { (format!("{:.1}%", 100.0 * g.turn_rate)) }
                    td.num { @match g.current_turns_fired { Some(n) => (n), None => "–" } }
                    td.num title=(format!("afterwards: {}", g.aftermath.describe())) { (super::fp_text(g)) }
                    td { @for e in &g.examples {
                        div title=(format!("{} [{}]", e.text, e.assessment.describe())) { (e.session) " · turn " (e.turn) " · " (e.agent) " · " (e.action) }
                    } }
                }
            } }
        }
    }
}
