//! The policy gates: territories and control files, overrides, sprawl, review and one handoff
//! per turn, the shell watch, gates as data, and the refusal texts — one test binary for the
//! area, sharing its set-up (`support`).

#[path = "../one_agent/mod.rs"]
mod one_agent;
mod overrides;
mod policy;
mod refusals;
mod review;
mod shell;
mod sprawl;
mod support;
mod territory;
