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

use crate::harness::{elapsed_ns, Effort};
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

/// Pins this thread, and the threads it starts later, to one CPU (the one it runs on). Both
/// sides then decode on it at once: the direct loop on this thread, loopward on its inference
/// thread, which inherits the mask.
fn pin_to_one_cpu() -> Result<()> {
    use rustix::thread::{sched_getcpu, sched_setaffinity, CpuSet};
    let mut set = CpuSet::new();
    set.set(sched_getcpu());
    sched_setaffinity(None, &set).context("pinning part 5's child to one CPU")
}

/// A thread's CPU time so far (ns) and how often it has blocked (voluntary context switches),
/// from `/proc`: `task` is `thread-self` for the calling thread or `self/task/<tid>`.
fn cpu_and_waits(task: &str) -> Result<(u64, u64)> {
    let read = |file: &str| {
        let path = format!("/proc/{task}/{file}");
        std::fs::read_to_string(&path).with_context(|| {
            format!("reading {path} (part 5 times each side by its threads' CPU time: Linux only)")
        })
    };
    let cpu = read("schedstat")?
        .split_whitespace()
        .next()
        .and_then(|v| v.parse().ok())
        .context("reading the CPU time in schedstat")?;
    let waits = read("status")?
        .lines()
        .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
        .and_then(|v| v.trim().parse().ok())
        .context("reading voluntary_ctxt_switches in status")?;
    Ok((cpu, waits))
}

/// The `/proc` task of this process's thread named `name`.
fn thread_named(name: &str) -> Result<String> {
    for entry in std::fs::read_dir("/proc/self/task").context("listing /proc/self/task")? {
        let tid = entry?.file_name().to_string_lossy().into_owned();
        let comm =
            std::fs::read_to_string(format!("/proc/self/task/{tid}/comm")).unwrap_or_default();
        if comm.trim_end() == name {
            return Ok(format!("self/task/{tid}"));
        }
    }
    bail!("no thread named {name:?} in this process")
}

/// CPU time and waits of a set of threads, added up.
fn sum_cpu_and_waits(tasks: &[&str]) -> Result<(u64, u64)> {
    tasks.iter().try_fold((0, 0), |(c, w), t| {
        let (c2, w2) = cpu_and_waits(t)?;
        Ok((c + c2, w + w2))
    })
}

/// Both sides in one process at once, pair by pair: each pair of requests runs on the direct
/// loop (this thread) and through loopward (a second thread waiting on its inference thread)
/// together on one CPU, each leg starting at a barrier, each side timed by its threads' CPU time.
/// Returns `(direct, loopward)` per pair.
fn paired(model_path: &Path, threads: u32, reps: usize) -> Result<Vec<(Rep, Rep)>> {
    pin_to_one_cpu()?;
    // One llama.cpp backend per process: the loopward crate's, shared with the direct loop.
    let backend = loopward_llama::llama_backend()?;
    let service = load(model_path, threads)?;
    let inference = thread_named(loopward_llama::INFERENCE_THREAD)?;
    // Loaded as the backend loads it (llama.cpp's own default offloads every layer).
    let offload = config(model_path, threads).n_gpu_layers;
    let model = CppModel::load_from_file(
        backend,
        model_path,
        &LlamaModelParams::default().with_n_gpu_layers(offload),
    )?;
    let t = i32::try_from(threads)?;
    let params = LlamaContextParams::default()
        .with_n_ctx(NonZeroU32::new(N_CTX))
        .with_n_batch(BATCH)
        .with_n_ubatch(BATCH)
        .with_n_threads(t)
        .with_n_threads_batch(t);
    let mut direct = DirectLoop::new(&model, backend, params)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let user = user_prompt();
    // The same requests as messages, through the loopward backend as a tower service; returns
    // (tokens prefilled, tokens generated).
    let through_loopward = |n: usize, max_tokens: u32| -> Result<(u64, u64)> {
        let messages = vec![
            Message::system(format!("Session {n}. {SYSTEM}")),
            Message::human(Person::at_the_keyboard().says(user.clone())),
        ];
        let reply = rt.block_on(service.clone().oneshot(request(messages, max_tokens)?))?;
        Ok((
            reply.usage.input_tokens - reply.usage.cached_tokens,
            reply.usage.output_tokens,
        ))
    };
    let timing = Timing::for_offload(offload);
    let barrier = std::sync::Barrier::new(2);
    let origin = Instant::now();
    // One side's pair, timed on `tasks`, the threads doing this side's work: by their CPU time
    // with each leg starting when the other side's does, or by the wall clock.
    let pair = |tasks: &[&str], complete: &mut dyn FnMut(u32) -> Result<(u64, u64)>| {
        let clock = || -> Result<(u64, u64)> {
            let (cpu, waits) = sum_cpu_and_waits(tasks)?;
            Ok(match timing {
                Timing::Together => (cpu, waits),
                Timing::InTurn => (elapsed_ns(origin), waits),
            })
        };
        let mut leg = |max_tokens: u32| -> Result<(u64, u64, u64, u64)> {
            if matches!(timing, Timing::Together) {
                barrier.wait();
            }
            let (t, waits) = clock()?;
            let (prefilled, generated) = complete(max_tokens)?;
            let (t2, waits2) = clock()?;
            Ok((prefilled, generated, t2 - t, waits2 - waits))
        };
        // The long request repeats the short one's prompt: both come from the cache.
        let (prefilled, short_gen, short_ns, _) = leg(1)?;
        let (long_prefilled, long_gen, long_ns, long_waits) = leg(1 + DECODE)?;
        anyhow::Ok(Rep {
            prefilled,
            short_ns,
            short_gen,
            long_ns,
            long_gen,
            long_prefilled,
            long_waits,
        })
    };
    let mut out = vec![];
    for k in 0..=reps {
        let n = 2 * k;
        let text = chatml(&format!("Session {n}. {SYSTEM}"), &user);
        let (d, o) = match timing {
            Timing::Together => std::thread::scope(|s| {
                let ours = s.spawn(|| {
                    pair(&["thread-self", &inference], &mut |max| {
                        through_loopward(n, max)
                    })
                });
                let d = pair(&["thread-self"], &mut |max| direct.complete(&text, max));
                let o = ours
                    .join()
                    .map_err(|_| anyhow::anyhow!("the loopward side's thread panicked"))?;
                anyhow::Ok((d?, o?))
            })?,
            // The side that goes first alternates.
            Timing::InTurn if k % 2 == 0 => {
                let d = pair(&["thread-self"], &mut |max| direct.complete(&text, max))?;
                let o = pair(&["thread-self", &inference], &mut |max| {
                    through_loopward(n, max)
                })?;
                (d, o)
            }
            Timing::InTurn => {
                let o = pair(&["thread-self", &inference], &mut |max| {
                    through_loopward(n, max)
                })?;
                let d = pair(&["thread-self"], &mut |max| direct.complete(&text, max))?;
                (d, o)
            }
        };
        // The first pair warms caches and page-ins; it is not counted.
        if k > 0 {
            out.push((d, o));
        }
    }
    Ok(out)
}

/// The minimal direct loop: tokenize, prefill in batches, then sample greedily and decode one
/// token at a time until end-of-generation or `max_tokens`. It keeps the token ids in sequence
/// 0, so that a request reuses the prefix it shares with the last one, as the loopward backend
/// does (and as LLAMA.md's KV-reuse recipe says).
struct DirectLoop<'m> {
    model: &'m CppModel,
    ctx: llama_cpp_2::context::LlamaContext<'m>,
    cached: Vec<llama_cpp_2::token::LlamaToken>,
}

impl<'m> DirectLoop<'m> {
    fn new(
        model: &'m CppModel,
        backend: &llama_cpp_2::llama_backend::LlamaBackend,
        params: LlamaContextParams,
    ) -> Result<Self> {
        Ok(Self {
            model,
            ctx: model.new_context(backend, params)?,
            cached: vec![],
        })
    }

    /// Returns (tokens prefilled, tokens generated).
    fn complete(&mut self, text: &str, max_tokens: u32) -> Result<(u64, u64)> {
        let vocab = self.model.vocab();
        let tokens = vocab.tokenize(text.as_bytes(), vocab.should_add_bos(), true);
        let mut reused = self
            .cached
            .iter()
            .zip(&tokens)
            .take_while(|(a, b)| a == b)
            .count()
            .min(tokens.len() - 1);
        if self
            .ctx
            .kv_cache_seq_rm(0, u32::try_from(reused).ok(), None)
            .is_err()
        {
            self.ctx.clear_kv_cache();
            reused = 0;
        }
        self.cached.truncate(reused);
        let tail = &tokens[reused..];
        let mut batch = LlamaBatch::new(BATCH as usize, 1);
        let mut pos = i32::try_from(reused)?;
        let chunks = tail.chunks(BATCH as usize).count();
        for (i, chunk) in tail.chunks(BATCH as usize).enumerate() {
            batch.clear();
            for (j, &tok) in chunk.iter().enumerate() {
                batch.add(tok, pos, &[0], i + 1 == chunks && j + 1 == chunk.len())?;
                pos += 1;
            }
            self.ctx.decode(&mut batch)?;
            self.cached.extend_from_slice(chunk);
        }
        let mut sampler = LlamaSampler::greedy();
        let mut generated = 0u64;
        let mut at = batch.n_tokens() - 1;
        while generated < u64::from(max_tokens) {
            let tok = sampler.sample(&self.ctx, at);
            if vocab.is_eog(tok) {
                break;
            }
            generated += 1;
            batch.clear();
            batch.add(tok, pos, &[0], true)?;
            pos += 1;
            self.ctx.decode(&mut batch)?;
            self.cached.push(tok);
            at = 0;
        }
        Ok((tail.len() as u64, generated))
    }
}

fn config(model_path: &Path, threads: u32) -> LlamaConfig {
    LlamaConfig::new(model_path)
        .n_ctx(N_CTX)
        .batch_size(BATCH)
        .threads(threads)
        .greedy()
}

fn load(model_path: &Path, threads: u32) -> Result<loopward_llama::LlamaService> {
    Ok(LlamaModel::load(config(model_path, threads))?)
}

fn request(messages: Vec<Message>, max_tokens: u32) -> Result<ChatRequest> {
    Ok(ChatRequest {
        agent: AgentId::new("storyteller")?,
        messages,
        tools: vec![],
        max_tokens: Some(max_tokens),
        turn: TurnSlot::empty(),
    })
}

fn conversation(model_path: &Path, threads: u32) -> Result<Vec<ConvTurn>> {
    let service = load(model_path, threads)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let questions = [
        "What is a beehive made of?",
        "Why do bees make honey?",
        "How many bees live in one hive?",
        "What does a queen bee do?",
        "How far do bees fly for food?",
        "What flowers do bees like most?",
        "How is honey taken from a hive?",
        "Why do bees swarm?",
        "What do bees do in winter?",
        "How can a town help its bees?",
    ];
    let mut messages = vec![Message::system(
        "You are a helpful beekeeper. Answer in two sentences.",
    )];
    let mut turns = vec![];
    rt.block_on(async {
        for q in questions {
            messages.push(Message::human(Person::at_the_keyboard().says(q)));
            let start = Instant::now();
            let reply = service
                .clone()
                .oneshot(request(messages.clone(), ANSWER)?)
                .await?;
            let ns = elapsed_ns(start);
            turns.push(ConvTurn {
                input: reply.usage.input_tokens,
                cached: reply.usage.cached_tokens,
                output: reply.usage.output_tokens,
                ns,
            });
            messages.push(Message::model(reply.content, vec![]));
        }
        anyhow::Ok(())
    })?;
    Ok(turns)
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

/// How part 5 runs and times the two sides on a CPU, for the report.
fn together_method(rounds: usize, reps: usize) -> String {
    format!(
        "Both sides run in one child process at the same time, pinned to the same single CPU: \
             the kernel interleaves them every few milliseconds, so the machine's speed, which \
             drifts by several per cent over seconds on this kind of machine, is the same for \
             both; each side is timed by the CPU time of the threads doing its work \
             (`/proc/self/task/<tid>/schedstat`: the direct loop's thread; loopward's inference \
             thread and the thread awaiting its reply), and rates are tokens per CPU-second (sharing \
             one CPU's caches, each side runs slower than alone: the rates compare the sides, they \
             do not size a machine). \
             One after the other, the drift between requests seconds apart was larger than the \
             gap being measured; this run's own figures for both are in the notes. Each leg of a pair starts \
             when the other side's does (a barrier); {rounds} children one after another, \
             {reps} pairs each after a warm-up pair. The target is the geometric mean of the \
             pairs' ratios, with a 95% bootstrap interval (4,000 resamples of the pairs): it is \
             met only when the whole interval is at or above the target, and not shown when \
             only the estimate is; the table's rates pool the pairs' summed tokens and times. \
             The direct loop is a minimal llama-cpp-2 0.1.160 program (tokenize, prefill in \
             batches, `LlamaSampler::greedy`, decode one token at a time); loopward is \
             `loopward_llama::LlamaModel` called as a tower service. Each pair changes the \
             prompt's first line, so both sides' short requests reuse only the few cached \
             tokens before it (the direct loop keeps its cache the way LLAMA.md's KV-reuse \
             recipe says, as the backend does) and prefill the rest; rates count only what was \
             actually prefilled."
    )
}

/// How much the machine moved under the measurement, from this run's own pairs: the direct
/// loop's decode rate from one pair to the next in a child (what comparing the sides one after
/// the other would have carried), against loopward ÷ direct within a pair.
fn drift_note(pairs: &[(Rep, Rep)], reps: usize) -> String {
    let sd = |v: &[f64]| {
        let n = v.len().max(1) as f64;
        let mean = v.iter().sum::<f64>() / n;
        (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n).sqrt()
    };
    let next: Vec<f64> = pairs
        .chunks(reps.max(1))
        .flat_map(|c| {
            c.windows(2)
                .map(|w| (w[1].0.decode_rate() / w[0].0.decode_rate().max(1e-9)).ln())
                .collect::<Vec<_>>()
        })
        .filter(|x| x.is_finite())
        .collect();
    let within: Vec<f64> = pairs
        .iter()
        .map(|(d, o)| (o.decode_rate() / d.decode_rate().max(1e-9)).ln())
        .filter(|x| x.is_finite())
        .collect();
    let seconds: Vec<f64> = pairs
        .iter()
        .map(|(d, o)| (d.short_ns + d.long_ns + o.short_ns + o.long_ns) as f64 / 1e9)
        .collect();
    format!(
        "How much the machine moved (standard deviation of the log ratio, decode): the direct \
         loop's own rate from one pair to the next, about {:.0} s apart, {:.1}% ({} steps); \
         loopward ÷ direct within a pair, both running at once, {:.2}% ({} pairs).",
        crate::ratio::median(&seconds),
        100.0 * sd(&next),
        next.len(),
        100.0 * sd(&within),
        within.len()
    )
}

/// Tokens a side's long requests prefilled, on average.
fn mean_long_prefill(reps: &[Rep]) -> f64 {
    reps.iter().map(|r| r.long_prefilled as f64).sum::<f64>() / reps.len().max(1) as f64
}

/// The smallest, median and largest of `f` over `reps`.
fn min_med_max(reps: &[Rep], f: fn(&Rep) -> f64) -> (f64, f64, f64) {
    let mut v: Vec<f64> = reps.iter().map(f).collect();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        return (0.0, 0.0, 0.0);
    }
    let med = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    (v[0], med, v[n - 1])
}

fn section(
    model: &Path,
    timing: Timing,
    (rounds, reps): (usize, usize),
    pairs: &[(Rep, Rep)],
    conv: &[ConvTurn],
) -> Section {
    let direct: Vec<Rep> = pairs.iter().map(|p| p.0).collect();
    let ours: Vec<Rep> = pairs.iter().map(|p| p.1).collect();
    let (direct, ours) = (&direct[..], &ours[..]);
    let (direct_all, ours_all) = (direct, ours);
    let rate = |reps: &[Rep], f: fn(&Rep) -> f64| f(&Rep::pooled(reps));
    let (dp, dd) = (
        rate(direct, Rep::prefill_rate),
        rate(direct, Rep::decode_rate),
    );
    let (op, od) = (rate(ours, Rep::prefill_rate), rate(ours, Rep::decode_rate));
    let tokens = |reps: &[Rep]| reps.first().map_or(0, |r| r.prefilled);
    let rows = vec![
        vec![
            "prefill".into(),
            format!("{dp:.0} tok/s"),
            format!("{op:.0} tok/s"),
            fmt_ratio(op / dp),
        ],
        vec![
            "decode".into(),
            format!("{dd:.1} tok/s"),
            format!("{od:.1} tok/s"),
            fmt_ratio(od / dd),
        ],
    ];
    let threads = PAIRED_THREADS;
    let range = |reps: &[Rep], f: fn(&Rep) -> f64| {
        let v: Vec<f64> = reps.iter().map(f).collect();
        let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = v.iter().copied().fold(0.0, f64::max);
        (lo, hi)
    };
    let most_waits = |reps: &[Rep]| reps.iter().map(|r| r.long_waits).max().unwrap_or(0);
    // Only CPU time can miss a wait; the wall clock counts it.
    let waits_ok =
        timing == Timing::InTurn || most_waits(direct_all).max(most_waits(ours_all)) <= MAX_WAITS;
    let share = |what: &str, f: fn(&Rep) -> f64| {
        let per_request = |reps: &[Rep]| reps.iter().map(f).collect::<Vec<f64>>();
        let r = paired_ratio(&per_request(ours_all), &per_request(direct_all));
        let pooled = rate(ours_all, f) / rate(direct_all, f);
        let (olo, ohi) = range(ours_all, f);
        let (dlo, dhi) = range(direct_all, f);
        let spread = format!(
            "single requests ranged {olo:.1}–{ohi:.1} tok/s through loopward and {dlo:.1}–{dhi:.1} tok/s direct"
        );
        let verdict = match r.verdict(TARGET_SHARE) {
            Verdict::Met if !waits_ok => Verdict::NotShown,
            v => v,
        };
        Target {
            what: format!(
                "local inference {what} through loopward ÷ direct llama-cpp-2 loop (geometric mean of paired requests' ratios, 95% interval)"
            ),
            target: format!("≥ {TARGET_SHARE:.2}"),
            measured: format!(
                "{:.3} [{:.3}–{:.3}] (pooled {pooled:.3})",
                r.point, r.low, r.high
            ),
            verdict,
            reason: match verdict {
                Verdict::Met | Verdict::NotMeasured => None,
                Verdict::NotShown if !waits_ok => Some(format!(
                    "not shown: a side's threads blocked more than {MAX_WAITS} times during a \
                     request, and its CPU time leaves the waiting out (see the notes)"
                )),
                Verdict::NotShown => Some(format!(
                    "not shown: the estimate meets {TARGET_SHARE:.2} but the interval reaches below \
                     it — this run's noise is larger than the gap ({spread}; a shared machine: \
                     rerun when it is quiet)"
                )),
                Verdict::Missed if r.below(TARGET_SHARE) => Some(format!(
                    "missed: the whole interval is below {TARGET_SHARE:.2} — loopward is slower \
                     here; {spread}"
                )),
                Verdict::Missed => Some(format!(
                    "missed: the estimate is below {TARGET_SHARE:.2}, though the interval reaches \
                     above it ({spread}; a shared machine: rerun when it is quiet)"
                )),
            },
        }
    };
    // KV reuse: what each turn prefilled against what was new since the previous turn's cache.
    let mut kv_rows = vec![];
    let mut worst = 0i64;
    let mut prev: Option<&ConvTurn> = None;
    for (i, t) in conv.iter().enumerate() {
        let new = prev.map_or(t.input, |p| t.input.saturating_sub(p.input + p.output));
        let prefilled = t.input - t.cached;
        let excess = prefilled as i64 - new as i64;
        if i > 0 {
            worst = worst.max(excess);
        }
        kv_rows.push(vec![
            (i + 1).to_string(),
            t.input.to_string(),
            new.to_string(),
            prefilled.to_string(),
            format!("{excess:+}"),
            format!("{:.0} ms", t.ns as f64 / 1e6),
        ]);
        prev = Some(t);
    }
    let kv_met = worst <= KV_SLACK as i64;
    let spread = |what: &str, f: fn(&Rep) -> f64| {
        let (d, o) = (min_med_max(direct_all, f), min_med_max(ours_all, f));
        format!(
            "| {what} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {} |",
            d.0,
            d.1,
            d.2,
            o.0,
            o.1,
            o.2,
            fmt_ratio(o.1 / d.1.max(1e-9))
        )
    };
    let mut notes = vec![format!(
        "Per request pair ({} a side, each side's own spread), tok/s: min / median / max.\n\n| | direct min | direct median | direct max | loopward min | loopward median | loopward max | median ÷ median |\n|---|---:|---:|---:|---:|---:|---:|---:|\n{}\n{}",
        direct_all.len().min(ours_all.len()),
        spread("prefill", Rep::prefill_rate),
        spread("decode", Rep::decode_rate)
    )];
    let pair_ratios = |f: fn(&Rep) -> f64| {
        let v: Vec<f64> = pairs.iter().map(|(d, o)| f(o) / f(d).max(1e-9)).collect();
        let (lo, hi) = v.iter().fold((f64::INFINITY, 0.0_f64), |(lo, hi), &r| {
            (lo.min(r), hi.max(r))
        });
        format!("{lo:.3} / {:.3} / {hi:.3}", crate::ratio::median(&v))
    };
    // Each child's own decode ratio: a child-wide offset (something the two sides did not share
    // for that process's lifetime, such as where their buffers landed) would show here as
    // children that disagree.
    let per_child: Vec<String> = pairs
        .chunks(reps.max(1))
        .map(|c| {
            let (d, o): (Vec<f64>, Vec<f64>) = c
                .iter()
                .map(|(d, o)| (d.decode_rate(), o.decode_rate()))
                .unzip();
            format!("{:.3}", paired_ratio(&o, &d).point)
        })
        .collect();
    notes.push(format!(
        "Loopward ÷ direct within each pair (min / median / max over {} pairs): prefill {}, \
         decode {}. Decode per child process (geometric mean of its {reps} pairs): {}.",
        pairs.len(),
        pair_ratios(Rep::prefill_rate),
        pair_ratios(Rep::decode_rate),
        per_child.join(", ")
    ));
    notes.push(drift_note(pairs, reps));
    notes.push(format!(
        "Waiting: during a long request ({} tokens) the direct loop's thread blocked at most {} \
         times, loopward's threads (its inference thread and the one awaiting the reply) at \
         most {}. {}",
        1 + DECODE,
        most_waits(direct),
        most_waits(ours),
        if waits_ok {
            format!(
                "At most {MAX_WAITS} is the hand-over of a request and of its reply, not a \
                 wait per token: neither side waits between tokens, so its CPU time is its \
                 whole time."
            )
        } else {
            format!(
                "More than {MAX_WAITS}: a side waits within a request, and CPU time leaves that \
                 time out, so the ratios are not shown."
            )
        }
    ));
    notes.push(format!(
        "Prompt: {} tokens prefilled per request by the direct loop, {} by loopward (the same \
         ChatML text, which loopward renders from messages with the model's template, less the \
         few cached tokens before the changed first line). Decode: the long request repeats \
         the prompt and generates up to {} tokens, greedy, on both sides; it prefilled {:.1} tokens \
         on average directly and {:.1} through loopward (the rest came from the cache).",
        tokens(direct),
        tokens(ours),
        1 + DECODE,
        mean_long_prefill(direct),
        mean_long_prefill(ours)
    ));
    notes.push(format!(
        "KV reuse over a 10-turn conversation through loopward ({ANSWER} tokens at most per answer): \"without\" is \
         the whole prompt, what a backend without reuse prefills each turn. Over the ten \
         turns: {} tokens prefilled with reuse against {} without ({} as many).\n\n| turn | whole prompt (without reuse) | new since last turn | prefilled with reuse | excess | time |\n|---:|---:|---:|---:|---:|---:|\n{}",
        conv.iter().map(|t| t.input - t.cached).sum::<u64>(),
        conv.iter().map(|t| t.input).sum::<u64>(),
        fmt_ratio(
            conv.iter().map(|t| t.input).sum::<u64>() as f64
                / conv.iter().map(|t| t.input - t.cached).sum::<u64>().max(1) as f64
        ),
        kv_rows.iter().map(|r| format!("| {} |", r.join(" | "))).collect::<Vec<_>>().join("\n")
    ));
    Section {
        part: 5,
        title: "Local inference".into(),
        method: format!(
            "`{}` on {threads} thread a side, context {N_CTX}, batch {BATCH}, greedy, {}",
            model
                .file_name()
                .map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
            match timing {
                Timing::Together => format!("CPU. {}", together_method(rounds, reps)),
                Timing::InTurn => format!(
                    "every layer offloaded to the GPU. Both sides run in one child process, one \
                     after the other pair by pair, the side that goes first alternating, timed \
                     by the wall clock (on a GPU both would queue on it at once, and its time is \
                     no thread's CPU time); {rounds} children, {reps} pairs each after a warm-up \
                     pair; the target is the geometric mean of the pairs' ratios with a 95% \
                     bootstrap interval (4,000 resamples of the pairs), met only when the whole \
                     interval is at or above it."
                ),
            }
        ),
        columns: ["", "direct llama-cpp-2", "loopward", "loopward ÷ direct"]
            .map(String::from)
            .to_vec(),
        rows,
        targets: vec![
            share("prefill", Rep::prefill_rate),
            share("decode", Rep::decode_rate),
            Target {
                what:
                    "KV reuse: tokens a turn prefills beyond its new tokens (worst of turns 2–10)"
                        .into(),
                target: format!("≤ {KV_SLACK}"),
                measured: format!("{worst:+}"),
                verdict: Verdict::met_if(kv_met),
                reason: (!kv_met).then(|| "missed: see the turn table below".to_string()),
            },
        ],
        notes,
        data: json!({ "direct": direct, "loopward": ours, "conversation": conv,
            "prefill_tok_s": {"direct": dp, "loopward": op}, "decode_tok_s": {"direct": dd, "loopward": od} }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rep(long_ns: u64, long_waits: u64) -> Rep {
        Rep {
            prefilled: 240,
            short_ns: 2_000_000_000,
            short_gen: 1,
            long_ns,
            long_gen: 193,
            long_prefilled: 1,
            long_waits,
        }
    }

    fn decode_verdict(pairs: &[(Rep, Rep)]) -> (Verdict, Option<String>) {
        let s = section(
            Path::new("m.gguf"),
            Timing::Together,
            (1, pairs.len()),
            pairs,
            &[],
        );
        let t = s
            .targets
            .iter()
            .find(|t| t.what.contains("decode"))
            .expect("a decode target");
        (t.verdict, t.reason.clone())
    }

    #[test]
    fn equal_sides_that_do_not_wait_meet_the_target() {
        let pairs: Vec<(Rep, Rep)> = (0..6)
            .map(|i| (rep(5_000_000_000 + i, 0), rep(5_000_000_000 + i, 1)))
            .collect();
        assert_eq!(decode_verdict(&pairs).0, Verdict::Met);
    }

    #[test]
    fn a_side_that_waits_within_a_request_is_not_shown_whatever_its_cpu_time_says() {
        // Loopward's CPU time equals the direct loop's, but its threads blocked 193 times: time
        // CPU time does not see.
        let pairs: Vec<(Rep, Rep)> = (0..6)
            .map(|_| (rep(5_000_000_000, 0), rep(5_000_000_000, 193)))
            .collect();
        let (verdict, reason) = decode_verdict(&pairs);
        assert_eq!(verdict, Verdict::NotShown);
        assert!(reason.is_some_and(|r| r.contains("blocked")));
    }

    #[test]
    fn the_drift_note_sets_the_machines_drift_against_the_pairs() {
        // The machine swings between two speeds from pair to pair; both sides swing together.
        let pairs: Vec<(Rep, Rep)> = (0..6)
            .map(|i| {
                let ns = if i % 2 == 0 {
                    4_000_000_000
                } else {
                    5_000_000_000
                };
                (rep(ns, 0), rep(ns, 1))
            })
            .collect();
        let note = drift_note(&pairs, 6);
        assert!(note.contains("21.9% (5 steps)"), "{note}");
        assert!(note.contains("0.00% (6 pairs)"), "{note}");
    }

    #[test]
    fn a_threads_cpu_time_and_waits_are_read_from_proc() {
        // Work until the reader sees 10 ms more CPU time: how soon depends on how busy the
        // machine is (CI runs tests side by side), so the deadline is only against a reader that
        // never moves.
        let (cpu, _) = cpu_and_waits("thread-self").expect("this thread");
        let mut x = 0u64;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let mut cpu2 = cpu;
        while cpu2 - cpu < 10_000_000 && std::time::Instant::now() < deadline {
            for _ in 0..100_000 {
                x = std::hint::black_box(x.wrapping_add(1));
            }
            cpu2 = cpu_and_waits("thread-self").expect("this thread").0;
        }
        assert!(
            cpu2 - cpu >= 10_000_000,
            "{cpu} → {cpu2}: the thread's CPU time did not grow by 10 ms in 20 s of work"
        );
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let h = std::thread::Builder::new()
            .name("lw-test-named".into())
            .spawn(move || rx.recv())
            .expect("spawn");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        // The thread names itself once it runs.
        let task = std::iter::repeat_with(|| {
            std::thread::sleep(std::time::Duration::from_millis(5));
            thread_named("lw-test-named")
        })
        .find(|t| t.is_ok() || std::time::Instant::now() > deadline)
        .and_then(Result::ok)
        .expect("found by name");
        // It blocks in `recv` soon after it starts: a voluntary switch.
        let waited = std::iter::repeat_with(|| {
            std::thread::sleep(std::time::Duration::from_millis(5));
            cpu_and_waits(&task).expect("the named thread").1
        })
        .find(|w| *w >= 1 || std::time::Instant::now() > deadline);
        tx.send(()).expect("send");
        h.join().expect("join").expect("recv");
        assert!(
            waited >= Some(1),
            "a thread blocked in recv has waited: {waited:?}"
        );
        assert!(thread_named("no-such-thread").is_err());
    }
}
