//! The `handoff` tool: ends the turn and gives the work to another agent.

use crate::context::TurnContext;
use crate::tool::{object_schema, parse_args, Access, Tool, ToolError, ToolInvocation, ToolOutput};
use futures::future::BoxFuture;
use futures::FutureExt;
use loopward_core::{Action, AgentId, AuditEvent, Decision, GateMode, Handoff, Refusal, ToolSpec};
use serde::Deserialize;
use serde_json::json;

/// `handoff {to, message}`. The target is an enum of the team's agents. The first handoff of a
/// turn stands; a second is refused with an error naming the first.
#[derive(Clone, Debug)]
pub struct HandoffTool {
    team: Vec<AgentId>,
}

impl HandoffTool {
    /// A handoff tool offering `team` as targets.
    pub fn new(team: Vec<AgentId>) -> Self {
        Self { team }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    to: String,
    #[serde(default)]
    message: String,
}

impl Tool for HandoffTool {
    fn spec(&self) -> ToolSpec {
        let names: Vec<&str> = self.team.iter().map(AgentId::as_str).collect();
        ToolSpec {
            name: "handoff".into(),
            description:
                "End your turn and hand the work to another agent, with a message for them.".into(),
            parameters: object_schema(
                json!({
                    "to": {"type": "string", "enum": names},
                    "message": {"type": "string"}
                }),
                &["to", "message"],
            ),
        }
    }

    fn accesses(
        &self,
        args: &serde_json::Value,
        _turn: &TurnContext,
    ) -> Result<Vec<Access>, ToolError> {
        let a: Args = parse_args("handoff", args)?;
        let to = AgentId::new(a.to).map_err(|e| ToolError::BadArguments {
            tool: "handoff".into(),
            why: e.to_string(),
        })?;
        Ok(vec![Access::Handoff { to }])
    }

    fn call(&self, inv: ToolInvocation) -> BoxFuture<'static, Result<ToolOutput, ToolError>> {
        async move {
            let a: Args = parse_args("handoff", &inv.call.arguments)?;
            let to = AgentId::new(a.to).map_err(|e| ToolError::BadArguments {
                tool: "handoff".into(),
                why: e.to_string(),
            })?;
            let handoff = Handoff {
                from: inv.turn.agent().clone(),
                to: to.clone(),
                message: a.message,
            };
            match inv.turn.register_handoff(handoff.clone()) {
                Ok(()) => {
                    inv.turn
                        .record_owned(AuditEvent::HandoffRegistered(handoff))
                        .map_err(ToolError::Audit)?;
                    Ok(ToolOutput::text(format!(
                        "handed off to {to}; your turn ends here"
                    )))
                }
                Err(err) => {
                    if let crate::context::HandoffError::AlreadyHandedOff { standing } = &err {
                        let refusal = Refusal::new(
                            loopward_core::GateKind::OneHandoff,
                            format!("a handoff to {standing} already stands this turn; only one handoff per turn is allowed, and the first one stands"),
                            format!("finish your reply; {standing} takes over next"),
                        );
                        inv.turn
                            .record_owned(AuditEvent::GateDecision {
                                call_id: Some(inv.call.id.clone()),
                                gate: loopward_core::GateId::of(loopward_core::GateKind::OneHandoff),
                                mode: GateMode::Enforce,
                                action: Action::Handoff(to.clone()),
                                path_raw: None,
                                source: None,
                                path: None,
                                decision: Decision::Deny(refusal.clone()),
                            })
                            .and_then(|()| {
                                inv.turn.record_owned(AuditEvent::HandoffRefused {
                                    to,
                                    standing: standing.clone(),
                                })
                            })
                            .map_err(ToolError::Audit)?;
                        return Err(ToolError::Refused(refusal));
                    }
                    Err(ToolError::Failed(err.to_string()))
                }
            }
        }
        .boxed()
    }
}
