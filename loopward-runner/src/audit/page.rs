//! The pages a finished run gets beside its ledger, besides `audit.json` and `audit.md`: views
//! rendered by another crate (`loopward-pages`' `audit.html`) and handed to the ledger in
//! [`LedgerOptions::pages`](super::LedgerOptions::pages), so the runner renders no HTML and a
//! page is always regenerable from the ledger ([`write_pages`](super::write_pages)).
//!
//! ```
//! use loopward_core::RunId;
//! use loopward_runner::audit::{Ledger, LedgerOptions, LedgerState, Page, Record};
//! use std::sync::Arc;
//!
//! /// A one-line page: how many records, under which chain.
//! struct Count;
//! impl Page for Count {
//!     fn file_name(&self) -> &str { "count.txt" }
//!     fn render(&self, records: &[Record], ledger: &LedgerState) -> String {
//!         format!("{} records, {}\n", records.len(), ledger.mac)
//!     }
//! }
//!
//! let runs = tempfile::tempdir().unwrap();
//! let opts = LedgerOptions { pages: vec![Arc::new(Count)], ..LedgerOptions::default() };
//! let done = Ledger::create(runs.path(), &RunId::new("r1").unwrap(), opts).unwrap().finish().unwrap();
//! assert_eq!(std::fs::read_to_string(&done.pages[0]).unwrap(), "0 records, sha256\n");
//! ```

use super::record::Record;
#[cfg(doc)]
use super::{Ledger, LedgerError};

/// What is known about the ledger a page is rendered from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LedgerState {
    /// `sha256` or `hmac-sha256`.
    pub mac: String,
    /// The key's id for an HMAC chain ([`KeyId`](super::KeyId)), never the key.
    pub key_id: Option<String>,
    /// Whether the final hash matched an anchor in `runs/index.jsonl`.
    pub anchored: bool,
    /// Why the ledger did not verify (`None`: it did).
    pub problem: Option<String>,
}

impl LedgerState {
    /// A chain that verified, not (yet) checked against an anchor.
    pub fn verified(mac: &str) -> Self {
        Self {
            mac: mac.into(),
            key_id: None,
            anchored: false,
            problem: None,
        }
    }
}

/// A page of a run, rendered from its verified records and written into the run's folder when
/// its ledger finishes (after the anchor, whole but unsynced: only the ledger is durable).
pub trait Page: Send + Sync {
    /// Its file name in the run's folder (`audit.html`): one plain name, never `events.jsonl`,
    /// `audit.json` or `audit.md` (a page named otherwise fails [`Ledger::finish`] with
    /// [`LedgerError::Page`], the run already anchored).
    fn file_name(&self) -> &str;
    /// Renders it from the run's records, in ledger order.
    fn render(&self, records: &[Record], ledger: &LedgerState) -> String;
}
