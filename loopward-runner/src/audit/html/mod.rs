//! `audit.html` and `runs/index.html`: a run, and all runs, at a glance.
//!
//! Each is one self-contained static file (inline CSS and SVG, no JavaScript, nothing fetched),
//! rendered with `maud`, which escapes every string it is given: the pages show model-controlled
//! text (tool arguments, handoff messages, paths) as text, never as markup. Like `audit.md`, both
//! are folded from verified ledger records alone.
//!
//! | part | what it shows |
//! |---|---|
//! | swimlane | a lane per agent, turns as bars, handoffs as arrows (solid: stood, dashed: refused), markers for writes, refusals, warnings, overrides, violations, stop-gates, class-jumps and caps — each linking to its record, with the reason and what to do on hover |
//! | files × agents | per path and agent: wrote, refused ×n, overridden, warned, violations |
//! | figures | the run's [`RunFigures`](super::RunFigures) and the ledger's state |
//! | events | every record, pass-through verdicts folded into `<details>` |
//!
//! ```
//! use loopward_core::{AuditEvent, RunId, Scope};
//! use loopward_runner::audit::{render_html, Chain, LedgerState, Record, GENESIS};
//! let scope = Scope { run: RunId::new("r1").unwrap(), turn: None, agent: None };
//! let (rec, _) = Record::seal(&Chain::Sha256, 1, "2026-01-01T00:00:00.000Z", &scope,
//!     &AuditEvent::HumanMessage { content: (&loopward_core::Person::at_the_keyboard().says("<b>say</b> hello")).into() }, GENESIS).unwrap();
//! let page = render_html(&[rec], &LedgerState::verified("sha256"));
//! assert!(page.contains("&lt;b&gt;say&lt;/b&gt; hello"));
//! assert!(!page.contains("<script"));
//! ```

mod events;
mod index;
mod matrix;
mod page;
mod style;
mod swimlane;
pub(crate) mod timeline;

use super::record::Record;
use super::report::ReportError;
use super::verify::VerifyOptions;
use maud::{html, Markup, DOCTYPE};
use std::path::Path;

pub use events::describe;
pub(crate) use index::render_dir;

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

/// Renders `audit.html` from a run's records (in ledger order).
pub fn render_html(records: &[Record], ledger: &LedgerState) -> String {
    page::render(records, ledger)
}

/// Renders `runs/index.html` over every run under `runs_dir`, verifying each ledger with
/// `opts`. Runs that do not verify are listed and marked, with the reason.
pub fn render_index(runs_dir: &Path, opts: &VerifyOptions) -> Result<String, ReportError> {
    render_dir(runs_dir, opts, None)
}

/// [`render_index`] with `section` after the runs (the calibration report's, until the pages
/// leave this crate).
#[doc(hidden)]
pub fn render_index_with(
    runs_dir: &Path,
    opts: &VerifyOptions,
    section: Option<Markup>,
) -> Result<String, ReportError> {
    render_dir(runs_dir, opts, section)
}

/// The page around a body: doctype, inline stylesheet, `main`.
fn shell(title: &str, body: Markup) -> String {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · loopward" }
                style { (maud::PreEscaped(style::CSS)) }
            }
            body { main { (body) footer { "Rendered by loopward from the run's verified ledger records." } } }
        }
    }
    .into_string()
}
