//! The layers, end to end through the runner: one test binary for the area (budgets, caps and
//! repeats, class-jump, rate limits, stop-gates, timeouts), sharing its fixtures.
#![allow(clippy::unwrap_used)] // helpers of tests, not only #[test] fns

mod budget;
mod caps;
mod classjump;
mod ratelimit;
mod stopgate;
#[path = "../one_agent/mod.rs"]
mod support;
mod timeout;
