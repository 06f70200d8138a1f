//! Repeat detection by counting, not similarity: the same tool call (tool name and canonical
//! arguments, see [`call_digest`](crate::layers::call_digest)) may run at most
//! `max_identical` times in a run; later ones are refused with a correctable error the model
//! reads. Refused repeats still count toward the turn's step cap, so a model that repeats one
//! call forever ends at that cap.
//!
//! ```
//! use loopward_runner::layers::repeat::{RepeatConfig, RepeatLayer};
//! use loopward_runner::layers::testing::{run, turn, Probe};
//! use loopward_runner::tool::{ToolError, ToolExecutor};
//! use serde_json::json;
//! use tower::{Layer, ServiceExt};
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let svc = RepeatLayer::new(RepeatConfig { max_identical: 2 }).unwrap().layer(ToolExecutor);
//! let dir = tempfile::tempdir().unwrap();
//! let (run, _sink) = run(dir.path(), "r1");
//! let turn = turn(&run, "builder", 1);
//! let probe = Probe::new("list_dir");
//! let args = json!({"path": "."});
//! for _ in 0..2 {
//!     assert!(svc.clone().oneshot(probe.invocation(&turn, args.clone())).await.is_ok());
//! }
//! let third = svc.clone().oneshot(probe.invocation(&turn, args)).await;
//! assert!(matches!(third, Err(ToolError::Refused(r)) if r.gate == "repeat"));
//! assert_eq!(probe.calls(), 2); // the third never ran
//! # });
//! ```

mod layer;
mod service;

pub use layer::{RepeatConfig, RepeatLayer, DEFAULT_MAX_IDENTICAL};
pub use service::{RepeatPolicy, RepeatService};
