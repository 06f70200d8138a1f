//! Part 5: local inference through the loopward llama backend against a minimal direct
//! llama-cpp-2 loop on the same model, thread count and prompt; and KV-cache reuse over a
//! ten-turn conversation.
//!
//! Both sides run in one child process of this binary (`--llama-child paired`; the
//! conversation in another, `--llama-child conversation`), sharing the one llama.cpp backend a
//! process may initialise. They take turns request pair by request pair, the side that goes first
//! alternating, so each pair saw about the same machine; the target is the geometric mean of the
//! pairs' ratios, with a bootstrap interval ([`crate::ratio`]). Several children run one after
//! another, so one process's memory layout does not decide the figure.
//!
//! Both sides are measured the same way, in pairs of requests on one prompt: the short request
//! prefills it and generates one token; the long one repeats the prompt, so both sides reuse it
//! from the cache (they keep their cache the same way) and prefill one token, and generates up to
//! `1 + DECODE` tokens. Decode rate = the long request's tokens ÷ its time — no prefill in it, so
//! the prefill's noise (single prefills on a shared machine vary by tens of percent) does not
//! enter; prefill rate = prefilled tokens ÷ (time of the short request − one decode step). Each
//! pair's prompt changes its first line, so a short request reuses only the few cached tokens
//! before the change, and only what was actually prefilled counts.

use crate::harness::{elapsed_ns, Effort};
use crate::ratio::paired_ratio;
use crate::report::{fmt_ns, fmt_ratio, Section, Target, Verdict};
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
pub const ROUNDS: usize = 8;
/// See [`ROUNDS`].
pub const PAIRS_PER_ROUND: usize = 9;
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

/// One measured pair of requests.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct Rep {
    /// Tokens prefilled by the requests.
    pub prefilled: u64,
    /// Time of the short request (ns) and what it generated.
    pub short_ns: u64,
    /// Tokens the short request generated.
    pub short_gen: u64,
    /// Time of the long request (ns).
    pub long_ns: u64,
    /// Tokens the long request generated.
    pub long_gen: u64,
    /// Tokens the long request prefilled (its prompt is the short one's, so about one: the rest
    /// comes from the cache).
    pub long_prefilled: u64,
    /// Of `long_ns`, the time spent inside llama.cpp's `decode` (ns): the model's compute; the
    /// rest is the code around it.
    pub long_decode_ns: u64,
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
                long_decode_ns: 0,
            },
            |a, r| Rep {
                prefilled: a.prefilled + r.prefilled,
                short_ns: a.short_ns + r.short_ns,
                short_gen: a.short_gen + r.short_gen,
                long_ns: a.long_ns + r.long_ns,
                long_gen: a.long_gen + r.long_gen,
                long_prefilled: a.long_prefilled + r.long_prefilled,
                long_decode_ns: a.long_decode_ns + r.long_decode_ns,
            },
        )
    }

    /// Decode tokens per second: the long request's (its prompt came from the cache).
    pub fn decode_rate(&self) -> f64 {
        if self.long_ns == 0 {
            0.0
        } else {
            self.long_gen as f64 / (self.long_ns as f64 / 1e9)
        }
    }

    /// Decode tokens per second counting only the time inside llama.cpp's `decode`: the speed
    /// of the model's compute itself, without the code around it.
    pub fn compute_rate(&self) -> f64 {
        if self.long_decode_ns == 0 {
            0.0
        } else {
            self.long_gen as f64 / (self.long_decode_ns as f64 / 1e9)
        }
    }

    /// Per generated token of the long request, the time outside llama.cpp's `decode` (ns).
    pub fn outside_per_token_ns(&self) -> f64 {
        self.long_ns.saturating_sub(self.long_decode_ns) as f64 / self.long_gen.max(1) as f64
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

/// Splits each side's decode time into llama.cpp's `decode` (the model's compute) and
/// everything around it, so a gap between the sides can be placed: in loopward's code, or in the
/// compute itself.
fn where_the_decode_time_goes(pairs: &[(Rep, Rep)]) -> String {
    let compute = |f: fn(&(Rep, Rep)) -> &Rep| pairs.iter().map(|p| f(p).compute_rate()).collect();
    let (direct, ours): (Vec<f64>, Vec<f64>) = (compute(|p| &p.0), compute(|p| &p.1));
    let r = paired_ratio(&ours, &direct);
    let outside = |f: fn(&(Rep, Rep)) -> &Rep| {
        let v: Vec<f64> = pairs.iter().map(|p| f(p).outside_per_token_ns()).collect();
        crate::ratio::median(&v)
    };
    let per_token = |f: fn(&(Rep, Rep)) -> &Rep| 1e9 / crate::ratio::median(&compute(f)).max(1e-9);
    format!(
        "Where the decode time goes (the long request, per generated token, medians over the \
         pairs): inside llama.cpp's `decode` {} directly and {} through loopward; outside it \
         (sampling, detokenizing, and for loopward its queue, stop-string check and reply) {} \
         directly and {} through loopward. The compute alone, loopward's context ÷ the direct \
         loop's, paired as above: {:.3} [{:.3}–{:.3}] — a gap there is llama.cpp running the \
         same model slower in one context than in the other, not loopward's code.",
        fmt_ns(per_token(|p| &p.0)),
        fmt_ns(per_token(|p| &p.1)),
        fmt_ns(outside(|p| &p.0)),
        fmt_ns(outside(|p| &p.1)),
        r.point,
        r.low,
        r.high
    )
}

/// Pins this thread, and the threads it starts later, to `n` CPUs (this one and the next
/// allowed ones). Both sides then decode on the same CPUs: the direct loop on this thread,
/// loopward on its inference thread, which inherits the mask. Left free, the two threads settle
/// on different virtual CPUs, whose speeds differ by several per cent for minutes at a time on a
/// shared host — a gap that belongs to neither side.
fn pin_to_cpus(n: u32) -> Result<()> {
    use rustix::thread::{sched_getaffinity, sched_getcpu, sched_setaffinity, CpuSet};
    let allowed = sched_getaffinity(None).context("reading this process's CPUs")?;
    let cpus: Vec<usize> = (0..CpuSet::MAX_CPU)
        .filter(|c| allowed.is_set(*c))
        .collect();
    let here = cpus.iter().position(|c| *c == sched_getcpu()).unwrap_or(0);
    let mut set = CpuSet::new();
    for k in 0..(n as usize).clamp(1, cpus.len().max(1)) {
        set.set(cpus[(here + k) % cpus.len()]);
    }
    sched_setaffinity(None, &set).context("pinning part 5's child to its CPUs")
}

/// Which side of a pair runs a request.
#[derive(Clone, Copy)]
enum Side {
    Direct,
    Loopward,
}

/// Both sides in one process, pair by pair: each pair of requests runs on the direct loop and
/// through loopward back to back, the side that goes first alternating, so whatever else the
/// machine does in those seconds weighs on both alike. Returns `(direct, loopward)` per pair.
fn paired(model_path: &Path, threads: u32, reps: usize) -> Result<Vec<(Rep, Rep)>> {
    pin_to_cpus(threads)?;
    // One llama.cpp backend per process: the loopward crate's, shared with the direct loop.
    let backend = loopward_llama::llama_backend()?;
    let service = load(model_path, threads)?;
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
    let mut ctx = model.new_context(backend, params)?;
    let vocab = model.vocab();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let user = user_prompt();
    // The minimal direct loop: tokenize, prefill in batches, then sample greedily and decode
    // one token at a time until end-of-generation or `max_tokens`. It keeps the token ids in
    // sequence 0, so that a request reuses the prefix it shares with the last one, as the
    // loopward backend does (and as LLAMA.md's KV-reuse recipe says).
    let mut cached: Vec<llama_cpp_2::token::LlamaToken> = vec![];
    // Returns (tokens prefilled, tokens generated, ns inside `decode`).
    let mut direct = |text: &str, max_tokens: u32| -> Result<(u64, u64, u64)> {
        let tokens = vocab.tokenize(text.as_bytes(), vocab.should_add_bos(), true);
        let mut reused = cached
            .iter()
            .zip(&tokens)
            .take_while(|(a, b)| a == b)
            .count()
            .min(tokens.len() - 1);
        if ctx
            .kv_cache_seq_rm(0, u32::try_from(reused).ok(), None)
            .is_err()
        {
            ctx.clear_kv_cache();
            reused = 0;
        }
        cached.truncate(reused);
        let tail = &tokens[reused..];
        let mut batch = LlamaBatch::new(BATCH as usize, 1);
        let mut pos = i32::try_from(reused)?;
        let mut decode_ns = 0u64;
        let mut timed_decode = |ctx: &mut llama_cpp_2::context::LlamaContext<'_>,
                                batch: &mut LlamaBatch<'_>|
         -> Result<()> {
            let start = Instant::now();
            let out = ctx.decode(batch);
            decode_ns += elapsed_ns(start);
            Ok(out?)
        };
        let chunks = tail.chunks(BATCH as usize).count();
        for (i, chunk) in tail.chunks(BATCH as usize).enumerate() {
            batch.clear();
            for (j, &tok) in chunk.iter().enumerate() {
                batch.add(tok, pos, &[0], i + 1 == chunks && j + 1 == chunk.len())?;
                pos += 1;
            }
            timed_decode(&mut ctx, &mut batch)?;
            cached.extend_from_slice(chunk);
        }
        let mut sampler = LlamaSampler::greedy();
        let mut generated = 0u64;
        let mut at = batch.n_tokens() - 1;
        while generated < u64::from(max_tokens) {
            let tok = sampler.sample(&ctx, at);
            if vocab.is_eog(tok) {
                break;
            }
            generated += 1;
            batch.clear();
            batch.add(tok, pos, &[0], true)?;
            pos += 1;
            timed_decode(&mut ctx, &mut batch)?;
            cached.push(tok);
            at = 0;
        }
        Ok((tail.len() as u64, generated, decode_ns))
    };
    // The same requests as messages, through the loopward backend as a tower service; returns
    // (tokens prefilled, tokens generated, ns inside `decode`) as the direct loop does.
    let through_loopward = |n: usize, max_tokens: u32| -> Result<(u64, u64, u64)> {
        let messages = vec![
            Message::system(format!("Session {n}. {SYSTEM}")),
            Message::human(Person::at_the_keyboard().says(user.clone())),
        ];
        let before = service.decode_time();
        let reply = rt.block_on(service.clone().oneshot(request(messages, max_tokens)?))?;
        let decode_ns = u64::try_from((service.decode_time() - before).as_nanos())?;
        Ok((
            reply.usage.input_tokens - reply.usage.cached_tokens,
            reply.usage.output_tokens,
            decode_ns,
        ))
    };
    let mut pair = |side: Side, n: usize| -> Result<Rep> {
        let text = chatml(&format!("Session {n}. {SYSTEM}"), &user);
        let mut complete = |max_tokens: u32| match side {
            Side::Direct => direct(&text, max_tokens),
            Side::Loopward => through_loopward(n, max_tokens),
        };
        // The long request repeats the short one's prompt: both come from the cache.
        let start = Instant::now();
        let (prefilled, short_gen, _) = complete(1)?;
        let short_ns = elapsed_ns(start);
        let start = Instant::now();
        let (long_prefilled, long_gen, long_decode_ns) = complete(1 + DECODE)?;
        let long_ns = elapsed_ns(start);
        Ok(Rep {
            prefilled,
            short_ns,
            short_gen,
            long_ns,
            long_gen,
            long_prefilled,
            long_decode_ns,
        })
    };
    let mut out = vec![];
    for k in 0..=reps {
        let order = if k % 2 == 0 {
            [Side::Direct, Side::Loopward]
        } else {
            [Side::Loopward, Side::Direct]
        };
        let (mut d, mut o) = (None, None);
        for side in order {
            let rep = pair(side, 2 * k)?;
            match side {
                Side::Direct => d = Some(rep),
                Side::Loopward => o = Some(rep),
            }
        }
        // The first pair warms caches and page-ins; it is not counted.
        if let (true, Some(d), Some(o)) = (k > 0, d, o) {
            out.push((d, o));
        }
    }
    Ok(out)
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
    let threads = llama_threads();
    let mut pairs = vec![];
    for _ in 0..rounds {
        pairs.extend(serde_json::from_str::<Vec<(Rep, Rep)>>(&run_child(
            "paired", model, reps, threads,
        )?)?);
    }
    let conv: Vec<ConvTurn> = serde_json::from_str(&run_child("conversation", model, 0, threads)?)?;
    Ok(section(model, (rounds, reps), &pairs, &conv))
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
    let threads = llama_threads();
    let range = |reps: &[Rep], f: fn(&Rep) -> f64| {
        let v: Vec<f64> = reps.iter().map(f).collect();
        let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = v.iter().copied().fold(0.0, f64::max);
        (lo, hi)
    };
    let share = |what: &str, f: fn(&Rep) -> f64| {
        let per_request = |reps: &[Rep]| reps.iter().map(f).collect::<Vec<f64>>();
        let r = paired_ratio(&per_request(ours_all), &per_request(direct_all));
        let pooled = rate(ours_all, f) / rate(direct_all, f);
        let (olo, ohi) = range(ours_all, f);
        let (dlo, dhi) = range(direct_all, f);
        let spread = format!(
            "single requests ranged {olo:.1}–{ohi:.1} tok/s through loopward and {dlo:.1}–{dhi:.1} tok/s direct"
        );
        let verdict = r.verdict(TARGET_SHARE);
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
    // Each child's own decode ratio: a child-wide offset (something both sides did not share
    // for that process's lifetime) would show here as children that disagree.
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
    notes.push(where_the_decode_time_goes(pairs));
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
            "`{}` on {threads} thread(s) (half the cores: with every core busy, llama.cpp's threads spin at their barriers whenever another process holds one), context {N_CTX}, batch {BATCH}, greedy, CPU. Both sides \
             run in one child process, taking turns: each request pair runs on the direct loop and \
             through loopward back to back, the side that goes first alternating, both pinned \
             to the same CPU(s); {rounds} children \
             one after another, {reps} pairs each after a warm-up pair. The target is the \
             geometric mean of the pairs' ratios (a pair's ratio cancels what the machine did to \
             both sides in those seconds), with a 95% bootstrap interval (4,000 resamples of the \
             pairs): it is met only \
             when the whole interval is at or above the target, and not shown when only the \
             estimate is; the table's rates pool the pairs' \
             summed tokens and times. \
             The direct loop is a minimal llama-cpp-2 0.1.160 program (tokenize, prefill in \
             batches, `LlamaSampler::greedy`, decode one token at a time); loopward is \
             `loopward_llama::LlamaModel` called as a tower service. Each pair changes the \
             prompt's first line, so both sides' short requests reuse only the few cached tokens before it (the \
             direct loop keeps its cache the way LLAMA.md's KV-reuse recipe says, as the backend \
             does) and prefill the rest; rates count only what was actually prefilled.",
            model
                .file_name()
                .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
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
