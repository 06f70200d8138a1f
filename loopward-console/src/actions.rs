//! What a person does from the console. Each action calls the same code as its command —
//! [`ApprovalStore::approve`](loopward_runner::layers::stopgate::ApprovalStore::approve)/[`deny`](loopward_runner::layers::stopgate::ApprovalStore::deny) (`loopward approve|deny`),
//! [`grant_override`](loopward::team::grant_override) (`loopward override grant`),
//! [`StopRequests::request`](loopward_runner::stop::StopRequests::request) — and changes nothing
//! when refused.

use crate::error::ConsoleError;
use crate::remote::RemoteRefusal;
use crate::routes::Signed;
use crate::Console;
use loopward_runner::layers::stopgate::{DurableError, PendingState};
use loopward_runner::{Clock, SystemClock};
use serde::Deserialize;

/// Approve / Deny: the exact action the person saw, and who they are (the sealed decision holds
/// who and when, as `loopward approve|deny` writes it; the agent is told who denied).
#[derive(Debug, Deserialize)]
pub struct Answer {
    /// The form's CSRF value.
    #[serde(default)]
    pub csrf: Option<String>,
    /// The action the person saw (`GatedAction::key`); another than the one waiting is refused.
    pub action: String,
    /// Who answers.
    pub by: String,
}

/// Stop one run, or every run.
#[derive(Debug, Deserialize)]
pub struct Stop {
    /// The form's CSRF value.
    #[serde(default)]
    pub csrf: Option<String>,
    /// Who decides.
    pub by: String,
    /// Why.
    pub reason: String,
    /// Also end the processes the console started for the run, now.
    #[serde(default)]
    pub now: Option<String>,
}

/// An override grant, as `loopward override grant` takes it.
#[derive(Debug, Deserialize)]
pub struct Grant {
    /// The form's CSRF value.
    #[serde(default)]
    pub csrf: Option<String>,
    /// The agent that may write.
    pub agent: String,
    /// The one path.
    pub path: String,
    /// Why.
    pub reason: String,
    /// How long (`10m`).
    pub ttl: String,
    /// A Claude Code subagent outside the team.
    #[serde(default)]
    pub subagent: Option<String>,
}

impl Signed for Answer {
    fn csrf(&self) -> Option<&str> {
        self.csrf.as_deref()
    }
}

impl Signed for Stop {
    fn csrf(&self) -> Option<&str> {
        self.csrf.as_deref()
    }
}

impl Signed for Grant {
    fn csrf(&self) -> Option<&str> {
        self.csrf.as_deref()
    }
}

/// The name a decision is recorded under: the person's, marked as answered in the console.
fn decider(by: &str) -> Result<String, ConsoleError> {
    let by = by.trim();
    if by.is_empty() || by.contains('\n') || by.len() > 150 {
        return Err(ConsoleError::BadRequest(
            "say who you are (1 to 150 characters, one line): the ledger records who answered"
                .into(),
        ));
    }
    Ok(format!("{by} (console)"))
}

fn io(e: impl std::fmt::Display) -> ConsoleError {
    ConsoleError::Internal(format!("{e:#}"))
}

impl Console {
    /// Approves (`approve`) or denies the waiting record `id`, if it still waits for exactly
    /// `answer.action`; then resumes the run when nothing else of it waits. Returns the run.
    pub fn answer(&self, id: &str, approve: bool, answer: &Answer) -> Result<String, ConsoleError> {
        let by = decider(&answer.by)?;
        let store = self.inner.custody.approvals().map_err(io)?;
        let record = match store.read(id) {
            Ok(Some(r)) => r,
            Ok(None) => {
                return Err(ConsoleError::NotFound(format!(
                    "no stop-gate record {id:?} is kept here: it was answered and taken by its run, or never existed; nothing was decided"
                )))
            }
            Err(DurableError::BadId { .. }) => {
                return Err(ConsoleError::BadRequest(format!(
                    "{id:?} is not a stop-gate record id"
                )))
            }
            Err(e) => return Err(ConsoleError::Conflict(format!("{e}; nothing was decided"))),
        };
        if record.state != PendingState::Pending {
            return Err(ConsoleError::Conflict(format!(
                "gate {} of run {} is no longer waiting: {}; a decision cannot be changed, and nothing was decided",
                record.gate,
                record.run,
                record.decision_text()
            )));
        }
        let waiting = record.action.key();
        if answer.action != waiting {
            return Err(ConsoleError::Conflict(format!(
                "gate {} of run {} waits to allow {waiting} ({}), not {:?}; nothing was decided. Reload the run's page and answer what it shows",
                record.gate, record.run, record.summary, answer.action
            )));
        }
        let now = SystemClock.now_millis();
        let decided = if approve {
            store.approve(id, &by, now)
        } else {
            store.deny(id, &by, now)
        };
        match decided {
            Ok(_) => {}
            Err(DurableError::AlreadyDecided { decision, .. }) => {
                return Err(ConsoleError::Conflict(format!(
                    "gate {} of run {} was answered a moment ago: {decision}; nothing was decided",
                    record.gate, record.run
                )))
            }
            Err(e) => return Err(io(e)),
        }
        let run = record.run.to_string();
        let none_waits = store
            .list_pending()
            .iter()
            .all(|p| p.run.as_str() != run.as_str());
        if none_waits {
            if let Some(r) = &self.inner.resumer {
                let events = self
                    .inner
                    .runs_dir
                    .join(&run)
                    .join(loopward_runner::audit::EVENTS_FILE);
                r.resume_when_free(&run, events);
            }
        }
        self.refresh();
        Ok(run)
    }

    /// Approves or denies the wait elsewhere `id` (a run on Restate), if that very wait still
    /// waits for exactly `answer.action` and no one answered it from here; the run goes on
    /// once its source's next worker takes the verdict. Returns the run.
    pub async fn answer_remote(
        &self,
        id: &str,
        approve: bool,
        answer: &Answer,
    ) -> Result<String, ConsoleError> {
        let by = decider(&answer.by)?;
        let Some(source) = self.inner.remote.clone() else {
            return Err(ConsoleError::NotFound(format!(
                "{id:?} names a stop-gate on Restate, and this console follows none (`loopward serve --restate URL`); nothing was decided"
            )));
        };
        // What waits now, not at the last listing.
        self.refresh_remote().await;
        let seen = self
            .remote_seen()
            .0
            .into_iter()
            .flatten()
            .find(|w| w.console_id() == id);
        let Some(w) = seen else {
            if let Some(done) = self.inner.answered.get(id) {
                return Err(ConsoleError::Conflict(format!(
                    "this wait was already answered: {done}; its run took the answer and went on. A decision cannot be changed, and nothing was decided"
                )));
            }
            return Err(ConsoleError::NotFound(format!(
                "no stop-gate {id:?} waits on {} now: it was answered and its run went on, or never existed; nothing was decided",
                source.describe()
            )));
        };
        if answer.action != w.action {
            return Err(ConsoleError::Conflict(format!(
                "gate {} of run {} waits to allow {} ({}), not {:?}; nothing was decided. Reload the page and answer what it shows",
                w.gate, w.run, w.action, w.summary, answer.action
            )));
        }
        if w.answered && self.inner.answered.get(id).is_none() {
            return Err(ConsoleError::Conflict(format!(
                "gate {} of run {} was answered elsewhere (`loopward approve|deny --restate`); {} keeps the first verdict. A decision cannot be changed, and nothing was decided",
                w.gate,
                w.run,
                source.describe()
            )));
        }
        let now = crate::watch::rfc3339(SystemClock.now_millis());
        let verb = if approve { "approved" } else { "denied" };
        self.inner
            .answered
            .claim(id, &format!("{verb} by {by} at {now}"))?;
        if let Err(e) = source.answer(&w, approve, &by).await {
            // Not given: the wait may be answered again.
            self.inner.answered.release(id);
            return Err(match e {
                RemoteRefusal::NotWaiting(m) => {
                    ConsoleError::Conflict(format!("{m}; nothing was decided"))
                }
                RemoteRefusal::Unreachable(m) => {
                    ConsoleError::Unavailable(format!("{m}; nothing was decided, try again"))
                }
            });
        }
        let c = self.clone();
        let _ = tokio::task::spawn_blocking(move || c.refresh()).await;
        Ok(w.run)
    }

    /// Asks `run` to stop at its next turn boundary (and, `now`, ends the processes the console
    /// started for it). A run that already ended is refused.
    pub fn stop(&self, run: &str, stop: &Stop) -> Result<bool, ConsoleError> {
        let by = decider(&stop.by)?;
        // Decide on what the ledger says now, not at the last tick.
        self.refresh();
        let snap = self.snapshot();
        let Some(row) = snap.run(run) else {
            return Err(ConsoleError::NotFound(format!(
                "there is no run {run:?} in {}; nothing was stopped",
                self.inner.runs_dir.display()
            )));
        };
        if let Some(on) = &row.elsewhere {
            return Err(ConsoleError::Conflict(format!(
                "run {run} runs on {on}, and its ledger is not in this workspace: it is not stopped from here (deny its gate instead); nothing was stopped"
            )));
        }
        if !row.is_open() && row.waiting.is_empty() && row.status != "awaiting_approval" {
            return Err(ConsoleError::Conflict(format!(
                "run {run} already ended ({}); nothing to stop",
                row.status
            )));
        }
        let id = loopward_core::RunId::new(run)
            .ok_or_else(|| ConsoleError::BadRequest(format!("{run:?} is not a run id")))?;
        let stops = self.inner.custody.stops().map_err(io)?;
        let fresh = stops
            .request(&id, &by, &stop.reason, SystemClock.now_millis())
            .map_err(|e| ConsoleError::BadRequest(e.to_string()))?;
        if stop.now.is_some() {
            if let Some(r) = &self.inner.resumer {
                r.end_now(run);
            }
        }
        self.refresh();
        Ok(fresh)
    }

    /// Asks every run that has not ended to stop; returns the runs asked.
    pub fn stop_all(&self, stop: &Stop) -> Result<Vec<String>, ConsoleError> {
        decider(&stop.by)?;
        let runs: Vec<String> = self
            .snapshot()
            .runs
            .iter()
            .filter(|r| r.elsewhere.is_none())
            .filter(|r| r.is_open() || r.status == "awaiting_approval")
            .map(|r| r.run.clone())
            .collect();
        let mut asked = Vec::with_capacity(runs.len());
        for run in runs {
            match self.stop(&run, stop) {
                Ok(_) => asked.push(run),
                // It ended (or went) since the snapshot: nothing to stop there.
                Err(ConsoleError::Conflict(_) | ConsoleError::NotFound(_)) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(asked)
    }

    /// Grants a one-shot override with the checks of `loopward override grant`; returns its id.
    pub fn grant(&self, g: &Grant) -> Result<String, ConsoleError> {
        let inner = &self.inner;
        loopward::team::check_grantee(
            &inner.cfg,
            &inner.config_path,
            &g.agent,
            g.subagent.is_some(),
        )
        .map_err(|e| ConsoleError::BadRequest(format!("{e:#}")))?;
        let ttl = humantime::parse_duration(g.ttl.trim()).map_err(|e| {
            ConsoleError::BadRequest(format!(
                "ttl {:?} is not a duration like 10m or 1h: {e}; nothing was granted",
                g.ttl
            ))
        })?;
        let limit = inner.cfg.overrides.max_ttl;
        if ttl > limit {
            return Err(ConsoleError::BadRequest(format!(
                "ttl {} is longer than the longest override allowed here ({}); nothing was granted. Ask for less, or raise [overrides] max_ttl in {}",
                g.ttl.trim(),
                humantime::format_duration(limit),
                inner.config_path.display()
            )));
        }
        let id = loopward::team::grant_override(
            &inner.workspace,
            Some(&inner.custody),
            &g.agent,
            &g.path,
            &g.reason,
            ttl,
            limit,
            &SystemClock,
        )
        .map_err(|e| ConsoleError::BadRequest(format!("{e:#}; nothing was granted")))?;
        Ok(id)
    }
}
