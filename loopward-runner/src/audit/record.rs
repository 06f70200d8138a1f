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
//! `HMAC-SHA256(key, DOMAIN ‖ canonical bytes)`, or `SHA-256(DOMAIN ‖ canonical bytes)` for a
//! keyless ledger (an explicit opt-out); `prev` is the previous record's hash ([`GENESIS`] for the
//! first), so the records form a chain. The first record also carries a [`LedgerHeader`] (the
//! schema version, the chain and the key's id), covered by its hash. Hashing the bytes as written (not a re-serialisation of parsed values)
//! means a verifier never depends on how a JSON library formats numbers.
//!
//! ```
//! use loopward_core::{AuditEvent, RunId, Scope};
//! use loopward_runner::audit::{Chain, Record, GENESIS};
//! let scope = Scope { run: RunId::new("r1").unwrap(), turn: None, agent: None };
//! let event = AuditEvent::HumanMessage { content: (&loopward_core::Person::at_the_keyboard().says("hi")).into() };
//! let (record, line) = Record::seal(&Chain::Sha256, 1, "2026-01-01T00:00:00.000Z", &scope, &event, GENESIS).unwrap();
//! let (parsed, canonical) = Record::parse_line(&line).unwrap();
//! assert_eq!(parsed, record);
//! assert_eq!(Chain::Sha256.digest(&canonical), record.hash);
//! assert_eq!(parsed.event().unwrap(), event);
//! ```

use super::key::{KeyId, LedgerKey};
use loopward_core::{AgentId, AuditEvent, RunId, Scope, TurnNumber};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Domain separation prefix of every record hash.
pub const DOMAIN: &[u8] = b"loopward.ledger.v1\0";

/// The `prev` of the first record: 64 zeros.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The ledger schema this version writes (in the first record's [`LedgerHeader`]). Schema 1
/// ledgers have no header; they verify only as keyless chains. Schema 3 added `gate_kind` to
/// every `gate_decision` (a gate is a kind and a name; nothing reads a kind from a name).
pub const SCHEMA: u32 = 3;

const HASH_KEY: &[u8] = b",\"hash\":\"";

/// One line of a run's ledger.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Record {
    /// The ledger's header: present in the first record only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ledger: Option<LedgerHeader>,
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

/// The members of a record before `data`, in the field order of [`Record`].
#[derive(Clone, Copy, Serialize)]
struct Head<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    ledger: Option<&'a LedgerHeader>,
    seq: u64,
    time: &'a str,
    run: &'a RunId,
    turn: Option<TurnNumber>,
    agent: Option<&'a AgentId>,
    kind: &'a str,
}

impl Head<'_> {
    /// Appends the head as serde_json writes it, without its closing brace (`data` and `prev`
    /// follow). By hand: its strings (the clock's time, validated ids, a kind) need no escaping,
    /// which [`push_json_str`] checks before it skips serde_json's escaper.
    fn write_open(&self, line: &mut Vec<u8>) -> Result<(), ParseError> {
        line.push(b'{');
        if let Some(header) = self.ledger {
            line.extend_from_slice(b"\"ledger\":");
            serde_json::to_writer(&mut *line, header).map_err(|e| ParseError(e.to_string()))?;
            line.push(b',');
        }
        line.extend_from_slice(b"\"seq\":");
        line.extend_from_slice(itoa::Buffer::new().format(self.seq).as_bytes());
        line.extend_from_slice(b",\"time\":");
        push_json_str(line, self.time);
        line.extend_from_slice(b",\"run\":");
        push_json_str(line, self.run.as_str());
        line.extend_from_slice(b",\"turn\":");
        match self.turn {
            Some(t) => line.extend_from_slice(itoa::Buffer::new().format(t.0).as_bytes()),
            None => line.extend_from_slice(b"null"),
        }
        line.extend_from_slice(b",\"agent\":");
        match self.agent {
            Some(a) => push_json_str(line, a.as_str()),
            None => line.extend_from_slice(b"null"),
        }
        line.extend_from_slice(b",\"kind\":");
        push_json_str(line, self.kind);
        Ok(())
    }
}

/// Appends `s` as a JSON string: quoted as it is when no byte needs escaping (serde_json escapes
/// only `"`, `\\` and control characters), else through serde_json's escaper.
fn push_json_str(line: &mut Vec<u8>, s: &str) {
    // A fold without early exit, so the compiler can check many bytes at once.
    let escape = s
        .bytes()
        .fold(false, |e, b| e | (b < 0x20) | (b == b'"') | (b == b'\\'));
    if !escape {
        line.push(b'"');
        line.extend_from_slice(s.as_bytes());
        line.push(b'"');
    } else {
        // Writing a string into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut *line, s);
    }
}

/// The record without its hash, with `data` as a [`serde_json::Value`]: how lines were built
/// before they were written straight from the event. Debug builds build every line this way too
/// and check that the bytes agree (see [`Record::seal_into`]).
#[cfg(any(test, debug_assertions))]
#[derive(Serialize)]
struct Body<'a> {
    #[serde(flatten)]
    head: Head<'a>,
    data: &'a serde_json::Value,
    prev: &'a str,
}

/// What the first record says about its ledger: the schema and how it is chained.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LedgerHeader {
    /// The schema version ([`SCHEMA`]).
    pub schema: u32,
    /// `hmac-sha256` or `sha256` (keyless).
    pub chain: String,
    /// The id of the key an HMAC chain is keyed with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<KeyId>,
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
        let mut line = Vec::new();
        let hash = Self::seal_into(chain, seq, time, scope, event, prev, &mut line)?;
        let record = Record {
            ledger: (seq == 1).then(|| chain.header()),
            seq,
            time: time.to_string(),
            run: scope.run.clone(),
            turn: scope.turn,
            agent: scope.agent.clone(),
            kind: event.kind().to_string(),
            data: untagged_value(event)?,
            prev: prev.to_string(),
            hash: String::from_utf8_lossy(&hash).into_owned(),
        };
        Ok((record, line))
    }

    /// Appends the line for `event` at `seq` after `prev` to `line` (a buffer the caller reuses,
    /// which may hold earlier lines not yet written) and returns its hash as hex, without building the [`Record`]: the
    /// ledger's append, and the bytes of [`Record::seal`].
    ///
    /// `data` is serialised straight from the event ([`AuditEvent::write_data`]): its keys come
    /// out sorted because every type in an event declares its fields in sorted order. Debug
    /// builds also build the line through a [`serde_json::Value`] (whose maps sort their keys)
    /// and panic if the bytes differ, so every test that writes a ledger checks the order.
    pub(crate) fn seal_into(
        chain: &Chain,
        seq: u64,
        time: &str,
        scope: &Scope,
        event: &AuditEvent,
        prev: &str,
        line: &mut Vec<u8>,
    ) -> Result<[u8; 64], ParseError> {
        // The first record carries the header, so the chain and its key are named under the MAC.
        let header = (seq == 1).then(|| chain.header());
        let head = Head {
            ledger: header.as_ref(),
            seq,
            time,
            run: &scope.run,
            turn: scope.turn,
            agent: scope.agent.as_ref(),
            kind: event.kind(),
        };
        let start = line.len();
        head.write_open(line)?;
        line.extend_from_slice(b",\"data\":");
        event
            .write_data(line)
            .map_err(|e| ParseError(e.to_string()))?;
        line.extend_from_slice(b",\"prev\":");
        push_json_str(line, prev);
        line.push(b'}');
        #[cfg(debug_assertions)]
        check_against_value(&head, event, prev, &line[start..]);
        let mut hex = [0u8; 64];
        hex::encode_to_slice(chain.digest_raw(DOMAIN, &line[start..]), &mut hex)
            .map_err(|e| ParseError(e.to_string()))?;
        line.pop(); // the closing brace; the hash member goes before it
        line.extend_from_slice(HASH_KEY);
        line.extend_from_slice(&hex);
        line.extend_from_slice(b"\"}\n");
        Ok(hex)
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
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Chain {
    /// `SHA-256(DOMAIN ‖ bytes)`, keyless: detects careless edits only; anyone who can write
    /// the file can re-chain it. An explicit opt-out, labelled as such by `verify` and `report`.
    #[default]
    Sha256,
    /// `HMAC-SHA256(key, DOMAIN ‖ bytes)`: only a holder of the key can re-chain.
    Hmac(LedgerKey),
}

impl Chain {
    /// The hex digest of `canonical` bytes.
    pub fn digest(&self, canonical: &[u8]) -> String {
        self.digest_in(DOMAIN, canonical)
    }

    /// The hex digest of `domain ‖ bytes`: the one hash every chain (ledger or index) uses.
    pub(crate) fn digest_in(&self, domain: &[u8], bytes: &[u8]) -> String {
        match self {
            Self::Sha256 => {
                let mut h = Sha256::new();
                h.update(domain);
                h.update(bytes);
                hex::encode(h.finalize())
            }
            Self::Hmac(key) => key.mac(domain, bytes),
        }
    }

    /// The digest of `domain ‖ bytes`, as bytes.
    pub(crate) fn digest_raw(&self, domain: &[u8], bytes: &[u8]) -> [u8; 32] {
        match self {
            Self::Sha256 => {
                let mut h = Sha256::new();
                h.update(domain);
                h.update(bytes);
                h.finalize().into()
            }
            Self::Hmac(key) => key.mac_raw(domain, bytes),
        }
    }

    /// The header the first record of a ledger chained this way carries.
    pub fn header(&self) -> LedgerHeader {
        LedgerHeader {
            schema: SCHEMA,
            chain: self.label().into(),
            key: self.key_id().cloned(),
        }
    }

    /// The key's id, for an HMAC chain.
    pub fn key_id(&self) -> Option<&KeyId> {
        match self {
            Self::Sha256 => None,
            Self::Hmac(k) => Some(k.id()),
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

/// `value` (an internally tagged enum) as a [`serde_json::Value`] without its `kind` member.
fn untagged_value<T: Serialize>(value: &T) -> Result<serde_json::Value, ParseError> {
    let mut data = serde_json::to_value(value).map_err(|e| ParseError(e.to_string()))?;
    if let Some(m) = data.as_object_mut() {
        m.remove("kind");
    }
    Ok(data)
}

/// The line without its hash built the old way, through a [`serde_json::Value`] (whose maps
/// sort their keys).
#[cfg(any(test, debug_assertions))]
fn line_via_value<T: Serialize>(head: &Head<'_>, value: &T, prev: &str) -> Vec<u8> {
    let data = untagged_value(value).expect("the event serialises");
    let body = Body {
        head: *head,
        data: &data,
        prev,
    };
    serde_json::to_vec(&body).expect("the record serialises")
}

/// Panics when `line` (without its hash) is not the bytes the old way builds: a field of an
/// event type is declared out of sorted order.
#[cfg(any(test, debug_assertions))]
fn check_against_value<T: Serialize>(head: &Head<'_>, value: &T, prev: &str, line: &[u8]) {
    let expected = line_via_value(head, value, prev);
    assert!(
        line == expected.as_slice(),
        "a ledger record written straight from its event differs from the same record written \
         through serde_json::Value: a field of an event type is declared out of sorted order \
         (declare it where its name sorts; see AuditEvent's docs)\n straight: {}\n sorted:   {}",
        String::from_utf8_lossy(line),
        String::from_utf8_lossy(&expected),
    );
}

/// Formats milliseconds since the Unix epoch as RFC 3339 (UTC, milliseconds).
pub(crate) fn rfc3339(millis: u64) -> String {
    let mut out = String::with_capacity(24);
    write_rfc3339(&mut out, millis);
    out
}

/// Appends milliseconds since the Unix epoch as RFC 3339 (UTC, milliseconds) to `out`.
pub(crate) fn write_rfc3339(out: &mut String, millis: u64) {
    use std::fmt::Write as _;
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_millis(millis);
    // Writing into a String cannot fail.
    let _ = write!(out, "{}", humantime::format_rfc3339_millis(t));
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
    fn strings_written_without_the_escaper_are_the_bytes_serde_json_writes() {
        for s in [
            "",
            "r1",
            "2026-01-01T00:00:00.000Z",
            "héllo ✓",
            "a\"b",
            "a\\b",
            "tab\there",
            "\u{7f}",
            "nl\n",
        ] {
            let mut line = Vec::new();
            push_json_str(&mut line, s);
            assert_eq!(line, serde_json::to_vec(s).unwrap(), "{s:?}");
        }
    }

    #[test]
    fn seal_into_appends_seal_s_bytes_to_a_reused_buffer() {
        let key = LedgerKey::from_bytes(vec![7u8; 32]).unwrap();
        let mut buf = b"left over from the last record".to_vec();
        for chain in [Chain::Sha256, Chain::Hmac(key)] {
            for (seq, ev) in [
                (
                    1,
                    AuditEvent::HumanMessage {
                        content: (&loopward_core::Person::at_the_keyboard().says("hi")).into(),
                    },
                ),
                (
                    2,
                    AuditEvent::ToolRequested {
                        call_id: "c1".into(),
                        tool: "write_file".into(),
                        arguments: serde_json::json!({"z": 1, "a": 2}),
                    },
                ),
            ] {
                let (rec, line) = Record::seal(&chain, seq, "T", &scope(), &ev, GENESIS).unwrap();
                let before = buf.len();
                let hash =
                    Record::seal_into(&chain, seq, "T", &scope(), &ev, GENESIS, &mut buf).unwrap();
                assert_eq!(buf[before..], line[..]);
                assert_eq!(&hash[..], rec.hash.as_bytes());
            }
        }
    }

    #[test]
    fn the_debug_check_catches_a_record_whose_data_is_out_of_sorted_order() {
        let ev = AuditEvent::HumanMessage {
            content: (&loopward_core::Person::at_the_keyboard().says("hi")).into(),
        };
        let header = Chain::Sha256.header();
        let scope = scope();
        let head = Head {
            ledger: Some(&header),
            seq: 1,
            time: "T",
            run: &scope.run,
            turn: scope.turn,
            agent: scope.agent.as_ref(),
            kind: ev.kind(),
        };
        let mut line = Vec::new();
        Record::seal_into(&Chain::Sha256, 1, "T", &scope, &ev, GENESIS, &mut line).unwrap();
        let good = line_via_value(&head, &ev, GENESIS);
        assert!(line.starts_with(&good[..good.len() - 1]));
        check_against_value(&head, &ev, GENESIS, &good);
        // The same record with a struct whose fields are declared out of order.
        #[derive(Serialize)]
        struct Unsorted {
            zebra: u32,
            apple: u32,
        }
        let unsorted = Unsorted { zebra: 1, apple: 2 };
        let mut straight = serde_json::to_vec(&head).unwrap();
        straight.pop();
        straight.extend_from_slice(b",\"data\":");
        serde_json::to_writer(&mut straight, &unsorted).unwrap();
        straight.extend_from_slice(b",\"prev\":\"p\"}");
        let caught = std::panic::catch_unwind(|| {
            check_against_value(&head, &unsorted, "p", &straight);
        });
        let message = caught.expect_err("the check panics");
        let message = message.downcast_ref::<String>().unwrap();
        assert!(message.contains("out of sorted order"), "{message}");
        assert!(
            message.contains(r#""data":{"zebra":1,"apple":2}"#),
            "{message}"
        );
    }

    #[test]
    fn seal_s_record_holds_the_event_and_the_line_s_hash() {
        let ev = AuditEvent::ToolRequested {
            arguments: serde_json::json!({"z": 1, "a": 2}),
            call_id: "c1".into(),
            tool: "write_file".into(),
        };
        let (rec, line) = Record::seal(&Chain::Sha256, 1, "T", &scope(), &ev, GENESIS).unwrap();
        let (parsed, canonical) = Record::parse_line(&line).unwrap();
        assert_eq!(parsed, rec);
        assert_eq!(rec.ledger, Some(Chain::Sha256.header()));
        assert_eq!(Chain::Sha256.digest(&canonical), rec.hash);
        assert_eq!(rec.event().unwrap(), ev);
    }

    #[test]
    fn a_flipped_byte_changes_the_hash() {
        let ev = AuditEvent::HumanMessage {
            content: (&loopward_core::Person::at_the_keyboard().says("hello")).into(),
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
        assert!(
            format!("{:?}", LedgerKey::from_bytes(vec![1u8; 32]).unwrap()).ends_with("<redacted>)")
        );
    }

    #[test]
    fn rfc3339_is_utc_with_millis() {
        assert_eq!(rfc3339(1_700_000_000_123), "2023-11-14T22:13:20.123Z");
    }
}
