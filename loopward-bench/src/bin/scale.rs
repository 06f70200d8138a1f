//! `loopward-bench-scale`: part 4, in its own binary because it counts every allocation.
//!
//! Usage: `loopward-bench-scale --out FILE [--quick]`

use anyhow::{bail, Context as _, Result};
use loopward_bench::harness::Effort;
use loopward_bench::machine::{load_average, Machine};
use loopward_bench::scale::{self, MemProbe};
use peak_alloc::PeakAlloc;
use serde_json::json;
use std::path::PathBuf;

#[global_allocator]
static HEAP: PeakAlloc = PeakAlloc;

struct Heap;

impl MemProbe for Heap {
    fn current(&self) -> usize {
        HEAP.current_usage()
    }
    fn peak(&self) -> usize {
        HEAP.peak_usage()
    }
    fn reset_peak(&self) {
        HEAP.reset_peak_usage();
    }
}

fn main() -> Result<()> {
    let mut out = None;
    let mut effort = Effort::Full;
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--out" => out = it.next().map(PathBuf::from),
            "--quick" => effort = Effort::Quick,
            other => bail!(
                "unknown argument {other:?}; usage: loopward-bench-scale --out FILE [--quick]"
            ),
        }
    }
    let out = out.context("--out FILE is required")?;
    let mut machine = Machine::probe();
    let section = scale::run(effort, &Heap).context("part 4 (scale)")?;
    machine.load_at_end = load_average();
    let doc = json!({ "machine": machine, "sections": [section] });
    std::fs::write(&out, serde_json::to_vec_pretty(&doc)?)
        .with_context(|| format!("writing {}", out.display()))?;
    Ok(())
}
