//! What each part hands back: a section of `bench/results.md` with its raw figures.

use serde::Serialize;

/// One part of the results: a table, the targets with the measured figure next to each, notes,
/// and the raw numbers behind them.
#[derive(Clone, Debug, Serialize)]
pub struct Section {
    /// The part's number (1–5); sections are shown in this order.
    pub part: u8,
    /// Its heading.
    pub title: String,
    /// What is measured against what, and how (markdown).
    pub method: String,
    /// Table header.
    pub columns: Vec<String>,
    /// Table rows, already formatted.
    pub rows: Vec<Vec<String>>,
    /// Targets, each with the measured figure.
    pub targets: Vec<Target>,
    /// Findings and caveats (markdown, one per bullet).
    pub notes: Vec<String>,
    /// The raw numbers (ns, counts, bytes) for machines.
    pub data: serde_json::Value,
}

impl Section {
    /// A part that did not run, with the reason in one line.
    pub fn skipped(part: u8, title: &str, why: &str) -> Self {
        Self {
            part,
            title: title.into(),
            method: why.into(),
            columns: vec![],
            rows: vec![],
            targets: vec![],
            notes: vec![],
            data: serde_json::json!({ "skipped": why }),
        }
    }
}

/// A target and the figure measured against it.
#[derive(Clone, Debug, Serialize)]
pub struct Target {
    /// What is measured.
    pub what: String,
    /// The target, as stated in the issue.
    pub target: String,
    /// The measured figure.
    pub measured: String,
    /// How the figure stands against the target.
    pub verdict: Verdict,
    /// Why it was missed or not shown (or not measured), as found.
    pub reason: Option<String>,
}

impl Target {
    /// A ceiling: met when `measured` is at most `bound`, both written by `fmt`.
    pub fn at_most(
        what: impl Into<String>,
        measured: f64,
        bound: f64,
        fmt: impl Fn(f64) -> String,
    ) -> Self {
        Self::met_if(
            what,
            format!("≤ {}", fmt(bound)),
            fmt(measured),
            measured <= bound,
        )
    }

    /// `what`, against `target`, measured as `measured`: met when `met`.
    pub fn met_if(
        what: impl Into<String>,
        target: impl Into<String>,
        measured: String,
        met: bool,
    ) -> Self {
        Self {
            what: what.into(),
            target: target.into(),
            measured,
            verdict: Verdict::met_if(met),
            reason: None,
        }
    }

    /// Says why, when the target was missed.
    pub fn or_missed(mut self, why: impl FnOnce() -> String) -> Self {
        if self.verdict == Verdict::Missed {
            self.reason = Some(why());
        }
        self
    }
}

/// How a measured figure stands against its target. Written into the JSON in snake case
/// (`"not_shown"`); `cargo xtask bench` renders it into `results.md`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Met; for an estimate with an interval, by the whole interval.
    Met,
    /// The estimate meets the target but its interval reaches past it: this run cannot tell.
    NotShown,
    /// The estimate misses the target.
    Missed,
    /// Not measured in this run.
    NotMeasured,
}

impl Verdict {
    /// [`Met`](Self::Met) or [`Missed`](Self::Missed), for a figure without an interval.
    pub fn met_if(met: bool) -> Self {
        if met {
            Self::Met
        } else {
            Self::Missed
        }
    }
}

/// Formats nanoseconds with a unit that keeps three significant figures.
pub fn fmt_ns(ns: f64) -> String {
    if ns.abs() < 1_000.0 {
        format!("{ns:.0} ns")
    } else if ns.abs() < 1_000_000.0 {
        format!("{:.2} µs", ns / 1_000.0)
    } else {
        format!("{:.2} ms", ns / 1_000_000.0)
    }
}

/// A cell comparing a row with the first, the baseline: a dash on the baseline's own row.
pub fn beside_base(row: usize, cell: impl FnOnce() -> String) -> String {
    if row == 0 {
        "—".into()
    } else {
        cell()
    }
}

/// Formats a ratio (`1.23×`).
pub fn fmt_ratio(r: f64) -> String {
    if r != 0.0 && r.abs() < 0.1 {
        format!("{r:.4}×")
    } else {
        format!("{r:.2}×")
    }
}

/// Formats a rate with thousands separators (`12,345/s`).
pub fn fmt_rate(per_sec: f64) -> String {
    format!("{}/s", thousands(per_sec.round() as u64))
}

/// Formats bytes as KiB with one decimal (`12.3 KiB`).
pub fn fmt_kib(bytes: f64) -> String {
    format!("{:.1} KiB", bytes / 1024.0)
}

/// `1234567` → `1,234,567`.
pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_read_naturally() {
        assert_eq!(fmt_ns(950.0), "950 ns");
        assert_eq!(fmt_ns(12_345.0), "12.35 µs");
        assert_eq!(fmt_ns(3_200_000.0), "3.20 ms");
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(fmt_rate(999.6), "1,000/s");
        assert_eq!(fmt_kib(2048.0), "2.0 KiB");
        assert_eq!(fmt_ratio(1.234), "1.23×");
        assert_eq!(fmt_ratio(0.00123), "0.0012×");
    }
}
