//! What a config says about the agents' reach: the secrets masked in every record
//! ([`masker`]) and what sandboxed commands read and inherit ([`reach`]).
//!
//! ```
//! use loopward::config::Config;
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("loopward.toml");
//! std::fs::write(dir.path().join("token.txt"), "tok-0123456789\n").unwrap();
//! let cfg = Config::parse(&path, r#"
//!     [run]
//!     first = "solo"
//!     [[agent]]
//!     name = "solo"
//!     tools = ["shell"]
//!     [secrets.DEPLOY_TOKEN]
//!     file = "token.txt"
//!     [env]
//!     pass = ["CARGO_HOME"]
//! "#).unwrap();
//! let masker = loopward::contain::masker(&cfg, &path, None).unwrap();
//! assert_eq!(masker.mask_str("got tok-0123456789"), "got [secret:DEPLOY_TOKEN]");
//! let reach = loopward::contain::reach(&cfg, Some(|k| match k {
//!     "PATH" => Some("/usr/bin".into()),
//!     "CARGO_HOME" => Some("/opt/cargo".into()),
//!     _ => Some("not passed".into()),
//! }));
//! let names: Vec<&str> = reach.environment().iter().map(|(k, _)| k.as_str()).collect();
//! assert!(names.contains(&"CARGO_HOME") && !names.contains(&"OPENAI_API_KEY"));
//! ```

use crate::backend::EnvLookup;
use crate::config::{Config, ConfigError};
use loopward_runner::sandbox::{Network, Reach, DEFAULT_ENV};
use loopward_runner::secrets::Masker;
use std::path::Path;

/// The value of the secret `name` of `cfg` (from its environment variable or file).
pub fn secret_value(
    cfg: &Config,
    config_path: &Path,
    env: Option<EnvLookup>,
    name: &str,
) -> Result<String, ConfigError> {
    let invalid = |key, problem, fix| ConfigError::invalid(config_path, key, problem, fix);
    let Some(s) = cfg.secrets.get(name) else {
        return Err(invalid(
            format!("secrets.{name}"),
            "there is no such secret".into(),
            format!("add [secrets.{name}] with env = \"…\" or file = \"…\""),
        ));
    };
    match (&s.env, &s.file) {
        (Some(var), _) => env.and_then(|lookup| lookup(var)).ok_or_else(|| {
            invalid(
                format!("secrets.{name}.env"),
                format!("the environment variable {var} is not set"),
                format!("set {var} before starting loopward, or remove [secrets.{name}]"),
            )
        }),
        (None, Some(file)) => {
            let path = Config::resolve(config_path, file);
            let text = std::fs::read_to_string(&path).map_err(|e| {
                invalid(
                    format!("secrets.{name}.file"),
                    format!("cannot read {}: {e}", path.display()),
                    format!(
                        "create the file with the value on its first line, or remove [secrets.{name}]"
                    ),
                )
            })?;
            Ok(text.lines().next().unwrap_or_default().trim().to_string())
        }
        (None, None) => Err(invalid(
            format!("secrets.{name}"),
            "needs exactly one source".into(),
            "give it either env = \"VARIABLE\" or file = \"path\"".into(),
        )),
    }
}

/// The masker of `cfg`'s `[secrets]`, with the backend's API key (`backend.api_key_env` or
/// `api_key_file`, when it can be found) masked too. A secret whose source is missing, or whose
/// value cannot be masked, fails here, before anything starts.
pub fn masker(
    cfg: &Config,
    config_path: &Path,
    env: Option<EnvLookup>,
) -> Result<Masker, ConfigError> {
    let invalid = |key, problem, fix| ConfigError::invalid(config_path, key, problem, fix);
    let mut pairs: Vec<(String, String)> = Vec::new();
    for name in cfg.secrets.keys() {
        pairs.push((name.clone(), secret_value(cfg, config_path, env, name)?));
    }
    let backend_key = match (&cfg.backend.api_key_env, &cfg.backend.api_key_file) {
        (Some(var), _) => env.and_then(|lookup| lookup(var)).map(|v| (var.clone(), v)),
        (None, Some(file)) => std::fs::read_to_string(Config::resolve(config_path, file))
            .ok()
            .map(|t| ("BACKEND_API_KEY".to_string(), t.trim().to_string())),
        (None, None) => None,
    };
    // A backend key too short to mask is not a declared secret: it is left out, not refused.
    let backend_key =
        backend_key.filter(|(_, v)| v.len() >= loopward_runner::secrets::MIN_SECRET_BYTES);
    if let Some((name, value)) = backend_key {
        if !pairs.iter().any(|(_, v)| *v == value) {
            pairs.push((name.to_ascii_uppercase(), value));
        }
    }
    Masker::new(pairs.iter().map(|(n, v)| (n.as_str(), v.as_str()))).map_err(|e| {
        invalid(
            "secrets".into(),
            e.to_string(),
            "fix the secret's source, or remove it from [secrets]".into(),
        )
    })
}

/// The toolchain homes a command reads (and is told of, its `HOME` being a scratch folder):
/// the variable, and its folder under the user's home when the variable is unset.
const TOOLCHAIN_HOMES: [(&str, &str); 2] = [("RUSTUP_HOME", ".rustup"), ("CARGO_HOME", ".cargo")];

/// What `cfg`'s sandboxed commands may read and inherit: the workspace, the system folders and
/// `[read] allow` (`~/` resolved with `HOME` from `env`; an entry that cannot be resolved is
/// left out, never widened), and the variables of [`DEFAULT_ENV`] and `[env] pass` that `env`
/// finds. Without a lookup, commands start with the default `PATH` only.
pub fn reach(cfg: &Config, env: Option<EnvLookup>) -> Reach {
    let mut reach = Reach::default();
    let home = env.and_then(|lookup| lookup("HOME"));
    for p in &cfg.read.allow {
        match (p.strip_prefix("~/"), &home) {
            (Some(rest), Some(home)) => reach = reach.read(Path::new(home).join(rest)),
            (Some(_), None) => {}
            (None, _) => reach = reach.read(p),
        }
    }
    if cfg.read.open {
        reach = reach.open_reads();
    }
    if !cfg.net.isolate {
        reach = reach.network(Network::Host);
    }
    reach = reach.local_tcp(cfg.net.local_tcp);
    // Inside `loopward contain`, the supervisor's proxy: a sandbox made there keeps its network.
    reach = reach.outer_proxy(env.and_then(|lookup| lookup("HTTP_PROXY")));
    for a in &cfg.agents {
        reach = reach.net(a.name.clone(), a.net.clone());
    }
    // The user's Rust toolchain (rustup's and cargo's homes) is read, never written: a
    // command's `HOME` is a scratch folder, so their homes are named for it.
    let mut toolchains: Vec<(String, String)> = Vec::new();
    if let (Some(lookup), Some(home)) = (env, &home) {
        for (var, dir) in TOOLCHAIN_HOMES {
            let path = lookup(var).unwrap_or_else(|| format!("{home}/{dir}"));
            if Path::new(&path).is_dir() {
                reach = reach.read(&path);
                toolchains.push((var.to_string(), path));
            }
        }
    }
    if let Some(lookup) = env {
        let names = DEFAULT_ENV
            .iter()
            .map(|s| s.to_string())
            .chain(cfg.env.pass.iter().cloned());
        let vars: Vec<(String, String)> = names
            .filter_map(|n| lookup(&n).map(|v| (n, v)))
            .chain(toolchains)
            .collect();
        if vars.iter().any(|(k, _)| k == "PATH") {
            reach = reach.env(vars);
        } else {
            let path = (
                "PATH".to_string(),
                loopward_runner::sandbox::DEFAULT_PATH.to_string(),
            );
            reach = reach.env(std::iter::once(path).chain(vars));
        }
    }
    reach
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(extra: &str) -> Config {
        Config::parse(
            "loopward.toml",
            &format!(
                "[run]\nfirst = \"solo\"\n[backend]\nkind = \"openai\"\napi_key_env = \"MY_KEY\"\n[[agent]]\nname = \"solo\"\ntools = []\n{extra}"
            ),
        )
        .unwrap()
    }

    /// The masker of `cfg` (read from `loopward.toml`) when the environment is `env`.
    fn masker_with(cfg: &Config, env: EnvLookup) -> Result<Masker, ConfigError> {
        masker(cfg, Path::new("loopward.toml"), Some(env))
    }

    #[test]
    fn the_backend_key_is_masked_when_it_can_be_and_a_short_one_never_stops_a_run() {
        let cfg = config("");
        let long = masker_with(&cfg, |_| Some("sk-long-enough-key".into())).unwrap();
        assert_eq!(long.mask_str("k=sk-long-enough-key"), "k=[secret:MY_KEY]");
        let short = masker_with(&cfg, |_| Some("sk-test".into())).unwrap();
        assert!(short.is_empty());
        // A declared secret that short is refused, naming it.
        let cfg = config("[secrets.TOKEN]\nenv = \"TOKEN\"\n");
        let err = masker_with(&cfg, |_| Some("short".into())).unwrap_err();
        assert!(err.to_string().contains("secret TOKEN"), "{err}");
    }
}
