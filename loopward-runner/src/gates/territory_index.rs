//! Which territories cover a path, found without compiling every territory's globs.
//!
//! A glob can match a path only if the path starts with the glob's literal prefix (what comes
//! before its first `*`, `?`, `[`, `{` or backslash). The index keeps the globs by that prefix,
//! so a path's candidates are found with one lookup per distinct prefix length; only the
//! candidates are matched: a plain path by comparison, `dir/**` by its prefix, any other glob
//! with a matcher compiled at its first use and kept. A decision stays flat from 10 to 1,000
//! territories, and a process that makes one decision (a hook call) compiles a glob only where
//! a wildcard could reach its path.

use super::config::{glob, is_plain, territory_patterns, ConfigError};
use super::territory::Territory;
use globset::GlobMatcher;
use std::collections::{BTreeSet, HashMap};
use std::sync::OnceLock;

/// How one glob is matched: most territory globs are a plain path or everything below one,
/// which need no compiled matcher.
#[derive(Debug)]
enum Matcher {
    /// No special character: the path itself.
    Literal,
    /// `L/**` with `L` plain: every path starting with `L/`.
    Below(String),
    /// Anything else: parsed and compiled when a path first needs it (the config's check
    /// parsed it already, so it parses; were it not to, it would match every path, so that the
    /// territory denies rather than lets through: fail closed).
    Compiled(OnceLock<Option<GlobMatcher>>),
}

impl Matcher {
    fn of(pattern: &str) -> Self {
        match pattern.strip_suffix("/**") {
            _ if !is_plain(pattern) => Self::Compiled(OnceLock::new()),
            Some(dir) => Self::Below(format!("{dir}/")),
            None => Self::Literal,
        }
    }

    fn is_match(&self, pattern: &str, rel: &str) -> bool {
        match self {
            Self::Literal => pattern == rel,
            Self::Below(prefix) => rel.starts_with(prefix.as_str()),
            Self::Compiled(m) => m
                .get_or_init(|| {
                    glob(pattern, "[[territory]]")
                        .ok()
                        .map(|g| g.compile_matcher())
                })
                .as_ref()
                .is_none_or(|m| m.is_match(rel)),
        }
    }
}

/// Which territories cover a path.
#[derive(Debug, Default)]
pub(crate) struct TerritoryIndex {
    /// Every territory's (widened) globs, and for each the index of its territory.
    globs: Vec<(String, usize)>,
    /// Each glob's matcher.
    matchers: Vec<Matcher>,
    /// The globs by their literal prefix.
    by_prefix: HashMap<String, Vec<usize>>,
    /// The lengths of those prefixes, shortest first.
    prefix_lens: Vec<usize>,
    /// Each territory's position when sorted by name (covering territories are reported in
    /// name order).
    rank: Vec<usize>,
}

impl Clone for TerritoryIndex {
    fn clone(&self) -> Self {
        Self {
            globs: self.globs.clone(),
            matchers: self.globs.iter().map(|(g, _)| Matcher::of(g)).collect(),
            by_prefix: self.by_prefix.clone(),
            prefix_lens: self.prefix_lens.clone(),
            rank: self.rank.clone(),
        }
    }
}

/// What a glob's matches all start with: the pattern up to its first special character.
fn literal_prefix(pattern: &str) -> &str {
    let end = pattern
        .find(['*', '?', '[', '{', '\\'])
        .unwrap_or(pattern.len());
    &pattern[..end]
}

impl TerritoryIndex {
    /// Indexes every territory's (widened) globs, checked when each territory was made;
    /// compiles none.
    pub(crate) fn new(territories: &[Territory]) -> Result<Self, ConfigError> {
        let mut globs = vec![];
        for (i, t) in territories.iter().enumerate() {
            for g in territory_patterns(&t.config().paths) {
                globs.push((g, i));
            }
        }
        let mut by_prefix: HashMap<String, Vec<usize>> = HashMap::new();
        for (n, (g, _)) in globs.iter().enumerate() {
            by_prefix
                .entry(literal_prefix(g).to_string())
                .or_default()
                .push(n);
        }
        let prefix_lens: BTreeSet<usize> = by_prefix.keys().map(String::len).collect();
        let mut by_name: Vec<usize> = (0..territories.len()).collect();
        by_name.sort_by(|a, b| territories[*a].name().cmp(territories[*b].name()));
        let mut rank = vec![0; territories.len()];
        for (r, i) in by_name.into_iter().enumerate() {
            rank[i] = r;
        }
        Ok(Self {
            matchers: globs.iter().map(|(g, _)| Matcher::of(g)).collect(),
            globs,
            by_prefix,
            prefix_lens: prefix_lens.into_iter().collect(),
            rank,
        })
    }

    /// The globs matching `rel`, by their index in `globs`.
    fn matching<'a>(&'a self, rel: &'a str) -> impl Iterator<Item = usize> + 'a {
        self.prefix_lens
            .iter()
            .take_while(move |&&len| len <= rel.len())
            .filter(move |&&len| rel.is_char_boundary(len))
            .filter_map(move |&len| self.by_prefix.get(&rel[..len]))
            .flatten()
            .copied()
            .filter(move |&g| self.matchers[g].is_match(&self.globs[g].0, rel))
    }

    /// The territories (by index) covering the canonical workspace-relative `rel`.
    pub(crate) fn covering_ids(&self, rel: &str) -> BTreeSet<usize> {
        if rel.is_empty() {
            return BTreeSet::new();
        }
        self.matching(rel).map(|g| self.globs[g].1).collect()
    }

    /// The territories covering the canonical workspace-relative `rel`, sorted by name: the
    /// same as filtering `territories` with [`Territory::covers`].
    pub(crate) fn covering<'t>(
        &self,
        territories: &'t [Territory],
        rel: &str,
    ) -> Vec<&'t Territory> {
        let mut hits: Vec<usize> = self.covering_ids(rel).into_iter().collect();
        hits.sort_unstable_by_key(|i| self.rank[*i]);
        hits.into_iter().map(|i| &territories[i]).collect()
    }

    /// Whether any territory covers `rel`.
    pub(crate) fn any(&self, rel: &str) -> bool {
        !rel.is_empty() && self.matching(rel).next().is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gates::TerritoryConfig;
    use globset::GlobSetBuilder;
    use proptest::prelude::*;

    fn territory(name: &str, paths: &[&str]) -> Territory {
        Territory::from_config(&TerritoryConfig {
            name: Some(name.into()),
            paths: paths.iter().map(|p| p.to_string()).collect(),
            owner: Some(name.into()),
            ..Default::default()
        })
        .unwrap()
    }

    #[test]
    fn the_literal_prefix_ends_at_the_first_special_character() {
        assert_eq!(literal_prefix("src/api/**"), "src/api/");
        assert_eq!(literal_prefix("docs/a.md"), "docs/a.md");
        assert_eq!(literal_prefix("**/x"), "");
        assert_eq!(literal_prefix("a{b,c}"), "a");
        assert_eq!(literal_prefix("a\\*b"), "a");
        assert_eq!(literal_prefix("[ab]/x"), "");
    }

    #[test]
    fn one_decision_compiles_only_the_globs_its_path_could_match() {
        let mut ts: Vec<Territory> = (0..100)
            .map(|i| territory(&format!("t{i}"), &[&format!("area{i}/**")]))
            .collect();
        ts.push(territory("locks", &["**/*.lock"]));
        let index = TerritoryIndex::new(&ts).unwrap();
        let names: Vec<&str> = index
            .covering(&ts, "area42/notes.md")
            .iter()
            .map(|t| t.name())
            .collect();
        assert_eq!(names, ["t42"]);
        // `area42/**`, `area42` and `area4` need no compiling; `**/*.lock` and its widened
        // `**/*.lock/**` have an empty prefix, so every path is their candidate.
        let compiled = index
            .matchers
            .iter()
            .filter(|m| matches!(m, Matcher::Compiled(c) if c.get().is_some()))
            .count();
        assert_eq!(compiled, 2, "of {}", index.globs.len());
        assert!(index.any("area7") && !index.any("area100/x") && !index.any(""));
    }

    /// One of `parts`, as an owned string.
    fn one_of(parts: &'static [&'static str]) -> impl Strategy<Value = String> {
        proptest::sample::select(parts).prop_map(String::from)
    }

    fn glob_part() -> impl Strategy<Value = String> {
        one_of(&[
            "a", "ab", "b", "*", "**", "a*", "?b", "[ab]", "{a,ab}", "x.md", "a]", "!b", "a,b",
        ])
    }

    fn path_part() -> impl Strategy<Value = String> {
        one_of(&["a", "ab", "b", "bb", "x.md", "a]", "!b", "a,b"])
    }

    proptest! {
        /// The prefix index finds exactly what one set of every glob finds.
        #[test]
        fn the_index_finds_what_a_set_of_every_glob_finds(
            territories in proptest::collection::vec(
                proptest::collection::vec(proptest::collection::vec(glob_part(), 1..4), 1..3),
                1..6,
            ),
            paths in proptest::collection::vec(proptest::collection::vec(path_part(), 1..5), 1..8),
        ) {
            let ts: Vec<Territory> = territories
                .iter()
                .enumerate()
                .map(|(i, globs)| {
                    let globs: Vec<String> = globs.iter().map(|g| g.join("/")).collect();
                    let globs: Vec<&str> = globs.iter().map(String::as_str).collect();
                    territory(&format!("t{i}"), &globs)
                })
                .collect();
            let index = TerritoryIndex::new(&ts).unwrap();
            let mut b = GlobSetBuilder::new();
            for (g, _) in &index.globs {
                b.add(glob(g, "t").unwrap());
            }
            let set = b.build().unwrap();
            for p in paths {
                let rel = p.join("/");
                let want: BTreeSet<usize> =
                    set.matches(&rel).into_iter().map(|g| index.globs[g].1).collect();
                prop_assert_eq!(index.covering_ids(&rel), want, "{}", rel);
            }
        }
    }
}
