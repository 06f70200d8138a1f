//! A run as a script reads it: one JSON object per line, each event after the ledger has
//! recorded it (`loopward run --json`).
//!
//! Every line is an object with `"schema": "loopward.run/1"` and a `type`:
//!
//! | `type` | when | fields besides `schema` and `type` |
//! |---|---|---|
//! | `start` | first | `run`, `task`, `backend`, `resumed` (bool) |
//! | `event` | per ledger record | `run`, `turn` (absent outside a turn), `agent` (absent when none), `event`: the record's event as the ledger holds it (`{"kind": "turn_started", …}`) |
//! | `end` | last | `run`, `status` (the run status, `{"status": "completed", …}`), `exit_code`, `turns`, `handoffs`, `tokens`, `ledger` (its path, or absent), `final_text` (absent when empty), `approve` (the commands that answer a waiting stop-gate, or absent), `error` (absent unless the run failed or its ledger could not be closed) |
//!
//! The schema's number changes only when a field is removed or changes meaning; new fields may
//! appear in any line. Event kinds are those of the ledger (docs/ledger.md).
//!
//! ```
//! use loopward_core::{AgentId, AuditEvent, AuditSink, RunId, Scope, TurnNumber};
//! use loopward_term::json::JsonSink;
//! use loopward_runner::audit::MemorySink;
//! use std::sync::{Arc, Mutex};
//! let out = Arc::new(Mutex::new(Vec::new()));
//! let sink = JsonSink::new(Arc::new(MemorySink::default()), out.clone());
//! let root = AgentId::new("root").unwrap();
//! let scope = Scope { run: RunId::new("r1").unwrap(), turn: Some(TurnNumber(1)), agent: Some(root.clone()) };
//! sink.record(&scope, &AuditEvent::TurnStarted { agent: root }).unwrap();
//! let text = String::from_utf8(out.lock().unwrap().clone()).unwrap();
//! let line: serde_json::Value = serde_json::from_str(text.trim_end()).unwrap();
//! assert_eq!(line["schema"], "loopward.run/1");
//! assert_eq!(line["type"], "event");
//! assert_eq!(line["turn"], 1);
//! assert_eq!(line["event"]["kind"], "turn_started");
//! ```

use loopward_core::{AuditError, AuditEvent, AuditSink, Scope};
use serde_json::{json, Map, Value};
use std::io::Write;
use std::sync::{Arc, Mutex};

/// The schema every line names.
pub const SCHEMA: &str = "loopward.run/1";

/// One line: `{"schema": …, "type": kind, …fields}`; fields that are `null` are left out.
pub fn line(kind: &str, fields: Value) -> String {
    let rest: Map<String, Value> = match fields {
        Value::Object(f) => f.into_iter().filter(|(_, v)| !v.is_null()).collect(),
        _ => Map::new(),
    };
    // `schema` and `type` first, for a person reading the stream.
    let rest = Value::Object(rest).to_string();
    let head = format!(
        "{{\"schema\":{},\"type\":{}",
        Value::from(SCHEMA),
        Value::from(kind)
    );
    match rest.strip_prefix('{').filter(|r| *r != "}") {
        Some(r) => format!("{head},{r}"),
        None => format!("{head}}}"),
    }
}

/// Records into the ledger, then writes the event as a JSON line.
pub struct JsonSink<W: Write + Send> {
    inner: Arc<dyn AuditSink>,
    out: Arc<Mutex<W>>,
}

impl<W: Write + Send> JsonSink<W> {
    /// Writes what `inner` records into `out`, a line per event.
    pub fn new(inner: Arc<dyn AuditSink>, out: Arc<Mutex<W>>) -> Self {
        Self { inner, out }
    }
}

impl<W: Write + Send> AuditSink for JsonSink<W> {
    fn commit(&self) -> Result<(), AuditError> {
        self.inner.commit()
    }

    fn record(&self, scope: &Scope, event: &AuditEvent) -> Result<(), AuditError> {
        self.inner.record(scope, event)?;
        let text = line(
            "event",
            json!({
                "run": scope.run,
                "turn": scope.turn.map(|t| t.0),
                "agent": scope.agent,
                "event": event,
            }),
        );
        let mut out = self.out.lock().unwrap_or_else(|p| p.into_inner());
        // Best effort, like the timeline: the ledger is the record.
        let _ = writeln!(out, "{text}").and_then(|()| out.flush());
        Ok(())
    }
}
