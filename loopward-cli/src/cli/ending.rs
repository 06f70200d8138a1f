//! Ending a contained command when loopward is asked to stop.
//!
//! The command runs beside its sandbox's init (PID 2 of its namespace), so a stop signal
//! loopward gets — `SIGINT`, `SIGTERM`, `SIGHUP` — is passed on to it by its recorded PID, and
//! it ends as it would on its own (a handler runs, the default ends it). One that has not
//! ended [`GRACE`] later, or when asked a second time, is killed, which ends everything in its
//! namespace. A terminal's Ctrl-C already reached the command when loopward is in the
//! terminal's foreground group (they share it): that `SIGINT` is not passed on again, and the
//! command decides (an interactive program keeps running).

use anyhow::{Context, Result};
use nix::sys::signal::Signal as Sig;
use std::pin::Pin;
use std::time::Duration;
use tokio::signal::unix::{signal, Signal, SignalKind};

/// How long a command asked to stop has to end before it is killed.
pub(super) const GRACE: Duration = Duration::from_secs(5);

/// The stop signals loopward answers while a contained command runs.
pub(super) struct Stop {
    signals: [(Sig, Signal); 3],
    kill_at: Option<Pin<Box<tokio::time::Sleep>>>,
    /// The kill is due (once: the command's end is awaited after it).
    due: bool,
}

impl Stop {
    /// Catches `SIGINT`, `SIGTERM` and `SIGHUP` from now on.
    pub(super) fn catch() -> Result<Self> {
        let one = |kind| signal(kind).context("catching the stop signals");
        Ok(Self {
            signals: [
                (Sig::SIGINT, one(SignalKind::interrupt())?),
                (Sig::SIGTERM, one(SignalKind::terminate())?),
                (Sig::SIGHUP, one(SignalKind::hangup())?),
            ],
            kill_at: None,
            due: false,
        })
    }

    /// Passes each stop signal on to the command `pid`; resolves when it is to be killed
    /// outright (asked twice, or [`GRACE`] after the first). Cancel-safe: a `select!` loop
    /// calls it again.
    pub(super) async fn kill_due(&mut self, pid: Option<u32>) {
        let Self {
            signals,
            kill_at,
            due,
        } = self;
        if *due {
            return std::future::pending().await;
        }
        loop {
            let [(a, sa), (b, sb), (c, sc)] = signals;
            let sig = tokio::select! {
                _ = sa.recv() => *a,
                _ = sb.recv() => *b,
                _ = sc.recv() => *c,
                () = until(kill_at) => break,
            };
            if kill_at.is_some() {
                break;
            }
            if sig == Sig::SIGINT && terminal_foreground() {
                continue;
            }
            if let Some(pid) = pid.and_then(|p| i32::try_from(p).ok()) {
                let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), sig);
            }
            *kill_at = Some(Box::pin(tokio::time::sleep(GRACE)));
        }
        *due = true;
    }
}

/// Resolves at `at`; never, without one.
async fn until(at: &mut Option<Pin<Box<tokio::time::Sleep>>>) {
    match at {
        Some(t) => t.as_mut().await,
        None => std::future::pending().await,
    }
}

/// Whether loopward is in its terminal's foreground group, where the terminal's signals reach
/// the command as well.
fn terminal_foreground() -> bool {
    nix::unistd::tcgetpgrp(std::io::stdin()).is_ok_and(|g| g == nix::unistd::getpgrp())
}
