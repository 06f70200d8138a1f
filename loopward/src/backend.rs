//! Picks the model service a team talks to: the scripted fake backend, or a real one when this
//! build has its feature.

use crate::config::{BackendKind, Config};
use anyhow::{bail, Context, Result};
use loopward_runner::model::fake::{FakeModel, Script};
use loopward_runner::model::BoxModelService;
use std::path::{Path, PathBuf};

/// How a backend finds environment variables (API keys): the library reads no environment
/// itself; the binary passes `|name| std::env::var(name).ok()`.
pub type EnvLookup = fn(&str) -> Option<String>;

/// What the command line chose, over the config.
#[derive(Clone, Debug, Default)]
pub struct Choice {
    /// Where API keys named by `backend.api_key_env` are looked up (none: nowhere, so an http
    /// backend that needs a key says it is missing).
    pub env: Option<EnvLookup>,
    /// `--backend`.
    pub kind: Option<BackendKind>,
    /// `--script`.
    pub script: Option<PathBuf>,
    /// `--model`.
    pub model: Option<String>,
}

/// The model's name as prices are keyed: `fake`, the GGUF file's stem, or the http model name.
pub fn model_name(cfg: &Config, choice: &Choice) -> String {
    let kind = choice.kind.unwrap_or(cfg.backend.kind);
    let model = choice.model.clone().or_else(|| cfg.backend.model.clone());
    match (kind, model) {
        (BackendKind::Fake, _) | (_, None) => "fake".into(),
        (BackendKind::Llama, Some(m)) => Path::new(&m)
            .file_stem()
            .map_or(m.clone(), |s| s.to_string_lossy().into_owned()),
        (_, Some(m)) => m,
    }
}

/// Loads a fake script, TOML or JSON by extension.
pub fn load_script(path: &Path) -> Result<Script> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the fake script {}", path.display()))?;
    let script = if path.extension().is_some_and(|e| e == "json") {
        Script::from_json(&text)
    } else {
        Script::from_toml(&text)
    };
    script.with_context(|| format!("{}: not a valid fake script", path.display()))
}

/// The files on the host the backend `choice` reads or writes for a run — the fake script and
/// its call log, an API key file, a local model — resolved against the folder of the config
/// file. Those inside the workspace are control files: an agent that rewrote the script would
/// choose its own next replies.
pub fn host_files(cfg: &Config, config_dir: &Path, choice: &Choice) -> Vec<PathBuf> {
    let kind = choice.kind.unwrap_or(cfg.backend.kind);
    let mut files = Vec::new();
    match kind {
        BackendKind::Fake => {
            files.extend(choice.script.clone());
            if choice.script.is_none() {
                files.extend(cfg.backend.script.as_ref().map(|p| config_dir.join(p)));
            }
            files.extend(cfg.backend.call_log.as_ref().map(|p| config_dir.join(p)));
        }
        BackendKind::Llama => match &choice.model {
            Some(m) => files.push(PathBuf::from(m)),
            None => files.extend(cfg.backend.model.as_ref().map(|m| config_dir.join(m))),
        },
        _ => {}
    }
    files.extend(
        cfg.backend
            .api_key_file
            .as_ref()
            .map(|p| config_dir.join(p)),
    );
    files
}

/// The model service for `cfg`, resolved against the folder of the config file.
pub fn model(cfg: &Config, config_dir: &Path, choice: &Choice) -> Result<BoxModelService> {
    let kind = choice.kind.unwrap_or(cfg.backend.kind);
    match kind {
        BackendKind::Fake => {
            let script = match (&choice.script, &cfg.backend.script) {
                (Some(p), _) => p.clone(),
                (None, Some(p)) => config_dir.join(p),
                (None, None) => bail!(
                    "the fake backend needs a script: pass --script <file> or set backend.script in the config (`loopward init` writes one)"
                ),
            };
            let mut fake = FakeModel::new(load_script(&script)?);
            if let Some(log) = &cfg.backend.call_log {
                fake = fake.with_call_log(config_dir.join(log));
            }
            Ok(BoxModelService::new(fake))
        }
        other => real(other, cfg, config_dir, choice),
    }
}

#[cfg_attr(not(any(feature = "llama", feature = "http")), allow(unused_variables))]
fn real(
    kind: BackendKind,
    cfg: &Config,
    config_dir: &Path,
    choice: &Choice,
) -> Result<BoxModelService> {
    let model = choice.model.clone().or_else(|| cfg.backend.model.clone());
    let tool_choice = cfg.backend.tool_choice;
    if !tool_choice.fits(kind) {
        let fits: Vec<&str> = [
            crate::config::ToolChoice::Auto,
            crate::config::ToolChoice::CallThenAnswer,
            crate::config::ToolChoice::Required,
            crate::config::ToolChoice::None,
        ]
        .into_iter()
        .filter(|c| c.fits(kind))
        .map(|c| c.as_str())
        .collect();
        bail!(
            "backend.tool_choice = {:?} does not work with the {kind} backend; use {}",
            tool_choice.as_str(),
            fits.join(" or ")
        );
    }
    match kind {
        #[cfg(feature = "llama")]
        BackendKind::Llama => {
            use loopward_llama::{LlamaConfig, LlamaModel};
            let path = model.context(
                "the llama backend needs a model: pass --model <file.gguf> or set backend.model (`cargo xtask fetch-model` downloads a small one into models/)",
            )?;
            let path = if choice.model.is_some() {
                PathBuf::from(path)
            } else {
                config_dir.join(path)
            };
            let mut c = LlamaConfig::new(path).greedy();
            if let Some(n) = cfg.backend.context {
                c = c.n_ctx(n);
            }
            if let Some(n) = cfg.backend.gpu_layers {
                c = c.n_gpu_layers(n);
            }
            if let Some(n) = cfg.backend.max_tokens {
                c = c.max_tokens(n);
            }
            if let Some(n) = cfg.backend.answer_chars {
                c = c.answer_chars(n);
            }
            if let Some(n) = cfg.backend.argument_chars {
                let items = c.max_array_items;
                c = c.argument_bounds(n, items);
            }
            if let Some(n) = cfg.backend.parallel {
                c = c.parallel(n);
            }
            if cfg.backend.tool_choice == crate::config::ToolChoice::CallThenAnswer {
                c = c.tool_choice(loopward_llama::ToolChoice::CallThenAnswer);
            }
            // Blocks while the model loads; callers do this once, before any run starts.
            let service = LlamaModel::load(c).map_err(|e| anyhow::anyhow!("{e}"))?;
            Ok(BoxModelService::new(service))
        }
        #[cfg(feature = "http")]
        BackendKind::Openai | BackendKind::Anthropic => {
            use loopward_runner::model::http::{
                AnthropicConfig, AnthropicModel, OpenAiConfig, OpenAiModel,
            };
            let mut t = toml::Table::new();
            let model = model.context(
                "an http backend needs a model name: pass --model <name> or set backend.model",
            )?;
            t.insert("model".into(), model.into());
            if let Some(u) = &cfg.backend.base_url {
                t.insert("base_url".into(), u.clone().into());
            }
            let default_key = if kind == BackendKind::Openai {
                "OPENAI_API_KEY"
            } else {
                "ANTHROPIC_API_KEY"
            };
            match (&cfg.backend.api_key_file, &cfg.backend.api_key_env) {
                (Some(file), None) => {
                    let file = config_dir.join(file).to_string_lossy().into_owned();
                    t.insert("key_file".into(), file.into());
                }
                (Some(_), Some(_)) => bail!(
                    "backend: api_key_env and api_key_file are both set; keep one (the variable that holds the key, or the file that does)"
                ),
                (None, env) => {
                    let key_env = env.clone().unwrap_or_else(|| default_key.into());
                    t.insert("key_env".into(), key_env.into());
                }
            }
            if let Some(n) = cfg.backend.max_tokens {
                t.insert("max_tokens".into(), i64::from(n).into());
            }
            let lookup = choice.env;
            let env = move |name: &str| lookup.and_then(|f| f(name));
            if kind == BackendKind::Openai {
                t.insert("tool_choice".into(), tool_choice.as_str().into());
                if let Some(n) = cfg.backend.argument_chars {
                    t.insert("argument_chars".into(), i64::from(n).into());
                }
                let c: OpenAiConfig = t.try_into().context("backend: invalid openai settings")?;
                Ok(BoxModelService::new(OpenAiModel::from_config(c, env)?))
            } else {
                if !t.contains_key("max_tokens") {
                    t.insert("max_tokens".into(), 4096.into());
                }
                let c: AnthropicConfig = t
                    .try_into()
                    .context("backend: invalid anthropic settings")?;
                Ok(BoxModelService::new(AnthropicModel::from_config(c, env)?))
            }
        }
        _ => {
            let example = if kind == BackendKind::Llama {
                "cargo install --path loopward-cli --features llama && cargo xtask fetch-model && loopward run --backend llama --model models/SmolLM2-135M-Instruct.Q4_1.gguf"
            } else {
                "cargo install --path loopward-cli --features http && loopward run --backend openai --model <name>"
            };
            let feature = if kind == BackendKind::Llama {
                "llama"
            } else {
                "http"
            };
            bail!(
                "this build has no {} backend; install the CLI with `--features {feature}`: `{example}`",
                kind.as_str()
            )
        }
    }
}

/// The llama backend over `model` (a GGUF file), configured by `cfg.backend`.
pub fn llama(cfg: &Config, model: &Path) -> Result<BoxModelService> {
    let choice = Choice {
        kind: Some(BackendKind::Llama),
        script: None,
        model: Some(model.display().to_string()),
        env: None,
    };
    real(BackendKind::Llama, cfg, Path::new("."), &choice)
}
