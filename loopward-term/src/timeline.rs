//! A run as a person reads it: turns, tool calls, refusals with their reasons, handoffs.
//!
//! [`LiveSink`] sits in front of the ledger: each event is printed only after the ledger has
//! recorded it, so what scrolls past is what the ledger holds.
//!
//! ```
//! use loopward_core::{AgentId, AuditEvent, AuditSink, Handoff, RunId, Scope, TurnNumber};
//! use loopward_term::render::Printer;
//! use loopward_term::timeline::LiveSink;
//! use loopward_runner::audit::MemorySink;
//! use std::sync::{Arc, Mutex};
//! let out = Arc::new(Mutex::new(Printer::plain(Vec::new())));
//! let sink = LiveSink::new(Arc::new(MemorySink::default()), out.clone());
//! let root = AgentId::new("root").unwrap();
//! let scope = Scope { run: RunId::new("r").unwrap(), turn: Some(TurnNumber(1)), agent: Some(root.clone()) };
//! sink.record(&scope, &AuditEvent::TurnStarted { agent: root.clone() }).unwrap();
//! sink.record(&scope, &AuditEvent::HandoffRegistered(Handoff {
//!     from: root, to: AgentId::new("planner").unwrap(), message: "plan it".into() })).unwrap();
//! let text = String::from_utf8(out.lock().unwrap().get_ref().clone()).unwrap();
//! assert_eq!(text, "  turn 1 · root\n    ↪ handoff → planner\n");
//! ```

use crate::render::{Printer, Tone};
use loopward_core::{
    AuditError, AuditEvent, AuditSink, CallId, Decision, GateKind, LayerId, LayerVerdict,
    RunStatus, Scope,
};
use loopward_runner::tools::SAY_TOOL;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Turns events into lines. Keeps just enough state to not repeat a refusal the gate already
/// explained when the tool result reports it again.
#[derive(Debug, Default)]
pub struct Timeline {
    refused_calls: Vec<CallId>,
    handoff_refusal_shown: bool,
    hints_shown: std::collections::HashSet<String>,
    task_next: bool,
    sayings: loopward_runner::audit::Sayings,
    root: Option<PathBuf>,
}

/// A short form of a tool call's arguments: its path (`path` in loopward's tools, `file_path` in
/// Claude Code's and Gemini CLI's), command or target.
///
/// ```
/// use loopward_term::timeline::call_summary;
/// use serde_json::json;
/// assert_eq!(call_summary("write_file", &json!({"path": "src/a.rs"})), "write_file src/a.rs");
/// assert_eq!(call_summary("Write", &json!({"file_path": "plan.md", "content": "x"})), "Write plan.md");
/// assert_eq!(call_summary("shell", &json!({"command": "cargo test"})), "shell `cargo test`");
/// ```
pub fn call_summary(tool: &str, args: &serde_json::Value) -> String {
    summary_in(tool, args, None)
}

/// [`call_summary`], with a path inside the workspace `root` (a host's tools name files by their
/// absolute paths) shown relative to it, as the records of what was written are.
fn summary_in(tool: &str, args: &serde_json::Value, root: Option<&Path>) -> String {
    let s = |k: &str| args.get(k).and_then(serde_json::Value::as_str);
    if let (Some(st), Some(o)) = (s("strategy"), s("outcome")) {
        return format!("{tool} {st}: {o}");
    }
    let path = s("path").or_else(|| s("file_path")).map(|p| {
        root.and_then(|r| Path::new(p).strip_prefix(r).ok())
            .and_then(Path::to_str)
            .filter(|rel| !rel.is_empty())
            .unwrap_or(p)
    });
    match (path, s("command"), s("to")) {
        (Some(p), _, _) => format!("{tool} {p}"),
        (_, Some(c), _) => format!("{tool} `{}`", clip(c, 60)),
        (_, _, Some(t)) => format!("{tool} → {t}"),
        _ => tool.to_string(),
    }
}

fn clip(s: &str, n: usize) -> String {
    let mut out: String = s.chars().take(n).collect();
    if out.len() < s.len() {
        out.push('…');
    }
    out
}

impl Timeline {
    /// A timeline that shows the paths a host's tool calls give inside `root` (the workspace)
    /// relative to it: `· Write src/a.rs`, not the absolute path the client sent.
    ///
    /// ```
    /// use loopward_core::{AuditEvent, RunId, Scope};
    /// use loopward_term::{render::Printer, timeline::Timeline};
    /// let mut view = Timeline::in_workspace("/home/ann/proj");
    /// let mut out = Printer::plain(Vec::new());
    /// let scope = Scope { run: RunId::new("r").unwrap(), turn: None, agent: None };
    /// for path in ["/home/ann/proj/src/a.rs", "/etc/passwd"] {
    ///     let arguments = serde_json::json!({ "file_path": path, "content": "x" });
    ///     let e = AuditEvent::ToolRequested { call_id: "c1".into(), tool: "Write".into(), arguments };
    ///     view.render(&mut out, &scope, &e);
    /// }
    /// let text = String::from_utf8(out.get_ref().clone()).unwrap();
    /// assert_eq!(text, "    · Write src/a.rs\n    · Write /etc/passwd\n");
    /// ```
    pub fn in_workspace(root: impl Into<PathBuf>) -> Self {
        Self {
            root: Some(root.into()),
            ..Self::default()
        }
    }

    /// Renders one event (some events render as nothing).
    pub fn render<W: Write>(&mut self, out: &mut Printer<W>, scope: &Scope, event: &AuditEvent) {
        // An agent's words to the people watching show once said, whole, as no person's.
        if let Some(said) = self.sayings.fold(scope.agent.as_ref(), event) {
            out.line(Tone::Plain, format!("    » {said}"));
            return;
        }
        match event {
            // The task (the message right after run_started) is shown above the timeline; a
            // person's later words show where the run took them.
            AuditEvent::RunStarted { .. } => self.task_next = true,
            AuditEvent::HumanMessage { content } if !std::mem::take(&mut self.task_next) => {
                out.line(
                    Tone::Plain,
                    format!("  person: {}", clip(content.as_str(), 200)),
                );
            }
            AuditEvent::TurnStarted { agent } => {
                let n = scope.turn.map_or(0, |t| t.0);
                out.line(Tone::Turn, format!("  turn {n} · {agent}"));
            }
            // A handoff shows as its `↪` line once registered, a say as its words once said.
            AuditEvent::ToolRequested {
                tool, arguments, ..
            } if tool != "handoff" && tool != SAY_TOOL => {
                out.line(
                    Tone::Dim,
                    format!(
                        "    · {}",
                        summary_in(tool.as_str(), arguments, self.root.as_deref())
                    ),
                );
            }
            AuditEvent::GateDecision {
                call_id,
                gate,
                decision,
                ..
            } => match decision {
                Decision::Allow => {}
                Decision::Warn(r) => out.line(
                    Tone::Warn,
                    format!(
                        "    ⚠ {gate} (advisory) warned: {} — the action went ahead",
                        r.reason
                    ),
                ),
                Decision::Deny(r) => {
                    out.line(
                        Tone::Refusal,
                        format!("    ✗ refused by {gate}: {}", r.reason),
                    );
                    // A hint is shown once per run; a repeated refusal repeats only its reason.
                    if !r.hint.is_empty() && self.hints_shown.insert(r.hint.clone()) {
                        out.line(Tone::Dim, format!("      what to do: {}", r.hint));
                    }
                    if let Some(id) = call_id {
                        self.refused_calls.push(id.clone());
                    }
                    self.handoff_refusal_shown = gate.kind == GateKind::OneHandoff;
                }
                Decision::Override { id, reason } => out.line(
                    Tone::Warn,
                    format!("    ⚑ {gate}: allowed by one-shot override {id} ({reason:?})"),
                ),
            },
            AuditEvent::OverrideConsumed {
                id, agent, path, ..
            } => out.line(
                Tone::Dim,
                format!(
                    "    ⚑ override {id} for {agent} on {path} consumed (logged before the write)"
                ),
            ),
            AuditEvent::ToolFinished {
                call_id,
                is_error,
                effects,
                summary,
                output,
                ..
            } => {
                if *is_error {
                    // A refused handoff shows too (unknown target, itself); a gate's refusal
                    // already said it. The whole first line: a refusal is not cut off.
                    if !self.refused_calls.contains(call_id) {
                        let text = output.as_deref().unwrap_or(summary);
                        let mut lines = text.lines();
                        out.line(
                            Tone::Refusal,
                            format!("    ✗ {}", lines.next().unwrap_or(summary)),
                        );
                        // A layer's refusal says what to do on its next line, shown once.
                        if let Some(hint) = lines.find_map(|l| l.strip_prefix("What to do: ")) {
                            if self.hints_shown.insert(hint.to_string()) {
                                out.line(Tone::Dim, format!("      what to do: {hint}"));
                            }
                        }
                    }
                } else {
                    for e in effects {
                        let what = match e.status {
                            loopward_core::EffectStatus::Ok => "wrote",
                            loopward_core::EffectStatus::Failed => "failed to write",
                            loopward_core::EffectStatus::Reverted => "reverted",
                        };
                        out.line(Tone::Ok, format!("    ✓ {what} {}", e.path));
                    }
                }
            }
            AuditEvent::Violation {
                path,
                remedy,
                reason,
            } => out.line(
                Tone::Refusal,
                format!("    ✗ violation: {path} — {reason}; {remedy}"),
            ),
            AuditEvent::HandoffRegistered(h) => out.handoff(h.from.as_str(), h.to.as_str()),
            // The gate's refusal already said it, when a gate made it.
            AuditEvent::HandoffRefused { to, standing }
                if !std::mem::take(&mut self.handoff_refusal_shown) =>
            {
                out.line(
                    Tone::Refusal,
                    format!("    ✗ second handoff → {to} refused: the handoff → {standing} stands"),
                );
            }
            // Allows and admissions are a census for the report; the timeline shows decisions
            // that changed what happened.
            AuditEvent::LayerDecision { decision, .. } if is_census(decision) => {}
            // A CLI session's hook decision is framed by a count of its records, which follow
            // and are shown as they are.
            AuditEvent::LayerDecision {
                layer: LayerId::Hook,
                ..
            } => {}
            AuditEvent::LayerDecision {
                layer,
                decision,
                detail,
            } => {
                let tone = match decision.as_str() {
                    "approved" | "auto_approved" => Tone::Ok,
                    "retry" => Tone::Dim,
                    _ => Tone::Warn,
                };
                let d = detail_summary(&detail.to_json());
                out.line(tone, format!("    ◆ {layer}: {decision}{d}"));
            }
            AuditEvent::RunEnded { status, .. } => {
                let why = match status {
                    RunStatus::CapReached { cap } => format!(" ({cap})"),
                    RunStatus::BudgetExceeded { budget } => format!(" ({budget})"),
                    RunStatus::Stopped { reason } => format!(" ({reason})"),
                    RunStatus::AwaitingApproval { pending } => format!(" (pending {pending})"),
                    RunStatus::AuditFailed { error } | RunStatus::Failed { error } => {
                        format!(" ({error})")
                    }
                    _ => String::new(),
                };
                out.line(Tone::Title, format!("  run ended: {}{why}", status.label()));
            }
            _ => {}
        }
    }
}

/// Layer decisions that only count what was let through.
fn is_census(decision: &LayerVerdict) -> bool {
    matches!(decision, LayerVerdict::Allow | LayerVerdict::Admitted)
}

/// `detail`'s scalar fields as ` (k=v, …)`.
fn detail_summary(detail: &serde_json::Value) -> String {
    let Some(obj) = detail.as_object() else {
        return String::new();
    };
    let parts: Vec<String> = obj
        .iter()
        .filter(|(_, v)| !v.is_object() && !v.is_array())
        .map(|(k, v)| match v {
            serde_json::Value::String(s) => format!("{k}={s}"),
            other => format!("{k}={other}"),
        })
        .collect();
    if parts.is_empty() {
        String::new()
    } else {
        format!(" ({})", parts.join(", "))
    }
}

/// A printer several owners write to.
pub type SharedPrinter<W> = Arc<Mutex<Printer<W>>>;

/// Records into the ledger, then prints the event.
pub struct LiveSink<W: Write + Send> {
    inner: Arc<dyn AuditSink>,
    view: Mutex<Timeline>,
    out: SharedPrinter<W>,
}

impl<W: Write + Send> LiveSink<W> {
    /// Prints what `inner` records into `out`.
    pub fn new(inner: Arc<dyn AuditSink>, out: SharedPrinter<W>) -> Self {
        Self {
            inner,
            view: Mutex::default(),
            out,
        }
    }

    /// Shows paths inside the workspace `root` relative to it ([`Timeline::in_workspace`]).
    pub fn in_workspace(self, root: impl Into<PathBuf>) -> Self {
        Self {
            view: Mutex::new(Timeline::in_workspace(root)),
            ..self
        }
    }
}

impl<W: Write + Send> AuditSink for LiveSink<W> {
    fn commit(&self) -> Result<(), AuditError> {
        self.inner.commit()
    }

    fn record(&self, scope: &Scope, event: &AuditEvent) -> Result<(), AuditError> {
        self.inner.record(scope, event)?;
        let mut view = self.view.lock().unwrap_or_else(|p| p.into_inner());
        let mut out = self.out.lock().unwrap_or_else(|p| p.into_inner());
        view.render(&mut out, scope, event);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use loopward_core::{AgentId, RunId, TurnNumber};

    fn rendered(events: &[AuditEvent]) -> String {
        let mut out = Printer::plain(Vec::new());
        let mut view = Timeline::default();
        let scope = Scope {
            run: RunId::new("r").unwrap(),
            turn: Some(TurnNumber(1)),
            agent: Some(AgentId::new("builder").unwrap()),
        };
        for e in events {
            view.render(&mut out, &scope, e);
        }
        String::from_utf8(out.get_ref().clone()).unwrap()
    }

    fn say(id: &str, text: &str, is_error: bool) -> [AuditEvent; 2] {
        [
            AuditEvent::ToolRequested {
                call_id: id.into(),
                tool: SAY_TOOL.into(),
                arguments: serde_json::json!({ "text": text }),
            },
            AuditEvent::ToolFinished {
                call_id: id.into(),
                tool: SAY_TOOL.into(),
                is_error,
                effects: vec![],
                output: Some("not run: refused".into()),
                summary: "not run: refused".into(),
            },
        ]
    }

    #[test]
    fn an_agents_say_prints_what_it_said_once_it_went_through() {
        let mut events = say("c1", "tests pass", false).to_vec();
        events.extend(say("c2", "never said", true));
        assert_eq!(
            rendered(&events),
            "    » builder said: tests pass\n    ✗ not run: refused\n"
        );
    }
}
