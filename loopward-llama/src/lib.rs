//! Local GGUF models through llama.cpp (`llama-cpp-2`), on CPU or, with the `cuda` feature, GPU.
//!
//! [`LlamaModel::load`] starts one OS thread per model that owns the model, its context and the
//! token ids in its KV cache; [`LlamaService`] (a cheap, cloneable `tower::Service`) sends it
//! jobs over a channel and awaits the answer, so no tokio worker ever blocks on inference.
//!
//! - **Many runs, one model.** The context has [`LlamaConfig::parallel`] sequence slots, each
//!   with its own region of the KV cache. A request goes to the free slot whose cache shares
//!   the longest prefix with its prompt, and every request in a slot advances in the same
//!   `decode` call: the next token of each generating request and the prompt chunks of the
//!   starting ones share one batch, so runs on one model do not queue behind one another token
//!   by token. With more requests than slots, the rest wait their turn in order. With one slot
//!   (the default) requests are answered one at a time.
//!
//! - **Chat template.** The model's own Jinja template, rendered with minijinja, carries tool
//!   definitions, calls and results; without a template the prompt is ChatML. Human messages are
//!   `user`, the system prompt `system`, model replies `assistant`; notices are `user` text
//!   prefixed `[notice]` and never become human messages in loopward.
//! - **Tool calls.** With tools offered, a grammar built from their JSON schemas constrains the
//!   reply to either a compact `{"name": …, "arguments": …}` object for one of the tools, or plain
//!   text ([`ToolChoice::CallThenAnswer`] makes small models call first, then answer). Every call the service returns has parsed and
//!   names an offered tool with its required arguments.
//! - **KV-cache reuse.** Each request decodes only the tokens after the longest common prefix
//!   with what its slot already holds. [`Usage::input_tokens`](loopward_core::Usage) counts the whole
//!   prompt, `cached_tokens` the reused prefix; the tokens actually prefilled are
//!   `input_tokens - cached_tokens`.
//! - **Cancellation.** Dropping the response future stops the job between prompt chunks
//!   ([`LlamaConfig::batch_size`]) and between generated tokens.
//! - **Errors.** A missing or unreadable file, a file that is not GGUF (its magic is checked
//!   before llama.cpp sees it), a prompt longer than the context and a context that fills up
//!   while generating are [`ModelError::Local`] with a message that says what to change.
//! - **Bounded answers.** With [`LlamaConfig::answer_chars`] set, a text answer is one line of
//!   printable ASCII of at most that many characters, and always fewer than the request's
//!   `max_tokens`: a grammar ends it there, so a small model that would ramble on until its
//!   token budget cuts it off (a failed run) ends its answer instead.
//!
//! `llama.cpp` is initialised once per process (on the first load); its logs go to `tracing`.
//!
//! ```
//! use loopward_llama::{LlamaConfig, LlamaModel};
//! use loopward_runner::model::{BoxModelService, ChatRequest, StopReason, TurnSlot};
//! use loopward_core::{AgentId, Message, Person};
//! use tower::ServiceExt;
//! # std::env::set_current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/..")).unwrap();
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! // `cargo xtask fetch-model` puts this file in place.
//! let config = LlamaConfig::new("models/SmolLM2-135M-Instruct.Q4_1.gguf")
//!     .n_ctx(2048)
//!     .answer_chars(200);
//! let model = BoxModelService::new(LlamaModel::load(config).unwrap());
//! let reply = model.oneshot(ChatRequest {
//!     agent: AgentId::new("asker").unwrap(),
//!     messages: vec![Message::human(Person::at_the_keyboard().says("What is the capital of France?"))],
//!     tools: vec![],
//!     max_tokens: Some(48),
//!     turn: TurnSlot::empty(),
//! }).await.unwrap();
//! // Whether a 135M model's answer is right is another matter (SmolLM2-135M does not say
//! // "Paris" here); what the backend guarantees is its shape: one finished line that ends
//! // before the 48-token budget (so at most 47 characters), not an answer cut off mid-way.
//! assert_eq!(reply.stop, StopReason::Finished);
//! assert!(!reply.content.is_empty() && reply.content.len() <= 47, "{:?}", reply.content);
//! assert!(!reply.content.contains('\n'));
//! # });
//! ```
//!
//! ## GPU (CUDA)
//!
//! Build with `--features cuda` and the CUDA toolkit installed: `CUDA_PATH` points at it (with
//! `nvcc` in `$CUDA_PATH/bin`), and `CMAKE_CUDA_ARCHITECTURES=90` targets H100/H200 (every
//! `CMAKE_*`/`GGML_*` variable reaches llama.cpp's CMake). The CUDA runtime is linked statically;
//! at run time only the driver is needed. With `cuda`, every layer is offloaded by default;
//! [`LlamaConfig::n_gpu_layers`] sets how many. `cargo xtask build-cuda` installs the toolkit from PyPI wheels into
//! `target/cuda-toolkit` and builds this feature for sm_90.

mod config;
mod grammar;
mod prompt;
mod worker;

pub use config::{LlamaConfig, ToolChoice};

/// The name of a loaded model's inference thread (the one thread that runs llama.cpp for it):
/// what `top -H`, `perf` and `/proc/<pid>/task/*/comm` show.
pub const INFERENCE_THREAD: &str = "loopward-llama";

use futures::future::BoxFuture;
use loopward_core::model::{ChatRequest, ChatResponse, ModelError};
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc};
use std::task::{Context, Poll};
use tokio::sync::oneshot;
use worker::Job;

/// The process-wide llama.cpp backend this crate initialises on first use. A program that also
/// drives `llama-cpp-2` directly in the same process must use this one: llama.cpp initialises
/// once per process, and a second `LlamaBackend::init` fails.
pub fn llama_backend() -> Result<&'static llama_cpp_2::llama_backend::LlamaBackend, ModelError> {
    worker::backend()
}

/// Loads GGUF models.
#[derive(Debug)]
#[non_exhaustive]
pub struct LlamaModel;

impl LlamaModel {
    /// Loads the model in `config` on its own inference thread and returns the service that
    /// talks to it. Blocks until the model is loaded (from async code, call it inside
    /// `tokio::task::spawn_blocking`). The thread ends when the last clone of the service is
    /// dropped.
    pub fn load(config: LlamaConfig) -> Result<LlamaService, ModelError> {
        let counters = Arc::new(worker::Counters::default());
        let (jobs, name) = worker::spawn(config, counters.clone())?;
        Ok(LlamaService {
            jobs,
            name: name.into(),
            counters,
        })
    }
}

/// The model-call service of one loaded local model. Clones share the model and its cache slots.
#[derive(Clone, Debug)]
pub struct LlamaService {
    jobs: mpsc::Sender<Job>,
    name: Arc<str>,
    counters: Arc<worker::Counters>,
}

impl LlamaService {
    /// The model's name (its GGUF `general.name`, or the file name).
    pub fn model_name(&self) -> &str {
        &self.name
    }

    /// How many requests were dropped by their caller and stopped before they finished.
    pub fn cancelled_jobs(&self) -> u64 {
        self.counters.cancelled.load(Ordering::Relaxed)
    }

    /// The most requests decoded together in one batch so far (at most
    /// [`LlamaConfig::parallel`]).
    pub fn peak_batched_requests(&self) -> u64 {
        self.counters.peak_together.load(Ordering::Relaxed)
    }

    /// How long the inference thread has spent inside llama.cpp's `decode` so far, all requests
    /// together: the model's own compute. Wall time less this is what the backend around it
    /// costs (tokenizing, sampling, queueing, replies).
    pub fn decode_time(&self) -> std::time::Duration {
        std::time::Duration::from_nanos(self.counters.decode_ns.load(Ordering::Relaxed))
    }
}

impl tower::Service<ChatRequest> for LlamaService {
    type Response = ChatResponse;
    type Error = ModelError;
    type Future = BoxFuture<'static, Result<ChatResponse, ModelError>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), ModelError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: ChatRequest) -> Self::Future {
        // Named here, on the caller's model-call span (the inference thread has none). This
        // crate depends only on the vocabulary, so the turn's span is not reached from here.
        tracing::Span::current().record("gen_ai.provider.name", "llama.cpp");
        let (reply, answer) = oneshot::channel();
        let sent = self.jobs.send(Job { request, reply });
        Box::pin(async move {
            sent.map_err(|_| ModelError::Local("the inference thread has stopped".into()))?;
            answer.await.map_err(|_| {
                ModelError::Local("the inference thread stopped before answering".into())
            })?
        })
    }
}
