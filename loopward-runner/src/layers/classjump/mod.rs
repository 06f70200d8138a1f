//! Class-jump: a subtask that fails `failures_per_strategy` times (default 3) with one strategy
//! may not be retried with it; the next strategy of the configured list is forced; when every
//! strategy is spent the run ends [`Exhausted`](loopward_core::RunStatus::Exhausted). A subtask
//! therefore takes at most `strategies × failures_per_strategy` failed attempts
//! ([`ClassJump::max_failures`]).
//!
//! Attempts are reported to the [`ClassJump`] tracker — by the embedding loop through
//! [`ClassJump::report`], or by the agent through the `report_attempt` tool
//! ([`ClassJump::tool`]). The answer is a [`Verdict`] only the tracker can mint: retry with the
//! same strategy, jump to the next, or exhausted. Reporting a spent or out-of-turn strategy is
//! refused. [`ClassJump::layer`] on the turn service ends the run once a subtask is exhausted.
//!
//! Reports are not the only evidence: [`ClassJump::evidence_layer`] on the tool stack counts
//! each failed result of the tools in `count_failed_tools` (default `shell`: a non-zero exit,
//! an error, a timeout) against the calling agent's own strategy track, so an agent that stops
//! reporting, or renames its subtask, still reaches the bound. Exhaustion ends the reply at the
//! call that caused it.
//! Every verdict is a `LayerDecision { layer: "class_jump" }`.
//!
//! ```
//! use loopward_runner::layers::classjump::{Attempt, ClassJump, ClassJumpConfig, VerdictKind};
//! use loopward_runner::layers::testing::{run, turn};
//! let cj = ClassJump::new(ClassJumpConfig {
//!     strategies: vec!["patch".into(), "rewrite".into()],
//!     failures_per_strategy: 3,
//!     count_failed_tools: vec!["shell".into()],
//! }).unwrap();
//! let dir = tempfile::tempdir().unwrap();
//! let (r, _) = run(dir.path(), "r1");
//! let t = turn(&r, "builder", 1);
//! let kinds: Vec<_> = ["patch", "patch", "patch", "rewrite", "rewrite", "rewrite"]
//!     .iter()
//!     .map(|s| cj.report(&t, "fix-test", s, Attempt::Failed).unwrap().kind())
//!     .collect();
//! use VerdictKind::*;
//! assert_eq!(kinds, [Retry, Retry, Jump, Retry, Retry, Exhausted]);
//! assert!(cj.report(&t, "fix-test", "patch", Attempt::Failed).is_err()); // spent
//! assert!(cj.is_exhausted(&r));
//! ```

mod evidence;
mod layer;
mod tool;
mod tracker;

pub use evidence::{EvidenceLayer, EvidencePolicy, EvidenceService};
pub use layer::{ClassJumpLayer, ClassJumpPolicy, ClassJumpService};
pub use tool::ReportAttemptTool;
pub use tracker::Sub;
pub use tracker::{
    Attempt, ClassJump, ClassJumpConfig, ClassJumpError, Verdict, VerdictKind,
    DEFAULT_FAILURES_PER_STRATEGY,
};
