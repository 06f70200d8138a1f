//! The egress proxy: the only way out of a sandboxed command's network namespace.
//!
//! A command in an [isolated](crate::sandbox::Network::Isolated) sandbox has loopback only. The
//! supervisor (the runner, outside the sandbox) serves an HTTP proxy on a port of that loopback
//! ([`serve`]): `CONNECT host:port` for TLS (allowed or refused by name, never read) and
//! absolute-form `http://` requests (forwarded with `Connection: close`, so each request is
//! judged; a redirect to another host is a new request, judged on its own). The proxy resolves
//! names itself and connects to the address it checked, so a name that resolves elsewhere
//! later is not followed; loopback, private, link-local, shared and cloud-metadata addresses
//! are refused after resolution unless the address itself is listed. Every decision is
//! recorded ([`AuditEvent::EgressDecided`](loopward_core::AuditEvent::EgressDecided), before
//! any byte goes out) and every allowed connection's byte counts when it ends
//! ([`AuditEvent::EgressClosed`](loopward_core::AuditEvent::EgressClosed)).
//!
//! ```
//! use loopward_runner::egress::EgressPolicy;
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let policy = EgressPolicy::new(["127.0.0.1", "localhost"]);
//! // Listed as an address: allowed, though it is loopback.
//! assert!(policy.resolve("127.0.0.1", 80).await.is_ok());
//! // Listed as a name that resolves to loopback: refused after resolution.
//! let why = policy.resolve("localhost", 80).await.unwrap_err();
//! assert!(why.contains("loopback"), "{why}");
//! // Not listed at all.
//! assert!(policy.resolve("169.254.169.254", 80).await.unwrap_err().contains("not in"));
//! # });
//! ```

mod gateway;
mod policy;
mod proxy;

pub use gateway::Gateway;
pub use policy::EgressPolicy;
pub use proxy::{serve, Record, Recorder};
