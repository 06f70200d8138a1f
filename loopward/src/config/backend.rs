//! `[backend]` and `[prices]`.

use loopward_core::Price;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Which model backend a team talks to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BackendKind {
    /// The scripted fake backend: deterministic, offline, no keys.
    #[default]
    Fake,
    /// A local GGUF model through llama-cpp-2 (build with `--features llama`).
    Llama,
    /// An OpenAI-compatible chat-completions server (build with `--features http`).
    Openai,
    /// The Anthropic Messages API (build with `--features http`).
    Anthropic,
}

impl BackendKind {
    /// Every kind, in the order `--help` lists them.
    pub const ALL: [BackendKind; 4] = [Self::Fake, Self::Llama, Self::Openai, Self::Anthropic];

    /// The name as written in config and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Fake => "fake",
            Self::Llama => "llama",
            Self::Openai => "openai",
            Self::Anthropic => "anthropic",
        }
    }
}

/// `[backend]`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BackendConfig {
    /// `fake` (default), `llama`, `openai` or `anthropic`.
    #[serde(default)]
    pub kind: BackendKind,
    /// fake: the script file, relative to the config file.
    #[serde(default)]
    pub script: Option<PathBuf>,
    /// fake: a file, relative to the config file, to which every model call appends one line
    /// (`<agent> <n>`): a count of model calls that survives the process (tests that kill a
    /// run and resume it check that no recorded reply is asked for again).
    #[serde(default)]
    pub call_log: Option<PathBuf>,
    /// llama: the GGUF file; http: the model name.
    #[serde(default)]
    pub model: Option<String>,
    /// http: the server's base URL (default: the provider's).
    #[serde(default)]
    pub base_url: Option<String>,
    /// http: the environment variable holding the API key (default `OPENAI_API_KEY` or
    /// `ANTHROPIC_API_KEY`).
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// http: a file holding only the API key, relative to the config file (instead of
    /// `api_key_env`; keep it out of the workspace and readable by you alone).
    #[serde(default)]
    pub api_key_file: Option<PathBuf>,
    /// llama: context size in tokens.
    #[serde(default)]
    pub context: Option<u32>,
    /// llama: layers to offload to the GPU.
    #[serde(default)]
    pub gpu_layers: Option<u32>,
    /// The most tokens one model call may generate.
    #[serde(default)]
    pub max_tokens: Option<u32>,
    /// `auto` (the model chooses between a tool call and text); llama: `call_then_answer` (one
    /// tool call, then the answer: for small models); openai: `required` (every reply is a tool
    /// call) or `none` (text only).
    #[serde(default)]
    pub tool_choice: ToolChoice,
    /// llama: bounded text answers — one line of at most this many printable-ASCII characters
    /// (and fewer than `max_tokens`), so an answer ends before its token budget instead of
    /// being cut off (for small models). Unset: text is free.
    #[serde(default)]
    pub answer_chars: Option<u32>,
    /// llama, openai: the longest a tool-call argument string may be, in characters, when its
    /// schema sets no `maxLength` (llama: default 256, enforced by its grammar; openai: unset by
    /// default, sent as `maxLength` for servers that constrain output, like llama.cpp's).
    #[serde(default)]
    pub argument_chars: Option<u32>,
    /// llama: sequence slots — how many requests the model answers at once, each slot with its
    /// own `context` tokens of KV cache. Agents that take turns on one model each keep their
    /// conversation's prefix cached in a slot of their own when there are as many slots as
    /// agents (default 1).
    #[serde(default)]
    pub parallel: Option<u32>,
}

/// How a model is steered between tool calls and text.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolChoice {
    /// The model chooses (every backend).
    #[default]
    Auto,
    /// llama: one tool call in reply to a message, then the answer in reply to its result.
    CallThenAnswer,
    /// openai: every reply is a tool call (`tool_choice: "required"`).
    Required,
    /// openai: no tool calls (`tool_choice: "none"`).
    None,
}

impl ToolChoice {
    /// The name as written in config.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::CallThenAnswer => "call_then_answer",
            Self::Required => "required",
            Self::None => "none",
        }
    }

    /// Whether `kind` can steer its model this way.
    ///
    /// ```
    /// use loopward::config::{BackendKind, ToolChoice};
    /// assert!(ToolChoice::Required.fits(BackendKind::Openai));
    /// assert!(!ToolChoice::Required.fits(BackendKind::Llama));
    /// assert!(ToolChoice::CallThenAnswer.fits(BackendKind::Llama));
    /// assert!(ToolChoice::Auto.fits(BackendKind::Anthropic));
    /// ```
    pub fn fits(self, kind: BackendKind) -> bool {
        match self {
            Self::Auto => true,
            Self::CallThenAnswer => kind == BackendKind::Llama,
            Self::Required | Self::None => kind == BackendKind::Openai,
        }
    }
}

/// `[prices.<model>]`: micro-dollars per million tokens, so costs add up exactly.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PriceConfig {
    /// Micro-dollars per million input tokens (3 dollars = 3000000).
    pub input_per_mtok_micros: u64,
    /// Micro-dollars per million output tokens.
    pub output_per_mtok_micros: u64,
}

impl From<PriceConfig> for Price {
    fn from(p: PriceConfig) -> Self {
        Price {
            input_per_mtok_micros: p.input_per_mtok_micros,
            output_per_mtok_micros: p.output_per_mtok_micros,
        }
    }
}

impl std::fmt::Display for BackendKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for BackendKind {
    type Err = String;

    /// ```
    /// use loopward::config::BackendKind;
    /// assert_eq!("llama".parse::<BackendKind>(), Ok(BackendKind::Llama));
    /// assert!("carrier-pigeon".parse::<BackendKind>().unwrap_err().contains("fake, llama"));
    /// ```
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = Self::ALL.iter().map(|k| k.as_str()).collect();
                format!("unknown backend {s:?}: use one of {}", names.join(", "))
            })
    }
}
