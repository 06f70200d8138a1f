//! Timeouts per model call, per tool call and per turn, on tokio time. A timed-out model call
//! is [`ModelError::Timeout`](crate::model::ModelError::Timeout); a timed-out tool call is
//! [`ToolError::Timeout`](crate::tool::ToolError::Timeout), an error result the model reads;
//! a timed-out turn ends the run `CapReached { cap: "timeout.turn (2m)" }`. Each is recorded as
//! `LayerDecision { layer: "timeout" }`.
//!
//! ```
//! use loopward_runner::layers::timeout::{TimeoutConfig, Timeouts};
//! use loopward_runner::layers::testing::{run, turn, Probe};
//! use loopward_runner::tool::{ToolError, ToolInvocation, ToolOutput};
//! use std::time::Duration;
//! use tower::{Layer, ServiceExt};
//! # tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap().block_on(async {
//! let t = Timeouts::new(TimeoutConfig { tool: Some(Duration::from_secs(5)), ..TimeoutConfig::default() }).unwrap();
//! let slow = tower::service_fn(|_inv: ToolInvocation| async {
//!     tokio::time::sleep(Duration::from_secs(60)).await;
//!     Ok::<_, ToolError>(ToolOutput::text("late"))
//! });
//! let dir = tempfile::tempdir().unwrap();
//! let (r, _) = run(dir.path(), "r1");
//! let inv = Probe::new("shell").invocation(&turn(&r, "builder", 1), serde_json::json!({}));
//! let err = t.tool_layer().layer(slow).oneshot(inv).await.unwrap_err();
//! assert_eq!(err, ToolError::Timeout { secs: 5 });
//! # });
//! ```

mod layer;
mod service;

pub use layer::{ModelTimeoutLayer, TimeoutConfig, Timeouts, ToolTimeoutLayer, TurnTimeoutLayer};
pub use service::{ModelTimeout, TimeoutPolicy, ToolTimeout, TurnTimeout};
