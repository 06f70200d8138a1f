//! The terminal prompt behind `interactive` stop-gates: the library asks through its
//! `Approver` trait; only this application reads a person's answer.

use futures::FutureExt as _;
use loopward_runner::layers::stopgate::{Answer, ApprovalRequest, Approver};
use std::io::{BufRead, IsTerminal, Write};

/// Asks on the terminal: prints the request, reads `y` or `n` from standard input. Anything
/// but `y`/`yes` — including end of input — denies.
#[derive(Clone, Copy, Debug, Default)]
pub struct TerminalApprover;

/// The answer a typed line means.
///
/// ```
/// use loopward_term::approver::answer_for;
/// use loopward_runner::layers::stopgate::Answer;
/// assert!(matches!(answer_for("y\n"), Answer::Approve { .. }));
/// assert!(matches!(answer_for(""), Answer::Deny { .. }));
/// assert!(matches!(answer_for("sure"), Answer::Deny { .. }));
/// ```
pub fn answer_for(line: &str) -> Answer {
    match line.trim().to_ascii_lowercase().as_str() {
        "y" | "yes" => Answer::Approve {
            by: "terminal".into(),
        },
        "" => Answer::Deny {
            reason: "no answer on the terminal".into(),
        },
        other => Answer::Deny {
            reason: format!("a person answered {other:?} on the terminal"),
        },
    }
}

impl Approver for TerminalApprover {
    fn ask(&self, request: ApprovalRequest) -> futures::future::BoxFuture<'static, Answer> {
        async move {
            let read = tokio::task::spawn_blocking(move || {
                let mut out = std::io::stdout().lock();
                let _ = writeln!(
                    out,
                    "    ? stop-gate {} (run {}): {} wants to: {}",
                    request.gate, request.run, request.agent, request.summary
                );
                let _ = writeln!(out, "    ? why you are asked: {}", request.why);
                let _ = write!(out, "    ? approve once? [y/N] ");
                let _ = out.flush();
                let mut line = String::new();
                let stdin = std::io::stdin();
                if stdin.lock().read_line(&mut line).is_err() {
                    line.clear();
                }
                // A terminal echoes what was typed; a pipe does not, so show the answer read.
                if !stdin.is_terminal() {
                    let _ = writeln!(out, "{}", line.trim());
                }
                line
            })
            .await;
            answer_for(&read.unwrap_or_default())
        }
        .boxed()
    }
}
