//! Finishing a ledger: the last sync, the file read back and checked against what this writer
//! wrote, the anchor, then the pages (regenerable, written whole but unsynced).

use super::super::html::{render_html, LedgerState};
use super::super::index::{append_anchor_observed, Anchor};
use super::super::record::{rfc3339, GENESIS};
use super::super::render::{render_json, render_markdown};
use super::super::verify::scan;
use super::{io_err, Finished, Ledger, LedgerError, LedgerOp, Phase};
use crate::atomic_file::{replace_unsynced, Step};
use std::path::Path;

impl Ledger {
    /// Ends the ledger: syncs it, reads `events.jsonl` back and verifies it, appends the final
    /// hash to `runs/index.jsonl` (synced, and the index head), releases the writer's lock, then
    /// writes `audit.json`, `audit.md` and `audit.html` from it, whole but unsynced. Later
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
        if let Err(e) = self.write_held(&mut st) {
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
        let synced = self
            .fault(LedgerOp::Sync {
                seq,
                kind: "finish",
            })
            .and_then(|()| st.file.as_ref().map_or(Ok(()), |f| f.sync_data()));
        if let Err(e) = synced {
            let error = format!("syncing at finish: {e}");
            st.phase = Phase::Poisoned(error.clone());
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
            &|step| self.fault(op_of(step)),
        )?;
        st.file = None; // releases the lock
        let dir = self.run_dir();
        let state = LedgerState {
            key_id: self.chain.key_id().map(ToString::to_string),
            ..LedgerState::verified(self.chain.label())
        };
        let pages = [
            (
                dir.join("audit.json"),
                render_json(&found.records, self.chain.label()),
            ),
            (dir.join("audit.md"), render_markdown(&found.records)),
            (dir.join("audit.html"), render_html(&found.records, &state)),
        ];
        for (path, text) in &pages {
            self.write_page(path, text.as_bytes())
                .map_err(|source| LedgerError::Page {
                    path: path.clone(),
                    source,
                })?;
        }
        let [(audit_json, _), (audit_md, _), (audit_html, _)] = pages;
        let (final_seq, final_hash) = (wrote_seq, st.prev.clone());
        Ok(Finished {
            final_seq,
            final_hash,
            audit_json,
            audit_md,
            key: self.chain.key_id().cloned(),
            index_line: entry.seq,
            audit_html,
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

impl Ledger {
    /// Writes a page or summary of the run (regenerable from the ledger, `loopward report
    /// --html`) so readers see the old file or the new one, never half of one; unsynced: only
    /// the ledger and its anchor are made durable.
    fn write_page(&self, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
        replace_unsynced(path, bytes, 0o644, &|step| self.fault(op_of(step)))
    }
}
