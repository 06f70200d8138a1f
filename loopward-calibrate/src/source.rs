//! Recorded history, streamed as steps: loopward ledgers (`events.jsonl`) and Claude Code
//! transcripts (the JSONL session files under `~/.claude/projects/<project>/`).
//!
//! A Claude Code transcript holds one JSON object a line. The lines that matter here:
//! - `{"type":"user","message":{"role":"user","content":"<text>"},"isMeta":…}` — a person's
//!   prompt (a string, or text blocks) starts a turn; `isMeta` lines and tool results do not;
//! - `{"type":"assistant","message":{"content":[{"type":"tool_use","id","name","input"}…]}}` —
//!   the tool calls (`Write`, `Edit`, `MultiEdit`, `NotebookEdit` write files);
//! - `{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id","is_error"}]}}` —
//!   what became of each call.
//!
//! Every line also carries `sessionId` and `cwd` (the project root the paths are under).
//! Lines of other types (`summary`, `system`, …) and unknown fields are skipped.

use loopward_core::{
    AuditEvent, CallId, Decision, Effect, EffectStatus, LayerDetail, LayerId, LayerVerdict,
    RefusedBy, RunStatus, ToolName,
};
use loopward_runner::audit::Record;
use serde_json::Value;
use std::collections::HashMap;
use std::io::BufRead;
use std::path::Path;

/// What became of a recorded write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// It ran and its change stood.
    Kept,
    /// It ran and its change was put back (or failed).
    Reverted,
    /// It was refused, or finished as an error, when it was recorded.
    Refused,
    /// The history does not say.
    Unknown,
}

/// One recorded step of a session, in order.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Step {
    /// A person's message: a new turn for turn-scoped gates.
    Human,
    /// A file write, as requested.
    Write(Write),
    /// An agent's turn starts (ledgers: the runner called it), and when (ms since the epoch,
    /// when the record's time parses).
    Turn(String, Option<u64>),
    /// Any other tool call (ledgers: shell, handoff, report_attempt, reads…).
    Call(Call),
}

/// A recorded tool call that is not a file write.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Call {
    /// The agent that asked.
    pub(crate) agent: String,
    /// The tool call's id.
    pub(crate) call_id: CallId,
    /// The tool, as the history names it.
    pub(crate) tool: ToolName,
    /// Its arguments, as requested.
    pub(crate) arguments: Value,
    /// What became of it.
    pub(crate) outcome: Outcome,
    /// The gate or layer that refused it, when one did.
    pub(crate) refused_by: Option<String>,
    /// The files it changed, as recorded.
    pub(crate) effects: Vec<Effect>,
}

impl Call {
    /// A call `agent` asked for, before the history says what became of it.
    fn requested(agent: String, call_id: CallId, tool: ToolName, arguments: Value) -> Self {
        Self {
            agent,
            call_id,
            tool,
            arguments,
            outcome: Outcome::Unknown,
            refused_by: None,
            effects: vec![],
        }
    }

    /// It was refused, first by `by` (a later refusal does not replace the first).
    fn refuse(&mut self, by: String) {
        self.outcome = Outcome::Refused;
        self.refused_by.get_or_insert(by);
    }
}

/// A recorded file write: a tool call with a path.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Write {
    /// The call: who asked, with what arguments (for repeat limits and stop-gates), and what
    /// became of it (the files it changed: ledgers).
    pub(crate) call: Call,
    /// The path as written.
    pub(crate) raw: String,
    /// Workspace-relative (`None`: outside the workspace or not resolvable).
    pub(crate) rel: Option<String>,
    /// An edit's (old, new) pairs.
    pub(crate) replacements: Vec<(String, String)>,
    /// The content written, when the history holds it (to recognise a plan).
    pub(crate) content: Option<String>,
    /// The recorded config flagged it (an advisory warning, or an override a person granted).
    pub(crate) flagged: bool,
}

impl Write {
    /// `call`, a write of `raw` (`rel` in the workspace) with `arguments`, before the history
    /// says what became of it.
    fn requested(call: Call, raw: &str, rel: Option<String>) -> Self {
        let arguments = &call.arguments;
        Self {
            raw: raw.to_string(),
            rel,
            replacements: replacements(arguments),
            content: arguments
                .get("content")
                .and_then(Value::as_str)
                .map(str::to_string),
            flagged: false,
            call,
        }
    }
}

impl Step {
    /// The tool call it is, if it is one (a write or another call).
    fn call_mut(&mut self) -> Option<&mut Call> {
        match self {
            Step::Write(w) => Some(&mut w.call),
            Step::Call(c) => Some(c),
            _ => None,
        }
    }
}

/// A session's steps: a loopward run or a Claude Code session.
#[derive(Debug)]
pub(crate) struct Session {
    /// `ledger` or `claude-code`.
    pub(crate) kind: &'static str,
    /// The run id or session id.
    pub(crate) id: String,
    /// Its steps, in order.
    pub(crate) steps: Vec<Step>,
    /// How the run ended, as recorded (ledgers; `None`: it did not, or a transcript).
    pub(crate) ended: Option<RunStatus>,
    /// The refusals and stops the recorded config made, by gate (ledgers).
    pub(crate) recorded: Vec<String>,
}

/// Normalises a path to workspace-relative form: strips the root of an absolute path, drops `.`,
/// refuses `..` that climbs out. `None` when it lies outside.
pub(crate) fn relative(raw: &str, root: Option<&str>) -> Option<String> {
    let rest = if raw.starts_with('/') {
        let root = root?.trim_end_matches('/');
        raw.strip_prefix(root)?
            .strip_prefix('/')
            .or_else(|| (raw == root).then_some(""))?
    } else {
        raw
    };
    let mut parts: Vec<&str> = Vec::new();
    for p in rest.split('/') {
        match p {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            p => parts.push(p),
        }
    }
    Some(parts.join("/"))
}

/// Reads one loopward run's verified records into a session.
pub(crate) fn ledger_session(name: &str, records: &[Record]) -> Session {
    let mut steps: Vec<Step> = Vec::new();
    let mut ended = None;
    let mut recorded = Vec::new();
    // call id → index of its step in `steps`
    let mut calls: HashMap<CallId, usize> = HashMap::new();
    for r in records {
        let Ok(event) = r.event() else { continue };
        let agent = r
            .agent
            .as_ref()
            .map(ToString::to_string)
            .unwrap_or_default();
        match event {
            AuditEvent::RunStarted { .. } | AuditEvent::HumanMessage { .. }
                if !matches!(steps.last(), Some(Step::Human)) =>
            {
                steps.push(Step::Human);
            }
            AuditEvent::TurnStarted { agent } => {
                steps.push(Step::Turn(agent.to_string(), millis(&r.time)));
            }
            AuditEvent::RunEnded { status, .. } => ended = Some(status),
            AuditEvent::ToolRequested {
                call_id,
                tool,
                arguments,
            } => {
                calls.insert(call_id.clone(), steps.len());
                let path = arguments.get("path").and_then(Value::as_str);
                let is_write = matches!(tool.as_str(), "write_file" | "edit_file");
                let path = path.filter(|_| is_write).map(str::to_string);
                let call = Call::requested(agent, call_id, tool, arguments);
                let step = match path {
                    Some(raw) => Step::Write(Write::requested(call, &raw, relative(&raw, None))),
                    None => Step::Call(call),
                };
                steps.push(step);
            }
            AuditEvent::GateDecision {
                gate: recorded_gate,
                decision: Decision::Deny(_),
                call_id: None,
                ..
            } => recorded.push(recorded_gate.name.to_string()),
            AuditEvent::GateDecision {
                call_id: Some(id),
                decision,
                path,
                ..
            } => {
                if let Decision::Deny(rf) = &decision {
                    recorded.push(rf.gate.to_string());
                }
                if let Some(step) = calls.get(&id).and_then(|&i| steps.get_mut(i)) {
                    if let Step::Write(w) = step {
                        if let Some(p) = path {
                            w.rel = Some(p.to_string());
                        }
                        w.flagged |=
                            matches!(decision, Decision::Warn(_) | Decision::Override { .. });
                    }
                    if let (Decision::Deny(rf), Some(c)) = (&decision, step.call_mut()) {
                        c.refuse(rf.gate.to_string());
                    }
                }
            }
            AuditEvent::LayerDecision {
                ref layer,
                decision,
                ref detail,
            } if layer_firing(layer, decision, detail).is_some() => {
                let gate = layer_firing(layer, decision, detail).unwrap_or_default();
                recorded.push(gate.clone());
                let step = detail.call_id().and_then(|id| calls.get(&id));
                let call = step
                    .and_then(|&i| steps.get_mut(i))
                    .and_then(Step::call_mut);
                if let Some(c) = call.filter(|_| decision != LayerVerdict::Approved) {
                    c.refuse(gate);
                }
            }
            AuditEvent::LayerDecision {
                layer,
                decision: LayerVerdict::Refused | LayerVerdict::Denied,
                detail,
            } => {
                let step = detail.call_id().and_then(|id| calls.get(&id));
                if let Some(c) = step
                    .and_then(|&i| steps.get_mut(i))
                    .and_then(Step::call_mut)
                {
                    c.refuse(layer.to_string());
                }
            }
            AuditEvent::ToolFinished {
                call_id,
                is_error,
                effects,
                ..
            } => match calls.get(&call_id).and_then(|&i| steps.get_mut(i)) {
                Some(Step::Write(w)) if w.call.outcome != Outcome::Refused => {
                    w.call.outcome = finished(is_error, &effects);
                    w.call.effects = effects;
                }
                Some(Step::Call(c)) if c.outcome != Outcome::Refused => {
                    c.outcome = if is_error {
                        Outcome::Refused
                    } else {
                        Outcome::Kept
                    };
                    c.effects = effects;
                }
                _ => {}
            },
            _ => {}
        }
    }
    Session {
        kind: "ledger",
        id: name.to_string(),
        steps,
        ended,
        recorded,
    }
}

/// The gate a recorded layer decision is a firing of (a refusal, a stop, a forced jump).
fn layer_firing(layer: &LayerId, decision: LayerVerdict, detail: &LayerDetail) -> Option<String> {
    use LayerVerdict as V;
    let by = match (layer, decision) {
        (LayerId::Repeat, V::Refused) | (LayerId::ClassJump, V::ClassJump | V::Exhausted) => {
            RefusedBy::from(layer)
        }
        (LayerId::Caps, V::CapReached) => RefusedBy::layer_instance(
            layer,
            detail
                .cap()
                .unwrap_or_default()
                .split(' ')
                .next()
                .unwrap_or_default(),
        ),
        (LayerId::StopGate, V::Denied | V::Approved | V::ApprovalRequested) => {
            let gate = detail.as_stop_gate().map(|g| g.gate.to_string());
            RefusedBy::layer_instance(layer, gate.as_deref().unwrap_or_default())
        }
        _ => return None,
    };
    Some(by.to_string())
}

/// A record's time in ms since the epoch.
fn millis(time: &str) -> Option<u64> {
    let t = humantime::parse_rfc3339_weak(time).ok()?;
    let d = t.duration_since(std::time::UNIX_EPOCH).ok()?;
    u64::try_from(d.as_millis()).ok()
}

/// What became of a write, from its recorded result.
fn finished(is_error: bool, effects: &[Effect]) -> Outcome {
    if is_error {
        Outcome::Refused
    } else if effects.iter().any(|e| e.status == EffectStatus::Ok) {
        Outcome::Kept
    } else if effects.is_empty() {
        Outcome::Unknown
    } else {
        Outcome::Reverted
    }
}

/// Reads Claude Code transcript lines into sessions (one file may hold one session; lines of
/// several sessions are kept apart by `sessionId`), and counts the lines. `main_agent` names
/// the main agent; sidechain (subagent) lines go by `subagent` unless they name their agent.
pub(crate) fn transcript_sessions(
    reader: impl BufRead,
    main_agent: &str,
    fallback_id: &str,
) -> std::io::Result<(Vec<Session>, u64)> {
    let mut lines = 0u64;
    let mut sessions: Vec<Session> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut calls: HashMap<(usize, String), usize> = HashMap::new();
    for line in reader.lines() {
        let line = line?;
        lines += 1;
        let Ok(v) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let Some(kind) = v.get("type").and_then(Value::as_str) else {
            continue;
        };
        if kind != "user" && kind != "assistant" {
            continue;
        }
        let sid = v
            .get("sessionId")
            .and_then(Value::as_str)
            .unwrap_or(fallback_id)
            .to_string();
        let si = *index.entry(sid.clone()).or_insert_with(|| {
            sessions.push(Session {
                kind: "claude-code",
                id: sid,
                steps: Vec::new(),
                ended: None,
                recorded: Vec::new(),
            });
            sessions.len() - 1
        });
        let cwd = v.get("cwd").and_then(Value::as_str);
        let sidechain = v.get("isSidechain").and_then(Value::as_bool) == Some(true);
        let agent = match (sidechain, v.get("agentType").and_then(Value::as_str)) {
            (true, Some(name)) => name.to_ascii_lowercase(),
            (true, None) => "subagent".to_string(),
            (false, _) => main_agent.to_string(),
        };
        let content = v.get("message").and_then(|m| m.get("content"));
        let steps = &mut sessions[si].steps;
        match (kind, content) {
            ("user", Some(Value::String(_))) if !meta(&v) && !sidechain => {
                steps.push(Step::Human);
            }
            ("user", Some(Value::Array(blocks))) => {
                let mut human = false;
                for b in blocks {
                    match b.get("type").and_then(Value::as_str) {
                        Some("tool_result") => {
                            let Some(id) = b.get("tool_use_id").and_then(Value::as_str) else {
                                continue;
                            };
                            if let Some(Step::Write(w)) = calls
                                .get(&(si, id.to_string()))
                                .and_then(|&i| steps.get_mut(i))
                            {
                                let err = b.get("is_error").and_then(Value::as_bool) == Some(true);
                                w.call.outcome = if err { Outcome::Refused } else { Outcome::Kept };
                                if err {
                                    w.call.refused_by = Some(first_line(b.get("content")));
                                }
                            }
                        }
                        Some("text") if !meta(&v) && !sidechain => human = true,
                        _ => {}
                    }
                }
                if human {
                    steps.push(Step::Human);
                }
            }
            ("assistant", Some(Value::Array(blocks))) => {
                for b in blocks {
                    if b.get("type").and_then(Value::as_str) != Some("tool_use") {
                        continue;
                    }
                    let (Some(id), Some(name), Some(input)) = (
                        b.get("id").and_then(Value::as_str),
                        b.get("name").and_then(Value::as_str),
                        b.get("input"),
                    ) else {
                        continue;
                    };
                    let key = match name {
                        "Write" | "Edit" | "MultiEdit" => "file_path",
                        "NotebookEdit" => "notebook_path",
                        _ => continue,
                    };
                    let Some(raw) = input.get(key).and_then(Value::as_str) else {
                        continue;
                    };
                    calls.insert((si, id.to_string()), steps.len());
                    let call =
                        Call::requested(agent.clone(), id.into(), name.into(), input.clone());
                    steps.push(Step::Write(Write::requested(call, raw, relative(raw, cwd))));
                }
            }
            _ => {}
        }
    }
    Ok((sessions, lines))
}

fn meta(v: &Value) -> bool {
    v.get("isMeta").and_then(Value::as_bool) == Some(true)
}

fn first_line(v: Option<&Value>) -> String {
    let text = match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(" "),
        _ => String::new(),
    };
    text.lines()
        .next()
        .unwrap_or_default()
        .chars()
        .take(200)
        .collect()
}

fn replacements(input: &Value) -> Vec<(String, String)> {
    let pair = |v: &Value| {
        Some((
            v.get("old_string")?.as_str()?.to_string(),
            v.get("new_string")?.as_str()?.to_string(),
        ))
    };
    let mut out: Vec<(String, String)> = pair(input).into_iter().collect();
    if let Some(edits) = input.get("edits").and_then(Value::as_array) {
        out.extend(edits.iter().filter_map(pair));
    }
    out
}

/// Whether `path` looks like a Claude Code transcript file.
pub(crate) fn is_transcript(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "jsonl")
        && path
            .file_name()
            .is_some_and(|n| n != "events.jsonl" && n != "index.jsonl")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_strips_the_root_and_refuses_escapes() {
        assert_eq!(
            relative("/p/src/a.rs", Some("/p")).as_deref(),
            Some("src/a.rs")
        );
        assert_eq!(
            relative("./src/../plan.md", None).as_deref(),
            Some("plan.md")
        );
        assert_eq!(relative("/elsewhere/a", Some("/p")), None);
        assert_eq!(relative("/pp/a", Some("/p")), None);
        assert_eq!(relative("../a", None), None);
    }

    #[test]
    fn a_transcript_yields_prompts_writes_and_their_results() {
        let lines = [
            r#"{"type":"summary","summary":"x"}"#,
            r#"{"type":"user","sessionId":"s1","cwd":"/p","message":{"role":"user","content":"fix it"}}"#,
            r#"{"type":"user","sessionId":"s1","cwd":"/p","isMeta":true,"message":{"role":"user","content":"<caveat>"}}"#,
            r#"{"type":"assistant","sessionId":"s1","cwd":"/p","message":{"role":"assistant","content":[{"type":"text","text":"ok"},{"type":"tool_use","id":"t1","name":"Write","input":{"file_path":"/p/a.rs","content":"x"}},{"type":"tool_use","id":"t2","name":"Read","input":{"file_path":"/p/b.rs"}}]}}"#,
            r#"{"type":"user","sessionId":"s1","cwd":"/p","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"File created"}]}}"#,
            r#"{"type":"assistant","sessionId":"s1","cwd":"/p","message":{"role":"assistant","content":[{"type":"tool_use","id":"t3","name":"Edit","input":{"file_path":"/p/c.rs","old_string":"a","new_string":"b"}}]}}"#,
            r#"{"type":"user","sessionId":"s1","cwd":"/p","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t3","is_error":true,"content":"blocked by hook"}]}}"#,
        ];
        let (s, _) = transcript_sessions(lines.join("\n").as_bytes(), "root", "f").unwrap();
        assert_eq!(s.len(), 1);
        let steps = &s[0].steps;
        assert_eq!(steps.len(), 3, "{steps:?}");
        assert_eq!(steps[0], Step::Human);
        let Step::Write(w1) = &steps[1] else { panic!() };
        assert_eq!(
            (w1.rel.as_deref(), w1.call.outcome),
            (Some("a.rs"), Outcome::Kept)
        );
        let Step::Write(w2) = &steps[2] else { panic!() };
        assert_eq!(w2.call.outcome, Outcome::Refused);
        assert_eq!(w2.replacements, vec![("a".to_string(), "b".to_string())]);
        assert_eq!(w2.call.refused_by.as_deref(), Some("blocked by hook"));
    }
}
