//! The files × agents matrix: for each path, what each agent did to it (wrote, was refused, went
//! through on an override, was warned, broke a rule after the fact).

use loopward_core::{AuditEvent, Decision, EffectStatus};
use loopward_runner::audit::Record;
use maud::{html, Markup};
use std::collections::BTreeMap;

/// What one agent did to one path.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Cell {
    pub(crate) wrote: u64,
    pub(crate) refused: u64,
    pub(crate) overridden: u64,
    pub(crate) warned: u64,
    pub(crate) violations: u64,
}

/// Path → agent → cell.
pub(crate) type Matrix = BTreeMap<String, BTreeMap<String, Cell>>;

/// Folds the records into the matrix.
pub(crate) fn fold(records: &[Record]) -> Matrix {
    let mut m = Matrix::new();
    for r in records {
        let (Some(agent), Ok(event)) = (r.agent.as_ref(), r.event()) else {
            continue;
        };
        let agent = agent.as_str();
        match &event {
            AuditEvent::GateDecision {
                path: Some(path),
                decision,
                ..
            } => match decision {
                Decision::Allow => {}
                Decision::Deny(_) => cell(&mut m, path, agent).refused += 1,
                Decision::Override { .. } => cell(&mut m, path, agent).overridden += 1,
                Decision::Warn(_) => cell(&mut m, path, agent).warned += 1,
            },
            AuditEvent::ToolFinished { effects, .. } => {
                for e in effects.iter().filter(|e| e.status == EffectStatus::Ok) {
                    cell(&mut m, &e.path, agent).wrote += 1;
                }
            }
            AuditEvent::Violation { path, .. } => cell(&mut m, path, agent).violations += 1,
            _ => {}
        }
    }
    m
}

fn cell<'m>(m: &'m mut Matrix, path: &str, agent: &str) -> &'m mut Cell {
    m.entry(path.to_string())
        .or_default()
        .entry(agent.to_string())
        .or_default()
}

/// The matrix as a table, agents as columns in lane order.
pub(crate) fn table(m: &Matrix, agents: &[String]) -> Markup {
    html! {
        @if m.is_empty() {
            p.none { "No file was written, refused or warned on in this run." }
        } @else {
            table.matrix {
                thead { tr { th { "file" } @for a in agents { th { (a) } } } }
                tbody {
                    @for (path, row) in m {
                        tr {
                            th.path { (path) }
                            @for a in agents {
                                @let c = row.get(a).copied().unwrap_or_default();
                                td class=(cell_class(&c)) { (cell_text(&c)) }
                            }
                        }
                    }
                }
            }
        }
    }
}

fn cell_class(c: &Cell) -> &'static str {
    if c.violations > 0 {
        "cell violation"
    } else if c.refused > 0 {
        "cell refusal"
    } else if c.warned > 0 {
        "cell warning"
    } else if c.overridden > 0 {
        "cell override"
    } else if c.wrote > 0 {
        "cell write"
    } else {
        "cell"
    }
}

fn cell_text(c: &Cell) -> String {
    let mut parts = Vec::new();
    if c.wrote > 0 {
        parts.push(if c.wrote == 1 {
            "wrote".to_string()
        } else {
            format!("wrote ×{}", c.wrote)
        });
    }
    for (n, what) in [
        (c.refused, "refused"),
        (c.overridden, "overridden"),
        (c.warned, "warned"),
        (c.violations, "violation"),
    ] {
        if n > 0 {
            parts.push(format!("{what} ×{n}"));
        }
    }
    parts.join(" · ")
}
