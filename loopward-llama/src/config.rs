//! How a local model is loaded and sampled.

use std::path::PathBuf;

/// Everything needed to load a GGUF model and sample from it.
///
/// ```
/// use loopward_llama::LlamaConfig;
/// let config = LlamaConfig::new("models/SmolLM2-135M-Instruct.Q4_1.gguf").n_ctx(4096).greedy();
/// assert_eq!(config.n_ctx, 4096);
/// assert_eq!(config.temperature, 0.0);
/// ```
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct LlamaConfig {
    /// The GGUF file.
    pub model_path: PathBuf,
    /// Context size in tokens (prompt and answer together) of each sequence slot; llama.cpp
    /// rounds the whole context up to a multiple of 256.
    pub n_ctx: u32,
    /// CPU threads for generation and prompt processing (`None`: what llama.cpp picks).
    pub threads: Option<u32>,
    /// Layers offloaded to the GPU (`u32::MAX` = all). Defaults to all with the `cuda` feature and
    /// to none without it.
    pub n_gpu_layers: u32,
    /// Most prompt tokens decoded in one call; cancellation is checked between these chunks.
    pub batch_size: u32,
    /// Seed of the sampler (ignored under greedy decoding).
    pub seed: u32,
    /// Sampling temperature; `0.0` (or below) is greedy decoding and fully deterministic.
    pub temperature: f32,
    /// Nucleus sampling threshold (`1.0` turns it off).
    pub top_p: f32,
    /// Keep only the `top_k` most likely tokens (`0` turns it off).
    pub top_k: u32,
    /// Default cap on generated tokens when a request does not set one.
    pub max_tokens: u32,
    /// Generation stops before any of these strings; they are not part of the answer.
    pub stop: Vec<String>,
    /// Whether a tool call is required when tools are offered.
    pub tool_choice: ToolChoice,
    /// The longest a tool-call argument string may be, in characters, when its schema sets no
    /// `maxLength` (the grammar enforces it, so a call ends within a known length).
    pub max_string_chars: u32,
    /// The most items a tool-call argument array may have when its schema sets no `maxItems`.
    pub max_array_items: u32,
    /// Bounded text answers: when set, a text answer is one line of printable ASCII of at most
    /// this many characters (and fewer than the request's `max_tokens`), enforced by a grammar
    /// that then ends it. Such an answer cannot be cut off by `max_tokens`: every token holds at
    /// least one character. `None` (the default): text is free and can run into `max_tokens`.
    pub answer_chars: Option<u32>,
    /// Sequence slots: how many requests the model answers at once, decoded together in one
    /// batch, each in its own region of the KV cache (`n_ctx` tokens each, so the cache takes
    /// `parallel` times the memory). `1` answers one request at a time.
    pub parallel: u32,
}

/// Whether the model may answer in text when tools are offered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum ToolChoice {
    /// The grammar allows a tool call or plain text; the model chooses.
    #[default]
    Auto,
    /// One tool call, then the answer: the reply to a human message or a notice must be a tool
    /// call, and the reply to a tool result must be text. For small models, which otherwise
    /// answer without looking anything up, or call the same tool again and again.
    CallThenAnswer,
}

impl LlamaConfig {
    /// Defaults for `model_path`: 4096-token context, every layer on the GPU with the `cuda`
    /// feature (CPU only without it), greedy decoding, 512 new tokens, argument strings of at
    /// most 256 characters and arrays of at most 16 items.
    pub fn new(model_path: impl Into<PathBuf>) -> Self {
        Self {
            model_path: model_path.into(),
            n_ctx: 4096,
            threads: None,
            n_gpu_layers: if cfg!(feature = "cuda") { u32::MAX } else { 0 },
            batch_size: 512,
            seed: 0,
            temperature: 0.0,
            top_p: 1.0,
            top_k: 0,
            max_tokens: 512,
            stop: Vec::new(),
            tool_choice: ToolChoice::Auto,
            max_string_chars: 256,
            max_array_items: 16,
            answer_chars: None,
            parallel: 1,
        }
    }

    /// Sets the context size.
    pub fn n_ctx(mut self, n_ctx: u32) -> Self {
        self.n_ctx = n_ctx;
        self
    }

    /// Sets the CPU thread count.
    pub fn threads(mut self, threads: u32) -> Self {
        self.threads = Some(threads);
        self
    }

    /// Sets how many layers go to the GPU.
    pub fn n_gpu_layers(mut self, layers: u32) -> Self {
        self.n_gpu_layers = layers;
        self
    }

    /// Sets the prompt batch size.
    pub fn batch_size(mut self, batch: u32) -> Self {
        self.batch_size = batch;
        self
    }

    /// Greedy decoding: temperature 0, deterministic.
    pub fn greedy(mut self) -> Self {
        self.temperature = 0.0;
        self
    }

    /// Random sampling with `temperature`, `top_p`, `top_k` and `seed`.
    pub fn sampling(mut self, temperature: f32, top_p: f32, top_k: u32, seed: u32) -> Self {
        self.temperature = temperature;
        self.top_p = top_p;
        self.top_k = top_k;
        self.seed = seed;
        self
    }

    /// Sets the default cap on generated tokens.
    pub fn max_tokens(mut self, max_tokens: u32) -> Self {
        self.max_tokens = max_tokens;
        self
    }

    /// Adds a stop string.
    pub fn stop(mut self, stop: impl Into<String>) -> Self {
        self.stop.push(stop.into());
        self
    }

    /// Sets the default bound on tool-call argument strings (characters) and arrays (items),
    /// for schemas that declare none.
    ///
    /// ```
    /// use loopward_llama::LlamaConfig;
    /// let config = LlamaConfig::new("m.gguf").argument_bounds(80, 4);
    /// assert_eq!((config.max_string_chars, config.max_array_items), (80, 4));
    /// ```
    pub fn argument_bounds(mut self, string_chars: u32, array_items: u32) -> Self {
        self.max_string_chars = string_chars;
        self.max_array_items = array_items;
        self
    }

    /// Bounds text answers to one line of at most `chars` printable-ASCII characters (and
    /// always fewer than the request's `max_tokens`), so that a model — a small one especially —
    /// ends its answer before its token budget instead of being cut off. The grammar ends the
    /// answer at the bound; a model that stops earlier ends earlier.
    ///
    /// ```
    /// use loopward_llama::LlamaConfig;
    /// let config = LlamaConfig::new("m.gguf").max_tokens(256).answer_chars(200);
    /// assert_eq!(config.answer_chars, Some(200));
    /// ```
    pub fn answer_chars(mut self, chars: u32) -> Self {
        self.answer_chars = Some(chars);
        self
    }

    /// Sets how many requests are answered at once (sequence slots, each with `n_ctx` tokens
    /// of KV cache).
    ///
    /// ```
    /// use loopward_llama::LlamaConfig;
    /// let config = LlamaConfig::new("m.gguf").n_ctx(2048).parallel(4);
    /// assert_eq!(config.parallel, 4);
    /// ```
    pub fn parallel(mut self, slots: u32) -> Self {
        self.parallel = slots.max(1);
        self
    }

    /// Sets whether tool calls are required.
    pub fn tool_choice(mut self, choice: ToolChoice) -> Self {
        self.tool_choice = choice;
        self
    }
}
