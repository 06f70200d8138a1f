//! The ledger read back as the run's journal, so a run can be resumed from its last committed
//! step.
//!
//! A run's ledger already records every step in order: each model reply
//! ([`AuditEvent::ModelReply`](loopward_core::AuditEvent::ModelReply), after its [`AuditEvent::ModelCall`](loopward_core::AuditEvent::ModelCall)), each tool call from
//! request to result ([`AuditEvent::ToolRequested`](loopward_core::AuditEvent::ToolRequested), [`AuditEvent::ToolStarted`](loopward_core::AuditEvent::ToolStarted) just before
//! the effect, [`AuditEvent::ToolFinished`](loopward_core::AuditEvent::ToolFinished) with the whole result), each handoff and each turn's
//! end. [`Journal::from_records`] folds those records into recorded turns;
//! [`Runner::resume`](crate::Runner::resume) feeds them back (no model call, no tool run, nothing
//! recorded twice) and goes on live from the first step the ledger does not hold.
//!
//! **The rule for an interrupted effect.** A call whose `tool_started` is recorded but not its
//! `tool_finished` may or may not have taken effect; the journal cannot tell, so it does not
//! guess. The call is marked interrupted (a `resume` layer decision), and the agent reads an error
//! result saying so — unless the [`ResumePolicy`] names the tool as safe to run again (reads, and
//! writes of the same whole content), in which case it is run again through its gates. A call
//! requested but never started (stopped inside its gates) had no effect and is run again through
//! its gates. A call paused for a durable approval is run again through its gates too, which is
//! how the approval a person gave is consumed.
//!
//! ```
//! use loopward_core::{AgentId, AuditEvent, RunId, RunStatus, Scope, TurnNumber, Usage};
//! use loopward_runner::journal::Journal;
//! let run = RunId::new("r1").unwrap();
//! let builder = AgentId::new("builder").unwrap();
//! let at = |turn: Option<u32>| Scope {
//!     run: run.clone(), turn: turn.map(TurnNumber), agent: turn.map(|_| builder.clone()),
//! };
//! let records = vec![
//!     (at(None), AuditEvent::RunStarted { task: "say hi".into(), agent: builder.clone() }),
//!     (at(Some(1)), AuditEvent::TurnStarted { agent: builder.clone() }),
//!     (at(Some(1)), AuditEvent::ModelCall {
//!         model: "fake".into(), usage: Usage::default(), cost_micros: None, tool_calls: 0 }),
//!     (at(Some(1)), AuditEvent::ModelReply { text: "hi".into(), tool_calls: vec![], stop: Default::default() }),
//! ];
//! let journal = Journal::from_records(&records).unwrap();
//! assert_eq!(journal.task(), "say hi");
//! assert_eq!(journal.finished(), None); // killed mid-turn: it can be resumed
//!
//! let mut done = records.clone();
//! done.push((at(None), AuditEvent::RunEnded {
//!     status: RunStatus::Completed, usage: Usage::default(), cost_micros: None }));
//! assert_eq!(Journal::from_records(&done).unwrap().finished(), Some(&RunStatus::Completed));
//! ```

mod bounds;
mod feed;
mod parse;
mod settled;

pub use parse::JournalError;
pub use settled::{settled_decisions, SettledDecision};

pub(crate) use bounds::{Resumed, SettledSprawl};
pub(crate) use feed::{FedCall, TurnFeed};

use loopward_core::{
    AgentId, CallId, Effect, FinishReason, Handoff, RunId, RunStatus, ToolCall, ToolName, Usage,
};
use std::collections::BTreeSet;

/// The word the ledger writes for the decisions a resume records (`interrupted`, `retried`):
/// [`LayerId::Resume`](loopward_core::LayerId::Resume)'s, which the runner records them under.
pub const RESUME_LAYER: &str = "resume";

/// A run's recorded steps, read from its ledger.
#[derive(Clone, Debug, PartialEq)]
pub struct Journal {
    run: RunId,
    task: String,
    first: AgentId,
    turns: Vec<RecordedTurn>,
    end: Option<RunStatus>,
    /// Every layer decision recorded in a turn, in order.
    decisions: Vec<PastDecision>,
    /// Every model call recorded (each one was paid for): its model and usage.
    model_calls: Vec<(String, Usage)>,
    /// What the sprawl gate's tracker saw, in order.
    sprawl: Vec<PastSprawl>,
}

/// Something the sprawl gate's tracker notes, as the ledger holds it, with where it happened
/// (like [`PastDecision`]; `turn` and `agent` are `None` for a person's message).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct PastSprawl {
    pub(crate) part: u32,
    pub(crate) turn: Option<u32>,
    pub(crate) agent: Option<AgentId>,
    pub(crate) call: Option<CallId>,
    pub(crate) step: SprawlStep,
}

/// What the sprawl gate's tracker notes.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum SprawlStep {
    /// A person spoke (`human_message`).
    Human,
    /// The gate refused (or warned about) a call (a `sprawl` gate decision).
    Fired,
    /// A call finished with these effects; `replacements` are its edit's (old, new) pair.
    Finished {
        effects: Vec<Effect>,
        replacements: Vec<(String, String)>,
    },
}

/// A layer decision as the ledger holds it, with where it was taken: the run's part (0 before
/// the first resume, then one more per `run_resumed`), the turn and, inside a tool call, the call.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct PastDecision {
    pub(crate) part: u32,
    pub(crate) turn: u32,
    pub(crate) agent: AgentId,
    pub(crate) call: Option<CallId>,
    pub(crate) decision: RecordedDecision,
}

/// One recorded turn.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct RecordedTurn {
    pub(crate) number: u32,
    pub(crate) agent: AgentId,
    pub(crate) steps: Vec<Step>,
    /// Stop-gate decisions taken before the turn's first step (turn gates), in order.
    pub(crate) decisions: Vec<RecordedDecision>,
    pub(crate) ended: Option<(FinishReason, Usage)>,
    /// How the run ends after this turn, when the turn ended it.
    pub(crate) ends_run: Option<RunStatus>,
    /// What people said into the run after this turn, before the next one started
    /// (`human_message` records), in order.
    pub(crate) heard: Vec<String>,
}

/// One step of a turn, in the order the agent took it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Step {
    Reply(RecordedReply),
    Call(RecordedCall),
}

/// A model reply, with the usage of its call.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct RecordedReply {
    pub(crate) text: String,
    pub(crate) tool_calls: Vec<ToolCall>,
    pub(crate) usage: Usage,
    pub(crate) stop: loopward_core::model::StopReason,
}

/// A tool call and how far it got.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct RecordedCall {
    pub(crate) call_id: CallId,
    pub(crate) tool: ToolName,
    pub(crate) state: CallState,
    pub(crate) effects: Vec<Effect>,
    pub(crate) handoff: Option<Handoff>,
    /// Its arguments as given.
    pub(crate) arguments: serde_json::Value,
    /// A stop-gate left it waiting for a durable approval.
    pub(crate) paused: bool,
}

/// How far a recorded call got.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum CallState {
    /// Requested; its gates had not all let it through (no effect began).
    Requested,
    /// Its tool started and never finished: interrupted.
    Started,
    /// Finished; the result the model read.
    Finished { content: String, is_error: bool },
}

/// A layer decision recorded in a turn before its first step.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct RecordedDecision {
    pub(crate) layer: loopward_core::LayerId,
    pub(crate) decision: loopward_core::LayerVerdict,
    pub(crate) detail: loopward_core::LayerDetail,
}

impl Journal {
    /// The run.
    pub fn run(&self) -> &RunId {
        &self.run
    }

    /// The task the run was started with.
    pub fn task(&self) -> &str {
        &self.task
    }

    /// The agent that took the first turn.
    pub fn first(&self) -> &AgentId {
        &self.first
    }

    /// How the last recorded part of the run ended (`None`: it was killed before recording its
    /// end, or it was resumed and the resumed part has not ended yet).
    pub fn end(&self) -> Option<&RunStatus> {
        self.end.as_ref()
    }

    /// How the run finished, when it did: an end that resuming cannot change
    /// (see [`is_resumable`]). `None` for a run that can be resumed.
    pub fn finished(&self) -> Option<&RunStatus> {
        self.end.as_ref().filter(|s| !is_resumable(s))
    }

    /// Turns recorded, the last one possibly unfinished.
    pub fn turns(&self) -> u32 {
        self.turns.last().map_or(0, |t| t.number)
    }

    /// The calls of the last turn that started and never finished: the interrupted effects.
    pub fn interrupted(&self) -> Vec<CallId> {
        self.turns
            .last()
            .filter(|t| t.ended.is_none())
            .map(|t| {
                t.steps
                    .iter()
                    .filter_map(|s| match s {
                        Step::Call(c) if c.state == CallState::Started => Some(c.call_id.clone()),
                        _ => None,
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    pub(crate) fn recorded_turns(&self) -> &[RecordedTurn] {
        &self.turns
    }
}

/// Seeds the per-run counters of the tool stack of `run` (the repeat layer's counts, class-jump's
/// failure evidence, the sprawl gate's tracker, the policy version the ledger last noted) from
/// `records`, the run's ledger as written so far, so a run that moved to another process is
/// held to the same bounds and makes the same records.
///
/// For an engine that journals each tool call as a step (Restate): on a new worker the calls
/// read back from the engine's journal never reach the tool stack, so call this before the
/// first call the stack runs in this process, when `records` hold exactly the calls to count.
/// What sits outside the steps (caps, the budget meter, `report_attempt`'s subtasks) is left
/// out: the replay rebuilds it. An interrupted call (started, never finished) counts, since it
/// is not run again. A run already resumed through [`Runner::resume`](crate::Runner::resume)
/// keeps what that seeded, and a counter that already exists is not touched: call it once.
///
/// ```
/// use loopward_core::{AgentId, AuditEvent, RunId, Scope};
/// use loopward_runner::{audit::MemorySink, journal, RunContext, SystemClock, Workspace};
/// use std::sync::Arc;
/// let dir = tempfile::tempdir().unwrap();
/// let run = RunId::new("r1").unwrap();
/// let builder = AgentId::new("builder").unwrap();
/// let records = vec![(
///     Scope { run: run.clone(), turn: None, agent: None },
///     AuditEvent::RunStarted { task: "say hi".into(), agent: builder.clone() },
/// )];
/// let ctx = RunContext::new(run, vec![builder], Workspace::new(dir.path()).unwrap(),
///     Arc::new(MemorySink::default()), Arc::new(SystemClock));
/// journal::seed_tool_stack(&ctx, &records).unwrap();
/// assert!(journal::seed_tool_stack(&ctx, &[]).is_ok(), "seeded once; a second call changes nothing");
/// ```
///
/// # Errors
/// [`JournalError`] when `records` do not read back as a run's journal.
pub fn seed_tool_stack(
    run: &crate::RunContext,
    records: &[(loopward_core::Scope, loopward_core::AuditEvent)],
) -> Result<(), JournalError> {
    crate::gates::seed_noted_version(run, records);
    if Resumed::of(run).is_some() {
        return Ok(());
    }
    let journal = Journal::from_records(records)?;
    let none: [&str; 0] = [];
    let settled = Resumed::new(&journal, &ResumePolicy::retrying(none)).tool_stack_only();
    run.extensions().get_or_insert_with(|| settled);
    Ok(())
}

/// Whether a run that ended with `status` may be resumed: it waits for a person
/// (`awaiting_approval`), or it failed for a reason outside the run (a backend beyond its
/// retries, a ledger that could not be written) that may be fixed. A run that completed, was
/// stopped by a gate, reached a cap, spent its budget or exhausted its strategies is finished.
pub fn is_resumable(status: &RunStatus) -> bool {
    matches!(
        status,
        RunStatus::AwaitingApproval { .. }
            | RunStatus::Failed { .. }
            | RunStatus::AuditFailed { .. }
    )
}

/// Which interrupted calls a resumed run may run again.
///
/// An interrupted call (started, never finished) is run again only when its tool is named here:
/// tools whose effect, applied twice, is the effect applied once. The default names
/// `read_file`, `list_dir` (no effect), `write_file` (the same whole content) and `handoff`
/// (run state only). `shell` and `edit_file` are never in the default: the agent is told the
/// call was interrupted and decides.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResumePolicy {
    retry: BTreeSet<ToolName>,
}

impl Default for ResumePolicy {
    fn default() -> Self {
        Self::retrying(["read_file", "list_dir", "write_file", "handoff"])
    }
}

impl ResumePolicy {
    /// A policy that runs interrupted calls of exactly these tools again.
    pub fn retrying<I, S>(tools: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<ToolName>,
    {
        Self {
            retry: tools.into_iter().map(Into::into).collect(),
        }
    }

    /// Whether an interrupted call of `tool` is run again.
    pub fn retries(&self, tool: &ToolName) -> bool {
        self.retry.contains(tool)
    }
}
