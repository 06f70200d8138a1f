//! An error and its causes on one line, each cause said once.
//!
//! anyhow's `{:#}` appends every cause after a colon; an error whose own text already quotes its
//! cause (`ledger runs/r1: No space left on device`, with the IO error as its source) then says
//! it twice. [`error_text`] leaves out a cause the text so far already contains.
//!
//! ```
//! let io = std::io::Error::other("disk full");
//! let e = anyhow::Error::new(io).context("cannot write the ledger");
//! assert_eq!(loopward_cli::error_text(&e), "cannot write the ledger: disk full");
//! ```

/// `e` and its chain of causes, joined by `: `, skipping any cause already said.
pub fn error_text(e: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in e.chain() {
        let said = cause.to_string();
        if said.is_empty() || text.contains(&said) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&said);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::error_text;

    /// An error that quotes its source in its own text, as thiserror's `{path}: {source}` does.
    #[derive(Debug)]
    struct Quotes(std::io::Error);

    impl std::fmt::Display for Quotes {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "ledger runs/r1/events.jsonl: {}", self.0)
        }
    }

    impl std::error::Error for Quotes {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn a_cause_the_error_already_quotes_is_said_once() {
        let e = anyhow::Error::new(Quotes(std::io::Error::other("No space left on device")))
            .context("cannot finish run r1");
        assert_eq!(
            error_text(&e),
            "cannot finish run r1: ledger runs/r1/events.jsonl: No space left on device"
        );
        // What `{:#}` says, for contrast: the cause twice.
        assert_eq!(format!("{e:#}").matches("No space left").count(), 2);
    }
}
