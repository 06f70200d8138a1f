//! Workspace globs as the gate sections write them: `*` not crossing `/`, workspace-relative,
//! and a territory's patterns widened to cover what lies below them.

use super::ConfigError;
use globset::{Glob, GlobBuilder, GlobSet, GlobSetBuilder};

/// Builds one glob with `*` not crossing `/`.
pub(crate) fn glob(pattern: &str, section: &str) -> Result<Glob, ConfigError> {
    check_workspace_relative(pattern, section)?;
    GlobBuilder::new(pattern)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
        .map_err(|e| ConfigError::BadGlob {
            section: section.into(),
            glob: pattern.into(),
            why: e.kind().to_string(),
        })
}

/// Refuses a glob that is empty or not workspace-relative.
fn check_workspace_relative(pattern: &str, section: &str) -> Result<(), ConfigError> {
    let bad = |why: String| ConfigError::BadGlob {
        section: section.into(),
        glob: pattern.into(),
        why,
    };
    if pattern.is_empty() {
        return Err(bad("it is empty".into()));
    }
    if pattern.starts_with('/') || pattern.split('/').any(|c| c == ".." || c == ".") {
        return Err(bad(
            "globs are workspace-relative: no leading '/', '.' or '..'".into(),
        ));
    }
    Ok(())
}

/// Whether `pattern` is a plain path, or `L/**` with `L` a plain path: a glob that always parses
/// and needs no compiled matcher (no character that means anything to a glob but that final
/// `**`).
pub(crate) fn is_plain(pattern: &str) -> bool {
    let body = pattern.strip_suffix("/**").unwrap_or(pattern);
    !body.is_empty() && !body.contains(['*', '?', '[', ']', '{', '}', ',', '\\', '!'])
}

/// Checks `pattern` as [`glob`] does, parsing it only when it is not plain (parsing builds the
/// glob's regex, which a plain path does not need).
pub(crate) fn check_glob(pattern: &str, section: &str) -> Result<(), ConfigError> {
    if is_plain(pattern) {
        check_workspace_relative(pattern, section)
    } else {
        glob(pattern, section).map(|_| ())
    }
}

/// Checks a territory's (widened) globs, as [`territory_globs`] would parse them.
pub(crate) fn check_territory_globs(paths: &[String], section: &str) -> Result<(), ConfigError> {
    for p in territory_patterns(paths) {
        check_glob(&p, section)?;
    }
    Ok(())
}

/// Compiles territory globs: each pattern `p` also covers `p/**`, and `d/**` covers `d` itself.
pub(crate) fn compile_territory_globs(
    paths: &[String],
    section: &str,
) -> Result<GlobSet, ConfigError> {
    let mut b = GlobSetBuilder::new();
    for g in territory_globs(paths, section)? {
        b.add(g);
    }
    b.build().map_err(|e| ConfigError::BadGlob {
        section: section.into(),
        glob: paths.join(", "),
        why: e.to_string(),
    })
}

/// A territory's globs, widened: each pattern `p` also covers `p/**`, and `d/**` covers `d`.
pub(crate) fn territory_globs(paths: &[String], section: &str) -> Result<Vec<Glob>, ConfigError> {
    territory_patterns(paths)
        .iter()
        .map(|p| glob(p, section))
        .collect()
}

/// A territory's patterns, widened as [`territory_globs`] widens them, unparsed.
pub(crate) fn territory_patterns(paths: &[String]) -> Vec<String> {
    let mut out = vec![];
    for p in paths {
        let trimmed = p.trim_end_matches('/');
        out.push(trimmed.to_string());
        if !trimmed.ends_with("**") {
            out.push(format!("{trimmed}/**"));
        }
        let mut root = trimmed;
        while let Some(r) = root.strip_suffix("/**") {
            root = r;
            if !root.is_empty() {
                out.push(root.to_string());
            }
        }
    }
    out
}
