//! `[secrets]`, `[env]` and `[read]`: what an agent's commands hold, inherit and read.

use super::validate::Problem;
use super::Config;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// `[secrets.NAME]`: a credential loopward holds for the agents and keeps out of every record.
/// Its value comes from one source; it is masked (`[secret:NAME]`) in the ledger, the pages and
/// `--json` output, and never given to a sandboxed command.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecretConfig {
    /// The environment variable of loopward's process that holds the value.
    #[serde(default)]
    pub env: Option<String>,
    /// A file whose first line is the value (relative to the config's folder).
    #[serde(default)]
    pub file: Option<PathBuf>,
    /// The hosts the secret is meant for (lowercase names, like `api.openai.com`).
    #[serde(default)]
    pub hosts: Vec<String>,
    /// Brokered for a contained program as this model API's key (`anthropic`, `openai`): the
    /// program gets the proxy as its base URL and a placeholder; loopward adds the value.
    #[serde(default)]
    pub gateway: Option<String>,
    /// Where brokered requests go (an `http://` URL; default the provider's API).
    #[serde(default)]
    pub upstream: Option<String>,
}

/// `[env]`: the environment sandboxed commands start with.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvConfig {
    /// Variables passed from loopward's environment besides the defaults (`PATH`, `LANG`,
    /// `TERM`, …: `loopward_runner::sandbox::DEFAULT_ENV`). Never a secret's source.
    #[serde(default)]
    pub pass: Vec<String>,
}

/// `[read]`: what sandboxed commands may read besides the workspace and the system folders.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReadConfig {
    /// Absolute paths, or `~/`-relative ones (a toolchain: `~/.cargo`, `~/.rustup`).
    #[serde(default)]
    pub allow: Vec<String>,
    /// Reads everywhere but loopward's state: an explicit opt-out of the allow-list.
    #[serde(default)]
    pub open: bool,
}

/// `[net]`: the network of sandboxed commands.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetConfig {
    /// Each command in a network namespace of its own, out only through the egress proxy to
    /// its agent's `net` hosts (default). `false` is an explicit opt-out: commands reach any
    /// host, and every shell call records a `sandbox` warning.
    #[serde(default = "yes")]
    pub isolate: bool,
    /// Lets commands connect to any TCP port inside their namespace (a test suite that starts
    /// a server of its own on loopback). Default `false`: where the kernel has Landlock's TCP
    /// rules (ABI 4), a command connects only to its egress proxy's port, a second line behind
    /// the namespace.
    #[serde(default)]
    pub local_tcp: bool,
}

impl Default for NetConfig {
    fn default() -> Self {
        Self {
            isolate: true,
            local_tcp: false,
        }
    }
}

fn yes() -> bool {
    true
}

fn var_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 128
        && !s.starts_with(|c: char| c.is_ascii_digit())
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

fn host_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && !l.starts_with('-')
                && !l.ends_with('-')
                && l.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        })
}

pub(super) fn check(cfg: &Config) -> Result<(), Problem> {
    for (i, a) in cfg.agents.iter().enumerate() {
        for (j, h) in a.net.iter().enumerate() {
            let h = h.trim_start_matches('[').trim_end_matches(']');
            if !(host_name(h) || h.parse::<std::net::IpAddr>().is_ok()) {
                return Err((
                    format!("agent[{i}].net[{j}]"),
                    format!("{h:?} is not a host name or an address"),
                    "write the bare host, lowercase, without scheme, port or path (like \"crates.io\" or \"10.0.0.5\")".into(),
                ));
            }
        }
    }
    for (name, s) in &cfg.secrets {
        let key = format!("secrets.{name}");
        if !(var_name(name) && name.bytes().all(|b| !b.is_ascii_lowercase())) {
            return Err((
                key,
                format!("{name:?} is not a secret name"),
                "name it with capital letters, digits and `_` (like OPENAI_API_KEY)".into(),
            ));
        }
        match (&s.env, &s.file) {
            (Some(_), Some(_)) | (None, None) => {
                return Err((
                    key,
                    "needs exactly one source".into(),
                    "give it either env = \"VARIABLE\" or file = \"path\"".into(),
                ))
            }
            (Some(v), None) if !var_name(v) => {
                return Err((
                    format!("{key}.env"),
                    format!("{v:?} is not an environment variable name"),
                    "use letters, digits and `_`".into(),
                ))
            }
            _ => {}
        }
        if let Some(g) = s
            .gateway
            .as_deref()
            .filter(|g| !["anthropic", "openai"].contains(g))
        {
            return Err((
                format!("{key}.gateway"),
                format!("{g:?} is not a gateway loopward knows"),
                "use \"anthropic\" or \"openai\"".into(),
            ));
        }
        if s.upstream.is_some() && s.gateway.is_none() {
            return Err((
                format!("{key}.upstream"),
                "an upstream without a gateway is never used".into(),
                "add gateway = \"anthropic\" or \"openai\", or remove upstream".into(),
            ));
        }
        if let Some(h) = s.hosts.iter().find(|h| !host_name(h)) {
            return Err((
                format!("{key}.hosts"),
                format!("{h:?} is not a host name"),
                "write the bare host, lowercase, without scheme, port or path (like \"api.openai.com\")".into(),
            ));
        }
    }
    for (i, v) in cfg.env.pass.iter().enumerate() {
        let key = format!("env.pass[{i}]");
        if !var_name(v) {
            return Err((
                key,
                format!("{v:?} is not an environment variable name"),
                "use letters, digits and `_`".into(),
            ));
        }
        let source = cfg
            .secrets
            .iter()
            .find(|(_, s)| s.env.as_deref() == Some(v.as_str()))
            .map(|(n, _)| n.clone())
            .or_else(|| {
                (cfg.backend.api_key_env.as_deref() == Some(v.as_str()))
                    .then(|| "backend.api_key_env".into())
            });
        if let Some(secret) = source {
            return Err((
                key,
                format!("{v} holds a secret ({secret}); passing it would hand it to every command"),
                "remove it from [env] pass; commands reach a secret's host through loopward, never with the value".into(),
            ));
        }
    }
    for (i, p) in cfg.read.allow.iter().enumerate() {
        let rest = p.strip_prefix("~/").unwrap_or(p);
        let bad = !(p.starts_with('/') || p.starts_with("~/"))
            || rest.split('/').any(|c| c == "..")
            || p.contains('\0');
        if bad {
            return Err((
                format!("read.allow[{i}]"),
                format!("{p:?} is not an absolute or ~/ path"),
                "write a folder as /opt/toolchain or ~/.cargo (no `..`)".into(),
            ));
        }
    }
    Ok(())
}
