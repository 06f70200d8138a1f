//! `[hooks]`: what an agent host's hook lets run without judging it.
//!
//! A host's hook judges the tools whose effect loopward can see (file writes, shell commands,
//! the client's own reads) and lets through a fixed list of the host's tools that change
//! nothing it judges. Any other tool — an MCP server's, a new tool of a newer client — is
//! denied: what it changes cannot be judged. `allow_tools` is where a person accepts such tools
//! unjudged, by name or glob; each call it lets through is recorded with the line of `[hooks]`.
//!
//! ```
//! use loopward_runner::gates::PolicyConfig;
//! let cfg = PolicyConfig::from_toml_in("loopward.toml",
//!     "[hooks]\nallow_tools = [\"mcp__github__*\", \"WebFetch\"]\n").unwrap();
//! let allowed = cfg.hooks.compile().unwrap();
//! let hit = allowed.allows("mcp__github__create_issue").unwrap();
//! assert_eq!((hit.pattern.as_str(), hit.source.as_deref()), ("mcp__github__*", Some("loopward.toml:1")));
//! assert!(allowed.allows("mcp__files__write").is_none());
//! // A regex, as Claude Code's hook matchers take, is refused at load with the glob to write.
//! let err = PolicyConfig::from_toml("[hooks]\nallow_tools = [\"mcp__github__.*\"]").unwrap_err();
//! assert!(err.to_string().contains("mcp__github__*"), "{err}");
//! ```

use super::config::ConfigError;
use super::source::RuleSource;
use globset::{Glob, GlobSet, GlobSetBuilder};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// `[hooks]`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HooksConfig {
    /// Tools a host's hook lets run unjudged, by name (`WebFetch`) or glob (`mcp__github__*`),
    /// besides the host's own tools it knows change nothing it judges. A tool the hook judges
    /// (`Write`, `Bash`, …) stays judged whatever this says.
    #[serde(default)]
    pub allow_tools: Vec<String>,
    /// Where it is written (`loopward.toml:12`), when read from a file.
    #[serde(skip)]
    pub source: RuleSource,
}

/// The tools `[hooks] allow_tools` accepts unjudged, compiled.
#[derive(Clone, Debug, Default)]
pub struct AllowedTools {
    config: HooksConfig,
    set: GlobSet,
}

/// Why a tool is allowed unjudged: the entry of `allow_tools` that names it, and where it is
/// written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AllowedTool {
    /// The entry (`mcp__github__*`).
    pub pattern: String,
    /// `loopward.toml:<line>` of `[hooks]`, when read from a file.
    pub source: Option<Arc<str>>,
}

impl HooksConfig {
    /// Whether nothing is configured (the section is then left out of the policy's version).
    pub fn is_empty(&self) -> bool {
        self.allow_tools.is_empty()
    }

    /// Checks each entry: a tool name or a glob of one, never a regex or a list in one string.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.compile().map(|_| ())
    }

    /// Compiles `allow_tools`.
    pub fn compile(&self) -> Result<AllowedTools, ConfigError> {
        let mut set = GlobSetBuilder::new();
        for (i, pattern) in self.allow_tools.iter().enumerate() {
            let bad = |why: String| ConfigError::BadGlob {
                section: format!("hooks.allow_tools[{i}]"),
                glob: pattern.clone(),
                why,
            };
            if pattern.is_empty() {
                return Err(bad(
                    "it is empty; write a tool name such as \"WebFetch\"".into()
                ));
            }
            if let Some(c) = pattern.chars().find(|c| !is_glob_char(*c)) {
                return Err(bad(format!(
                    "{c:?} is in no tool name: entries are tool names or globs of them (\"mcp__github__*\"), not regexes; list each tool as its own entry{}",
                    regex_hint(pattern)
                )));
            }
            set.add(Glob::new(pattern).map_err(|e| bad(e.kind().to_string()))?);
        }
        Ok(AllowedTools {
            config: self.clone(),
            set: set.build().map_err(|e| ConfigError::BadGlob {
                section: "hooks.allow_tools".into(),
                glob: self.allow_tools.join(", "),
                why: e.to_string(),
            })?,
        })
    }
}

/// Characters of tool names (Claude Code's MCP tools: `mcp__<server>__<tool>`, letters, digits,
/// `_` and `-`) and of globs over them.
fn is_glob_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "_-*?[]{},!".contains(c)
}

/// For a regex written where a glob goes (`mcp__x__.*`, `Web.*`): the glob meant.
fn regex_hint(pattern: &str) -> String {
    if pattern.contains(".*") && !pattern.contains('|') {
        format!(" (for {pattern:?} write {:?})", pattern.replace(".*", "*"))
    } else {
        String::new()
    }
}

impl AllowedTools {
    /// The entry that accepts `tool` unjudged, if one does.
    pub fn allows(&self, tool: &str) -> Option<AllowedTool> {
        let i = *self.set.matches(tool).first()?;
        Some(AllowedTool {
            pattern: self.config.allow_tools[i].clone(),
            source: self.config.source.get().cloned(),
        })
    }

    /// The configuration it was compiled from.
    pub fn config(&self) -> &HooksConfig {
        &self.config
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allowed(list: &[&str]) -> Result<AllowedTools, ConfigError> {
        HooksConfig {
            allow_tools: list.iter().map(|s| s.to_string()).collect(),
            source: RuleSource::default(),
        }
        .compile()
    }

    #[test]
    fn names_match_exactly_and_globs_match_a_servers_tools() {
        let a = allowed(&["WebFetch", "mcp__github__*"]).unwrap();
        assert_eq!(a.allows("WebFetch").unwrap().pattern, "WebFetch");
        assert!(a.allows("WebFetchX").is_none());
        assert!(
            a.allows("webfetch").is_none(),
            "tool names are case-sensitive"
        );
        assert_eq!(
            a.allows("mcp__github__create_issue").unwrap().pattern,
            "mcp__github__*"
        );
        assert!(a.allows("mcp__githubx__create_issue").is_none());
        assert!(allowed(&[]).unwrap().allows("WebFetch").is_none());
    }

    #[test]
    fn regexes_lists_and_bad_globs_are_refused_naming_the_entry() {
        for (bad, says) in [
            ("mcp__lab__.*", "write \"mcp__lab__*\""),
            ("Write|Edit", "'|' is in no tool name"),
            ("", "it is empty"),
            ("mcp__[x", "hooks.allow_tools[0]"),
        ] {
            let e = allowed(&[bad]).unwrap_err().to_string();
            assert!(e.contains(says), "{bad:?}: {e}");
            assert!(e.contains("hooks.allow_tools[0]"), "{bad:?}: {e}");
        }
    }
}
