//! The repeat service.

use crate::journal::Resumed;
use crate::layers::{call_digest, record};
use crate::tool::{ToolError, ToolInvocation, ToolOutput};
use futures::future::BoxFuture;
use loopward_core::{LayerVerdict, Refusal};
use serde_json::json;
use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::task::{Context, Poll};
use tower::{Service, ServiceExt};

/// A tool service that refuses a call made more than `max_identical` times in a run.
#[derive(Clone, Debug)]
pub struct RepeatService<S> {
    inner: S,
    max: u32,
}

impl<S> RepeatService<S> {
    pub(super) fn new(inner: S, max: u32) -> Self {
        Self { inner, max }
    }
}

#[derive(Default)]
struct Seen(Mutex<HashMap<String, u32>>);

impl Seen {
    /// A resumed run's counts: each settled call this layer judged, once per digest.
    fn rebuilt(resumed: Option<&Resumed>) -> Self {
        let mut calls: HashMap<String, HashSet<&str>> = HashMap::new();
        for d in resumed.into_iter().flat_map(|r| r.decisions("repeat")) {
            if let (Some(digest), Some(call)) =
                (d.decision.detail["digest"].as_str(), d.call.as_deref())
            {
                calls.entry(digest.to_string()).or_default().insert(call);
            }
        }
        let counts = calls
            .into_iter()
            .map(|(digest, calls)| (digest, u32::try_from(calls.len()).unwrap_or(u32::MAX)))
            .collect();
        Self(Mutex::new(counts))
    }
}

impl<S> Service<ToolInvocation> for RepeatService<S>
where
    S: Service<ToolInvocation, Response = ToolOutput, Error = ToolError> + Clone + Send + 'static,
    S::Future: Send,
{
    type Response = ToolOutput;
    type Error = ToolError;
    type Future = BoxFuture<'static, Result<ToolOutput, ToolError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), ToolError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, inv: ToolInvocation) -> Self::Future {
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        let max = self.max;
        Box::pin(async move {
            let digest = call_digest(&inv.call.name, &inv.call.arguments);
            let resumed = Resumed::of(inv.turn.run());
            let seen = inv
                .turn
                .run()
                .extensions()
                .get_or_insert_with(|| Seen::rebuilt(resumed.as_deref()));
            let count = {
                let mut map = seen.0.lock().unwrap_or_else(|p| p.into_inner());
                let n = map.entry(digest.clone()).or_insert(0);
                *n += 1;
                *n
            };
            let detail = json!({"call_id": inv.call.id, "tool": inv.call.name,
                                "digest": digest, "count": count, "limit": max});
            if count > max {
                record::decision(&inv.turn, "repeat", LayerVerdict::Refused, detail)
                    .map_err(ToolError::Audit)?;
                return Err(ToolError::Refused(Refusal::new(
                    "repeat",
                    format!(
                        "this exact call ({} with the same arguments) was already made {max} times in this run; repeating it will not give a different result",
                        inv.call.name
                    ),
                    "change the arguments, try a different approach, or finish and report what blocks you",
                )));
            }
            record::decision(&inv.turn, "repeat", LayerVerdict::Allow, detail)
                .map_err(ToolError::Audit)?;
            inner.oneshot(inv).await
        })
    }
}
