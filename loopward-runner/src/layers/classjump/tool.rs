//! The `report_attempt` tool: how an agent reports an attempt to the tracker.

use super::tracker::{Attempt, ClassJump, ClassJumpError};
use crate::context::TurnContext;
use crate::tool::{parse_args, Access, Tool, ToolError, ToolInvocation, ToolOutput};
use futures::future::BoxFuture;
use loopward_core::{LayerId, Refusal, ToolSpec};
use serde::Deserialize;
use serde_json::json;

/// `report_attempt {subtask, strategy, outcome: "failed" | "succeeded", note?}`. Answers with
/// the tracker's verdict; a refused report is an error result naming the strategy to use.
#[derive(Clone, Debug)]
pub struct ReportAttemptTool {
    tracker: ClassJump,
}

impl ClassJump {
    /// The `report_attempt` tool over this tracker.
    pub fn tool(&self) -> ReportAttemptTool {
        ReportAttemptTool {
            tracker: self.clone(),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    subtask: String,
    strategy: String,
    outcome: Attempt,
    #[serde(default)]
    #[allow(dead_code)]
    note: String,
}

impl Tool for ReportAttemptTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "report_attempt".into(),
            description: "Report how an attempt at a subtask went, with the strategy you used. The answer says whether to retry, which strategy to switch to, or that the run ends.".into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "subtask": {"type": "string"},
                    "strategy": {"type": "string", "enum": self.tracker.strategies()},
                    "outcome": {"type": "string", "enum": ["failed", "succeeded"]},
                    "note": {"type": "string"}
                },
                "required": ["subtask", "strategy", "outcome"],
                "additionalProperties": false
            }),
        }
    }

    fn accesses(
        &self,
        arguments: &serde_json::Value,
        _turn: &TurnContext,
    ) -> Result<Vec<Access>, ToolError> {
        parse_args::<Args>("report_attempt", arguments)?;
        Ok(vec![])
    }

    fn call(&self, inv: ToolInvocation) -> BoxFuture<'static, Result<ToolOutput, ToolError>> {
        let tracker = self.tracker.clone();
        Box::pin(async move {
            let a: Args = parse_args("report_attempt", &inv.call.arguments)?;
            match tracker.report(&inv.turn, &a.subtask, &a.strategy, a.outcome) {
                Ok(v) => Ok(ToolOutput::text(v.message())),
                Err(ClassJumpError::Audit(e)) => Err(ToolError::Audit(e)),
                Err(e) => Err(ToolError::Refused(Refusal::new(
                    &LayerId::ClassJump,
                    e.to_string(),
                    "report attempts with the current strategy only",
                ))),
            }
        })
    }
}
