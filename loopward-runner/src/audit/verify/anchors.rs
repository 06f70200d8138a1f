//! A run's anchors, in the index and at the witness, checked against its records.

use super::super::index::{read_witness, IndexEntry, INDEX_FILE};
use super::super::record::{Chain, Record, GENESIS};
use super::scan::chain_text;
use super::{Breach, VerifyError, VerifyOptions};
use std::path::Path;

/// Checks every anchor of a run against its records, in index order.
pub(super) fn check_anchors(
    records: &[Record],
    anchors: &[&IndexEntry],
    chain: &Chain,
    allow_unfinished: bool,
) -> Result<(), (u64, Breach)> {
    let last = records.len() as u64;
    let ledger = chain_text(chain.label(), chain.key_id());
    let mut earlier = 0;
    for a in anchors {
        let at = a.anchor.final_seq;
        // An empty ledger names no chain; its anchors are checked by position only.
        let anchor = chain_text(&a.mac, a.key.as_ref());
        if !records.is_empty() && anchor != ledger {
            return Err((
                at.max(1),
                Breach::AnchorKey {
                    line: a.seq,
                    anchor,
                    ledger,
                },
            ));
        }
        if at < earlier {
            return Err((
                at,
                Breach::AnchorRegressed {
                    line: a.seq,
                    earlier,
                    later: at,
                },
            ));
        }
        earlier = at;
        if last < at {
            return Err((last + 1, Breach::Truncated { last, anchored: at }));
        }
        let hash = match at {
            0 => GENESIS,
            n => records[usize::try_from(n - 1).unwrap_or(usize::MAX)]
                .hash
                .as_str(),
        };
        if hash != a.anchor.final_hash {
            return Err((at, Breach::AnchorMismatch { line: a.seq }));
        }
    }
    match anchors.last() {
        Some(a) if a.anchor.final_seq < last && !allow_unfinished => Err((
            a.anchor.final_seq + 1,
            Breach::AfterAnchor {
                anchored: a.anchor.final_seq,
            },
        )),
        _ => Ok(()),
    }
}

/// The witness must hold exactly the run's anchors that the index holds.
pub(super) fn check_witness(
    witness: &Path,
    anchors: &[&IndexEntry],
    run: &str,
    opts: &VerifyOptions,
) -> Result<(), VerifyError> {
    let held = read_witness(witness, &opts.keys, opts.allow_keyless).map_err(|e| {
        VerifyError::Witness {
            path: witness.to_path_buf(),
            why: e.to_string(),
        }
    })?;
    let mine: Vec<&IndexEntry> = held.iter().filter(|e| e.anchor.run == run).collect();
    let fail = |why: String| VerifyError::Witness {
        path: witness.to_path_buf(),
        why,
    };
    for a in anchors {
        if !mine.iter().any(|w| w.hash == a.hash) {
            return Err(fail(format!(
                "{INDEX_FILE} line {} (run {run} at seq {}) was never witnessed: the index was rewritten",
                a.seq, a.anchor.final_seq
            )));
        }
    }
    for w in &mine {
        if !anchors.iter().any(|a| a.hash == w.hash) {
            return Err(fail(format!(
                "it holds an anchor of run {run} at seq {} that {INDEX_FILE} no longer has: anchors were dropped",
                w.anchor.final_seq
            )));
        }
    }
    Ok(())
}
