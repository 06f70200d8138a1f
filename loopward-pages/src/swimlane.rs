//! The swimlane as inline SVG: one lane per agent, turns as bars, handoffs as arrows, markers
//! that link to their ledger records. The mini form (the index page) draws the same model small,
//! without labels or links.

use super::timeline::{MarkerKind, Timeline};
use maud::{html, Markup};

/// Sizes of one drawing.
struct Geometry {
    width: f64,
    label: f64,
    lane_h: f64,
    bar_h: f64,
    dot: f64,
}

const FULL: Geometry = Geometry {
    width: 1200.0,
    label: 120.0,
    lane_h: 40.0,
    bar_h: 18.0,
    dot: 6.0,
};

const MINI: Geometry = Geometry {
    width: 320.0,
    label: 0.0,
    lane_h: 10.0,
    bar_h: 6.0,
    dot: 2.5,
};

impl Geometry {
    fn x(&self, t: &Timeline, seq: u64) -> f64 {
        let plot = self.width - self.label - 2.0 * self.dot - 4.0;
        let span = t.span.saturating_sub(1).max(1) as f64;
        self.label + self.dot + 2.0 + plot * (seq.saturating_sub(1) as f64) / span
    }

    fn y(&self, lane: usize) -> f64 {
        self.lane_h * lane as f64 + self.lane_h / 2.0
    }

    fn height(&self, t: &Timeline) -> f64 {
        self.lane_h * t.lanes.len().max(1) as f64
    }
}

fn n(v: f64) -> String {
    format!("{v:.1}")
}

/// The full swimlane of a run, with lane labels, tooltips and links to `#seq-N`.
pub(crate) fn full(t: &Timeline) -> Markup {
    let g = &FULL;
    let h = g.height(t);
    html! {
        svg.swimlane xmlns="http://www.w3.org/2000/svg" viewBox=(format!("0 0 {} {}", g.width, n(h)))
            role="img" aria-label=(format!("swimlane of {} agent(s)", t.lanes.len())) {
            defs {
                marker #head viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto" {
                    path d="M0,0 L10,5 L0,10 z" {}
                }
            }
            @for (i, lane) in t.lanes.iter().enumerate() {
                g.lane data-agent=(lane) {
                    rect.lane-bg x="0" y=(n(g.lane_h * i as f64)) width=(g.width) height=(g.lane_h) {}
                    text.lane-label x="8" y=(n(g.y(i) + 4.0)) { (lane) }
                }
            }
            @for bar in &t.turns {
                @let (x0, x1) = (g.x(t, bar.start), g.x(t, bar.end));
                rect.turn x=(n(x0)) y=(n(g.y(bar.lane) - g.bar_h / 2.0)) width=(n((x1 - x0).max(4.0)))
                    height=(g.bar_h) rx="3" {
                    title { (turn_title(t, bar)) }
                }
            }
            @for a in &t.arrows {
                @let x0 = g.x(t, a.seq);
                // A refused handoff lands nowhere: a short dashed stroke towards the lane it aimed at.
                @let x1 = if a.stood { g.x(t, a.land) } else { x0 + 2.0 * g.lane_h / 3.0 };
                @let (y0, y1) = (g.y(a.from), g.y(a.to));
                @let y1 = if y1 > y0 { y1 - g.bar_h / 2.0 } else { y1 + g.bar_h / 2.0 };
                a href=(format!("#seq-{}", a.seq)) {
                    line class=(if a.stood { "arrow stood" } else { "arrow refused" })
                        x1=(n(x0)) y1=(n(y0)) x2=(n(x1.max(x0))) y2=(n(y1)) marker-end="url(#head)" {
                        title { (a.title) }
                    }
                }
            }
            @for m in &t.markers {
                a href=(format!("#seq-{}", m.seq)) {
                    circle class=(format!("marker {}", m.kind.class())) cx=(n(g.x(t, m.seq)))
                        cy=(n(g.y(m.lane) + offset(m.kind) * g.bar_h / 2.0)) r=(g.dot) {
                        title { "#" (m.seq) " " (m.title) }
                    }
                }
            }
        }
    }
}

/// The small swimlane of the index page: same model, no labels, no links.
pub(crate) fn mini(t: &Timeline) -> Markup {
    let g = &MINI;
    let h = g.height(t);
    html! {
        svg.mini xmlns="http://www.w3.org/2000/svg" viewBox=(format!("0 0 {} {}", g.width, n(h)))
            width=(g.width) height=(n(h)) role="img"
            aria-label=(format!("{} agent(s), {} turn(s)", t.lanes.len(), t.turns.len())) {
            @for (i, lane) in t.lanes.iter().enumerate() {
                rect.lane-bg x="0" y=(n(g.lane_h * i as f64)) width=(g.width) height=(g.lane_h) {
                    title { (lane) }
                }
            }
            @for bar in &t.turns {
                @let (x0, x1) = (g.x(t, bar.start), g.x(t, bar.end));
                rect.turn x=(n(x0)) y=(n(g.y(bar.lane) - g.bar_h / 2.0)) width=(n((x1 - x0).max(2.0)))
                    height=(g.bar_h) rx="1" {}
            }
            @for a in &t.arrows {
                line class=(if a.stood { "arrow stood" } else { "arrow refused" })
                    x1=(n(g.x(t, a.seq))) y1=(n(g.y(a.from))) x2=(n(g.x(t, a.land).max(g.x(t, a.seq))))
                    y2=(n(g.y(a.to))) {}
            }
            @for m in &t.markers {
                circle class=(format!("marker {}", m.kind.class())) cx=(n(g.x(t, m.seq)))
                    cy=(n(g.y(m.lane))) r=(g.dot) {}
            }
        }
    }
}

/// The legend: one swatch per marker kind and both arrow styles.
pub(crate) fn legend() -> Markup {
    html! {
        ul.legend {
            @for k in MarkerKind::ALL {
                li { span class=(format!("swatch {}", k.class())) {} (k.label()) }
            }
            li { span.swatch.arrow-stood {} "handoff (stood)" }
            li { span.swatch.arrow-refused {} "handoff (refused)" }
        }
    }
}

/// Markers of kinds that often share a record's neighbourhood sit above or below the bar's centre.
fn offset(kind: MarkerKind) -> f64 {
    match kind {
        MarkerKind::Write | MarkerKind::Override => -1.0,
        MarkerKind::Refusal | MarkerKind::Violation | MarkerKind::Cap => 1.0,
        MarkerKind::Warning | MarkerKind::StopGate | MarkerKind::ClassJump => 0.0,
    }
}

fn turn_title(t: &Timeline, bar: &super::timeline::TurnBar) -> String {
    let said = if bar.said.is_empty() {
        String::new()
    } else {
        format!(
            "\n{}: “{}”",
            t.lanes.get(bar.lane).map_or("?", String::as_str),
            bar.said
        )
    };
    format!(
        "turn {} · {} · records {}–{} · {}{said}",
        bar.turn.map_or_else(|| "?".into(), |n| n.to_string()),
        t.lanes.get(bar.lane).map_or("?", String::as_str),
        bar.start,
        bar.end,
        bar.finish
    )
}
