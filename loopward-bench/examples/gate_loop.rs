//! Part 1's gated call (100 territories and the other gates) in a loop: a target for a profiler.
//!
//! ```text
//! cargo build --release -p loopward-bench --example gate_loop
//! perf record --call-graph dwarf target/release/examples/gate_loop 3
//! ```
//!
//! The argument is how many seconds to run (default 3); it prints the time per call, gated
//! and bare, measured side by side.

#![allow(clippy::print_stdout)] // its report is its output

mod profiled;

use loopward_bench::gates::{noop_write_call, policy_toml};
use loopward_bench::support::{agent, run_id, CountingSink};
use loopward_core::TurnNumber;
use loopward_runner::gates::{Policy, PolicyConfig, PolicyLayer};
use loopward_runner::tool::{BoxToolService, ToolExecutor};
use loopward_runner::{RunContext, SystemClock, TurnContext, Workspace};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tower::ServiceExt;

fn main() -> anyhow::Result<()> {
    let secs = profiled::seconds()?;
    let dir = tempfile::tempdir()?;
    let ws = Workspace::new(dir.path())?;
    let policy = Policy::from_config(&PolicyConfig::from_toml(&policy_toml(100))?, ws.clone())?;
    let gated = PolicyLayer::new(policy).wrap(BoxToolService::new(ToolExecutor));
    let bare = BoxToolService::new(ToolExecutor);
    let team = ["builder", "planner", "auditor", "writer", "tester"].map(agent);
    let sink = Arc::new(CountingSink::default());
    let run = RunContext::new(
        run_id("gate-loop".into())?,
        team.to_vec(),
        ws,
        sink,
        Arc::new(SystemClock),
    );
    let inv = noop_write_call(TurnContext::new(run, agent("builder"), TurnNumber(1)))?;
    let rt = tokio::runtime::Builder::new_current_thread().build()?;
    let (mut ns, mut n) = ([0u128; 2], 0u128);
    let end = Instant::now() + Duration::from_secs(secs);
    rt.block_on(async {
        while Instant::now() < end {
            for (i, svc) in [&gated, &bare].into_iter().enumerate() {
                let t = Instant::now();
                for _ in 0..1_000 {
                    let out = svc.clone().oneshot(inv.clone()).await;
                    std::hint::black_box(out.expect("the gated call is allowed"));
                }
                ns[i] += t.elapsed().as_nanos();
            }
            n += 1_000;
        }
    });
    let (gated, bare) = (ns[0] / n, ns[1] / n);
    println!(
        "{n} calls each: gated {gated} ns, bare {bare} ns, decision {} ns",
        gated.saturating_sub(bare)
    );
    Ok(())
}
