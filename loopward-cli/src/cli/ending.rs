//! Ending a contained command when loopward is asked to stop.
//!
//! The command is the init of its PID namespace, and an init ignores `SIGINT`, `SIGTERM` and
//! `SIGHUP` unless it handles them, even from outside: a terminal's Ctrl-C or an agent host
//! ending its `Bash` call would end loopward and leave the command running without it. So
//! loopward catches them and ends the command by its recorded PID with `SIGKILL`, which ends
//! everything in its namespace.

use anyhow::{Context, Result};
use tokio::signal::unix::{signal, Signal, SignalKind};

/// The stop signals loopward answers while a contained command runs.
pub(super) struct Stop([Signal; 3]);

impl Stop {
    /// Catches `SIGINT`, `SIGTERM` and `SIGHUP` from now on.
    pub(super) fn catch() -> Result<Self> {
        let one = |kind| signal(kind).context("catching the stop signals");
        Ok(Self([
            one(SignalKind::interrupt())?,
            one(SignalKind::terminate())?,
            one(SignalKind::hangup())?,
        ]))
    }

    /// Resolves when one of them arrives.
    pub(super) async fn asked(&mut self) {
        let [a, b, c] = &mut self.0;
        tokio::select! {
            _ = a.recv() => {}
            _ = b.recv() => {}
            _ = c.recv() => {}
        }
    }
}
