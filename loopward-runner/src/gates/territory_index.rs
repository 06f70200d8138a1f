//! All territories' globs compiled into one [`GlobSet`], so a path is matched once however many
//! territories there are (the decision stays flat from 10 to 1,000 territories).

use super::config::{territory_globs, ConfigError};
use super::territory::Territory;
use globset::{Candidate, GlobSet, GlobSetBuilder};
use std::cell::RefCell;

/// Which territories cover a path, in one match.
#[derive(Clone, Debug, Default)]
pub(crate) struct TerritoryIndex {
    set: GlobSet,
    /// For each glob of `set`, the index of its territory.
    owner_of: Vec<usize>,
    /// Each territory's position when sorted by name (covering territories are reported in
    /// name order).
    rank: Vec<usize>,
}

impl TerritoryIndex {
    /// Compiles every territory's (widened) globs into one set.
    pub(crate) fn new(territories: &[Territory]) -> Result<Self, ConfigError> {
        let mut b = GlobSetBuilder::new();
        let mut owner_of = vec![];
        for (i, t) in territories.iter().enumerate() {
            let section = format!("territory {}", t.name());
            for g in territory_globs(&t.config().paths, &section)? {
                b.add(g);
                owner_of.push(i);
            }
        }
        let set = b.build().map_err(|e| ConfigError::BadGlob {
            section: "[[territory]]".into(),
            glob: "(all territories)".into(),
            why: e.to_string(),
        })?;
        let mut by_name: Vec<usize> = (0..territories.len()).collect();
        by_name.sort_by(|a, b| territories[*a].name().cmp(territories[*b].name()));
        let mut rank = vec![0; territories.len()];
        for (r, i) in by_name.into_iter().enumerate() {
            rank[i] = r;
        }
        Ok(Self {
            set,
            owner_of,
            rank,
        })
    }

    /// The territories covering the canonical workspace-relative `rel`, sorted by name: the
    /// same as filtering `territories` with [`Territory::covers`], in one match of the path.
    pub(crate) fn covering<'t>(
        &self,
        territories: &'t [Territory],
        rel: &str,
    ) -> Vec<&'t Territory> {
        if rel.is_empty() || self.set.is_empty() {
            return vec![];
        }
        // The matched globs go into a buffer kept per thread: a decision allocates only the
        // list it returns.
        thread_local! {
            static HITS: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
        }
        HITS.with_borrow_mut(|hits| {
            hits.clear();
            self.set.matches_candidate_into(&Candidate::new(rel), hits);
            for h in hits.iter_mut() {
                *h = self.owner_of[*h];
            }
            hits.sort_unstable_by_key(|i| self.rank[*i]);
            hits.dedup();
            hits.iter().map(|i| &territories[*i]).collect()
        })
    }

    /// Every territory's globs in one set, and for each glob the index of its territory.
    pub(crate) fn globs(&self) -> (&GlobSet, &[usize]) {
        (&self.set, &self.owner_of)
    }

    /// Whether any territory covers `rel`.
    pub(crate) fn any(&self, rel: &str) -> bool {
        !rel.is_empty() && self.set.is_match(rel)
    }
}
