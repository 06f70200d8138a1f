//! The repeat policy.

use crate::journal::Resumed;
use crate::layers::from_fn::{layer_fn, FromFn, NextTool};
use crate::layers::{call_digest, record};
use crate::tool::{ToolError, ToolInvocation, ToolOutput};
use loopward_core::{CallId, LayerId};
use loopward_core::{LayerDetail, LayerVerdict, Refusal, RepeatDetail};
use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

/// A tool service that refuses a call made more than `max_identical` times in a run.
pub type RepeatService<S> = FromFn<RepeatPolicy, S>;

/// The repeat layer's policy: count each identical call (tool + canonical arguments) in the
/// run, record the verdict, refuse past the limit.
#[derive(Clone, Copy, Debug)]
pub struct RepeatPolicy {
    pub(super) max: u32,
}

#[derive(Default)]
struct Seen(Mutex<HashMap<String, u32>>);

impl Seen {
    /// A resumed run's counts: each settled call this layer judged, once per digest.
    fn rebuilt(resumed: Option<&Resumed>) -> Self {
        let mut calls: HashMap<String, HashSet<&CallId>> = HashMap::new();
        for d in resumed
            .into_iter()
            .flat_map(|r| r.decisions(&LayerId::Repeat))
        {
            if let (Some(repeat), Some(call)) = (d.decision.detail.as_repeat(), d.call.as_ref()) {
                calls.entry(repeat.digest.clone()).or_default().insert(call);
            }
        }
        let counts = calls
            .into_iter()
            .map(|(digest, calls)| (digest, u32::try_from(calls.len()).unwrap_or(u32::MAX)))
            .collect();
        Self(Mutex::new(counts))
    }
}

layer_fn!(RepeatPolicy, tool_call(ToolInvocation) -> Result<ToolOutput, ToolError>);

impl RepeatPolicy {
    async fn tool_call(self, inv: ToolInvocation, next: NextTool) -> Result<ToolOutput, ToolError> {
        let Self { max } = self;
        let digest = call_digest(inv.call.name.as_str(), &inv.call.arguments);
        let resumed = Resumed::of(inv.turn.run());
        let seen = inv
            .turn
            .run()
            .extensions()
            .get_or_insert_with(|| Seen::rebuilt(resumed.as_deref()));
        let count = {
            let mut map = seen.0.lock().unwrap_or_else(|p| p.into_inner());
            // Looked up by `&str`: the digest is copied into the map only when it is new.
            if let Some(n) = map.get_mut(&digest) {
                *n += 1;
                *n
            } else {
                map.insert(digest.clone(), 1);
                1
            }
        };
        let detail = LayerDetail::Repeat(RepeatDetail {
            call_id: inv.call.id.clone(),
            count,
            digest,
            limit: max,
            tool: inv.call.name.clone(),
        });
        if count > max {
            record::decision(&inv.turn, LayerId::Repeat, LayerVerdict::Refused, detail)
                .map_err(ToolError::Audit)?;
            return Err(ToolError::Refused(Refusal::new(
                &LayerId::Repeat,
                format!(
                    "this exact call ({} with the same arguments) was already made {max} times in this run; repeating it will not give a different result",
                    inv.call.name
                ),
                "change the arguments, try a different approach, or finish and report what blocks you",
            )));
        }
        record::decision(&inv.turn, LayerId::Repeat, LayerVerdict::Allow, detail)
            .map_err(ToolError::Audit)?;
        next.run(inv).await
    }
}
