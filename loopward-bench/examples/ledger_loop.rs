//! Part 3's event stream into a ledger without fsync, in a loop: a target for a profiler.
//!
//! ```text
//! cargo build --release -p loopward-bench --example ledger_loop
//! perf record --call-graph dwarf target/release/examples/ledger_loop 3
//! ```
//!
//! The argument is how many seconds to run (default 3); it prints the time per record.

#![allow(clippy::print_stdout)] // its report is its output

mod profiled;

use loopward_bench::ledger::events;
use loopward_core::{AgentId, AuditSink, RunId, Scope, TurnNumber};
use loopward_runner::audit::{Durability, Ledger, LedgerOptions};
use std::time::{Duration, Instant};

fn main() -> anyhow::Result<()> {
    let secs = profiled::seconds()?;
    let dir = tempfile::tempdir()?;
    let run = RunId::new("profile").expect("a valid run id");
    let options = LedgerOptions {
        durability: Durability::NoSync,
        ..LedgerOptions::default()
    };
    let ledger = Ledger::create(dir.path(), &run, options)?;
    let scope = Scope {
        run,
        turn: Some(TurnNumber(1)),
        agent: Some(AgentId::new("builder").expect("a valid agent id")),
    };
    let evs = events();
    let (start, mut n) = (Instant::now(), 0u64);
    while start.elapsed() < Duration::from_secs(secs) {
        for e in &evs {
            ledger.record(&scope, e)?;
            if e.is_decision() {
                ledger.commit()?;
            }
        }
        n += evs.len() as u64;
    }
    let per = start.elapsed().as_nanos() as f64 / n as f64;
    println!("{n} records, {per:.0} ns a record");
    Ok(())
}
