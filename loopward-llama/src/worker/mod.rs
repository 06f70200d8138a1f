//! The inference thread: one OS thread per loaded model owns the model, its context and, for
//! each of its sequence slots ([`LlamaConfig::parallel`]), the token ids in that slot's region of
//! the KV cache. Jobs arrive on a channel; each goes to a free slot (the one whose cache shares
//! the longest prefix with its prompt), and every active job advances in the same `decode` call:
//! the next token of each generating request and the prompt chunks of starting ones share one
//! batch.

use super::config::{LlamaConfig, ToolChoice};
use super::grammar::{answer_bound, parse_reply, tool_grammar, Bounds, Reply, Shape};
use super::prompt::PromptTemplate;
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::LlamaModel as CppModel;
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;
use llama_cpp_2::{send_logs_to_tracing, LogOptions};
use loopward_core::model::{ChatRequest, ChatResponse, ModelError, StopReason};
use loopward_core::{CallId, Message, ToolCall, Usage};
use std::collections::{HashMap, VecDeque};
use std::io::Read;
use std::num::NonZeroU32;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, OnceLock};
use tokio::sync::oneshot;

mod sampling;
mod slots;

use slots::{add, common_prefix, pick_slot};

/// One request for the inference thread; the reply goes back on `reply`. Dropping the receiver
/// cancels the job between tokens or prompt chunks.
pub(crate) struct Job {
    pub(crate) request: ChatRequest,
    pub(crate) reply: oneshot::Sender<Result<ChatResponse, ModelError>>,
}

/// How many tool calls' raw text is remembered for re-rendering (older ones fall back to
/// compact JSON and only cost a cache miss).
const RAW_CALLS_KEPT: usize = 256;

static BACKEND: OnceLock<Result<LlamaBackend, String>> = OnceLock::new();

/// The process-wide llama.cpp backend (`LlamaBackend::init` fails when called twice).
pub(crate) fn backend() -> Result<&'static LlamaBackend, ModelError> {
    BACKEND
        .get_or_init(|| {
            send_logs_to_tracing(LogOptions::default());
            LlamaBackend::init().map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| ModelError::Local(format!("could not initialise llama.cpp: {e}")))
}

/// Checks that `path` is a readable GGUF file before llama.cpp sees it.
pub(crate) fn check_gguf(path: &Path) -> Result<(), ModelError> {
    let shown = path.display();
    let mut file = std::fs::File::open(path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            ModelError::Local(format!("the model file {shown} does not exist"))
        } else {
            ModelError::Local(format!("could not read the model file {shown}: {e}"))
        }
    })?;
    let mut magic = [0u8; 4];
    file.read_exact(&mut magic).map_err(|e| {
        ModelError::Local(format!(
            "{shown} is not a GGUF model: could not read its first 4 bytes ({e})"
        ))
    })?;
    if &magic != b"GGUF" {
        return Err(ModelError::Local(format!(
            "{shown} is not a GGUF model: it starts with {:?}, a GGUF file starts with \"GGUF\"",
            String::from_utf8_lossy(&magic)
        )));
    }
    Ok(())
}

/// Starts the inference thread for `config` and waits until the model is loaded. Returns the
/// job queue and the model's name.
pub(crate) fn spawn(
    config: LlamaConfig,
    counters: Arc<Counters>,
) -> Result<(mpsc::Sender<Job>, String), ModelError> {
    check_gguf(&config.model_path)?;
    let (jobs, queue) = mpsc::channel::<Job>();
    let (ready_tx, ready_rx) = mpsc::sync_channel(1);
    std::thread::Builder::new()
        .name(crate::INFERENCE_THREAD.into())
        .spawn(move || run(config, queue, ready_tx, &counters))
        .map_err(|e| ModelError::Local(format!("could not start the inference thread: {e}")))?;
    let name = ready_rx.recv().map_err(|_| {
        ModelError::Local("the inference thread stopped while loading the model".into())
    })??;
    Ok((jobs, name))
}

fn run(
    config: LlamaConfig,
    queue: mpsc::Receiver<Job>,
    ready: mpsc::SyncSender<Result<String, ModelError>>,
    counters: &Counters,
) {
    let cancelled = &counters.cancelled;
    let loaded = backend().and_then(|backend| {
        let params = LlamaModelParams::default().with_n_gpu_layers(config.n_gpu_layers);
        let model =
            CppModel::load_from_file(backend, &config.model_path, &params).map_err(|e| {
                ModelError::Local(format!(
                    "llama.cpp could not load {}: {e}",
                    config.model_path.display()
                ))
            })?;
        Ok((backend, model))
    });
    let (backend, model) = match loaded {
        Ok(loaded) => loaded,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    let mut engine = match Engine::new(backend, &model, config) {
        Ok(engine) => {
            let _ = ready.send(Ok(engine.name.clone()));
            engine
        }
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    let mut waiting: VecDeque<Job> = VecDeque::new();
    let mut open = true;
    loop {
        // Block only when there is nothing to do; ends when every service handle is dropped
        // and the last job is answered.
        if !engine.busy() && waiting.is_empty() {
            if !open {
                break;
            }
            match queue.recv() {
                Ok(job) => waiting.push_back(job),
                Err(_) => break,
            }
        }
        loop {
            match queue.try_recv() {
                Ok(job) => waiting.push_back(job),
                Err(mpsc::TryRecvError::Empty) => break,
                Err(mpsc::TryRecvError::Disconnected) => {
                    open = false;
                    break;
                }
            }
        }
        while let Some(job) = waiting.pop_front() {
            if job.reply.is_closed() {
                cancelled.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            if let Err(job) = engine.start(job) {
                waiting.push_front(job);
                break;
            }
        }
        engine.step(counters);
    }
}

/// What the inference thread counts, for [`crate::LlamaService`]'s accessors.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    /// Requests dropped by their caller and stopped before they finished.
    pub(crate) cancelled: AtomicU64,
    /// The most sequences decoded together in one batch.
    pub(crate) peak_together: AtomicU64,
    /// Nanoseconds spent inside llama.cpp's `decode`, all sequences together.
    pub(crate) decode_ns: AtomicU64,
}

/// One sequence of the context: its KV region's token ids, and the job it serves.
struct Slot {
    seq: i32,
    /// Token ids in this sequence's KV region, in order.
    cached: Vec<LlamaToken>,
    /// The text those ids came from, when known exactly (empty otherwise).
    cached_text: String,
    job: Option<Active>,
    /// When a job last started here (a count of jobs started; 0: never).
    last_used: u64,
}

/// A request being answered in a slot.
struct Active {
    job: Job,
    text: String,
    tokens: Vec<LlamaToken>,
    reused: usize,
    sampler: LlamaSampler,
    constrained: bool,
    max_tokens: usize,
    answer: Vec<u8>,
    decoded_text: Vec<u8>,
    generated: usize,
    /// The sampled token to decode next (generation phase).
    next: Option<LlamaToken>,
    /// Where this job's logits sit in the batch just decoded.
    logits_at: Option<i32>,
}

/// What a job's last sampling step decided.
enum Next {
    Token(LlamaToken),
    Done { cut_off: bool },
}

/// Model, context and its sequence slots.
struct Engine<'m> {
    model: &'m CppModel,
    ctx: LlamaContext<'m>,
    config: LlamaConfig,
    template: PromptTemplate,
    name: String,
    batch: LlamaBatch<'static>,
    batch_size: usize,
    /// Context per sequence, in tokens.
    n_ctx: usize,
    slots: Vec<Slot>,
    /// Call id → the exact text the model generated for it.
    raw_calls: HashMap<CallId, String>,
    raw_order: VecDeque<CallId>,
    calls_made: u64,
    /// Jobs started so far (orders the slots by when they were last used).
    jobs_started: u64,
}

impl<'m> Engine<'m> {
    fn new(
        backend: &LlamaBackend,
        model: &'m CppModel,
        config: LlamaConfig,
    ) -> Result<Self, ModelError> {
        let parallel = config.parallel.max(1);
        let total = config.n_ctx.max(1).saturating_mul(parallel);
        let batch = config.batch_size.clamp(1, total);
        let mut params = LlamaContextParams::default()
            .with_n_ctx(NonZeroU32::new(total))
            .with_n_batch(batch)
            .with_n_ubatch(batch)
            .with_n_seq_max(parallel)
            .with_kv_unified(false);
        if let Some(t) = config.threads {
            let t = i32::try_from(t).unwrap_or(i32::MAX);
            params = params.with_n_threads(t).with_n_threads_batch(t);
        }
        let ctx = model
            .new_context(backend, params)
            .map_err(|e| ModelError::Local(format!("could not create a llama.cpp context: {e}")))?;
        let vocab = model.vocab();
        let piece = |t| String::from_utf8_lossy(&vocab.token_to_piece(t, true, None)).into_owned();
        let source = model
            .chat_template(None)
            .ok()
            .and_then(|t| t.to_string().ok());
        let template = PromptTemplate::new(source, piece(vocab.bos()), piece(vocab.eos()))?;
        let name = model.meta_val_str("general.name").unwrap_or_else(|_| {
            config
                .model_path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| "gguf".into())
        });
        let n_ctx = (ctx.n_ctx() / parallel) as usize;
        let slots = (0..parallel)
            .map(|i| Slot {
                seq: i32::try_from(i).unwrap_or(i32::MAX),
                cached: Vec::new(),
                cached_text: String::new(),
                job: None,
                last_used: 0,
            })
            .collect();
        Ok(Self {
            model,
            ctx,
            template,
            name,
            batch: LlamaBatch::new(batch as usize, 1),
            batch_size: batch as usize,
            n_ctx,
            config,
            slots,
            raw_calls: HashMap::new(),
            raw_order: VecDeque::new(),
            calls_made: 0,
            jobs_started: 0,
        })
    }

    fn busy(&self) -> bool {
        self.slots.iter().any(|s| s.job.is_some())
    }

    /// Puts `job` in the free slot whose cache shares the longest prefix with its prompt, or
    /// answers it at once when it cannot start (a prompt too long, a bad grammar). Gives the
    /// job back when every slot is busy.
    fn start(&mut self, job: Job) -> Result<(), Job> {
        let free: Vec<usize> = (0..self.slots.len())
            .filter(|&i| self.slots[i].job.is_none())
            .collect();
        if free.is_empty() {
            return Err(job);
        }
        let text =
            match self
                .template
                .render(&job.request.messages, &job.request.tools, &self.raw_calls)
            {
                Ok(text) => text,
                Err(e) => {
                    let _ = job.reply.send(Err(e));
                    return Ok(());
                }
            };
        let plain = self.tokenize_plain(&text);
        let prefixes: Vec<(usize, usize)> = free
            .iter()
            .map(|&i| {
                let s = &self.slots[i];
                let len = if !s.cached_text.is_empty() && text.starts_with(s.cached_text.as_str()) {
                    s.cached.len()
                } else {
                    common_prefix(&s.cached, &plain)
                };
                (i, len)
            })
            .collect();
        let lru: Vec<(usize, u64)> = free.iter().map(|&i| (i, self.slots[i].last_used)).collect();
        let best = pick_slot(&prefixes, &lru, plain.len());
        self.jobs_started += 1;
        self.slots[best].last_used = self.jobs_started;
        let tokens = self.tokenize_for(best, &text).unwrap_or(plain);
        match self.prepare(best, &job.request, &tokens) {
            Ok((sampler, constrained, reused)) => {
                let max_tokens = job.request.max_tokens.unwrap_or(self.config.max_tokens) as usize;
                self.slots[best].job = Some(Active {
                    job,
                    text,
                    tokens,
                    reused,
                    sampler,
                    constrained,
                    max_tokens,
                    answer: Vec::new(),
                    decoded_text: Vec::new(),
                    generated: 0,
                    next: None,
                    logits_at: None,
                });
            }
            Err(e) => {
                let _ = job.reply.send(Err(e));
            }
        }
        Ok(())
    }

    /// Checks the prompt against the context, builds the sampler, and trims slot `i`'s cache to
    /// the prefix it shares with `tokens`. Returns the sampler, whether a grammar constrains
    /// it, and how many tokens are reused.
    fn prepare(
        &mut self,
        i: usize,
        req: &ChatRequest,
        tokens: &[LlamaToken],
    ) -> Result<(LlamaSampler, bool, usize), ModelError> {
        if tokens.is_empty() {
            return Err(ModelError::Local("the rendered prompt is empty".into()));
        }
        if tokens.len() >= self.n_ctx {
            return Err(ModelError::Local(format!(
                "the prompt has {} tokens but the context holds {}: raise n_ctx or shorten \
                 the conversation",
                tokens.len(),
                self.n_ctx
            )));
        }
        let max_tokens = req.max_tokens.unwrap_or(self.config.max_tokens);
        let bounds = Bounds {
            string_chars: self.config.max_string_chars,
            array_items: self.config.max_array_items,
            answer_chars: answer_bound(self.config.answer_chars, max_tokens),
        };
        let shape = match (self.config.tool_choice, req.messages.last()) {
            _ if req.tools.is_empty() => Shape::Text,
            (ToolChoice::CallThenAnswer, Some(Message::Tool(_))) => Shape::Text,
            (ToolChoice::CallThenAnswer, _) => Shape::Call,
            _ => Shape::CallOrText,
        };
        let grammar = if req.tools.is_empty() && bounds.answer_chars.is_none() {
            None
        } else {
            Some(tool_grammar(&req.tools, shape, bounds)?)
        };
        let sampler = self.sampler(grammar.as_deref())?;
        // Reuse the longest common prefix; always decode at least one token for fresh logits.
        let slot = &mut self.slots[i];
        let mut reused = common_prefix(&slot.cached, tokens).min(tokens.len() - 1);
        if self
            .ctx
            .kv_cache_seq_rm(slot.seq, u32::try_from(reused).ok(), None)
            .is_err()
        {
            let _ = self.ctx.kv_cache_seq_rm(slot.seq, None, None);
            reused = 0;
        }
        slot.cached.truncate(reused);
        slot.cached_text.clear();
        Ok((sampler, grammar.is_some(), reused))
    }

    /// One `decode` for every active job: the generating ones' next tokens first, then prompt
    /// chunks up to the batch size; then each job whose logits came back samples its next token.
    fn step(&mut self, counters: &Counters) {
        let cancelled = &counters.cancelled;
        self.batch.clear();
        let mut fed: Vec<(usize, usize)> = Vec::new(); // (slot, tokens added)
        let mut room = self.batch_size;
        for pass in [true, false] {
            for i in 0..self.slots.len() {
                let Some(active) = self.slots[i].job.as_mut() else {
                    continue;
                };
                if active.job.reply.is_closed() {
                    if pass {
                        self.slots[i].job = None;
                        cancelled.fetch_add(1, Ordering::Relaxed);
                    }
                    continue;
                }
                if pass {
                    active.logits_at = None;
                }
                let slot = &self.slots[i];
                let active = slot.job.as_ref().expect("checked above");
                let (toks, with_logits): (Vec<LlamaToken>, bool) = match (pass, active.next) {
                    (true, Some(tok)) => (vec![tok], true),
                    (false, None) => {
                        let start = slot.cached.len();
                        let n = (active.tokens.len() - start).min(room);
                        let end = start + n;
                        (
                            active.tokens[start..end].to_vec(),
                            end == active.tokens.len(),
                        )
                    }
                    _ => continue,
                };
                if toks.is_empty() || toks.len() > room {
                    continue;
                }
                let base = slot.cached.len();
                let seq = slot.seq;
                let mut failed = None;
                for (j, &tok) in toks.iter().enumerate() {
                    let last = with_logits && j + 1 == toks.len();
                    if let Err(e) = add(&mut self.batch, tok, base + j, seq, last) {
                        failed = Some(e);
                        break;
                    }
                }
                if let Some(e) = failed {
                    self.fail(i, e);
                    continue;
                }
                if with_logits {
                    let at = self.batch.n_tokens() - 1;
                    if let Some(a) = self.slots[i].job.as_mut() {
                        a.logits_at = Some(at);
                    }
                }
                room -= toks.len();
                fed.push((i, toks.len()));
            }
        }
        if fed.is_empty() {
            return;
        }
        counters
            .peak_together
            .fetch_max(fed.len() as u64, Ordering::Relaxed);
        // A duration for `decode_time`, not a time of day: the inference thread has no runtime,
        // so tokio's clock reads the monotonic clock here.
        let started = tokio::time::Instant::now();
        let decoded = self.ctx.decode(&mut self.batch);
        let spent = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        counters.decode_ns.fetch_add(spent, Ordering::Relaxed);
        if let Err(e) = decoded {
            // The cache's state is unknown: every job in this batch fails, every slot starts
            // clean.
            self.ctx.clear_kv_cache();
            let why = format!("llama.cpp could not decode: {e}");
            for i in 0..self.slots.len() {
                self.slots[i].cached.clear();
                self.slots[i].cached_text.clear();
                if self.slots[i].job.is_some() {
                    self.fail(i, ModelError::Local(why.clone()));
                }
            }
            return;
        }
        for &(i, n) in &fed {
            let slot = &mut self.slots[i];
            let Some(active) = slot.job.as_mut() else {
                continue;
            };
            match active.next.take() {
                Some(tok) => slot.cached.push(tok),
                None => {
                    let start = slot.cached.len();
                    slot.cached
                        .extend_from_slice(&active.tokens[start..start + n]);
                }
            }
        }
        for i in 0..self.slots.len() {
            let Some(at) = self.slots[i].job.as_ref().and_then(|a| a.logits_at) else {
                continue;
            };
            match self.sample(i, at) {
                Ok(Next::Token(tok)) => {
                    if let Some(a) = self.slots[i].job.as_mut() {
                        a.next = Some(tok);
                    }
                }
                Ok(Next::Done { cut_off }) => self.finish(i, cut_off),
                Err(e) => self.fail(i, e),
            }
        }
    }
}
