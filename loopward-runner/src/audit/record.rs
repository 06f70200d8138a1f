//! The on-disk ledger record, its canonical bytes and its hash.
//!
//! One record is one line of `events.jsonl`:
//!
//! ```text
//! {"seq":1,"time":"…","run":"r1","turn":null,"agent":null,"kind":"run_started","data":{…},"prev":"00…0","hash":"…"}
//! ```
//!
//! The fields are always written in this order and `data`'s keys are sorted, so the same events
//! give the same bytes. The **canonical bytes** of a record are the line without its trailing
//! `,"hash":"…"` member (that is, the record serialised without `hash`). Its hash is
//! `SHA-256(DOMAIN ‖ canonical bytes)`, or `HMAC-SHA256(key, DOMAIN ‖ canonical bytes)` when the
//! ledger is keyed; `prev` is the previous record's hash ([`GENESIS`] for the first), so the
//! records form a chain. Hashing the bytes as written (not a re-serialisation of parsed values)
//! means a verifier never depends on how a JSON library formats numbers.
//!
//! ```
//! use loopward_core::{AuditEvent, RunId, Scope};
//! use loopward_runner::audit::{Chain, Record, GENESIS};
//! let scope = Scope { run: RunId::new("r1").unwrap(), turn: None, agent: None };
//! let event = AuditEvent::HumanMessage { content: "hi".into() };
//! let (record, line) = Record::seal(&Chain::Sha256, 1, "2026-01-01T00:00:00.000Z", &scope, &event, GENESIS).unwrap();
//! let (parsed, canonical) = Record::parse_line(&line).unwrap();
//! assert_eq!(parsed, record);
//! assert_eq!(Chain::Sha256.digest(&canonical), record.hash);
//! assert_eq!(parsed.event().unwrap(), event);
//! ```

use hmac::{Hmac, Mac};
use loopward_core::{AgentId, AuditEvent, RunId, Scope, TurnNumber};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::path::Path;

/// Domain separation prefix of every record hash.
pub const DOMAIN: &[u8] = b"loopward.ledger.v1\0";

/// The `prev` of the first record: 64 zeros.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The smallest key accepted for an HMAC chain, in bytes.
pub const MIN_KEY_BYTES: usize = 32;

const HASH_KEY: &[u8] = b",\"hash\":\"";

/// One line of a run's ledger.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Record {
    /// Position in the ledger, counting from 1 (equal to the line number).
    pub seq: u64,
    /// When it was recorded (RFC 3339, UTC, milliseconds), from the run's injected clock.
    pub time: String,
    /// The run.
    pub run: RunId,
    /// The turn, when the event belongs to one.
    pub turn: Option<TurnNumber>,
    /// The agent acting, when there is one.
    pub agent: Option<AgentId>,
    /// The event's kind ([`AuditEvent::kind`]).
    pub kind: String,
    /// The event's fields (without `kind`).
    pub data: serde_json::Value,
    /// The previous record's hash ([`GENESIS`] for the first).
    pub prev: String,
    /// This record's hash (hex).
    pub hash: String,
}

/// The record without its hash: what is hashed, in the field order of [`Record`].
#[derive(Serialize)]
struct Body<'a> {
    seq: u64,
    time: &'a str,
    run: &'a RunId,
    turn: Option<TurnNumber>,
    agent: Option<&'a AgentId>,
    kind: &'a str,
    data: &'a serde_json::Value,
    prev: &'a str,
}

/// Why a line is not a well-formed record.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ParseError(pub String);

impl Record {
    /// Builds the record for `event` at `seq` after `prev`, and its line (with the newline).
    pub fn seal(
        chain: &Chain,
        seq: u64,
        time: &str,
        scope: &Scope,
        event: &AuditEvent,
        prev: &str,
    ) -> Result<(Record, Vec<u8>), ParseError> {
        let mut data = serde_json::to_value(event).map_err(|e| ParseError(e.to_string()))?;
        let kind = match data.as_object_mut().and_then(|m| m.remove("kind")) {
            Some(serde_json::Value::String(k)) => k,
            _ => event.kind().to_string(),
        };
        let body = Body {
            seq,
            time,
            run: &scope.run,
            turn: scope.turn,
            agent: scope.agent.as_ref(),
            kind: &kind,
            data: &data,
            prev,
        };
        let mut line = serde_json::to_vec(&body).map_err(|e| ParseError(e.to_string()))?;
        let hash = chain.digest(&line);
        line.pop(); // the closing brace; the hash member goes before it
        line.extend_from_slice(HASH_KEY);
        line.extend_from_slice(hash.as_bytes());
        line.extend_from_slice(b"\"}\n");
        let record = Record {
            seq,
            time: time.to_string(),
            run: scope.run.clone(),
            turn: scope.turn,
            agent: scope.agent.clone(),
            kind,
            data,
            prev: prev.to_string(),
            hash,
        };
        Ok((record, line))
    }

    /// Parses one line (with or without its newline) and returns the record and its canonical
    /// bytes (the bytes its hash covers).
    pub fn parse_line(line: &[u8]) -> Result<(Record, Vec<u8>), ParseError> {
        let line = line.strip_suffix(b"\n").unwrap_or(line);
        let record: Record = serde_json::from_slice(line)
            .map_err(|e| ParseError(format!("not a ledger record: {e}")))?;
        // The hash member must be the last one, written exactly as the writer writes it.
        let tail_len = HASH_KEY.len() + 64 + 2;
        let cut = line.len().checked_sub(tail_len).ok_or_else(|| {
            ParseError("the line is too short to end with its hash member".into())
        })?;
        let tail = &line[cut..];
        let hex_ok = tail[HASH_KEY.len()..HASH_KEY.len() + 64]
            .iter()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b));
        if !tail.starts_with(HASH_KEY) || !tail.ends_with(b"\"}") || !hex_ok {
            return Err(ParseError(
                "the line does not end with its \"hash\" member (64 lowercase hex digits)".into(),
            ));
        }
        let mut canonical = line[..cut].to_vec();
        canonical.push(b'}');
        Ok((record, canonical))
    }

    /// The event this record holds.
    pub fn event(&self) -> Result<AuditEvent, ParseError> {
        let mut data = self.data.clone();
        match data.as_object_mut() {
            Some(m) => {
                m.insert("kind".into(), serde_json::Value::String(self.kind.clone()));
            }
            None => return Err(ParseError("the record's data is not an object".into())),
        }
        serde_json::from_value(data)
            .map_err(|e| ParseError(format!("seq {}: not a known event: {e}", self.seq)))
    }

    /// The scope the event was recorded under.
    pub fn scope(&self) -> Scope {
        Scope {
            run: self.run.clone(),
            turn: self.turn,
            agent: self.agent.clone(),
        }
    }
}

/// How record hashes are computed: plain SHA-256, or HMAC-SHA256 under a secret key.
#[derive(Clone, Debug, Default)]
pub enum Chain {
    /// `SHA-256(DOMAIN ‖ bytes)`: detects edits; anyone can re-chain, so the anchors in
    /// `runs/index.jsonl` are what detect a rewritten tail.
    #[default]
    Sha256,
    /// `HMAC-SHA256(key, DOMAIN ‖ bytes)`: only a holder of the key can re-chain.
    Hmac(LedgerKey),
}

impl Chain {
    /// The hex digest of `canonical` bytes.
    pub fn digest(&self, canonical: &[u8]) -> String {
        match self {
            Self::Sha256 => {
                let mut h = Sha256::new();
                h.update(DOMAIN);
                h.update(canonical);
                hex::encode(h.finalize())
            }
            Self::Hmac(key) => {
                // HMAC takes keys of any length; MIN_KEY_BYTES is enforced when loading.
                let Ok(mut m) = Hmac::<Sha256>::new_from_slice(&key.0) else {
                    return String::new();
                };
                m.update(DOMAIN);
                m.update(canonical);
                hex::encode(m.finalize().into_bytes())
            }
        }
    }

    /// The name written in anchors: `sha256` or `hmac-sha256`.
    pub fn label(&self) -> &'static str {
        match self {
            Self::Sha256 => "sha256",
            Self::Hmac(_) => "hmac-sha256",
        }
    }
}

/// A secret key for an HMAC chain. Its `Debug` never shows the key.
#[derive(Clone)]
pub struct LedgerKey(Vec<u8>);

impl std::fmt::Debug for LedgerKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LedgerKey(<redacted>)")
    }
}

/// A ledger key could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KeyError {
    /// The file could not be read.
    #[error("cannot read the ledger key {path}: {source}")]
    Io {
        /// The key file.
        path: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The key file lies inside the workspace, where agents could read it.
    #[error("the ledger key {path} lies inside the workspace {workspace}; keep it outside, where no agent can read it")]
    InsideWorkspace {
        /// The key file.
        path: std::path::PathBuf,
        /// The workspace root.
        workspace: std::path::PathBuf,
    },
    /// The key is too short.
    #[error("the ledger key {path} has {len} bytes; use at least {MIN_KEY_BYTES} random bytes (e.g. `head -c 32 /dev/urandom > key`)")]
    TooShort {
        /// The key file.
        path: std::path::PathBuf,
        /// Its length after trimming.
        len: usize,
    },
}

impl LedgerKey {
    /// A key from bytes; `None` when shorter than [`MIN_KEY_BYTES`].
    pub fn from_bytes(bytes: impl Into<Vec<u8>>) -> Option<Self> {
        let bytes = bytes.into();
        (bytes.len() >= MIN_KEY_BYTES).then_some(Self(bytes))
    }

    /// A short public id of the key (16 hex digits of `HMAC-SHA256(key, "loopward.key-id")`):
    /// names which key a ledger is chained with without disclosing it.
    pub fn id(&self) -> String {
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.0)
            .unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"));
        mac.update(b"loopward.key-id");
        hex::encode(&mac.finalize().into_bytes()[..8])
    }

    /// Reads a key file (its bytes, without a trailing newline). When `workspace` is given, a
    /// key inside it is refused: agents can read the workspace.
    pub fn from_file(path: &Path, workspace: Option<&Path>) -> Result<Self, KeyError> {
        let io = |source| KeyError::Io {
            path: path.to_path_buf(),
            source,
        };
        if let Some(ws) = workspace {
            let real = path.canonicalize().map_err(io)?;
            let root = ws.canonicalize().map_err(io)?;
            if real.starts_with(&root) {
                return Err(KeyError::InsideWorkspace {
                    path: path.to_path_buf(),
                    workspace: ws.to_path_buf(),
                });
            }
        }
        let mut bytes = std::fs::read(path).map_err(io)?;
        while bytes.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
            bytes.pop();
        }
        let len = bytes.len();
        Self::from_bytes(bytes).ok_or(KeyError::TooShort {
            path: path.to_path_buf(),
            len,
        })
    }
}

/// Formats milliseconds since the Unix epoch as RFC 3339 (UTC, milliseconds).
pub(crate) fn rfc3339(millis: u64) -> String {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_millis(millis);
    humantime::format_rfc3339_millis(t).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope() -> Scope {
        Scope {
            run: RunId::new("r1").unwrap(),
            turn: Some(TurnNumber(2)),
            agent: Some(AgentId::new("planner").unwrap()),
        }
    }

    #[test]
    fn record_line_has_fixed_field_order_and_sorted_data() {
        let ev = AuditEvent::ToolRequested {
            call_id: "c1".into(),
            tool: "write_file".into(),
            arguments: serde_json::json!({"z": 1, "a": 2}),
        };
        let (_, line) = Record::seal(&Chain::Sha256, 7, "T", &scope(), &ev, GENESIS).unwrap();
        let text = String::from_utf8(line).unwrap();
        assert!(text.starts_with(r#"{"seq":7,"time":"T","run":"r1","turn":2,"agent":"planner","kind":"tool_requested","data":{"arguments":{"a":2,"z":1},"call_id":"c1","tool":"write_file"},"prev":"000"#), "{text}");
        assert!(text.ends_with("\"}\n"));
    }

    #[test]
    fn a_flipped_byte_changes_the_hash() {
        let ev = AuditEvent::HumanMessage {
            content: "hello".into(),
        };
        let (rec, line) = Record::seal(&Chain::Sha256, 1, "T", &scope(), &ev, GENESIS).unwrap();
        let edited = String::from_utf8(line).unwrap().replace("hello", "hellp");
        let (_, canonical) = Record::parse_line(edited.as_bytes()).unwrap();
        assert_ne!(Chain::Sha256.digest(&canonical), rec.hash);
    }

    #[test]
    fn hmac_chain_differs_from_plain_and_needs_the_key() {
        let key = LedgerKey::from_bytes(vec![7u8; 32]).unwrap();
        let other = LedgerKey::from_bytes(vec![8u8; 32]).unwrap();
        let a = Chain::Hmac(key).digest(b"x");
        assert_ne!(a, Chain::Sha256.digest(b"x"));
        assert_ne!(a, Chain::Hmac(other).digest(b"x"));
        assert!(LedgerKey::from_bytes(vec![1u8; 8]).is_none());
        assert_eq!(
            format!("{:?}", LedgerKey::from_bytes(vec![1u8; 32]).unwrap()),
            "LedgerKey(<redacted>)"
        );
    }

    #[test]
    fn rfc3339_is_utc_with_millis() {
        assert_eq!(rfc3339(1_700_000_000_123), "2023-11-14T22:13:20.123Z");
    }
}
