//! Territories with different owners must not cover the same path: each glob's sample paths
//! matched against every territory at once.

use super::config::{ConfigError, TerritoryConfig};
use super::territory_index::TerritoryIndex;
use std::collections::BTreeSet;

/// Concrete paths a glob stands for, to test overlaps: its literal prefix and one instance.
fn samples(pattern: &str) -> Vec<String> {
    let trimmed = pattern.trim_end_matches('/');
    let mut inst = String::new();
    let mut chars = trimmed.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '*' => {
                if chars.peek() == Some(&'*') {
                    chars.next();
                    inst.push_str("x/x");
                } else {
                    inst.push('x');
                }
            }
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
    let literal: String = trimmed
        .chars()
        .take_while(|c| !matches!(c, '*' | '?' | '[' | '{' | '\\'))
        .collect();
    let mut out = vec![inst.replace("//", "/")];
    let literal = literal.trim_end_matches('/');
    if !literal.is_empty() {
        out.push(literal.to_string());
    }
    out
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
        for j in 0..territories.len() {
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
