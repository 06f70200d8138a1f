//! Measuring part 5's two sides: each thread's CPU time and waits from `/proc`, the paired
//! requests through the loopward backend and a minimal direct llama-cpp-2 loop, and the
//! conversation whose KV reuse is counted.

use super::*;

/// Pins this thread, and the threads it starts later, to one CPU (the one it runs on). Both
/// sides then decode on it at once: the direct loop on this thread, loopward on its inference
/// thread, which inherits the mask.
pub(super) fn pin_to_one_cpu() -> Result<()> {
    use rustix::thread::{sched_getcpu, sched_setaffinity, CpuSet};
    let mut set = CpuSet::new();
    set.set(sched_getcpu());
    sched_setaffinity(None, &set).context("pinning part 5's child to one CPU")
}

/// A thread's CPU time so far (ns) and how often it has blocked (voluntary context switches),
/// from `/proc`: `task` is `thread-self` for the calling thread or `self/task/<tid>`.
pub(super) fn cpu_and_waits(task: &str) -> Result<(u64, u64)> {
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
pub(super) fn thread_named(name: &str) -> Result<String> {
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
pub(super) fn sum_cpu_and_waits(tasks: &[&str]) -> Result<(u64, u64)> {
    tasks.iter().try_fold((0, 0), |(c, w), t| {
        let (c2, w2) = cpu_and_waits(t)?;
        Ok((c + c2, w + w2))
    })
}

/// Both sides in one process at once, pair by pair: each pair of requests runs on the direct
/// loop (this thread) and through loopward (a second thread waiting on its inference thread)
/// together on one CPU, each leg starting at a barrier, each side timed by its threads' CPU time.
/// Returns `(direct, loopward)` per pair.
pub(super) fn paired(model_path: &Path, threads: u32, reps: usize) -> Result<Vec<(Rep, Rep)>> {
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
    let rt = runtime()?;
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
pub(super) struct DirectLoop<'m> {
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

pub(super) fn config(model_path: &Path, threads: u32) -> LlamaConfig {
    LlamaConfig::new(model_path)
        .n_ctx(N_CTX)
        .batch_size(BATCH)
        .threads(threads)
        .greedy()
}

pub(super) fn load(model_path: &Path, threads: u32) -> Result<loopward_llama::LlamaService> {
    Ok(LlamaModel::load(config(model_path, threads))?)
}

pub(super) fn request(messages: Vec<Message>, max_tokens: u32) -> Result<ChatRequest> {
    Ok(ChatRequest {
        agent: AgentId::new("storyteller")?,
        messages,
        tools: vec![],
        max_tokens: Some(max_tokens),
        turn: TurnSlot::empty(),
    })
}

pub(super) fn conversation(model_path: &Path, threads: u32) -> Result<Vec<ConvTurn>> {
    let service = load(model_path, threads)?;
    let rt = runtime()?;
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
