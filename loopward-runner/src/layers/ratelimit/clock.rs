//! A governor clock on tokio time, so paused-time tests drive the limiters.

use governor::nanos::Nanos;

/// Governor's clock over [`tokio::time::Instant`]: nanoseconds since the clock was made.
#[derive(Clone, Copy, Debug)]
pub struct TokioClock {
    origin: tokio::time::Instant,
}

impl TokioClock {
    /// A clock starting now (on tokio's clock: paused time in tests).
    pub fn new() -> Self {
        Self {
            origin: tokio::time::Instant::now(),
        }
    }
}

impl Default for TokioClock {
    fn default() -> Self {
        Self::new()
    }
}

impl governor::clock::Clock for TokioClock {
    type Instant = Nanos;

    fn now(&self) -> Nanos {
        Nanos::from(self.origin.elapsed())
    }
}
