//! `LlmAgent`: the model ↔ tools inner loop of one turn.

use crate::journal::{FedCall, TurnFeed};
use crate::model::{BoxModelService, ChatRequest, ChatResponse};
use crate::tool::{BoxToolService, ToolError, ToolInvocation, ToolSet};
use crate::turn::{TurnError, TurnOutcome, TurnRequest};
use loopward_core::{
    AgentId, AuditEvent, CallId, FinishReason, LayerVerdict, Message, Price, ToolCall, ToolResult,
    Usage,
};
use std::collections::HashSet;
use std::sync::Arc;
use tower::ServiceExt;
use tracing::Instrument;

/// The default cap on tool calls in one turn.
pub const DEFAULT_MAX_STEPS: u32 = 16;

/// An agent backed by a model: calls the model, runs its tool calls through the tool stack,
/// feeds the results back, until the model stops calling tools, hands off, or the step cap is
/// hit. A refused or failed tool call becomes an error result the model reads in the same turn.
#[derive(Clone)]
pub struct LlmAgent {
    inner: Arc<Inner>,
}

struct Inner {
    name: AgentId,
    system: String,
    model: BoxModelService,
    tools: ToolSet,
    tool_stack: BoxToolService,
    max_steps: u32,
    max_tokens: Option<u32>,
    price: Option<Price>,
}

impl std::fmt::Debug for LlmAgent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlmAgent")
            .field("name", &self.inner.name)
            .field("tools", &self.inner.tools)
            .field("max_steps", &self.inner.max_steps)
            .finish_non_exhaustive()
    }
}

/// Builds an [`LlmAgent`].
pub struct LlmAgentBuilder {
    name: AgentId,
    system: String,
    model: BoxModelService,
    tools: ToolSet,
    tool_stack: Option<BoxToolService>,
    max_steps: u32,
    max_tokens: Option<u32>,
    price: Option<Price>,
}

impl LlmAgent {
    /// Starts building an agent called `name` that talks to `model`.
    pub fn builder(name: AgentId, model: BoxModelService) -> LlmAgentBuilder {
        LlmAgentBuilder {
            name,
            system: String::new(),
            model,
            tools: ToolSet::new(),
            tool_stack: None,
            max_steps: DEFAULT_MAX_STEPS,
            max_tokens: None,
            price: None,
        }
    }

    /// The agent's name.
    pub fn name(&self) -> &AgentId {
        &self.inner.name
    }
}

impl LlmAgentBuilder {
    /// The system prompt.
    pub fn system(mut self, prompt: impl Into<String>) -> Self {
        self.system = prompt.into();
        self
    }

    /// The tools the agent may call.
    pub fn tools(mut self, tools: ToolSet) -> Self {
        self.tools = tools;
        self
    }

    /// The tool stack calls go through (default: the bare [`ToolExecutor`](crate::tool::ToolExecutor)).
    pub fn tool_stack(mut self, stack: BoxToolService) -> Self {
        self.tool_stack = Some(stack);
        self
    }

    /// The cap on tool calls in one turn (at least 1).
    pub fn max_steps(mut self, n: u32) -> Self {
        self.max_steps = n.max(1);
        self
    }

    /// The most tokens one model call may generate.
    pub fn max_tokens(mut self, n: u32) -> Self {
        self.max_tokens = Some(n);
        self
    }

    /// The price of the agent's model, so each model call's cost is recorded in the ledger.
    pub fn price(mut self, price: Price) -> Self {
        self.price = Some(price);
        self
    }

    /// Builds the agent.
    pub fn build(self) -> LlmAgent {
        LlmAgent {
            inner: Arc::new(Inner {
                name: self.name,
                system: self.system,
                model: self.model,
                tools: self.tools,
                tool_stack: self
                    .tool_stack
                    .unwrap_or_else(|| BoxToolService::new(crate::tool::ToolExecutor)),
                max_steps: self.max_steps,
                max_tokens: self.max_tokens,
                price: self.price,
            }),
        }
    }
}

crate::leaf_service!(LlmAgent: TurnRequest => Result<TurnOutcome, TurnError>, |agent, req| {
    let inner = agent.inner.clone();
    Box::pin(async move { inner.run_turn(req).await })
});

impl Inner {
    async fn run_turn(&self, req: TurnRequest) -> Result<TurnOutcome, TurnError> {
        let turn = req.turn;
        // A resumed turn takes its recorded steps from here before going live.
        let feed = turn.extensions().get::<TurnFeed>();
        let mut history = Vec::with_capacity(req.messages.len() + 1);
        if !self.system.is_empty() {
            history.push(Message::system(self.system.clone()));
        }
        history.extend(req.messages);
        let first_new = history.len();
        let mut usage = Usage::default();
        let mut text = String::new();
        let finish = loop {
            let tools_disabled = turn.state().tools_disabled;
            let request = ChatRequest {
                agent: self.name.clone(),
                messages: history.clone(),
                tools: if tools_disabled {
                    vec![]
                } else {
                    self.tools.specs()
                },
                max_tokens: self.max_tokens,
                turn: turn.slot(),
            };
            let reply = self.reply(&turn, request, feed.as_deref()).await?;
            usage += reply.usage;
            let cut_off = reply.stop.is_cut_off();
            text.clone_from(&reply.content);
            let calls = reply.tool_calls.clone();
            history.push(Message::model(reply.content, reply.tool_calls));
            // A reply cut off at the token limit is unfinished, whatever it says: not an answer,
            // and none of its calls run. (Wrap-up words, when the run ends anyway, are optional.)
            if cut_off && !turn.state().tools_disabled {
                return Err(TurnError::CutOff {
                    agent: self.name.clone(),
                    max_tokens: self.max_tokens.map_or_else(
                        || "the backend's limit".to_owned(),
                        |n| format!("{n} tokens"),
                    ),
                });
            }
            if calls.is_empty() {
                // An empty answer completes nothing. Wrap-up words (tools disabled by a cap, an
                // exhaustion or a denial, the run ending anyway) are optional.
                if text.trim().is_empty() && !turn.state().tools_disabled {
                    return Err(TurnError::EmptyReply {
                        agent: self.name.clone(),
                    });
                }
                break FinishReason::Done;
            }
            let mut seen = HashSet::new();
            for call in calls {
                let span = crate::telemetry::tool_span(&call);
                let result = self
                    .run_call(&turn, call, &mut seen, feed.as_deref())
                    .instrument(span.clone())
                    .await;
                crate::telemetry::record_tool(&span, result.as_ref());
                let result = result?;
                history.push(Message::Tool(result));
            }
            if turn.state().handoff.is_some() {
                break FinishReason::Handoff;
            }
            if turn.state().steps >= self.max_steps {
                turn.state().step_limit = Some(self.max_steps);
                break FinishReason::StepCap;
            }
        };
        let state = turn.state().clone();
        Ok(TurnOutcome {
            messages: history.split_off(first_new),
            effects: state.effects,
            handoff: state.handoff,
            usage,
            finish,
            text,
        })
    }

    /// Runs one tool call through the stack; every failure but a fatal one becomes an error
    /// result for the model.
    async fn run_call(
        &self,
        turn: &crate::context::TurnContext,
        call: ToolCall,
        seen: &mut HashSet<CallId>,
        feed: Option<&TurnFeed>,
    ) -> Result<ToolResult, TurnError> {
        // Read live, not once per reply: a call that ends the run (exhaustion, a denied
        // stop-gate) ends the rest of the reply that made it.
        let (step, tools_disabled, run_ends) = {
            let mut st = turn.state();
            st.steps += 1;
            (st.steps, st.tools_disabled, st.run_ends.clone())
        };
        match feed.and_then(|f| f.take_call(&call.id, &call.name)) {
            None => turn.record_owned(AuditEvent::ToolRequested {
                call_id: call.id.clone(),
                tool: call.name.clone(),
                arguments: call.arguments.clone(),
            })?,
            Some(fed) => {
                seen.insert(call.id.clone());
                match resume_call(turn, &call, fed)? {
                    Some(result) => return Ok(result),
                    None => {
                        let outcome = dispatch(&self.tools, &self.tool_stack, turn, &call).await;
                        return finish_call(turn, call, outcome);
                    }
                }
            }
        }
        let outcome = if !seen.insert(call.id.clone()) {
            Err(ToolError::BadArguments {
                tool: call.name.clone(),
                why: format!(
                    "call id {:?} was already used in this reply; each call needs its own id",
                    call.id
                ),
            })
        } else if let Some(status) = run_ends {
            Err(ToolError::Failed(format!(
                "not run: the run ends after this reply ({}); answer in text",
                status.label()
            )))
        } else if tools_disabled {
            Err(ToolError::Failed(
                "tools are disabled for this wrap-up turn; answer in text".into(),
            ))
        } else if step > self.max_steps {
            Err(ToolError::Failed(format!(
                "not run: this turn reached its cap of {} tool calls; finish your reply or hand off",
                self.max_steps
            )))
        } else if turn.state().handoff.is_some() && call.name != "handoff" {
            Err(ToolError::Failed(
                "not run: you already handed off this turn".into(),
            ))
        } else {
            dispatch(&self.tools, &self.tool_stack, turn, &call).await
        };
        finish_call(turn, call, outcome)
    }

    /// The model's next reply: the recorded one when the turn is being resumed and the journal
    /// holds it (no model call, nothing recorded again), else a live call, recorded.
    async fn reply(
        &self,
        turn: &crate::context::TurnContext,
        request: ChatRequest,
        feed: Option<&TurnFeed>,
    ) -> Result<ChatResponse, TurnError> {
        if let Some(r) = feed.and_then(TurnFeed::next_reply) {
            return Ok(ChatResponse {
                content: r.text,
                tool_calls: r.tool_calls,
                usage: r.usage,
                model: String::new(),
                stop: r.stop,
            });
        }
        // The layers' decisions that let this call through are durable before it is made.
        turn.commit()?;
        let turn_span = tracing::Span::current();
        let span = crate::telemetry::model_span(&self.name, self.max_tokens);
        let call = self.model.clone().oneshot(request).instrument(span.clone());
        let reply = crate::telemetry::naming_provider(turn, &turn_span, call).await;
        crate::telemetry::record_model(&span, reply.as_ref());
        let reply = reply?;
        turn.record_owned(AuditEvent::ModelCall {
            model: reply.model.clone(),
            usage: reply.usage,
            cost_micros: self.price.map(|p| p.cost_micros(&reply.usage)),
            tool_calls: u32::try_from(reply.tool_calls.len()).unwrap_or(u32::MAX),
        })?;
        turn.record_owned(AuditEvent::ModelReply {
            text: reply.content.clone(),
            tool_calls: reply.tool_calls.clone(),
            stop: reply.stop,
        })?;
        Ok(reply)
    }
}

/// Runs `call` through `stack` with its tool from `tools` (the accesses it declares resolved
/// first). Shared by [`LlmAgent`] and the tools a CLI agent's session calls over MCP.
pub(crate) async fn dispatch(
    tools: &ToolSet,
    stack: &BoxToolService,
    turn: &crate::context::TurnContext,
    call: &ToolCall,
) -> Result<crate::tool::ToolOutput, ToolError> {
    let tool = tools.get(call.name.as_str())?;
    let accesses = tool.accesses(&call.arguments, turn)?;
    let inv = ToolInvocation {
        call: call.clone(),
        tool,
        accesses,
        turn: turn.clone(),
    };
    stack.clone().oneshot(inv).await
}

/// Records how a call ended and makes its result; a fatal error (the ledger) ends the turn.
pub(crate) fn finish_call(
    turn: &crate::context::TurnContext,
    call: ToolCall,
    outcome: Result<crate::tool::ToolOutput, ToolError>,
) -> Result<ToolResult, TurnError> {
    let (content, is_error, effects) = match outcome {
        Ok(out) => (out.content, out.is_error, out.effects),
        // The one fatal tool error: the ledger's, carried by value into the turn's.
        Err(ToolError::Audit(e)) => return Err(TurnError::Audit(e)),
        Err(e) => (e.to_string(), true, vec![]),
    };
    turn.push_effects(effects.iter().cloned());
    turn.record_owned(AuditEvent::ToolFinished {
        call_id: call.id.clone(),
        tool: call.name.clone(),
        is_error,
        effects,
        summary: summary(&content),
        output: Some(content.clone()),
    })?;
    Ok(ToolResult {
        call_id: call.id,
        name: call.name,
        content,
        is_error,
    })
}

/// A call the journal holds, on resume: `Some(result)` when its result is settled (recorded, or
/// interrupted and not run again), `None` when it is to run through the tool stack again.
fn resume_call(
    turn: &crate::context::TurnContext,
    call: &ToolCall,
    fed: FedCall,
) -> Result<Option<ToolResult>, TurnError> {
    let result = |content: String, is_error: bool| ToolResult {
        call_id: call.id.clone(),
        name: call.name.clone(),
        content,
        is_error,
    };
    let note = |decision: LayerVerdict| {
        turn.record_owned(AuditEvent::LayerDecision {
            layer: loopward_core::LayerId::Resume,
            decision,
            detail: loopward_core::LayerDetail::Resume(loopward_core::ResumeDetail {
                call_id: call.id.clone(),
                tool: call.name.clone(),
            }),
        })
    };
    match fed {
        FedCall::Finished {
            content,
            is_error,
            effects,
            handoff,
        } => {
            let mut st = turn.state();
            st.effects.extend(effects);
            if let Some(h) = handoff {
                st.handoff.get_or_insert(h);
            }
            Ok(Some(result(content, is_error)))
        }
        FedCall::Again { retried } => {
            if retried {
                note(LayerVerdict::Retried)?;
            }
            Ok(None)
        }
        FedCall::Interrupted { handoff } => {
            note(LayerVerdict::Interrupted)?;
            let (content, is_error) = match handoff {
                Some(h) => {
                    let content = format!("handed off to {}: {}", h.to, h.message);
                    turn.state().handoff.get_or_insert(h);
                    (content, false)
                }
                None => (
                    format!(
                        "interrupted: this {} call started, then the run stopped (its process ended) before it finished, so whether it took effect is unknown; it was not run again. Check its effect before you repeat it.",
                        call.name
                    ),
                    true,
                ),
            };
            turn.record_owned(AuditEvent::ToolFinished {
                call_id: call.id.clone(),
                tool: call.name.clone(),
                is_error,
                effects: vec![],
                summary: summary(&content),
                output: Some(content.clone()),
            })?;
            Ok(Some(result(content, is_error)))
        }
    }
}

/// The first line of a result, at most 120 characters, for ledgers.
fn summary(content: &str) -> String {
    let line = content.lines().next().unwrap_or("");
    let mut s: String = line.chars().take(120).collect();
    if s.len() < line.len() {
        s.push('…');
    }
    s
}
