//! Finishing a ledger: the last sync, the file read back and checked against what this writer
//! wrote, the anchor, then the summaries and the injected pages (regenerable, written whole but
//! unsynced).

use super::super::index::{append_anchor_observed, Anchor};
use super::super::key::KeyId;
use super::super::page::{LedgerState, Page};
use super::super::record::{rfc3339, Record, GENESIS};
use super::super::render::{render_json, render_markdown};
use super::super::verify::{scan, verify_records, VerifyOptions, EVENTS_FILE};
use super::{io_err, Durability, Finished, Ledger, LedgerError, LedgerOp, Phase};
use crate::atomic_file::{replace_unsynced, unobserved, Observer, Step};
use std::path::{Path, PathBuf};
use std::sync::Arc;

impl Ledger {
    /// Ends the ledger: syncs it (and its folders, if no commit did), reads `events.jsonl` back
    /// and verifies it, appends the final hash to `runs/index.jsonl` (synced, and the index
    /// head; nothing synced under [`Durability::NoSync`]), releases the writer's lock, then
    /// writes `audit.json`, `audit.md` and the [pages](super::LedgerOptions::pages) from it, whole but
    /// unsynced. Later
    /// `record`s fail. A page that cannot be written is [`LedgerError::Page`]: the ledger and
    /// its anchor are already durable.
    pub fn finish(&self) -> Result<Finished, LedgerError> {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        match &st.phase {
            Phase::Open => {}
            Phase::Poisoned(error) => {
                return Err(LedgerError::Poisoned {
                    path: self.path.clone(),
                    error: error.clone(),
                })
            }
            Phase::Finished => return Err(LedgerError::Finished(self.path.clone())),
        }
        let seq = st.next_seq - 1;
        // Without fsync nothing is synced, the ledger's folders and its anchor included: a
        // power loss may then leave an anchor or a head ahead of what survived, which `verify`
        // reports as damage, never as a whole run.
        let durable = self.opts.durability != Durability::NoSync;
        let written = self.write_held(&mut st).and_then(|()| {
            if durable {
                self.sync(&mut st, seq, "finish", || "syncing at finish".into())
            } else {
                Ok(())
            }
        });
        if let Err(e) = written {
            // The failure as the ledger keeps it (without the path, which the error names).
            let error = match &st.phase {
                Phase::Poisoned(error) => error.clone(),
                _ => e.0,
            };
            return Err(LedgerError::Poisoned {
                path: self.path.clone(),
                error,
            });
        }
        st.phase = Phase::Finished;
        let wrote_seq = st.next_seq - 1;
        let bytes = std::fs::read(&self.path).map_err(io_err(&self.path))?;
        let header = (!self.legacy).then(|| self.chain.header());
        let found = scan(
            &bytes,
            &self.chain,
            Some(self.run.as_str()),
            header.as_ref(),
        );
        let file_seq = found.records.len() as u64;
        let file_hash = found
            .records
            .last()
            .map_or_else(|| GENESIS.to_string(), |r| r.hash.clone());
        // Anchor what this writer wrote, and only if the file holds exactly that.
        if found.bad.is_some() || file_seq != wrote_seq || file_hash != st.prev {
            if let Some((seq, breach)) = found.bad {
                return Err(LedgerError::Corrupt {
                    path: self.path.clone(),
                    seq,
                    breach,
                });
            }
            return Err(LedgerError::Disagrees {
                path: self.path.clone(),
                wrote_seq,
                wrote_hash: st.prev.clone(),
                file_seq,
                file_hash,
            });
        }
        // The anchor first: the ledger and its anchor are the run's durable record, the pages
        // only views of it, so a page that cannot be written loses nothing.
        let anchor = Anchor::new(
            self.run.as_str(),
            wrote_seq,
            st.prev.clone(),
            rfc3339(self.opts.clock.now_millis()),
        );
        let entry = append_anchor_observed(
            &self.runs_dir,
            &anchor,
            &self.chain,
            self.opts.index_head.as_deref(),
            self.opts.witness.as_deref(),
            durable,
            &|step| self.fault(op_of(step)),
        )?;
        st.file = None; // releases the lock
        let ([audit_json, audit_md], pages) = write_pages_of(
            &self.run_dir(),
            &found.records,
            (self.chain.label(), self.chain.key_id()),
            &self.opts.pages,
            &|step| self.fault(op_of(step)),
        )?;
        let (final_seq, final_hash) = (wrote_seq, st.prev.clone());
        Ok(Finished {
            final_seq,
            final_hash,
            audit_json,
            audit_md,
            key: self.chain.key_id().cloned(),
            index_line: entry.seq,
            pages,
        })
    }
}

/// The ledger operation a step of writing another file is.
fn op_of(step: Step<'_>) -> LedgerOp<'_> {
    match step {
        Step::Create(path) => LedgerOp::Create { path },
        Step::SyncFile(path) => LedgerOp::SyncFile { path },
        Step::SyncDir(path) => LedgerOp::SyncDir { path },
    }
}

/// Writes a run's summaries and pages — `audit.json`, `audit.md`, then each of `pages` — from
/// its records, each whole by rename and unsynced: only the ledger and its anchor are made
/// durable. `(mac, key)` name the chain that verified them. Returns their paths: the summaries',
/// then the pages' in order.
fn write_pages_of(
    dir: &Path,
    records: &[Record],
    (mac, key): (&str, Option<&KeyId>),
    pages: &[Arc<dyn Page>],
    observe: Observer<'_>,
) -> Result<([PathBuf; 2], Vec<PathBuf>), LedgerError> {
    let state = LedgerState {
        key_id: key.map(ToString::to_string),
        ..LedgerState::verified(mac)
    };
    let write = |name: &str, text: String| {
        let path = dir.join(name);
        match replace_unsynced(&path, text.as_bytes(), 0o644, observe) {
            Ok(()) => Ok(path),
            Err(source) => Err(LedgerError::Page { path, source }),
        }
    };
    let summaries = [
        write("audit.json", render_json(records, mac))?,
        write("audit.md", render_markdown(records))?,
    ];
    let pages = pages
        .iter()
        .map(|p| {
            let name = p.file_name();
            if !is_page_name(name) {
                return Err(LedgerError::Page {
                    path: dir.join(name),
                    source: std::io::Error::new(
                        std::io::ErrorKind::InvalidInput,
                        format!("a page is named {name:?}: name it a plain file in the run's folder, not {EVENTS_FILE}, audit.json or audit.md"),
                    ),
                });
            }
            write(name, p.render(records, &state))
        })
        .collect::<Result<_, _>>()?;
    Ok((summaries, pages))
}

/// Whether a page may take `name`: one plain file in the run's folder, never the ledger or a
/// summary (a page written over `events.jsonl` would destroy the run's record).
fn is_page_name(name: &str) -> bool {
    let mut parts = Path::new(name).components();
    matches!(
        (parts.next(), parts.next()),
        (Some(std::path::Component::Normal(_)), None)
    ) && ![EVENTS_FILE, "audit.json", "audit.md"].contains(&name)
}

/// Writes `audit.json`, `audit.md` and `pages` of the run in `run_dir` again from its ledger,
/// once it verifies under `opts`: what [`Ledger::finish`] writes after the anchor, for a run
/// whose pages a crash or a full disk left old or missing. `loopward report --html` does it for
/// every run missing one. Returns their paths in that order.
pub fn write_pages(
    run_dir: &Path,
    opts: &VerifyOptions,
    pages: &[Arc<dyn Page>],
) -> Result<Vec<PathBuf>, LedgerError> {
    let (ok, records) = verify_records(run_dir, opts)?;
    let (summaries, pages) = write_pages_of(
        run_dir,
        &records,
        (ok.mac, ok.key.as_ref()),
        pages,
        &unobserved,
    )?;
    Ok(summaries.into_iter().chain(pages).collect())
}
