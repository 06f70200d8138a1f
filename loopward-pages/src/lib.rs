//! loopward's HTML pages: `audit.html` (a run at a glance) and `runs/index.html` (all runs).
//!
//! Each is one self-contained static file (inline CSS and SVG, no JavaScript, nothing fetched),
//! rendered with `maud`, which escapes every string it is given: the pages show model-controlled
//! text (tool arguments, handoff messages, paths) as text, never as markup. Like `audit.md`, both
//! are folded from verified ledger records alone, so they can always be written again.
//!
//! The runner renders no HTML: a ledger writes `audit.html` when it finishes if [`AuditHtml`] is
//! among its `LedgerOptions::pages` (the `loopward` facade's `Custody::ledger_options` puts it
//! there), and [`write_pages`] writes a run's pages again from its ledger.
//!
//! | item | what |
//! |---|---|
//! | [`AuditHtml`] | `audit.html` as a ledger [`Page`] |
//! | [`render_html`] | `audit.html` from a run's records |
//! | [`render_index`], [`render_index_with`] | `runs/index.html`, with a section of the caller's after the runs (`loopward-calibrate`'s report) |
//! | [`write_pages`] | a verified run's `audit.json`, `audit.md` and `audit.html` again |
//! | [`describe_event`] | one record in words, as the page shows it |
//!
//! | part of `audit.html` | what it shows |
//! |---|---|
//! | swimlane | a lane per agent, turns as bars, handoffs as arrows (solid: stood, dashed: refused), markers for writes, refusals, warnings, overrides, violations, stop-gates, class-jumps and caps — each linking to its record, with the reason and what to do on hover |
//! | files × agents | per path and agent: wrote, refused ×n, overridden, warned, violations |
//! | figures | the run's [`RunFigures`](loopward_runner::audit::RunFigures) and the ledger's state |
//! | events | every record, pass-through verdicts folded into `<details>` |
//!
//! ```
//! use loopward_core::{AuditEvent, RunId, Scope};
//! use loopward_pages::{render_html, AuditHtml};
//! use loopward_runner::audit::{Chain, Ledger, LedgerOptions, LedgerState, Record, GENESIS};
//! use std::sync::Arc;
//! let scope = Scope { run: RunId::new("r1").unwrap(), turn: None, agent: None };
//! let (rec, _) = Record::seal(&Chain::Sha256, 1, "2026-01-01T00:00:00.000Z", &scope,
//!     &AuditEvent::HumanMessage { content: (&loopward_core::Person::at_the_keyboard().says("<b>say</b> hello")).into() }, GENESIS).unwrap();
//! let page = render_html(&[rec], &LedgerState::verified("sha256"));
//! assert!(page.contains("&lt;b&gt;say&lt;/b&gt; hello"));
//! assert!(!page.contains("<script"));
//!
//! // A ledger given the page writes it when it finishes.
//! let runs = tempfile::tempdir().unwrap();
//! let opts = LedgerOptions { pages: vec![Arc::new(AuditHtml)], ..LedgerOptions::default() };
//! let done = Ledger::create(runs.path(), &RunId::new("r1").unwrap(), opts).unwrap().finish().unwrap();
//! assert!(done.pages[0].ends_with("r1/audit.html"));
//! ```

mod events;
mod index;
mod matrix;
mod page;
mod style;
mod swimlane;
pub(crate) mod timeline;

use loopward_runner::audit::{LedgerError, Page, Record, ReportError, VerifyOptions};
use maud::{html, Markup, DOCTYPE};
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use events::describe as describe_event;
use index::render_dir;
pub use loopward_runner::audit::LedgerState;

/// `audit.html`, as a page a ledger writes when it finishes
/// ([`LedgerOptions::pages`](loopward_runner::audit::LedgerOptions::pages)).
#[derive(Clone, Copy, Debug, Default)]
pub struct AuditHtml;

impl Page for AuditHtml {
    fn file_name(&self) -> &str {
        "audit.html"
    }

    fn render(&self, records: &[Record], ledger: &LedgerState) -> String {
        render_html(records, ledger)
    }
}

/// The pages loopward writes for a run: [`AuditHtml`].
pub fn pages() -> Vec<Arc<dyn Page>> {
    vec![Arc::new(AuditHtml)]
}

/// Writes `audit.json`, `audit.md` and `audit.html` of the run in `run_dir` again from its
/// ledger, once it verifies under `opts` (see
/// [`audit::write_pages`](loopward_runner::audit::write_pages)); returns their paths in that
/// order.
pub fn write_pages(run_dir: &Path, opts: &VerifyOptions) -> Result<Vec<PathBuf>, LedgerError> {
    loopward_runner::audit::write_pages(run_dir, opts, &pages())
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

/// [`render_index`] with `section` after the runs (`loopward-calibrate`'s report).
pub fn render_index_with(
    runs_dir: &Path,
    opts: &VerifyOptions,
    section: Markup,
) -> Result<String, ReportError> {
    render_dir(runs_dir, opts, Some(section))
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
