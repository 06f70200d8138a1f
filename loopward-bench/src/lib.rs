//! # loopward-bench
//!
//! The cost of governance, measured side by side: every figure is a ratio against a baseline
//! taken in the same run, on the same machine, interleaved round by round so that a noisy
//! neighbour slows both sides alike. Run it with `cargo xtask bench`, which builds the two
//! binaries in release mode, runs them, and writes `bench/results.json` and `bench/results.md`.
//!
//! | part | module | subject | baseline |
//! |---|---|---|---|
//! | 1 | [`gates`] | a tool call through the policy gates (10/100/1,000 territories) | the same no-op tool through the bare `ToolExecutor` |
//! | 2 | [`stack`] | a turn through the recommended stack, audited to a ledger without fsync | the same fake model called bare |
//! | 3 | [`ledger`] | ledger appends under each `Durability` | appends without fsync; raw line writes |
//! | 4 | [`scale`] | 1, 100, 1,000 concurrent runs of a scripted team | one run |
//! | 5 | `llama` (feature `llama`) | prefill and decode through the loopward backend | a direct llama-cpp-2 loop |
//! | 6 | `concurrent` (feature `llama`) | 1, 2, 4, 8 requests at once on one model, decoded in one batch | the same requests one after another |
//! | 7 | [`governed`] | a class-jump verdict, an auto stop-gate and a record, into memory (time and allocations) | the same three records, made beforehand |
//! | 8 | [`console`] | `loopward serve`'s console following 100 runs × 10 records/s (CPU share, memory over the window) and a 10,000-record run's page | the targets of the console issue (≤ 5 % of one core, flat memory, < 300 ms) |
//! | 9 | [`loop_cli`] | a session of a loop over a scripted stand-in CLI (10 and 100 sessions; 1,000 files) | the same script and verifier started bare |
//! | 10 | [`containment`] | a command started in its sandbox (Landlock, its own network); HTTP through the egress proxy | the same command started bare; the same request sent directly |
//! | 11 | [`disk_run`] | a whole scripted run on disk (ledger, pages, anchor), default durability and without fsync; syncs and files per run | the same run into memory |
//! | 12 | [`hook_call`] | one hook call from outside: a release `loopward-hook hook claude-code` denying a territory write at 100 territories | the same binary's `loopward-hook --version`, interleaved |
//!
//! Benchmarks are not tests: nothing here asserts a threshold. Each part returns a
//! [`report::Section`] that states its targets next to the measured figures.
//!
//! ```
//! use loopward_bench::harness::Stats;
//! let s = Stats::from_samples(&mut [5, 1, 3, 2, 4]);
//! assert_eq!(s.median_ns, 3.0);
//! assert_eq!(loopward_bench::report::fmt_ns(1_500.0), "1.50 µs");
//! ```

#[cfg(feature = "llama")]
pub mod concurrent;
pub mod console;
pub mod containment;
pub mod disk_run;
pub mod gates;
pub mod governed;
pub mod harness;
pub mod hook_call;
pub mod hook_channel;
pub mod ledger;
#[cfg(feature = "llama")]
pub mod llama;
pub mod loop_cli;
pub mod machine;
pub mod ratio;
pub mod report;
pub mod scale;
pub mod stack;
pub mod support;
pub mod team_run;
