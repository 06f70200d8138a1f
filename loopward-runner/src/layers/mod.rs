//! Tower layers that keep a run within its rules: each concern is a [`tower::Layer`] in its own
//! module, and every decision one takes is a `LayerDecision` event in the run's ledger.
//!
//! | module | wraps | ends the run with | decides |
//! |---|---|---|---|
//! | [`caps`] | turn | `CapReached` | turns per run/agent, handoff hops, steps per turn, wall time |
//! | [`repeat`] | tool | (refuses the call) | the same call (tool + canonical arguments) K times |
//! | [`classjump`] | turn + a tool | `Exhausted` | a subtask's strategy failed N times → the next |
//! | [`stopgate`] | turn + tool | `Stopped`, `AwaitingApproval` | a person's approval, bound to one action |
//! | [`ratelimit`] | model | (waits) | requests and tokens per interval, per backend and per agent |
//! | [`budget`] | turn | `BudgetExceeded` | tokens and cost per run |
//! | [`timeout`] | model, tool, turn | `CapReached` (turn) | time per call |
//!
//! [`from_fn`] makes a layer of your own from an async function of the request and the rest of
//! the stack (a layer is its policy; the readiness idiom is in one place). Every built-in layer
//! above, and the gates' `PolicyLayer`, is made the same way: the layer is
//! `FromFnLayer<TheirPolicy>` and its service `FromFn<TheirPolicy, S>` (a struct implementing
//! [`from_fn::LayerFn`]), so no layer writes its own `Layer` impl or `poll_ready`.
//!
//! [`stack`] builds the recommended stacks from the `loopward.toml` tables, in this order
//! (outermost first):
//!
//! - turn: caps → stop-gates → budget → class-jump → turn timeout → the agent
//! - tool: repeat → stop-gates → tool timeout → the executor
//! - model: rate limit → model timeout → the backend (waiting for a quota is not a timeout)
//!
//! Layers keep their per-run state in [`RunContext::extensions`](crate::RunContext::extensions),
//! so one stack serves many runs without sharing counts between them.
//!
//! ```
//! use loopward_runner::layers::{caps::{CapsConfig, CapsLayer}, repeat::{RepeatConfig, RepeatLayer}};
//! // Settings are validated when a layer is built; the error names the field.
//! let err = CapsLayer::new(CapsConfig { turns_per_run: 0, ..CapsConfig::default() }).unwrap_err();
//! assert_eq!(err.field, "limits.turns_per_run");
//! let err = RepeatLayer::new(RepeatConfig { max_identical: 0 }).unwrap_err();
//! assert!(err.to_string().contains("repeat.max_identical"));
//! ```

pub mod budget;
mod canonical;
pub mod caps;
pub mod classjump;
mod config;
pub mod from_fn;
pub mod ratelimit;
mod record;
pub mod repeat;
pub mod stack;
pub mod stopgate;
#[doc(hidden)]
pub mod testing;
pub mod timeout;

pub use canonical::{call_digest, canonical_json};
pub use config::ConfigError;
