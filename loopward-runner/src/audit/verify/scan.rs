//! Reading a ledger's bytes front to back: the chain its header names, and every line's seal,
//! sequence and link.

use super::super::key::KeyId;
use super::super::record::{Chain, LedgerHeader, Record, GENESIS, SCHEMA};
use super::{Breach, VerifyError, VerifyOptions};
use std::path::Path;

/// The chain a ledger says it uses (its first record's header), if the verifier accepts it.
pub(super) fn chain_of(
    path: &Path,
    bytes: &[u8],
    opts: &VerifyOptions,
) -> Result<(Chain, Option<LedgerHeader>), VerifyError> {
    let first = bytes.split(|b| *b == b'\n').next().unwrap_or_default();
    if first.is_empty() {
        // No records: anchors decide (an emptied ledger no longer matches them).
        return Ok((Chain::Sha256, None));
    }
    let record = Record::parse_line(first).map_err(|e| VerifyError::Breach {
        path: path.to_path_buf(),
        seq: 1,
        breach: Breach::Unparseable(e.0),
    })?;
    let header = match record.0.ledger {
        None if opts.allow_keyless => return Ok((Chain::Sha256, None)),
        None => {
            return Err(VerifyError::Keyless {
                path: path.to_path_buf(),
                legacy: " from schema 1",
            })
        }
        Some(h) => h,
    };
    let bad = |why: String| VerifyError::Breach {
        path: path.to_path_buf(),
        seq: 1,
        breach: Breach::Header(why),
    };
    if header.schema != SCHEMA {
        return Err(VerifyError::OtherSchema {
            path: path.to_path_buf(),
            schema: header.schema,
            by: if header.schema < SCHEMA {
                "an older"
            } else {
                "a newer"
            },
        });
    }
    let chain = match (header.chain.as_str(), &header.key) {
        ("hmac-sha256", Some(id)) => match opts.keys.get(id) {
            Some(k) => Chain::Hmac(k.clone()),
            None => {
                return Err(VerifyError::KeyNotHeld {
                    path: path.to_path_buf(),
                    key: id.clone(),
                })
            }
        },
        ("sha256", None) if opts.allow_keyless => Chain::Sha256,
        ("sha256", None) => {
            return Err(VerifyError::Keyless {
                path: path.to_path_buf(),
                legacy: "",
            })
        }
        (other, _) => return Err(bad(format!("unknown chain {other:?}"))),
    };
    Ok((chain, Some(header)))
}

/// The result of reading a ledger's bytes front to back.
pub(crate) struct Scan {
    /// The records that verified, in order.
    pub(crate) records: Vec<Record>,
    /// Bytes up to the end of the last good line.
    pub(crate) good_len: usize,
    /// The first problem: (seq, what).
    pub(crate) bad: Option<(u64, Breach)>,
    /// Whether the first problem is in the last line of the file (a torn write looks like this).
    pub(crate) bad_is_last_line: bool,
}

/// Reads records until the first bad one. `run`, when given, is the run every record must name;
/// `header` is the header the first record must carry (`None`: a schema 1 ledger, no header).
pub(crate) fn scan(
    bytes: &[u8],
    chain: &Chain,
    run: Option<&str>,
    header: Option<&LedgerHeader>,
) -> Scan {
    let mut out = Scan {
        records: vec![],
        good_len: 0,
        bad: None,
        bad_is_last_line: false,
    };
    let mut prev = GENESIS.to_string();
    let mut pos = 0;
    while pos < bytes.len() {
        let end = bytes[pos..]
            .iter()
            .position(|b| *b == b'\n')
            .map_or(bytes.len(), |i| pos + i + 1);
        let line = &bytes[pos..end];
        let expected = out.records.len() as u64 + 1;
        let is_last = end == bytes.len();
        let checked = if line.ends_with(b"\n") {
            check_line(line, chain, expected, &prev, run, header, &bytes[end..])
        } else {
            Err(Breach::Unparseable(
                "the last line has no newline (torn write)".into(),
            ))
        };
        let record = match checked {
            Ok(r) => r,
            Err(b) => {
                out.bad = Some((expected, b));
                out.bad_is_last_line = is_last;
                return out;
            }
        };
        prev.clone_from(&record.hash);
        out.records.push(record);
        out.good_len = end;
        pos = end;
    }
    out
}

fn check_line(
    line: &[u8],
    chain: &Chain,
    expected: u64,
    prev: &str,
    run: Option<&str>,
    header: Option<&LedgerHeader>,
    rest: &[u8],
) -> Result<Record, Breach> {
    let (record, canonical) = Record::parse_line(line).map_err(|e| Breach::Unparseable(e.0))?;
    if chain.digest(&canonical) != record.hash {
        return Err(Breach::Edited);
    }
    if record.seq != expected {
        let later = rest
            .split(|b| *b == b'\n')
            .filter_map(|l| Record::parse_line(l).ok())
            .any(|(r, _)| r.seq == expected);
        return Err(if later {
            Breach::Reordered { found: record.seq }
        } else {
            Breach::Missing { found: record.seq }
        });
    }
    if record.prev != prev {
        return Err(Breach::BadLink);
    }
    let wanted = if expected == 1 { header } else { None };
    if record.ledger.as_ref() != wanted {
        return Err(Breach::Header(match (&record.ledger, wanted) {
            (Some(_), None) if expected > 1 => {
                "a header after the first record: a second ledger was spliced in".into()
            }
            (found, wanted) => format!(
                "the first record names {}, expected {}",
                header_text(found.as_ref()),
                header_text(wanted)
            ),
        }));
    }
    if let Some(run) = run {
        if record.run.as_str() != run {
            return Err(Breach::WrongRun {
                found: record.run.to_string(),
            });
        }
    }
    Ok(record)
}

fn header_text(h: Option<&LedgerHeader>) -> String {
    match h {
        None => "no header (schema 1)".into(),
        Some(h) => format!(
            "schema {} {}",
            h.schema,
            chain_text(&h.chain, h.key.as_ref())
        ),
    }
}

/// How a chain is named for people: its MAC and the key it names.
pub(super) fn chain_text(mac: &str, key: Option<&KeyId>) -> String {
    match key {
        Some(k) => format!("{mac} key {k}"),
        None => mac.to_string(),
    }
}
