//! The turn a model call belongs to, carried in the request itself ([`ChatRequest::turn`]), so a
//! layer around the model records its decisions on the right turn on whatever task it runs — a
//! task-local would be lost the moment a layer or backend spawns.
//!
//! The vocabulary does not know the runner's turn type, so the slot is opaque here: the runner
//! puts its turn in when it builds the request and its layers read it back by type
//! (`TurnContext::of(&req)` in `loopward-runner`). A backend passes the slot on untouched, or
//! ignores it.
//!
//! [`ChatRequest::turn`]: crate::model::ChatRequest::turn

use std::any::Any;
use std::sync::Arc;

/// An opaque, cheap-to-clone slot for the turn a call belongs to; empty for a call made outside
/// any turn (a backend called directly).
///
/// ```
/// use loopward_core::model::TurnSlot;
///
/// #[derive(Debug, PartialEq)]
/// struct MyTurn(u32);
///
/// let slot = TurnSlot::new(MyTurn(3));
/// assert_eq!(slot.get::<MyTurn>(), Some(&MyTurn(3)));
/// assert_eq!(slot.get::<String>(), None, "read back by its own type only");
/// assert!(TurnSlot::empty().get::<MyTurn>().is_none());
/// // Equal only to itself (a clone), never to another turn with the same contents.
/// assert_eq!(slot.clone(), slot);
/// assert_ne!(TurnSlot::new(MyTurn(3)), slot);
/// assert_eq!(TurnSlot::empty(), TurnSlot::default());
/// ```
#[derive(Clone, Default)]
pub struct TurnSlot(Option<Arc<dyn Any + Send + Sync>>);

impl TurnSlot {
    /// A slot holding `turn`.
    pub fn new<T: Any + Send + Sync>(turn: T) -> Self {
        Self(Some(Arc::new(turn)))
    }

    /// The empty slot: a call that belongs to no turn.
    pub fn empty() -> Self {
        Self(None)
    }

    /// The turn in the slot, if it holds one of type `T`.
    pub fn get<T: Any>(&self) -> Option<&T> {
        self.0.as_deref()?.downcast_ref()
    }

    /// Whether the slot holds nothing.
    pub fn is_empty(&self) -> bool {
        self.0.is_none()
    }
}

impl std::fmt::Debug for TurnSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.is_empty() {
            "TurnSlot(empty)"
        } else {
            "TurnSlot(..)"
        })
    }
}

/// Two slots are equal when both are empty or both hold the very same turn (the same
/// allocation): the slot is identity, not contents.
impl PartialEq for TurnSlot {
    fn eq(&self, other: &Self) -> bool {
        match (&self.0, &other.0) {
            (None, None) => true,
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}
