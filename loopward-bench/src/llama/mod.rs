//! Part 5: local inference through the loopward llama backend against a minimal direct
//! llama-cpp-2 loop on the same model, thread count and prompt; and KV-cache reuse over a
//! ten-turn conversation.
//!
//! Both sides run in one child process of this binary (`--llama-child paired`; the
//! conversation in another, `--llama-child conversation`), sharing the one llama.cpp backend a
//! process may initialise, **at the same time on the same CPU**: the process is pinned to one
//! CPU, each side decodes on one thread, and the kernel interleaves the two every few
//! milliseconds. Each side is timed by the CPU time of the threads doing its work
//! (`/proc/self/task/<tid>/schedstat`): for the direct loop the thread it runs on, for loopward
//! its inference thread and the thread waiting for its reply. Why not one after the other: on
//! this kind of machine (a VM's vCPU) the speed drifts by several percent over seconds, and the
//! drift is the vCPU's own — two direct loops measured in adjacent 4-second windows differed by
//! 8% (standard deviation of the log ratio), on two CPUs at once by 7–10%, and sharing one CPU
//! at once, by CPU time, by 0.6%. Interleaved within milliseconds, both sides meet the same
//! drift. CPU time is a side's whole time only if its threads do not wait between tokens; the
//! voluntary context switches of each side's threads during a request are counted and reported
//! to show that they do not.
//!
//! Both sides are measured the same way, in pairs of requests on one prompt: the short request
//! prefills it and generates one token; the long one repeats the prompt, so both sides reuse it
//! from the cache (they keep their cache the same way) and prefill one token, and generates up to
//! `1 + DECODE` tokens. Decode rate = the long request's tokens ÷ its CPU time; prefill rate =
//! prefilled tokens ÷ (CPU time of the short request − one decode step). Each pair's prompt
//! changes its first line, so a short request reuses only the few cached tokens before the
//! change, and only what was actually prefilled counts. Both legs of a pair start together (a
//! barrier). The target is the geometric mean of the pairs' ratios with a bootstrap interval
//! ([`crate::ratio`]); several children run one after another, so one process's memory layout
//! does not decide the figure.

mod measure;
mod report;
#[cfg(test)]
mod tests;

use measure::{config, conversation, paired};
use report::section;
#[cfg(test)]
use {
    measure::{cpu_and_waits, thread_named},
    report::drift_note,
};

use crate::harness::{elapsed_ns, runtime, Effort};
use crate::ratio::paired_ratio;
use crate::report::{fmt_ratio, Section, Target, Verdict};
use anyhow::{bail, Context as _, Result};
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::LlamaModel as CppModel;
use llama_cpp_2::sampling::LlamaSampler;
use loopward_core::{AgentId, Message, Person};
use loopward_llama::{LlamaConfig, LlamaModel};
use loopward_runner::model::{ChatRequest, TurnSlot};
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::num::NonZeroU32;
use std::path::Path;
use std::time::Instant;
use tower::ServiceExt;

/// Context size on both sides.
pub const N_CTX: u32 = 2048;
/// Prompt batch size on both sides.
pub const BATCH: u32 = 512;
/// Tokens the long request generates beyond its first.
pub const DECODE: u32 = 192;
/// Child processes of part 5, and measured request pairs in each (after a warm-up pair).
pub const ROUNDS: usize = 4;
/// See [`ROUNDS`].
pub const PAIRS_PER_ROUND: usize = 6;
/// The most times a side's threads may block during a long request (handing over the request
/// and the reply) for its CPU time to be its whole time.
pub const MAX_WAITS: u64 = 2;
/// Threads each side decodes on. One: the two sides share one CPU, and llama.cpp's threads
/// spin at their barriers while a sibling is descheduled, which CPU time would count.
pub const PAIRED_THREADS: u32 = 1;
/// The target: loopward's rates as a share of the direct loop's.
pub const TARGET_SHARE: f64 = 0.97;
/// The most tokens one conversation answer generates.
pub const ANSWER: u32 = 24;
/// The "small constant" of the KV-reuse target, in tokens.
pub const KV_SLACK: u64 = 8;

const SYSTEM: &str = "You are a patient storyteller. You write long, detailed stories.";

fn user_prompt() -> String {
    let setting = "The town sits on a river between two hills. Its people keep bees, mend boats \
                   and trade honey for salt with the traders who come down the river each spring. ";
    format!(
        "{}Write a long story about the beekeeper's daughter who finds a map in an old boat.",
        setting.repeat(6)
    )
}

/// The ChatML text SmolLM2's template renders for a system and a user message.
fn chatml(system: &str, user: &str) -> String {
    format!(
        "<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n"
    )
}

/// One side's measured pair of requests. Times are CPU time of the threads doing the side's
/// work (the two sides run at once on one CPU, so wall time would count the other side too).
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct Rep {
    /// Tokens prefilled by the requests.
    pub prefilled: u64,
    /// CPU time of the short request (ns).
    pub short_ns: u64,
    /// Tokens the short request generated.
    pub short_gen: u64,
    /// CPU time of the long request (ns).
    pub long_ns: u64,
    /// Tokens the long request generated.
    pub long_gen: u64,
    /// Tokens the long request prefilled (its prompt is the short one's, so about one: the rest
    /// comes from the cache).
    pub long_prefilled: u64,
    /// Times the side's threads blocked during the long request (voluntary context switches):
    /// about none, or CPU time would not be the side's whole time.
    pub long_waits: u64,
}

impl Rep {
    /// All of a side's pairs added up into one: rates from it weigh every request by its length,
    /// which is steadier than a median of per-pair rates when the decode leg is short.
    pub fn pooled(reps: &[Rep]) -> Rep {
        reps.iter().fold(
            Rep {
                prefilled: 0,
                short_ns: 0,
                short_gen: 0,
                long_ns: 0,
                long_gen: 0,
                long_prefilled: 0,
                long_waits: 0,
            },
            |a, r| Rep {
                prefilled: a.prefilled + r.prefilled,
                short_ns: a.short_ns + r.short_ns,
                short_gen: a.short_gen + r.short_gen,
                long_ns: a.long_ns + r.long_ns,
                long_gen: a.long_gen + r.long_gen,
                long_prefilled: a.long_prefilled + r.long_prefilled,
                long_waits: a.long_waits + r.long_waits,
            },
        )
    }

    /// Decode tokens per CPU-second: the long request's (its prompt came from the cache).
    pub fn decode_rate(&self) -> f64 {
        if self.long_ns == 0 {
            0.0
        } else {
            self.long_gen as f64 / (self.long_ns as f64 / 1e9)
        }
    }

    /// Prefill tokens per second (the short request less its decode steps).
    pub fn prefill_rate(&self) -> f64 {
        let step_ns = 1e9 / self.decode_rate().max(1e-9);
        let t = self.short_ns as f64 - step_ns * self.short_gen as f64;
        if t <= 0.0 {
            0.0
        } else {
            self.prefilled as f64 / (t / 1e9)
        }
    }
}

/// One conversation turn through the loopward backend.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct ConvTurn {
    /// The whole prompt, in tokens (what a backend without reuse prefills).
    pub input: u64,
    /// Tokens reused from the cache.
    pub cached: u64,
    /// Tokens generated.
    pub output: u64,
    /// Wall time (ns).
    pub ns: u64,
}

/// The child processes' entry point: runs one side and prints its JSON on stdout.
pub fn child(kind: &str, model: &Path, reps: usize, threads: u32) -> Result<String> {
    Ok(match kind {
        "paired" => serde_json::to_string(&paired(model, threads, reps)?)?,
        "conversation" => serde_json::to_string(&conversation(model, threads)?)?,
        "concurrent" => serde_json::to_string(&crate::concurrent::child(model, threads, reps)?)?,
        other => bail!("unknown llama child {other:?}"),
    })
}

/// How the two sides of a pair are run and timed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Timing {
    /// At once on one CPU, each by its threads' CPU time: inference on the CPU.
    Together,
    /// One after the other, the side that goes first alternating, by the wall clock: with layers
    /// offloaded to a GPU, both sides would queue on it and its time is no thread's CPU time.
    InTurn,
}

impl Timing {
    /// The timing for a model loaded with `n_gpu_layers` offloaded.
    pub fn for_offload(n_gpu_layers: u32) -> Self {
        if n_gpu_layers == 0 {
            Self::Together
        } else {
            Self::InTurn
        }
    }
}

pub(crate) fn run_child(kind: &str, model: &Path, reps: usize, threads: u32) -> Result<String> {
    let exe = std::env::current_exe().context("finding this binary")?;
    let out = std::process::Command::new(exe)
        .args(["--llama-child", kind, "--model"])
        .arg(model)
        .args([
            "--reps",
            &reps.to_string(),
            "--threads",
            &threads.to_string(),
        ])
        .env("GGML_NO_BACKTRACE", "1")
        .output()
        .context("starting a llama child process")?;
    if !out.status.success() {
        bail!(
            "llama child {kind} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8(out.stdout)?)
}

/// Threads for both sides: half the cores. On a shared 2-core machine two llama.cpp threads
/// spin at their barriers whenever another process holds a core: a test here fell from about 70
/// to about 7 decoded tokens/s.
pub fn llama_threads() -> u32 {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    u32::try_from(cores / 2).unwrap_or(1).max(1)
}

/// Runs part 5 (or says why it cannot).
pub fn run(model: Option<&Path>, effort: Effort) -> Result<Section> {
    let Some(model) = model.filter(|m| m.is_file()) else {
        return Ok(Section::skipped(
            5,
            "Local inference",
            "skipped: the model file is missing; `cargo xtask fetch-model` puts \
             `models/SmolLM2-135M-Instruct.Q4_1.gguf` in place",
        ));
    };
    let rounds = effort.pick(ROUNDS, 1);
    let reps = effort.pick(PAIRS_PER_ROUND, 1);
    let mut pairs = vec![];
    for _ in 0..rounds {
        pairs.extend(serde_json::from_str::<Vec<(Rep, Rep)>>(&run_child(
            "paired",
            model,
            reps,
            PAIRED_THREADS,
        )?)?);
    }
    let conv: Vec<ConvTurn> =
        serde_json::from_str(&run_child("conversation", model, 0, llama_threads())?)?;
    let timing = Timing::for_offload(config(model, PAIRED_THREADS).n_gpu_layers);
    Ok(section(model, timing, (rounds, reps), &pairs, &conv))
}
