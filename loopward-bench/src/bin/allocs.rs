//! `loopward-bench-allocs`: counts the heap allocations of part 7's governed iteration and of
//! its baseline, with a counting global allocator; prints them as JSON (per iteration).
//!
//! Usage: `loopward-bench-allocs [--iterations N]`

// A binary: its output is the point.
#![allow(clippy::print_stdout)]

use anyhow::{bail, Context as _, Result};
use loopward_bench::governed::Fixture;
use loopward_bench::harness::runtime;
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};
use std::alloc::System;

#[global_allocator]
static HEAP: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

fn main() -> Result<()> {
    let mut n = 20_000u64;
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--iterations" => n = it.next().context("--iterations needs a number")?.parse()?,
            other => {
                bail!("unknown argument {other:?}; usage: loopward-bench-allocs [--iterations N]")
            }
        }
    }
    let rt = runtime()?;
    let mut subject = Fixture::new()?;
    let base = Fixture::new()?;
    let events = Fixture::baseline_events();
    // Warm up: the first iterations fill lazily built state.
    rt.block_on(async {
        for _ in 0..100 {
            subject.iterate().await?;
            base.record_baseline(&events)?;
        }
        anyhow::Ok(())
    })?;
    let region = Region::new(HEAP);
    rt.block_on(async {
        for _ in 0..n {
            subject.iterate().await?;
        }
        anyhow::Ok(())
    })?;
    let subject_allocs = region.change().allocations as f64 / n as f64;
    let region = Region::new(HEAP);
    for _ in 0..n {
        base.record_baseline(&events)?;
    }
    let baseline_allocs = region.change().allocations as f64 / n as f64;
    println!(
        "{}",
        serde_json::json!({"iterations": n, "subject_allocs": subject_allocs, "baseline_allocs": baseline_allocs})
    );
    Ok(())
}
