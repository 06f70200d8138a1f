//! The team hook: one line moves a `loopward.toml` team to Restate.

use crate::{
    JournaledModelLayer, JournaledToolLayer, RestateApprover, SharedQuota, SharedQuotaLayer,
};
use loopward_runner::layers::stopgate::{Approver, StopGates};
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

    fn gated_tool_step(&self, tools: BoxToolService, gates: &StopGates) -> BoxToolService {
        BoxToolService::new(JournaledToolLayer.asking(gates.clone()).layer(tools))
    }

    fn approver(&self) -> Option<Arc<dyn Approver>> {
        Some(Arc::new(RestateApprover))
    }
}

impl Restate {
    /// The same engine, with every model call held to `quota`, shared by all the workers that
    /// name its provider ([`SharedQuotaLayer`]; bind [`ProviderQuota`](crate::ProviderQuota) on
    /// each worker's endpoint).
    ///
    /// ```no_run
    /// # fn main() -> anyhow::Result<()> {
    /// use loopward_restate::{Restate, SharedQuota};
    /// use std::sync::Arc;
    /// let quota = SharedQuota::new("openai", 500)?.burst(10)?;
    /// let runner = loopward::Team::from_config("loopward.toml")?
    ///     .durable(Arc::new(Restate.with_quota(quota)))
    ///     .build()?;
    /// # let _ = runner; Ok(()) }
    /// ```
    pub fn with_quota(self, quota: SharedQuota) -> RestateWithQuota {
        RestateWithQuota {
            quota: SharedQuotaLayer::new(quota),
        }
    }
}

/// [`Restate`] with a provider quota shared by every worker (see [`Restate::with_quota`]).
#[derive(Clone, Debug)]
pub struct RestateWithQuota {
    quota: SharedQuotaLayer,
}

impl loopward::team::Durable for RestateWithQuota {
    fn model_step(&self, model: BoxModelService) -> BoxModelService {
        BoxModelService::new(self.quota.layer(JournaledModelLayer.layer(model)))
    }

    fn tool_step(&self, tools: BoxToolService) -> BoxToolService {
        Restate.tool_step(tools)
    }

    fn gated_tool_step(&self, tools: BoxToolService, gates: &StopGates) -> BoxToolService {
        Restate.gated_tool_step(tools, gates)
    }

    fn approver(&self) -> Option<Arc<dyn Approver>> {
        Restate.approver()
    }
}
