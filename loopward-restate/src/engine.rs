//! The team hook: one line moves a `loopward.toml` team to Restate.

use crate::{JournaledModelLayer, JournaledToolLayer, RestateApprover};
use loopward_runner::layers::stopgate::Approver;
use loopward_runner::model::BoxModelService;
use loopward_runner::tool::BoxToolService;
use std::sync::Arc;
use tower::Layer;

/// Restate as a team's durable-execution engine: model calls and tool calls become journaled
/// steps, `interactive` stop-gates wait on awakeables ([`RestateApprover`], unless the team
/// names another approver). Outside a Restate invocation the team runs as before.
///
/// ```no_run
/// # fn main() -> anyhow::Result<()> {
/// use std::sync::Arc;
/// let runner = loopward::Team::from_config("loopward.toml")?
///     .durable(Arc::new(loopward_restate::Restate))
///     .build()?;
/// # let _ = runner; Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct Restate;

impl loopward::team::Durable for Restate {
    fn model_step(&self, model: BoxModelService) -> BoxModelService {
        BoxModelService::new(JournaledModelLayer.layer(model))
    }

    fn tool_step(&self, tools: BoxToolService) -> BoxToolService {
        BoxToolService::new(JournaledToolLayer.layer(tools))
    }

    fn approver(&self) -> Option<Arc<dyn Approver>> {
        Some(Arc::new(RestateApprover))
    }
}
