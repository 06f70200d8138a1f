//! The figures a finished run is summed up with, folded from its ledger.

use loopward::ledger;
use loopward_core::RunStatus;
use std::path::Path;

/// Turns, handoffs and tokens as `loopward report` shows them: folded from the ledger, not
/// from runner state (a stopped turn's tokens and handoffs are in the ledger either way).
#[derive(Debug)]
pub(super) struct Figures {
    pub(super) turns: u64,
    pub(super) handoffs: usize,
    pub(super) tokens: u64,
    /// Why `tokens` may be short, when it may be.
    pub(super) short: Option<&'static str>,
}

impl Figures {
    pub(super) fn of(run_dir: &Path, report: &loopward_runner::RunReport) -> Self {
        // A model call is paid before its record is written: once the ledger has failed, a
        // call whose record was lost is in no count.
        let stopped = matches!(report.status, RunStatus::AuditFailed { .. })
            .then_some("the ledger stopped recording");
        match ledger::run_figures(run_dir) {
            Ok(f) => Self {
                turns: f.turns,
                handoffs: f.handoffs.len(),
                tokens: f.usage.total(),
                short: stopped,
            },
            // The runner counts a turn's tokens only when the turn ends.
            Err(_) => Self {
                turns: u64::from(report.turns),
                handoffs: report.handoffs.len(),
                tokens: report.usage.total(),
                short: stopped.or(Some("the ledger could not be read")),
            },
        }
    }

    /// `2 turns, 1 handoff, 170 tokens`; a count that may be short says so.
    pub(super) fn text(&self) -> String {
        let tokens = match (self.short, self.tokens) {
            (None, n) => format!("{n} tokens"),
            (Some(why), 0) => format!("tokens unknown ({why})"),
            (Some(why), n) => format!("at least {n} tokens ({why})"),
        };
        format!(
            "{} {}, {} {}, {tokens}",
            self.turns,
            plural(self.turns, "turn", "turns"),
            self.handoffs,
            plural(self.handoffs as u64, "handoff", "handoffs"),
        )
    }
}

fn plural<'a>(n: u64, one: &'a str, many: &'a str) -> &'a str {
    if n == 1 {
        one
    } else {
        many
    }
}

#[cfg(test)]
mod tests {
    use super::Figures;

    #[test]
    fn a_token_count_the_ledger_may_have_missed_is_never_said_as_exact() {
        let figures = |tokens, short| Figures {
            turns: 1,
            handoffs: 0,
            tokens,
            short,
        };
        assert_eq!(figures(170, None).text(), "1 turn, 0 handoffs, 170 tokens");
        let why = Some("the ledger stopped recording");
        assert_eq!(
            figures(170, why).text(),
            "1 turn, 0 handoffs, at least 170 tokens (the ledger stopped recording)"
        );
        assert_eq!(
            figures(0, why).text(),
            "1 turn, 0 handoffs, tokens unknown (the ledger stopped recording)"
        );
    }
}
