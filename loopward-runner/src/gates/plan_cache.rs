//! Where the sprawl gate's plan lands, resolved once while nothing can have changed the links on
//! its way, instead of an `lstat` per component on every decision.
//!
//! The cache is dropped (a process-wide epoch moves) before and after every shell command, and
//! after every governed call that writes, deletes, renames or links the plan's configured path,
//! where it lands, or a folder above either — the only ways a run's agents change where the plan
//! lands. Only the sprawl gate reads it (is this write the plan? did this call write the plan?);
//! territories, control files and the hard-link defence resolve every path they judge, every time.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Moves whenever a link under any workspace of this process may have changed.
static EPOCH: AtomicU64 = AtomicU64::new(0);

/// Drops every cached plan location in the process: links may have changed.
pub(crate) fn links_may_have_changed() {
    EPOCH.fetch_add(1, Ordering::AcqRel);
}

/// One policy's cached plan location, valid for the epoch it was resolved in.
#[derive(Debug, Default)]
pub(super) struct PlanCache(Mutex<Option<(u64, Option<Arc<str>>)>>);

impl PlanCache {
    /// The cached location, or `resolve()`'s (then cached).
    pub(super) fn get(&self, resolve: impl FnOnce() -> Option<Arc<str>>) -> Option<Arc<str>> {
        // Read before resolving: a change while resolving moves the epoch past this one, so
        // the value is not reused.
        let epoch = EPOCH.load(Ordering::Acquire);
        if let Some((at, landed)) = &*self.lock() {
            if *at == epoch {
                return landed.clone();
            }
        }
        let landed = resolve();
        *self.lock() = Some((epoch, landed.clone()));
        landed
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<(u64, Option<Arc<str>>)>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Whether changing `rel` may move where the plan lands: it is the plan's configured path
/// (`literal`), where it lands (`landed`), or a folder above either (`""`: the root).
pub(super) fn moves_plan(rel: &str, literal: &str, landed: Option<&str>) -> bool {
    let above_or_at = |x: &str| {
        rel.is_empty()
            || x == rel
            || (x.len() > rel.len() && x.starts_with(rel) && x.as_bytes()[rel.len()] == b'/')
    };
    above_or_at(literal.trim_start_matches("./")) || landed.is_some_and(above_or_at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_at_or_above_the_plan_moves_it_and_nothing_else_does() {
        let landed = Some("docs/plan.md");
        for rel in ["plans/plan.md", "plans", "", "docs", "docs/plan.md"] {
            assert!(moves_plan(rel, "plans/plan.md", landed), "{rel}");
        }
        for rel in [
            "plansx",
            "plans/plan.md.bak",
            "src/lib.rs",
            "doc",
            "docs/plan",
        ] {
            assert!(!moves_plan(rel, "plans/plan.md", landed), "{rel}");
        }
    }

    #[test]
    fn the_cache_is_kept_until_the_epoch_moves() {
        let cache = PlanCache::default();
        let calls = std::cell::Cell::new(0);
        let get = || {
            cache.get(|| {
                calls.set(calls.get() + 1);
                Some("plan.md".into())
            })
        };
        // Other tests in this process may move the epoch too: then a second resolve is allowed.
        let before = EPOCH.load(Ordering::Acquire);
        assert_eq!(get().as_deref(), Some("plan.md"));
        get();
        let moved = EPOCH.load(Ordering::Acquire) != before;
        assert!(calls.get() == 1 || moved, "{}", calls.get());
        let so_far = calls.get();
        links_may_have_changed();
        get();
        assert_eq!(calls.get(), so_far + 1, "a moved epoch resolves again");
    }
}
