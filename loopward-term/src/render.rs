//! Terminal output: colour when stdout is a terminal, plain text otherwise.
//!
//! Everything the demo and the CLI show goes through a [`Printer`], so the same code writes
//! to a terminal, a pipe, or a buffer in a snapshot test.
//!
//! ```
//! use loopward_term::render::{Printer, Tone};
//! let mut out = Printer::plain(Vec::new());
//! out.line(Tone::Refusal, "  ✗ refused by territory: plan.md belongs to planner");
//! out.handoff("root", "planner");
//! let text = String::from_utf8(out.into_inner()).unwrap();
//! assert!(text.contains("↪ handoff → planner"));
//! assert!(!text.contains('\x1b'));
//! ```

use anstyle::{AnsiColor, Style};
use std::io::{IsTerminal, Write};

/// What a line means; decides its colour.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tone {
    /// Ordinary text.
    Plain,
    /// A chapter or section title.
    Title,
    /// Secondary text: explanations, paths.
    Dim,
    /// A turn header.
    Turn,
    /// Something allowed or done.
    Ok,
    /// A warning (advisory gates).
    Warn,
    /// A refusal or a violation.
    Refusal,
    /// A handoff.
    Handoff,
}

impl Tone {
    fn style(self) -> Style {
        match self {
            Self::Plain => Style::new(),
            Self::Title => Style::new().bold(),
            Self::Dim => Style::new().dimmed(),
            Self::Turn => Style::new().fg_color(Some(AnsiColor::Cyan.into())),
            Self::Ok => Style::new().fg_color(Some(AnsiColor::Green.into())),
            Self::Warn => Style::new().fg_color(Some(AnsiColor::Yellow.into())),
            Self::Refusal => Style::new().fg_color(Some(AnsiColor::Red.into())).bold(),
            Self::Handoff => Style::new().fg_color(Some(AnsiColor::Magenta.into())),
        }
    }
}

/// Writes styled lines. Write errors (a closed pipe) are ignored: output is best effort, the
/// ledger is the record.
#[derive(Debug)]
pub struct Printer<W: Write> {
    out: W,
    color: bool,
}

impl Printer<std::io::Stdout> {
    /// Standard output, coloured when it is a terminal and `NO_COLOR` is unset.
    pub fn stdout() -> Self {
        let out = std::io::stdout();
        let color = out.is_terminal() && std::env::var_os("NO_COLOR").is_none();
        Self { out, color }
    }
}

impl<W: Write> Printer<W> {
    /// Plain text into `out`.
    pub fn plain(out: W) -> Self {
        Self { out, color: false }
    }

    /// Into `out`, coloured or not.
    pub fn new(out: W, color: bool) -> Self {
        Self { out, color }
    }

    /// Whether colour is on.
    pub fn color(&self) -> bool {
        self.color
    }

    /// The writer.
    pub fn get_ref(&self) -> &W {
        &self.out
    }

    /// The writer back.
    pub fn into_inner(self) -> W {
        self.out
    }

    /// One line in a tone.
    pub fn line(&mut self, tone: Tone, text: impl AsRef<str>) {
        let text = text.as_ref();
        let _ = if self.color && tone != Tone::Plain {
            let s = tone.style();
            writeln!(self.out, "{s}{text}{s:#}")
        } else {
            writeln!(self.out, "{text}")
        };
    }

    /// An empty line.
    pub fn blank(&mut self) {
        let _ = writeln!(self.out);
    }

    /// A title with an underline.
    pub fn title(&mut self, text: &str) {
        self.line(Tone::Title, text);
        self.line(Tone::Dim, "─".repeat(text.chars().count()));
    }

    /// `↪ handoff → to`.
    pub fn handoff(&mut self, _from: &str, to: &str) {
        self.line(Tone::Handoff, format!("    ↪ handoff → {to}"));
    }

    /// Preformatted text (a table), line by line.
    pub fn block(&mut self, tone: Tone, text: &str) {
        for l in text.lines() {
            self.line(tone, l);
        }
    }

    /// Flushes the writer.
    pub fn flush(&mut self) {
        let _ = self.out.flush();
    }
}
