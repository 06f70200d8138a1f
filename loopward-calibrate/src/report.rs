//! What a calibration says: per gate, its firings, their assessments and the false-positive
//! estimate, as JSON or a terminal table.

use serde::Serialize;
use std::collections::BTreeMap;

/// What the history shows of one firing, and so whether it looks right.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Assessment {
    /// The action was refused or failed when it was recorded, or the recorded config flagged it
    /// (a warning, an override a person granted), or the recorded run did not complete anyway
    /// (for a firing that would have stopped it): right.
    Agreed,
    /// The write was reverted: right.
    Reverted,
    /// A plan was written later in the same turn: right (the sprawl gate asks for one).
    PlanFollowed,
    /// The same file was written again later by another agent or in a later turn: right (the
    /// work was not done yet).
    Reworked,
    /// The action stood and the history went on well without the firing (the run completed; a
    /// person's next message came; a repeat came after the workspace changed): a false positive.
    LikelyFalse,
    /// The action stood, but the history ends before it shows whether that was well.
    Unclear,
    /// The history does not say what became of the action.
    Unknown,
}

impl Assessment {
    /// Says it for a person.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Agreed => "right: refused, failed or flagged anyway",
            Self::Reverted => "right: reverted",
            Self::PlanFollowed => "right: a plan followed",
            Self::Reworked => "right: reworked later",
            Self::LikelyFalse => "likely false positive: it stood and the history went on well",
            Self::Unclear => "unclear: it stood, the history ends there",
            Self::Unknown => "unknown",
        }
    }
}

/// One example firing.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Firing {
    /// `ledger` or `claude-code`, and the run or session id.
    pub session: String,
    /// The turn (from 1) in the session.
    pub turn: u64,
    /// The agent.
    pub agent: String,
    /// The tool and the path.
    pub action: String,
    /// The refusal (or warning) the agent would have read.
    pub text: String,
    /// What the history shows of it.
    pub assessment: Assessment,
}

/// What came of the actions a gate fired on, as the history shows it: each firing assessed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Aftermath {
    /// [`Assessment::Agreed`].
    pub agreed: u64,
    /// [`Assessment::Reverted`].
    pub reverted: u64,
    /// [`Assessment::PlanFollowed`].
    pub plan_followed: u64,
    /// [`Assessment::Reworked`].
    pub reworked: u64,
    /// [`Assessment::LikelyFalse`].
    pub likely_false: u64,
    /// [`Assessment::Unclear`].
    pub unclear: u64,
    /// [`Assessment::Unknown`].
    pub unknown: u64,
}

impl Aftermath {
    pub(super) fn add(&mut self, a: Assessment) {
        let n = match a {
            Assessment::Agreed => &mut self.agreed,
            Assessment::Reverted => &mut self.reverted,
            Assessment::PlanFollowed => &mut self.plan_followed,
            Assessment::Reworked => &mut self.reworked,
            Assessment::LikelyFalse => &mut self.likely_false,
            Assessment::Unclear => &mut self.unclear,
            Assessment::Unknown => &mut self.unknown,
        };
        *n += 1;
    }

    /// Says it for a person.
    pub fn describe(&self) -> String {
        format!(
            "{} refused, failed or flagged anyway, {} reverted, {} followed by a plan, {} reworked later; {} likely false positives; {} unclear, {} unknown",
            self.agreed, self.reverted, self.plan_followed, self.reworked, self.likely_false, self.unclear, self.unknown
        )
    }

    /// Firings the history shows were right.
    pub fn right(&self) -> u64 {
        self.agreed + self.reverted + self.plan_followed + self.reworked
    }

    /// The false-positive estimate: likely false positives over the firings whose outcome is
    /// clear (right or likely false), and the range it lies in whichever way the unclear ones
    /// went. `None` when no firing's outcome is known.
    pub fn false_positives(&self) -> Option<(f64, (f64, f64))> {
        let clear = self.right() + self.likely_false;
        let known = clear + self.unclear;
        if known == 0 {
            return None;
        }
        let point = if clear == 0 {
            (self.likely_false + self.unclear) as f64 / known as f64
        } else {
            self.likely_false as f64 / clear as f64
        };
        let lo = self.likely_false as f64 / known as f64;
        let hi = (self.likely_false + self.unclear) as f64 / known as f64;
        Some((point, (lo, hi)))
    }
}

/// One gate's figures under the candidate config.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct GateCalibration {
    /// Actions it decided on.
    pub actions: u64,
    /// Denials (enforce) it would have given, or stops it would have made.
    pub denied: u64,
    /// Warnings (advisory) it would have given.
    pub warned: u64,
    /// Turns it would have fired in.
    pub turns_fired: u64,
    /// Sessions (runs) it would have fired in.
    pub sessions_fired: u64,
    /// `turns_fired` over all turns.
    pub turn_rate: f64,
    /// What came of the actions it fired on, firing by firing.
    pub aftermath: Aftermath,
    /// Likely false positives over the firings whose outcome is clear (`None`: none clear).
    pub false_positive_estimate: Option<f64>,
    /// The range the false-positive rate lies in, whichever way the unclear firings went.
    pub false_positive_range: Option<(f64, f64)>,
    /// The first few firings.
    pub examples: Vec<Firing>,
    /// Under the current config: turns it fired in (`None`: no current config given).
    pub current_turns_fired: Option<u64>,
    /// Refusals, stops and forced jumps by this gate recorded in the ledgers (what actually
    /// happened under the recorded config).
    pub recorded_refusals: u64,
}

/// The calibration report.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Calibration {
    /// Sessions (runs and Claude Code sessions) read.
    pub sessions: u64,
    /// Turns (a person's message starts one).
    pub turns: u64,
    /// Recorded actions re-judged: file writes (all sources), and every other tool call and
    /// agent turn of a ledger.
    pub actions: u64,
    /// Recorded file writes re-judged (a part of `actions`).
    pub writes: u64,
    /// Records (ledger records, transcript lines) read, for the throughput.
    pub records: u64,
    /// Writes left out: outside the workspace or by an agent name loopward cannot use.
    pub unjudged: u64,
    /// Per gate, under the candidate.
    pub gates: BTreeMap<String, GateCalibration>,
    /// Actions whose verdict differs between the current config and the candidate (`None`: no
    /// current config given).
    pub changed: Option<u64>,
    /// The first few of them: (firing under the candidate, or the action it stops firing on).
    pub changed_examples: Vec<Firing>,
    /// Ledgers read, by what verified them (`key k…`, `keyless (sha256)`).
    pub verified_by: BTreeMap<String, u64>,
    /// Ledgers left out because they did not verify, with the reason.
    pub left_out: Vec<(String, String)>,
}

/// The false-positive estimate and its range, for a table cell.
pub(crate) fn fp_text(g: &GateCalibration) -> String {
    match (g.false_positive_estimate, g.false_positive_range) {
        (Some(p), Some((lo, hi))) if (hi - lo).abs() < 1e-9 => format!("{:.0}%", 100.0 * p),
        (Some(p), Some((lo, hi))) => {
            format!("{:.0}% ({:.0}–{:.0}%)", 100.0 * p, 100.0 * lo, 100.0 * hi)
        }
        _ => "-".into(),
    }
}

impl Calibration {
    /// Stable, pretty JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self)
            .unwrap_or_else(|e| format!("{{\"error\":{:?}}}", e.to_string()))
    }

    /// A plain-text table for a terminal.
    pub fn to_table(&self) -> String {
        use std::fmt::Write as _;
        let mut o = String::new();
        let _ = writeln!(
            o,
            "{} session(s), {} turn(s), {} recorded action(s) re-judged from {} record(s) ({} write(s) left unjudged: outside the workspace or unnamed agent)",
            self.sessions, self.turns, self.actions, self.records, self.unjudged
        );
        let _ = writeln!(
            o,
            "\n{:<28} {:>7} {:>7} {:>7} {:>12} {:>9} {:>7} {:>9} {:>9}  FP estimate (range)",
            "gate",
            "actions",
            "denied",
            "warned",
            "turns fired",
            "sessions",
            "rate",
            "current",
            "recorded",
        );
        for (name, g) in &self.gates {
            let _ = writeln!(
                o,
                "{:<28} {:>7} {:>7} {:>7} {:>12} {:>9} {:>6.1}% {:>9} {:>9}  {}",
                name,
                g.actions,
                g.denied,
                g.warned,
                format!("{} of {}", g.turns_fired, self.turns),
                g.sessions_fired,
                100.0 * g.turn_rate,
                g.current_turns_fired
                    .map_or_else(|| "-".into(), |n| format!("{n} turns")),
                g.recorded_refusals,
                fp_text(g),
            );
        }
        for (name, g) in &self.gates {
            if g.examples.is_empty() {
                continue;
            }
            let a = g.aftermath;
            let _ = writeln!(o, "\n{name}: afterwards {}", a.describe());
            for e in &g.examples {
                let _ = writeln!(
                    o,
                    "  {} turn {} · {} · {}: {} [{}]",
                    e.session,
                    e.turn,
                    e.agent,
                    e.action,
                    e.text,
                    e.assessment.describe()
                );
            }
        }
        if let Some(n) = self.changed {
            let _ = writeln!(
                o,
                "\nagainst the current config: {n} action(s) would be judged differently"
            );
            for e in &self.changed_examples {
                let _ = writeln!(
                    o,
                    "  {} turn {} · {} · {}: {}",
                    e.session, e.turn, e.agent, e.action, e.text
                );
            }
        }
        let _ = writeln!(
            o,
            "\nFP estimate: each firing is assessed from what the history shows came next; the estimate is the likely false positives (the action stood and the history went on well: the run completed, the person's next message came, a repeat followed a change) over the firings whose outcome is clear; the range counts the unclear ones (the history ends there) as right, then as false."
        );
        for (by, n) in &self.verified_by {
            let _ = writeln!(o, "ledgers verified by {by}: {n}");
        }
        for (run, why) in &self.left_out {
            let _ = writeln!(o, "LEFT OUT {run}: {why}");
        }
        o
    }
}
