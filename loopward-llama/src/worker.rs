//! The inference thread: one OS thread per loaded model owns the model, its context and the
//! token ids in the KV cache, and answers jobs from a channel in order.

use super::config::{LlamaConfig, ToolChoice};
use super::grammar::{parse_reply, tool_grammar, Bounds, Reply, Shape};
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
use loopward_core::{Message, ToolCall, Usage};
use std::collections::{HashMap, VecDeque};
use std::io::Read;
use std::num::NonZeroU32;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, OnceLock};
use tokio::sync::oneshot;

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
fn backend() -> Result<&'static LlamaBackend, ModelError> {
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
    cancelled: Arc<AtomicU64>,
) -> Result<(mpsc::Sender<Job>, String), ModelError> {
    check_gguf(&config.model_path)?;
    let (jobs, queue) = mpsc::channel::<Job>();
    let (ready_tx, ready_rx) = mpsc::sync_channel(1);
    std::thread::Builder::new()
        .name("loopward-llama".into())
        .spawn(move || run(config, queue, ready_tx, &cancelled))
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
    cancelled: &AtomicU64,
) {
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
    let engine = Engine::new(backend, &model, config);
    let mut engine = match engine {
        Ok(engine) => {
            let _ = ready.send(Ok(engine.name.clone()));
            engine
        }
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    // Ends when every service handle is dropped.
    while let Ok(job) = queue.recv() {
        let answer = if job.reply.is_closed() {
            None
        } else {
            engine.complete(&job.request, &job.reply).transpose()
        };
        match answer {
            Some(result) => {
                let _ = job.reply.send(result);
            }
            None => {
                cancelled.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// Model, context and what sits in sequence 0 of the KV cache.
struct Engine<'m> {
    model: &'m CppModel,
    ctx: LlamaContext<'m>,
    config: LlamaConfig,
    template: PromptTemplate,
    name: String,
    batch_size: usize,
    /// Token ids in the KV cache, in order.
    cached: Vec<LlamaToken>,
    /// The text those ids came from, when known exactly (empty otherwise).
    cached_text: String,
    /// Call id → the exact text the model generated for it.
    raw_calls: HashMap<String, String>,
    raw_order: VecDeque<String>,
    calls_made: u64,
}

impl<'m> Engine<'m> {
    fn new(
        backend: &LlamaBackend,
        model: &'m CppModel,
        config: LlamaConfig,
    ) -> Result<Self, ModelError> {
        let batch = config.batch_size.clamp(1, config.n_ctx.max(1));
        let mut params = LlamaContextParams::default()
            .with_n_ctx(NonZeroU32::new(config.n_ctx))
            .with_n_batch(batch)
            .with_n_ubatch(batch);
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
        Ok(Self {
            model,
            ctx,
            template,
            name,
            batch_size: batch as usize,
            config,
            cached: Vec::new(),
            cached_text: String::new(),
            raw_calls: HashMap::new(),
            raw_order: VecDeque::new(),
            calls_made: 0,
        })
    }

    /// Answers one request; `Ok(None)` when the caller went away.
    fn complete(
        &mut self,
        req: &ChatRequest,
        reply: &oneshot::Sender<Result<ChatResponse, ModelError>>,
    ) -> Result<Option<ChatResponse>, ModelError> {
        let text = self
            .template
            .render(&req.messages, &req.tools, &self.raw_calls)?;
        let tokens = self.tokenize_prompt(&text);
        let n_ctx = self.ctx.n_ctx() as usize;
        if tokens.is_empty() {
            return Err(ModelError::Local("the rendered prompt is empty".into()));
        }
        if tokens.len() >= n_ctx {
            return Err(ModelError::Local(format!(
                "the prompt has {} tokens but the context holds {n_ctx}: raise n_ctx or shorten \
                 the conversation",
                tokens.len()
            )));
        }
        let grammar = if req.tools.is_empty() {
            None
        } else {
            let shape = match (self.config.tool_choice, req.messages.last()) {
                (ToolChoice::CallThenAnswer, Some(Message::Tool(_))) => Shape::Text,
                (ToolChoice::CallThenAnswer, _) => Shape::Call,
                _ => Shape::CallOrText,
            };
            let bounds = Bounds {
                string_chars: self.config.max_string_chars,
                array_items: self.config.max_array_items,
            };
            Some(tool_grammar(&req.tools, shape, bounds)?)
        };
        let mut sampler = self.sampler(grammar.as_deref())?;

        // Reuse the longest common prefix; always decode at least one token for fresh logits.
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
        self.cached_text.clear();

        let mut batch = LlamaBatch::new(self.batch_size, 1);
        let tail = &tokens[reused..];
        let chunks = tail.chunks(self.batch_size).count();
        for (i, chunk) in tail.chunks(self.batch_size).enumerate() {
            if reply.is_closed() {
                return Ok(None);
            }
            batch.clear();
            for (j, &tok) in chunk.iter().enumerate() {
                let last = i + 1 == chunks && j + 1 == chunk.len();
                self.add(&mut batch, tok, self.cached.len() + j, last)?;
            }
            self.decode(&mut batch)?;
            self.cached.extend_from_slice(chunk);
        }

        let vocab = self.model.vocab();
        let max_tokens = req.max_tokens.unwrap_or(self.config.max_tokens) as usize;
        let mut answer: Vec<u8> = Vec::new();
        let mut decoded_text: Vec<u8> = Vec::new();
        let mut generated = 0usize;
        let mut logits_at = batch.n_tokens() - 1;
        let mut cut_off = false;
        loop {
            if reply.is_closed() {
                return Ok(None);
            }
            if generated >= max_tokens {
                cut_off = true;
                break;
            }
            let mut candidates = self.ctx.token_data_array_ith(logits_at);
            candidates.apply_sampler(&mut sampler);
            let Some(tok) = candidates.selected_token() else {
                return Err(ModelError::Local("the sampler selected no token".into()));
            };
            // Stop before accepting: a grammar that has completed must not see another token.
            if vocab.is_eog(tok) || sampler.try_accept(tok).is_err() {
                break;
            }
            generated += 1;
            answer.extend(vocab.token_to_piece(tok, false, None));
            if let Some(at) = stop_at(&answer, &self.config.stop) {
                answer.truncate(at);
                break;
            }
            if self.cached.len() + 1 >= n_ctx {
                return Err(ModelError::Local(format!(
                    "the context of {n_ctx} tokens filled up after {generated} generated tokens \
                     (prompt {} tokens): raise n_ctx or lower max_tokens",
                    tokens.len()
                )));
            }
            batch.clear();
            self.add(&mut batch, tok, self.cached.len(), true)?;
            self.decode(&mut batch)?;
            self.cached.push(tok);
            decoded_text.extend(vocab.token_to_piece(tok, true, None));
            logits_at = 0;
        }
        if self.cached.len() == tokens.len() + generated {
            if let Ok(gen) = String::from_utf8(decoded_text) {
                self.cached_text = format!("{text}{gen}");
            }
        }

        let answer = String::from_utf8_lossy(&answer).into_owned();
        let usage = Usage {
            input_tokens: tokens.len() as u64,
            output_tokens: generated as u64,
            cached_tokens: reused as u64,
            calls: 1,
        };
        let reply = match parse_reply(&answer, &req.tools) {
            Ok(Reply::Text(content)) => ChatResponse {
                content,
                tool_calls: vec![],
                usage,
                model: self.name.clone(),
                // Text that ran into max_tokens is unfinished: the runner does not take it as
                // an answer.
                stop: if cut_off {
                    StopReason::TokenLimit
                } else {
                    StopReason::Finished
                },
            },
            Ok(Reply::Call { name, arguments }) => {
                self.calls_made += 1;
                let id = format!("call_{}", self.calls_made);
                self.remember_raw(&id, answer.trim().to_owned());
                ChatResponse {
                    content: String::new(),
                    tool_calls: vec![ToolCall::new(id, name, arguments)],
                    usage,
                    model: self.name.clone(),
                    stop: StopReason::Finished,
                }
            }
            // Never a half call: the request fails as a whole and the model stays usable (the
            // next request re-prefills from where its prompt differs).
            Err(_) if cut_off => {
                return Err(ModelError::InvalidResponse(format!(
                    "the model's tool call was cut off at max_tokens ({max_tokens}) before it \
                     was complete, so nothing was called: raise max_tokens, or lower the \
                     argument bounds (LlamaConfig::argument_bounds) or the tool's maxLength"
                )))
            }
            Err(e) => return Err(e),
        };
        Ok(Some(reply))
    }

    /// Tokenises the prompt, keeping the cached ids verbatim when the prompt extends the text
    /// they came from (re-tokenising an earlier answer may not give the sampled ids back).
    fn tokenize_prompt(&self, text: &str) -> Vec<LlamaToken> {
        let vocab = self.model.vocab();
        if !self.cached_text.is_empty() {
            if let Some(rest) = text.strip_prefix(self.cached_text.as_str()) {
                let mut tokens = self.cached.clone();
                tokens.extend(vocab.tokenize(rest.as_bytes(), false, true));
                return tokens;
            }
        }
        let bos =
            String::from_utf8_lossy(&vocab.token_to_piece(vocab.bos(), true, None)).into_owned();
        let add_bos = vocab.should_add_bos() && (bos.is_empty() || !text.starts_with(&bos));
        vocab.tokenize(text.as_bytes(), add_bos, true)
    }

    fn sampler(&self, grammar: Option<&str>) -> Result<LlamaSampler, ModelError> {
        let mut chain = Vec::new();
        if let Some(gbnf) = grammar {
            chain.push(
                LlamaSampler::grammar(self.model, gbnf, "root").map_err(|e| {
                    ModelError::Local(format!("llama.cpp rejected the tool-call grammar: {e}"))
                })?,
            );
        }
        let c = &self.config;
        if c.temperature <= 0.0 {
            chain.push(LlamaSampler::greedy());
        } else {
            if c.top_k > 0 {
                chain.push(LlamaSampler::top_k(
                    i32::try_from(c.top_k).unwrap_or(i32::MAX),
                ));
            }
            if c.top_p < 1.0 {
                chain.push(LlamaSampler::top_p(c.top_p, 1));
            }
            chain.push(LlamaSampler::temp(c.temperature));
            chain.push(LlamaSampler::dist(c.seed));
        }
        Ok(LlamaSampler::chain_simple(chain))
    }

    fn add(
        &self,
        batch: &mut LlamaBatch<'_>,
        tok: LlamaToken,
        pos: usize,
        logits: bool,
    ) -> Result<(), ModelError> {
        let pos = i32::try_from(pos)
            .map_err(|_| ModelError::Local(format!("token position {pos} is out of range")))?;
        batch
            .add(tok, pos, &[0], logits)
            .map_err(|e| ModelError::Local(format!("could not fill a batch: {e}")))
    }

    /// Decodes `batch`; on failure the cache is cleared so the next call starts clean.
    fn decode(&mut self, batch: &mut LlamaBatch<'_>) -> Result<(), ModelError> {
        self.ctx.decode(batch).map_err(|e| {
            self.ctx.clear_kv_cache();
            self.cached.clear();
            self.cached_text.clear();
            ModelError::Local(format!("llama.cpp could not decode: {e}"))
        })
    }

    fn remember_raw(&mut self, id: &str, raw: String) {
        self.raw_calls.insert(id.to_owned(), raw);
        self.raw_order.push_back(id.to_owned());
        while self.raw_order.len() > RAW_CALLS_KEPT {
            if let Some(old) = self.raw_order.pop_front() {
                self.raw_calls.remove(&old);
            }
        }
    }
}

/// Where the first stop string starts in `answer`, if any.
fn stop_at(answer: &[u8], stops: &[String]) -> Option<usize> {
    stops
        .iter()
        .filter(|s| !s.is_empty())
        .filter_map(|s| answer.windows(s.len()).position(|w| w == s.as_bytes()))
        .min()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_strings_cut_at_the_earliest_match() {
        let stops = vec!["END".to_owned(), "\n\n".to_owned()];
        assert_eq!(stop_at(b"one\n\ntwo END", &stops), Some(3));
        assert_eq!(stop_at(b"no stop here", &stops), None);
    }
}
