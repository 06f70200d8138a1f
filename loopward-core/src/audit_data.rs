//! An event's `data`: its fields as the ledger writes them, serialised straight from the event.
//!
//! The ledger's format promises `data`'s keys sorted. They come out sorted because every type an
//! event holds declares its fields in sorted order of their written names (and the two types whose
//! derived order cannot be sorted, [`RunStatus`](crate::RunStatus) and [`Effect`](crate::Effect),
//! serialise by hand); `serde_json::Value` fields sort their own maps. Its tests (`tests.rs`)
//! check every variant against a re-serialisation through `serde_json::Value`, whose maps sort
//! their keys.

use crate::audit::AuditEvent;
use serde::Serialize;

/// The first bytes serde writes for an internally tagged (`kind`) enum: `{"kind":"`.
const TAG_OPEN: &[u8] = b"{\"kind\":\"";

impl AuditEvent {
    /// Appends the event's fields (all but its `kind`) to `out` as one JSON object with its keys
    /// sorted: a ledger record's `data`, written without an intermediate `serde_json::Value`.
    ///
    /// ```
    /// use loopward_core::{AgentId, AuditEvent};
    /// let ev = AuditEvent::RunStarted { task: "fix it".into(), agent: AgentId::new("planner").unwrap() };
    /// let mut out = b"data=".to_vec();
    /// ev.write_data(&mut out).unwrap();
    /// assert_eq!(out, br#"data={"agent":"planner","task":"fix it"}"#);
    /// ```
    pub fn write_data(&self, out: &mut Vec<u8>) -> Result<(), serde_json::Error> {
        write_untagged(self, self.kind(), out)
    }
}

/// Appends `value`, an enum tagged `kind` whose tag is `kind`, to `out` as a JSON object without
/// its tag. Serde writes the tag first; it is cut out of the bytes just written, and a value that
/// does not start with it is refused (nothing is appended).
fn write_untagged<T: Serialize>(
    value: &T,
    kind: &str,
    out: &mut Vec<u8>,
) -> Result<(), serde_json::Error> {
    let start = out.len();
    serde_json::to_writer(&mut *out, value)?;
    let tag_end = start + TAG_OPEN.len() + kind.len() + 1; // just past the tag's closing quote
    let written = &out[start..];
    let tagged = written.starts_with(TAG_OPEN)
        && written[TAG_OPEN.len()..].starts_with(kind.as_bytes())
        && out.get(tag_end - 1) == Some(&b'"');
    let cut_end = match out.get(tag_end) {
        Some(b',') if tagged => tag_end + 1, // `"kind":"…",` before the other members
        Some(b'}') if tagged => tag_end,     // `"kind":"…"` alone
        _ => {
            out.truncate(start);
            return Err(serde::ser::Error::custom(format!(
                "the value does not serialise with \"kind\":{kind:?} as its first member, \
                 so it cannot be written without its tag"
            )));
        }
    };
    out.drain(start + 1..cut_end);
    Ok(())
}

#[cfg(test)]
mod tests;
