//! Picks the model service a team talks to: the scripted fake backend, or a real one when this
//! build has its feature.

use crate::config::{BackendKind, Config};
use anyhow::{bail, Context, Result};
use loopward_runner::model::fake::{FakeModel, Script};
use loopward_runner::model::BoxModelService;
use std::path::{Path, PathBuf};

/// What the command line chose, over the config.
#[derive(Clone, Debug, Default)]
pub struct Choice {
    /// `--backend`.
    pub kind: Option<BackendKind>,
    /// `--script`.
    pub script: Option<PathBuf>,
    /// `--model`.
    pub model: Option<String>,
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
            Ok(BoxModelService::new(FakeModel::new(load_script(&script)?)))
        }
        other => real(other, cfg, config_dir, choice),
    }
}

fn real(
    kind: BackendKind,
    _cfg: &Config,
    _config_dir: &Path,
    _choice: &Choice,
) -> Result<BoxModelService> {
    let feature = if kind == BackendKind::Llama {
        "llama"
    } else {
        "http"
    };
    bail!(
        "this build has no {} backend; rebuild with `--features {feature}` (e.g. `cargo run -p loopward-demo --features {feature} --bin loopward -- run --backend {}`)",
        kind.as_str(),
        kind.as_str()
    )
}

/// The llama backend over `model` (a GGUF file), configured by `cfg.backend`.
pub fn llama(cfg: &Config, model: &Path) -> Result<BoxModelService> {
    let choice = Choice {
        kind: Some(BackendKind::Llama),
        script: None,
        model: Some(model.display().to_string()),
    };
    real(BackendKind::Llama, cfg, Path::new("."), &choice)
}
