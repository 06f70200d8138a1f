//! A small type map so layers and gates can keep their own state on a run or a turn without
//! the runner knowing their types.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Per-run or per-turn state owned by layers and gates, keyed by type.
///
/// ```
/// use loopward_runner::Extensions;
/// use std::sync::atomic::{AtomicU32, Ordering};
/// let ext = Extensions::default();
/// ext.get_or_default::<AtomicU32>().fetch_add(1, Ordering::SeqCst);
/// assert_eq!(ext.get_or_default::<AtomicU32>().load(Ordering::SeqCst), 1);
/// ```
#[derive(Default)]
pub struct Extensions(Mutex<HashMap<TypeId, Arc<dyn Any + Send + Sync>>>);

impl Extensions {
    /// The value of type `T`, created by `init` the first time it is asked for. `init` runs
    /// outside the map's lock, so it may read other extensions (a layer rebuilding its state
    /// from the run's journal does); callers racing to be first may each run it, and one value
    /// is kept.
    pub fn get_or_insert_with<T: Any + Send + Sync>(&self, init: impl FnOnce() -> T) -> Arc<T> {
        if let Some(v) = self.get::<T>() {
            return v;
        }
        let fresh = Arc::new(init()) as Arc<dyn Any + Send + Sync>;
        let mut map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let entry = map.entry(TypeId::of::<T>()).or_insert(fresh).clone();
        drop(map);
        match entry.downcast::<T>() {
            Ok(v) => v,
            Err(_) => unreachable!("extensions are keyed by their own TypeId"),
        }
    }

    /// The value of type `T`, created with `Default` the first time.
    pub fn get_or_default<T: Any + Send + Sync + Default>(&self) -> Arc<T> {
        self.get_or_insert_with(T::default)
    }

    /// The value of type `T`, if one was inserted.
    pub fn get<T: Any + Send + Sync>(&self) -> Option<Arc<T>> {
        let map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        map.get(&TypeId::of::<T>())
            .cloned()
            .and_then(|v| v.downcast::<T>().ok())
    }
}

impl std::fmt::Debug for Extensions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.0.lock().map(|m| m.len()).unwrap_or(0);
        f.debug_struct("Extensions").field("len", &n).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::Extensions;

    #[test]
    fn an_init_may_read_other_extensions_without_deadlock() {
        let ext = Extensions::default();
        ext.get_or_insert_with(|| 7u32);
        let seen = ext.get_or_insert_with(|| *ext.get::<u32>().unwrap() as u64 + 1);
        assert_eq!(*seen, 8);
    }
}
