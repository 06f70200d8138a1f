//! The scratch `HOME` of a contained program or command, seeded from the user's own config
//! without credentials.
//!
//! Only the files of [`SEEDED`] are copied, each through a filter that drops what can carry a
//! credential: git's `credential` and `include` sections, `url` rewrites with a user in them,
//! `extraHeader` and any key that names a token, password or secret; in Claude Code's
//! `settings.json`, `env` and the helpers that fetch keys. A file that cannot be read or
//! parsed is left out, never copied as it is. Nothing else of the home comes in: not `.ssh`,
//! `.aws`, `.netrc`, `.npmrc`, `.docker`, `.config/gh`, `.claude.json` or any token file.

use anyhow::{Context, Result};
use std::path::Path;

/// The files copied, with the filter each goes through.
const SEEDED: &[(&str, Filter)] = &[
    (".gitconfig", Filter::GitConfig),
    (".config/git/config", Filter::GitConfig),
    (".config/git/ignore", Filter::Plain),
    (".config/git/attributes", Filter::Plain),
    (".gitignore_global", Filter::Plain),
    (".editorconfig", Filter::Plain),
    (".inputrc", Filter::Plain),
    (".claude/settings.json", Filter::ClaudeSettings),
];

/// How a seeded file is cleaned.
#[derive(Clone, Copy)]
enum Filter {
    /// Copied as it is (holds no credential by its format).
    Plain,
    /// Git's config format.
    GitConfig,
    /// Claude Code's user settings (JSON).
    ClaudeSettings,
}

/// Keys of Claude Code's settings that hold or fetch credentials.
const CLAUDE_DROPPED: &[&str] = &[
    "env",
    "apiKeyHelper",
    "awsAuthRefresh",
    "awsCredentialExport",
    "otelHeadersHelper",
];

/// Copies the seeded files of `user_home` into `scratch` (a fresh folder); returns the ones
/// copied, relative to the home.
pub(super) fn seed(user_home: &Path, scratch: &Path) -> Result<Vec<&'static str>> {
    let mut copied = Vec::new();
    for (rel, filter) in SEEDED {
        let Ok(text) = std::fs::read_to_string(user_home.join(rel)) else {
            continue;
        };
        let Some(clean) = clean(*filter, &text) else {
            continue;
        };
        let to = scratch.join(rel);
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("seeding the scratch home: {}", parent.display()))?;
        }
        std::fs::write(&to, clean)
            .with_context(|| format!("seeding the scratch home: {}", to.display()))?;
        copied.push(*rel);
    }
    Ok(copied)
}

fn clean(filter: Filter, text: &str) -> Option<String> {
    match filter {
        Filter::Plain => Some(text.to_string()),
        Filter::GitConfig => Some(git_config(text)),
        Filter::ClaudeSettings => {
            let mut v: serde_json::Value = serde_json::from_str(text).ok()?;
            let map = v.as_object_mut()?;
            for k in CLAUDE_DROPPED {
                map.remove(*k);
            }
            serde_json::to_string_pretty(&v).ok()
        }
    }
}

/// Git config without the sections and keys that carry credentials.
fn git_config(text: &str) -> String {
    let mut out = String::new();
    let mut dropping = false;
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with('[') {
            let name = t
                .trim_start_matches('[')
                .split(|c: char| c == ']' || c == '"' || c.is_whitespace())
                .next()
                .unwrap_or_default()
                .to_ascii_lowercase();
            dropping = name.starts_with("credential")
                || name.starts_with("include")
                || (name == "url" && t.contains('@'));
        } else if !dropping && !t.is_empty() && !t.starts_with(['#', ';']) {
            let key = t
                .split('=')
                .next()
                .unwrap_or_default()
                .trim()
                .to_ascii_lowercase();
            let secret = ["extraheader", "token", "password", "secret", "helper"]
                .iter()
                .any(|s| key.contains(s));
            if secret {
                continue;
            }
        }
        if !dropping {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn git_config_keeps_the_person_and_drops_every_credential() {
        let text = "[user]\n\tname = Ada\n\temail = ada@example.com\n\
                    [credential]\n\thelper = store\n\
                    [credential \"https://github.com\"]\n\thelper = !gh auth git-credential\n\
                    [url \"https://tok123@github.com/\"]\n\tinsteadOf = https://github.com/\n\
                    [http]\n\textraHeader = Authorization: Bearer tok456\n\
                    [include]\n\tpath = ~/.gitconfig.local\n\
                    [github]\n\ttoken = tok789\n\
                    [alias]\n\tco = checkout\n";
        let clean = git_config(text);
        for kept in ["name = Ada", "email = ada@example.com", "co = checkout"] {
            assert!(clean.contains(kept), "{kept}: {clean}");
        }
        for gone in [
            "helper",
            "tok123",
            "tok456",
            "tok789",
            "gitconfig.local",
            "credential",
        ] {
            assert!(!clean.contains(gone), "{gone}: {clean}");
        }
    }

    #[test]
    fn claude_settings_lose_env_and_key_helpers_and_unparseable_ones_are_left_out() {
        let text = r#"{"model": "opus", "env": {"ANTHROPIC_API_KEY": "sk-x"}, "apiKeyHelper": "pass show k"}"#;
        let kept = clean(Filter::ClaudeSettings, text).unwrap();
        assert!(kept.contains("opus"), "{kept}");
        assert!(
            !kept.contains("sk-x") && !kept.contains("pass show"),
            "{kept}"
        );
        assert!(clean(Filter::ClaudeSettings, "{not json").is_none());
    }
}
