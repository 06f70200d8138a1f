//! Globs that load but can never match what they seem to name, for `loopward policy lint`.
//!
//! Paths are matched as the engine writes them: workspace-relative, `/` between folders, no
//! `.`, `..` or empty parts, no trailing `/`. A glob that is empty, absolute or has a `.` or
//! `..` part is refused when the config loads; these are the ones that load.
//!
//! ```
//! use loopward_runner::gates::GlobFlaw;
//! assert_eq!(GlobFlaw::of("src//main.rs", true), Some(GlobFlaw::EmptyPart));
//! assert_eq!(GlobFlaw::of("src/", false), Some(GlobFlaw::TrailingSlash));
//! assert_eq!(GlobFlaw::of("src/", true), None, "a territory drops the trailing `/`");
//! assert!(matches!(GlobFlaw::of("src\\main.rs", true), Some(GlobFlaw::Backslash { .. })));
//! assert_eq!(GlobFlaw::of("notes/a\\*.md", true), None, "an escaped wildcard is meant");
//! ```

use std::fmt;

/// Why a glob matches no workspace path, or not the one it seems to name.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum GlobFlaw {
    /// `//`: an empty folder name, which no workspace path has.
    EmptyPart,
    /// A trailing `/` on a glob matched against changed files as written (a review gate's
    /// `when`, a stop-gate's `glob`): no file path ends in `/`.
    TrailingSlash,
    /// A `\` before an ordinary character: an escape, not a folder separator.
    Backslash {
        /// The one path the glob matches instead (`src\main.rs` → `srcmain.rs`).
        matches: String,
    },
}

impl GlobFlaw {
    /// The flaw of `pattern`, if any. `widened`: a territory's glob, which drops a trailing `/`
    /// and also covers what lies below it.
    pub fn of(pattern: &str, widened: bool) -> Option<Self> {
        let body = if widened {
            pattern.trim_end_matches('/')
        } else {
            pattern
        };
        let mut chars = body.chars();
        let mut unescaped = String::new();
        let mut stray = false;
        while let Some(c) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some(d) if "*?[]{}!,\\^-".contains(d) => unescaped.extend([c, d]),
                    Some(d) => {
                        stray = true;
                        unescaped.push(d);
                    }
                    None => {}
                },
                c => unescaped.push(c),
            }
        }
        if stray {
            return Some(Self::Backslash {
                matches: unescaped.replace('\\', ""),
            });
        }
        let trimmed = body.trim_end_matches('/');
        if trimmed.split('/').any(str::is_empty) {
            return Some(Self::EmptyPart);
        }
        (!widened && body.ends_with('/')).then_some(Self::TrailingSlash)
    }

    /// What to write instead.
    pub fn remedy(&self) -> &'static str {
        match self {
            Self::EmptyPart => "write one `/` between folders",
            Self::TrailingSlash => "write `dir/**` for the files below a folder",
            Self::Backslash { .. } => "write `/` between folders (`\\` escapes `*`, `?`, `[`, `{`)",
        }
    }
}

impl fmt::Display for GlobFlaw {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::EmptyPart => f.write_str(
                "has an empty folder name (`//`), which no workspace path has: it matches nothing",
            ),
            Self::TrailingSlash => f.write_str(
                "ends in `/`, and the changed paths it is matched against are files, written without one: it matches nothing",
            ),
            Self::Backslash { matches } => write!(
                f,
                "uses `\\`, which escapes the next character rather than separating folders: it matches `{matches}`, not what it seems to name"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::config::{glob, territory_globs};
    use super::*;

    /// The engine's own matchers: a territory's widened globs, and a plain glob as review gates
    /// and stop-gates compile theirs.
    fn territory_matches(pattern: &str, path: &str) -> bool {
        let globs = territory_globs(&[pattern.to_string()], "t").unwrap();
        globs.iter().any(|g| g.compile_matcher().is_match(path))
    }

    fn plain_matches(pattern: &str, path: &str) -> bool {
        glob(pattern, "g").unwrap().compile_matcher().is_match(path)
    }

    #[test]
    fn an_empty_part_matches_no_workspace_path() {
        for path in ["src/main.rs", "src/x/main.rs", "src"] {
            assert!(!territory_matches("src//main.rs", path), "{path}");
            assert!(!plain_matches("src//main.rs", path), "{path}");
        }
        assert!(territory_matches("src/main.rs", "src/main.rs"));
        assert_eq!(GlobFlaw::of("a//**", true), Some(GlobFlaw::EmptyPart));
        assert_eq!(GlobFlaw::of("src//", true), None, "trailing, dropped");
    }

    #[test]
    fn a_trailing_slash_matches_no_file_unless_the_glob_is_a_territory_s() {
        assert!(!plain_matches("src/", "src/main.rs"));
        assert!(!plain_matches("src/", "src"));
        assert!(territory_matches("src/", "src/main.rs"));
        assert_eq!(GlobFlaw::of("src/", true), None);
        assert_eq!(GlobFlaw::of("src/", false), Some(GlobFlaw::TrailingSlash));
    }

    #[test]
    fn a_backslash_escapes_rather_than_separates() {
        assert!(!territory_matches("src\\main.rs", "src/main.rs"));
        assert!(territory_matches("src\\main.rs", "srcmain.rs"));
        assert_eq!(
            GlobFlaw::of("src\\main.rs", true),
            Some(GlobFlaw::Backslash {
                matches: "srcmain.rs".into()
            })
        );
        // An escaped wildcard is a literal character, and meant.
        assert!(plain_matches("a\\*.md", "a*.md") && !plain_matches("a\\*.md", "ab.md"));
        assert_eq!(GlobFlaw::of("a\\*.md", false), None);
    }

    #[test]
    fn what_does_not_load_is_refused_by_the_engine_not_linted() {
        for bad in ["", "/src/**", "./src/**", "src/../x", "src/./x"] {
            assert!(glob(bad, "g").is_err(), "{bad:?}");
        }
    }
}
