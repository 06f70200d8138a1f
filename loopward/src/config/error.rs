//! Why a config file could not be loaded.

use std::path::{Path, PathBuf};

/// A config file that cannot be used. Every variant names the file, the key and what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file could not be read.
    #[error("{}: cannot read the config file: {why}\nwhat to do: run `loopward init` to write a starter loopward.toml, or pass --config <file>", .file.display())]
    Read {
        /// The file.
        file: PathBuf,
        /// The IO error.
        why: String,
    },
    /// The file is not valid TOML or has a key of the wrong type or an unknown key.
    #[error("{}: {key}: {problem}\nwhat to do: {fix}", .file.display())]
    Syntax {
        /// The file.
        file: PathBuf,
        /// The key (or `line L, column C` when no key is known).
        key: String,
        /// What the parser said.
        problem: String,
        /// What to do.
        fix: String,
    },
    /// The file parses but breaks a rule.
    #[error("{}: {key}: {problem}\nwhat to do: {fix}", .file.display())]
    Invalid {
        /// The file.
        file: PathBuf,
        /// The key, as a path (`agent[1].tools`, `territory[0].paths[2]`).
        key: String,
        /// What is wrong.
        problem: String,
        /// What to do.
        fix: String,
    },
}

impl ConfigError {
    /// The value of `key` in `file` does not work: `problem`, and how to `fix` it.
    pub(crate) fn invalid(file: &Path, key: String, problem: String, fix: String) -> Self {
        Self::Invalid {
            file: file.to_path_buf(),
            key,
            problem,
            fix,
        }
    }

    /// The key the error is about (`""` for a file that cannot be read).
    pub fn key(&self) -> &str {
        match self {
            Self::Read { .. } => "",
            Self::Syntax { key, .. } | Self::Invalid { key, .. } => key,
        }
    }

    /// `path` is where the deserializer was when it failed (`agent[1].max_steps`, `.` at the
    /// top), as `serde_path_to_error` tracks it.
    pub(crate) fn parse(file: &Path, source: &str, path: &str, e: &toml::de::Error) -> Self {
        let text = e.message().trim_end().to_string();
        let at = e.span().map(|s| line_col(source, s.start));
        let path = Some(path).filter(|p| !p.is_empty() && *p != ".");
        // An unknown key is reported at its table; name the key itself.
        let named = match (path, unknown_key(&text)) {
            // serde_path_to_error's path may already end in the unknown key.
            (Some(p), Some(k)) if p == k || p.ends_with(&format!(".{k}")) => Some(p.to_string()),
            (Some(p), Some(k)) => Some(format!("{p}.{k}")),
            (None, Some(k)) => Some(k.to_string()),
            (p, None) => p.map(str::to_string),
        };
        let key = match (named, at) {
            (Some(k), Some((l, c))) => format!("{k} (line {l}, column {c})"),
            (Some(k), None) => k,
            (None, Some((l, c))) => format!("line {l}, column {c}"),
            (None, None) => "(file)".to_string(),
        };
        let renamed = unknown_key(&text).and_then(|k| renamed(k, source, e.span()));
        let fix = if let Some(fix) = renamed {
            fix
        } else if text.starts_with("unknown field") {
            "remove or rename the key; `loopward init` writes a commented starter file listing every key"
                .to_string()
        } else if let Some(wanted) = expected(&text) {
            format!(
                "write {wanted} there; `loopward init` writes a commented starter file with an example of each key"
            )
        } else {
            "fix the value at that key; `loopward init` writes a commented starter file with an example of each"
                .to_string()
        };
        Self::Syntax {
            file: file.to_path_buf(),
            key,
            problem: text,
            fix,
        }
    }
}

/// What serde's "invalid type: …, expected X" asks for, in words with an example.
fn expected(message: &str) -> Option<String> {
    let wanted = message
        .strip_prefix("invalid type: ")?
        .split(", expected ")
        .nth(1)?;
    let words = match wanted.trim() {
        "u8" | "u16" | "u32" | "u64" | "usize" => "a whole number without quotes (e.g. `12`)",
        "i8" | "i16" | "i32" | "i64" | "isize" => "a whole number without quotes (e.g. `-3`)",
        "f32" | "f64" => "a number without quotes (e.g. `0.5`)",
        "a boolean" => "`true` or `false` without quotes",
        "a string" => "a quoted string (e.g. `\"text\"`)",
        "a sequence" => "a list in brackets (e.g. `[\"a\", \"b\"]`)",
        other => return Some(other.to_string()),
    };
    Some(words.to_string())
}

/// Keys that held a number of seconds before durations were written one way everywhere, and
/// the key that replaced each. An old key is refused (never read as an alias), with the new
/// spelling of its own value.
const RENAMED_DURATION_KEYS: &[(&str, &str)] = &[
    ("model_secs", "model"),
    ("tool_secs", "tool"),
    ("turn_secs", "turn"),
    ("wall_time_secs", "wall_time"),
    ("per_secs", "per"),
    ("ask_timeout_secs", "ask_timeout"),
];

/// What to write instead of a renamed duration key: `model = "30s"` for `model_secs = 30`.
fn renamed(key: &str, source: &str, span: Option<std::ops::Range<usize>>) -> Option<String> {
    let new = RENAMED_DURATION_KEYS
        .iter()
        .find(|(old, _)| *old == key)
        .map(|(_, new)| *new)?;
    // The value as written on the key's line, when it is a plain number of seconds.
    let value = span
        .and_then(|s| source.get(s.start..)?.lines().next())
        .and_then(|line| line.split_once('='))
        .map(|(_, v)| v.split('#').next().unwrap_or("").trim().replace('_', ""))
        .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()));
    let value = value.as_deref().unwrap_or("N");
    Some(format!(
        "durations are written with a unit now: replace `{key} = {value}` with `{new} = \"{value}s\"` (or \"15m\", \"1h\"; see docs/config.md)"
    ))
}

/// The key named by serde's "unknown field `x`" message.
fn unknown_key(message: &str) -> Option<&str> {
    let rest = message.strip_prefix("unknown field `")?;
    rest.split('`').next()
}

/// 1-based line and column of a byte offset.
fn line_col(source: &str, offset: usize) -> (usize, usize) {
    let before = &source[..offset.min(source.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}
