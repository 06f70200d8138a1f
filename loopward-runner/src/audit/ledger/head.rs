//! Reopening a ledger at its head: for a writer that appends a few records to a long ledger and
//! goes (a hook process per tool call), reading only the end of the file instead of checking the
//! whole chain each time.
//!
//! What stays tamper-evident: the head (the last record) is parsed and its keyed hash checked,
//! its run must be this one, and its link to the record before it is checked; every new record
//! chains to that head, so anything changed earlier in the file still breaks the chain that
//! `loopward verify` reads whole. Anything unusual — a torn last line, a head that does not
//! verify, a record longer than the tail read — falls back to [`Ledger::open_existing`], which
//! checks everything and cuts or refuses as it always has.

use super::{io_err, lock, Ledger, LedgerError, LedgerOptions, Recovery};
use crate::audit::record::Record;
use crate::audit::verify::EVENTS_FILE;
use loopward_core::RunId;
use nix::fcntl::Flock;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// How much of the end of the file is read to find the head and the record before it.
const TAIL_BYTES: u64 = 64 * 1024;

impl Ledger {
    /// Reopens a run's ledger at its head (see this module's docs): the last record is
    /// checked, not the whole chain. Falls back to [`Ledger::open_existing`] when the end of
    /// the file is not two whole, linked records whose last verifies.
    pub fn open_at_head(
        runs_dir: &Path,
        run: &RunId,
        opts: LedgerOptions,
    ) -> Result<(Arc<Self>, Recovery), LedgerError> {
        let (path, mut file) = reopen(runs_dir, run)?;
        let len = file.metadata().map_err(io_err(&path))?.len();
        let from = len.saturating_sub(TAIL_BYTES);
        let mut tail = Vec::with_capacity((len - from) as usize);
        file.seek(SeekFrom::Start(from))
            .and_then(|_| (&mut *file).take(TAIL_BYTES).read_to_end(&mut tail))
            .map_err(io_err(&path))?;
        let chain = opts
            .key
            .clone()
            .map_or(super::Chain::Sha256, super::Chain::Hmac);
        let Some((head, legacy)) = head_of(&tail, from == 0, &chain, run) else {
            // Released, then taken again by the full check.
            drop(file);
            return Self::open_existing(runs_dir, run, opts);
        };
        // Its folders are not synced again: the writer that made them synced them with its
        // first sync or when it ended (a hook call per tool call pays no folder sync).
        let mut ledger = Self::new(run, runs_dir, path, opts, file, head.seq + 1, &head.hash);
        ledger.legacy = legacy;
        Ok((
            Arc::new(ledger),
            Recovery {
                kept: head.seq,
                truncated_bytes: 0,
            },
        ))
    }
}

/// A run's existing ledger file, opened to read and append, under the writer's lock.
pub(super) fn reopen(runs_dir: &Path, run: &RunId) -> Result<(PathBuf, Flock<File>), LedgerError> {
    let path = runs_dir.join(run.as_str()).join(EVENTS_FILE);
    let file = std::fs::OpenOptions::new()
        .read(true)
        .append(true)
        .open(&path)
        .map_err(io_err(&path))?;
    let file = lock(file, &path)?;
    Ok((path, file))
}

/// The head of the ledger whose last bytes are `tail` (`whole`: the whole file), and whether the
/// ledger is a schema 1 one (no header), when the end is two whole linked records (or one, the
/// first) and the last verifies under `chain` as a record of `run`.
fn head_of(tail: &[u8], whole: bool, chain: &super::Chain, run: &RunId) -> Option<(Record, bool)> {
    let body = tail.strip_suffix(b"\n")?;
    let (before, last) = match body.iter().rposition(|b| *b == b'\n') {
        Some(i) => (Some(&body[..i]), &body[i + 1..]),
        None if whole => (None, body),
        None => return None,
    };
    let (head, canonical) = Record::parse_line(last).ok()?;
    if chain.digest(&canonical) != head.hash || head.run != *run {
        return None;
    }
    let previous = match before {
        Some(b) => {
            // The record before it: whole only if a newline (or the file's start) precedes it.
            let start = b.iter().rposition(|c| *c == b'\n').map(|i| i + 1);
            if start.is_none() && !whole {
                return None;
            }
            Some(Record::parse_line(&b[start.unwrap_or(0)..]).ok()?.0)
        }
        None => None,
    };
    match (&previous, head.seq == 1) {
        (Some(p), false) if p.hash == head.prev && p.seq + 1 == head.seq => {}
        (None, true) => {}
        _ => return None,
    }
    // A schema 1 ledger (keyless, written before headers) is continued without a header; its
    // first record says so, and is known here only when the tail holds it.
    let legacy = match chain {
        super::Chain::Sha256 if head.seq == 1 => head.ledger.is_none(),
        super::Chain::Sha256 if whole => {
            let first = tail.split(|b| *b == b'\n').next()?;
            Record::parse_line(first).ok()?.0.ledger.is_none()
        }
        super::Chain::Sha256 => return None,
        _ => false,
    };
    Some((head, legacy))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::{verify, KeyRing, LedgerKey, VerifyOptions};
    use loopward_core::{AuditEvent, AuditSink, Scope};

    fn note(ledger: &Ledger, run: &RunId, n: u32) {
        let scope = Scope {
            run: run.clone(),
            turn: None,
            agent: None,
        };
        let event = AuditEvent::ToolStarted {
            call_id: format!("c{n}").into(),
            tool: "t".into(),
        };
        ledger.record(&scope, &event).unwrap();
        ledger.commit().unwrap();
    }

    #[test]
    fn a_ledger_reopened_at_its_head_continues_its_chain_and_a_torn_end_is_checked_whole() {
        let runs = tempfile::tempdir().unwrap();
        let run = RunId::new("s1").unwrap();
        let key = LedgerKey::generate().unwrap();
        let opts = || LedgerOptions::keyed(key.clone());
        let ledger = Ledger::create(runs.path(), &run, opts()).unwrap();
        note(&ledger, &run, 0);
        drop(ledger);
        for n in 1..4 {
            let (ledger, found) = Ledger::open_at_head(runs.path(), &run, opts()).unwrap();
            assert_eq!(found.kept, u64::from(n));
            note(&ledger, &run, n);
        }
        let check = VerifyOptions::keyed(KeyRing::single(key.clone())).unfinished(true);
        verify(&runs.path().join("s1"), &check).unwrap();
        // A torn last line: the whole chain is read, the tear cut and recorded.
        let events = runs.path().join("s1").join(EVENTS_FILE);
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&events)
            .unwrap();
        std::io::Write::write_all(&mut f, b"{\"seq\":5,").unwrap();
        let (ledger, found) = Ledger::open_at_head(runs.path(), &run, opts()).unwrap();
        assert_eq!((found.kept, found.truncated_bytes), (4, 9));
        drop(ledger);
        verify(&runs.path().join("s1"), &check).unwrap();
    }
}
