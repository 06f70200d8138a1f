//! Model calls as journaled steps.

use crate::journal;
use futures::future::BoxFuture;
use loopward_core::{AuditError, ToolCall, Usage};
use loopward_runner::layers::from_fn::{from_fn, FromFn, LayerFn, NextModel};
use loopward_runner::model::{ChatRequest, ChatResponse, ModelError, StopReason};
use serde::{Deserialize, Serialize};

/// Makes each model call a journaled step when the run executes on Restate: the reply is
/// recorded in the invocation's journal, and a replay after a worker's death reads it from
/// there instead of calling the model again. Outside Restate it passes calls through.
///
/// Put it inside the budget meter and outside the rate limit ([`Stack::model_step`]): a
/// replayed reply still counts toward the run's budget, and does not wait for a quota again.
///
/// [`Stack::model_step`]: loopward_runner::layers::stack::Stack::model_step
///
/// ```
/// use loopward_restate::JournaledModelLayer;
/// use loopward_runner::model::{fake::{FakeModel, Script}, BoxModelService};
/// use tower::Layer;
/// let model = BoxModelService::new(JournaledModelLayer.layer(FakeModel::new(Script::default())));
/// # let _ = model;
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct JournaledModelLayer;

impl<S> tower::Layer<S> for JournaledModelLayer {
    type Service = JournaledModel<S>;
    fn layer(&self, inner: S) -> JournaledModel<S> {
        tower::Layer::layer(&from_fn(JournaledModelPolicy), inner)
    }
}

/// The service [`JournaledModelLayer`] builds: the layer kit's [`FromFn`] around its policy.
pub type JournaledModel<S> = FromFn<JournaledModelPolicy, S>;

/// [`JournaledModelLayer`]'s policy: the call, as a journaled step of the run's invocation.
#[derive(Clone, Copy, Debug, Default)]
pub struct JournaledModelPolicy;

/// A model reply as the journal holds it.
#[derive(Serialize, Deserialize)]
enum Journaled {
    Reply {
        content: String,
        tool_calls: Vec<ToolCall>,
        usage: Usage,
        model: String,
        #[serde(default)]
        stop: StopReason,
    },
    /// The call failed; the text is the error's, `audit` marks a ledger failure (fatal).
    Failed { text: String, audit: bool },
}

impl LayerFn<ChatRequest, ChatResponse, ModelError> for JournaledModelPolicy {
    type Future = BoxFuture<'static, Result<ChatResponse, ModelError>>;

    fn call(&mut self, req: ChatRequest, next: NextModel) -> Self::Future {
        let Some(journal) = journal::for_model_call(&req) else {
            return Box::pin(next.run(req));
        };
        Box::pin(async move {
            let name = format!("model {}", req.agent);
            let journaled = journal
                .step(&name, |_| async move {
                    match next.run(req).await {
                        Ok(r) => Journaled::Reply {
                            content: r.content,
                            tool_calls: r.tool_calls,
                            usage: r.usage,
                            model: r.model,
                            stop: r.stop,
                        },
                        Err(ModelError::Audit(e)) => Journaled::Failed {
                            text: e.0,
                            audit: true,
                        },
                        Err(e) => Journaled::Failed {
                            text: e.to_string(),
                            audit: false,
                        },
                    }
                })
                .await
                .map_err(|e| ModelError::Audit(AuditError(e.to_string())))?;
            match journaled {
                Journaled::Reply {
                    content,
                    tool_calls,
                    usage,
                    model,
                    stop,
                } => Ok(ChatResponse {
                    content,
                    tool_calls,
                    usage,
                    model,
                    stop,
                }),
                Journaled::Failed { text, audit: true } => Err(ModelError::Audit(AuditError(text))),
                Journaled::Failed { text, .. } => Err(ModelError::Local(text)),
            }
        })
    }
}
