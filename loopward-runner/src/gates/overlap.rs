//! Territories with different owners must not cover the same path: each glob's sample paths
//! matched against every territory at once. The same samples find a path claimed twice for the
//! same owners ([`redundant_claims`], for `loopward policy lint`).

use super::config::{territory_globs, ConfigError, TerritoryConfig};
use super::territory_index::TerritoryIndex;
use globset::GlobSetBuilder;
use std::collections::BTreeSet;

/// Concrete paths a glob stands for, to test overlaps: its literal prefix and one instance.
fn samples(pattern: &str) -> Vec<String> {
    let mut out = vec![instance(pattern, "x")];
    let literal: String = pattern
        .trim_end_matches('/')
        .chars()
        .take_while(|c| !matches!(c, '*' | '?' | '[' | '{' | '\\'))
        .collect();
    let literal = literal.trim_end_matches('/');
    if !literal.is_empty() {
        out.push(literal.to_string());
    }
    out
}

/// One path the glob matches, each wildcard filled with `fill` (`**` with two folders of it).
fn instance(pattern: &str, fill: &str) -> String {
    let trimmed = pattern.trim_end_matches('/');
    let mut inst = String::new();
    let mut chars = trimmed.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '*' => {
                if chars.peek() == Some(&'*') {
                    chars.next();
                    inst.push_str(&format!("{fill}/{fill}"));
                } else {
                    inst.push_str(fill);
                }
            }
            // One character whatever the fill.
            '?' => inst.push('x'),
            '[' => {
                let mut first = None;
                for d in chars.by_ref() {
                    if d == ']' && first.is_some() {
                        break;
                    }
                    if first.is_none() && d != '!' && d != '^' {
                        first = Some(d);
                    }
                }
                inst.push(first.unwrap_or('x'));
            }
            '{' => {
                for d in chars.by_ref() {
                    if d == ',' || d == '}' {
                        if d == ',' {
                            for e in chars.by_ref() {
                                if e == '}' {
                                    break;
                                }
                            }
                        }
                        break;
                    }
                    inst.push(d);
                }
            }
            '\\' => {
                if let Some(d) = chars.next() {
                    inst.push(d);
                }
            }
            c => inst.push(c),
        }
    }
    inst.replace("//", "/")
}

/// A sample path and the territories (by index) that cover it.
type Covered = (String, BTreeSet<usize>);

/// Territories with different owners covering one path, found with the index the policy
/// decides with (`index`, built from `territories` in order). Each glob's samples are matched
/// once against all.
pub(super) fn overlaps_with(
    territories: &[TerritoryConfig],
    index: &TerritoryIndex,
) -> Result<(), ConfigError> {
    let owners = territories
        .iter()
        .enumerate()
        .map(|(i, t)| t.owner_ids(&format!("territory[{i}]")))
        .collect::<Result<Vec<_>, _>>()?;
    overlaps_in(territories, &owners, index)
}

fn overlaps_in(
    territories: &[TerritoryConfig],
    owners: &[Vec<loopward_core::AgentId>],
    index: &TerritoryIndex,
) -> Result<(), ConfigError> {
    let covering = |s: &str| -> BTreeSet<usize> { index.covering_ids(s) };
    // Each territory's samples (its own, with who covers each) and the folders it names.
    let own: Vec<Vec<Vec<Covered>>> = territories
        .iter()
        .map(|t| {
            t.paths
                .iter()
                .map(|p| {
                    samples(p)
                        .into_iter()
                        .map(|s| {
                            let by = covering(&s);
                            (s, by)
                        })
                        .collect()
                })
                .collect()
        })
        .collect();
    let prefixes: Vec<Vec<String>> = territories
        .iter()
        .map(|t| {
            t.paths
                .iter()
                .flat_map(|q| samples(q).into_iter().skip(1))
                .collect()
        })
        .collect();
    for (i, t) in territories.iter().enumerate() {
        // Only a territory that covers one of this one's samples can overlap it, unless a
        // `**/x` glob meets another's folder below: then every territory is tried (the first
        // overlap found is the same either way, in the same order).
        let candidates: BTreeSet<usize> = if t.paths.iter().any(|p| p.starts_with("**/")) {
            (0..territories.len()).collect()
        } else {
            own[i]
                .iter()
                .flatten()
                .flat_map(|(_, by)| by.iter().copied())
                .collect()
        };
        for j in candidates {
            if i == j || owners[j] == owners[i] {
                continue;
            }
            let overlap = |path: String| ConfigError::Overlap {
                a: format!("territory[{i}]"),
                b: format!("territory[{j}]"),
                path,
            };
            for (k, p) in t.paths.iter().enumerate() {
                if let Some((s, _)) = own[i][k].iter().find(|(_, by)| by.contains(&j)) {
                    return Err(overlap(s.clone()));
                }
                // `**/x` meets another territory's folder: try it there too.
                if let Some(rest) = p.strip_prefix("**/") {
                    for pre in &prefixes[j] {
                        for s in samples(&format!("{pre}/{rest}")) {
                            if covering(&s).contains(&j) {
                                return Err(overlap(s));
                            }
                        }
                    }
                }
            }
        }
    }
    Ok(())
}

/// A sample path and the globs, as (territory, glob) indices, that cover it.
type Claimed = (String, BTreeSet<(usize, usize)>);

/// A path claimed twice for the same owners: by two territories, or by two globs of one
/// territory where one adds nothing to the other. Harmless to the decision, but a claim that
/// diverges from its twin when one is edited (a changed owner makes the config refuse to load).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RedundantClaim {
    /// The first claim: (territory index, glob index in its `paths`).
    pub first: (usize, usize),
    /// The second claim, later in the config than the first.
    pub second: (usize, usize),
    /// A path both cover.
    pub path: String,
    /// Which of the two covers every sample of the other (its claim adds nothing), if either.
    pub adds_nothing: Option<(usize, usize)>,
}

/// Paths claimed twice for the same owners, found with the samples that find overlaps between
/// owners: two territories with the same owners that overlap, and a glob of one territory that
/// another of its globs already covers. Samples-based, like the overlap check: what it reports is
/// a real shared path; a pair whose samples all miss is not reported.
///
/// ```
/// use loopward_runner::gates::{redundant_claims, TerritoryConfig};
/// let t = |owner: &str, paths: &[&str]| TerritoryConfig {
///     paths: paths.iter().map(|p| p.to_string()).collect(),
///     owner: Some(owner.into()),
///     ..Default::default()
/// };
/// let found = redundant_claims(&[
///     t("builder", &["src/**", "src/*.rs"]),
///     t("writer", &["docs/**", "**/*.md"]),
/// ])
/// .unwrap();
/// assert_eq!(found.len(), 1, "{found:?}");
/// assert_eq!((found[0].first, found[0].second), ((0, 0), (0, 1)));
/// assert_eq!(found[0].adds_nothing, Some((0, 1)), "src/*.rs adds nothing to src/**");
/// ```
pub fn redundant_claims(
    territories: &[TerritoryConfig],
) -> Result<Vec<RedundantClaim>, ConfigError> {
    let mut owners = vec![];
    let mut b = GlobSetBuilder::new();
    let mut of_glob = vec![];
    for (i, t) in territories.iter().enumerate() {
        let section = format!("territory[{i}]");
        owners.push(t.owner_ids(&section)?);
        for (k, p) in t.paths.iter().enumerate() {
            for g in territory_globs(std::slice::from_ref(p), &section)? {
                b.add(g);
                of_glob.push((i, k));
            }
        }
    }
    let all = b.build().map_err(|e| ConfigError::BadGlob {
        section: "[[territory]]".into(),
        glob: "(all territories)".into(),
        why: e.to_string(),
    })?;
    let covering = |s: &str| -> BTreeSet<(usize, usize)> {
        all.matches(s).into_iter().map(|g| of_glob[g]).collect()
    };
    let globs: Vec<(usize, usize, &str)> = territories
        .iter()
        .enumerate()
        .flat_map(|(i, t)| {
            t.paths
                .iter()
                .enumerate()
                .map(move |(k, p)| (i, k, p.as_str()))
        })
        .collect();
    // Every sample of a glob (a second instance filled otherwise, so a literal that happens to
    // match the first is not taken for a cover), with who covers each.
    let sampled: Vec<Vec<Claimed>> = globs
        .iter()
        .map(|&(_, _, p)| {
            let mut s = samples(p);
            s.push(instance(p, "zq7"));
            s.into_iter()
                .map(|s| {
                    let by = covering(&s);
                    (s, by)
                })
                .collect()
        })
        .collect();
    let mut out: Vec<RedundantClaim> = vec![];
    for (a, &(i, k, p)) in globs.iter().enumerate() {
        for (b, &(j, l, q)) in globs.iter().enumerate().skip(a + 1) {
            if owners[i] != owners[j] {
                continue;
            }
            let covers_all = |of: usize, by: (usize, usize)| {
                sampled[of].iter().all(|(_, who)| who.contains(&by))
            };
            let adds_nothing = if covers_all(b, (i, k)) {
                Some((j, l))
            } else if covers_all(a, (j, l)) {
                Some((i, k))
            } else {
                None
            };
            // Two globs of one territory may overlap in part (`docs/**`, `**/*.md`): each claims
            // what the other does not. Only one that adds nothing is redundant there.
            if i == j && adds_nothing.is_none() {
                continue;
            }
            let mut shared = sampled[a]
                .iter()
                .find(|(_, who)| who.contains(&(j, l)))
                .or_else(|| sampled[b].iter().find(|(_, who)| who.contains(&(i, k))))
                .map(|(s, _)| s.clone());
            // `**/x` meets the other glob's folder: try it there too.
            for (rest, other) in [(p.strip_prefix("**/"), q), (q.strip_prefix("**/"), p)] {
                let Some(rest) = rest.filter(|_| shared.is_none()) else {
                    continue;
                };
                shared = samples(other)
                    .into_iter()
                    .skip(1)
                    .flat_map(|pre| samples(&format!("{pre}/{rest}")))
                    .find(|s| {
                        let by = covering(s);
                        by.contains(&(i, k)) && by.contains(&(j, l))
                    });
            }
            if let Some(path) = shared {
                out.push(RedundantClaim {
                    first: (i, k),
                    second: (j, l),
                    path,
                    adds_nothing,
                });
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owned(owner: &str, paths: &[&str]) -> TerritoryConfig {
        TerritoryConfig {
            paths: paths.iter().map(|p| p.to_string()).collect(),
            owner: Some(owner.into()),
            ..Default::default()
        }
    }

    #[test]
    fn two_territories_of_one_owner_that_overlap_are_one_claim_made_twice() {
        let found = redundant_claims(&[
            owned("builder", &["src/**"]),
            owned("planner", &["plan.md"]),
            owned("builder", &["**/*.rs"]),
        ])
        .unwrap();
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!((found[0].first, found[0].second), ((0, 0), (2, 0)));
        assert_eq!(found[0].path, "src/x.rs");
        assert_eq!(found[0].adds_nothing, None);
    }

    #[test]
    fn a_glob_another_of_its_territory_covers_adds_nothing() {
        let found = redundant_claims(&[owned("builder", &["src/main.rs", "src/**"])]).unwrap();
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].adds_nothing, Some((0, 0)));
        assert_eq!(found[0].path, "src/main.rs");
    }

    #[test]
    fn globs_that_only_meet_or_share_a_name_by_chance_are_not_redundant() {
        // Each claims what the other does not.
        assert_eq!(
            redundant_claims(&[owned("w", &["docs/**", "**/*.md"])]).unwrap(),
            []
        );
        // `x.md` adds nothing to `*.md`; `*.md` is more than its one instance `x.md`.
        assert_eq!(
            redundant_claims(&[owned("w", &["*.md", "x.md"])]).unwrap()[0].adds_nothing,
            Some((0, 1))
        );
        // Different owners are the load's business (refused there), not a redundancy.
        assert_eq!(
            redundant_claims(&[owned("a", &["src/**"]), owned("b", &["lib/**"])]).unwrap(),
            []
        );
    }
}
