//! Budget settings and the layers.

use super::service::BudgetPolicy;
use crate::layers::config::ConfigError;
use crate::layers::from_fn::{from_fn, FromFnLayer};
use loopward_core::Price;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The `[budget]` table of `loopward.toml`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BudgetConfig {
    /// Tokens (input + output) one run may use (1..=10^12).
    pub max_tokens: Option<u64>,
    /// Dollars one run may spend (more than 0, at most 1,000,000).
    pub max_cost_usd: Option<f64>,
    /// Prices per model name (as the backend reports it). A cost budget needs a price for every
    /// model that answers; a call by an unpriced model ends the run.
    pub prices: BTreeMap<String, Price>,
}

/// A validated budget, shared by the turn layer and the meter.
#[derive(Debug)]
pub(super) struct Limits {
    pub(super) max_tokens: Option<u64>,
    pub(super) max_cost_micros: Option<u64>,
    pub(super) prices: BTreeMap<String, Price>,
    /// The cost is what the agents report ([`BudgetLayer::reported`]): a model without a price
    /// adds no cost and does not end the run.
    pub(super) reported: bool,
}

impl BudgetConfig {
    fn limits(&self) -> Result<Limits, ConfigError> {
        if let Some(t) = self.max_tokens {
            crate::layers::config::in_range("budget.max_tokens", t, 1_000_000_000_000)?;
        }
        let max_cost_micros = match self.max_cost_usd {
            None => None,
            Some(c) if !c.is_finite() || c <= 0.0 => {
                return Err(ConfigError::new(
                    "budget.max_cost_usd",
                    format!("{c} is not a budget; give a positive amount of dollars"),
                ))
            }
            Some(c) if c > 1_000_000.0 => {
                return Err(ConfigError::new(
                    "budget.max_cost_usd",
                    format!("{c} is absurdly large; the most accepted is 1000000"),
                ))
            }
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            Some(c) => Some((c * 1_000_000.0).round() as u64),
        };
        if max_cost_micros.is_some() && self.prices.is_empty() {
            return Err(ConfigError::new(
                "budget.prices",
                "a cost budget needs the price of each model ([budget.prices.<model>])",
            ));
        }
        Ok(Limits {
            max_tokens: self.max_tokens,
            max_cost_micros,
            prices: self.prices.clone(),
            reported: false,
        })
    }
}

/// Ends a run whose budget is spent (turn layer). Get its meter with [`BudgetLayer::meter`].
/// The layer is its policy (see [`from_fn`](crate::layers::from_fn)).
pub type BudgetLayer = FromFnLayer<BudgetPolicy>;

/// Meters model calls against the budget of the run they belong to (model layer): the same
/// policy as [`BudgetLayer`], at the model boundary.
pub type BudgetMeterLayer = FromFnLayer<BudgetPolicy>;

impl BudgetLayer {
    /// A budget layer; fails naming the field for a zero, negative or absurd budget.
    pub fn new(config: BudgetConfig) -> Result<Self, ConfigError> {
        Ok(Self::of(config.limits()?))
    }

    fn of(limits: Limits) -> Self {
        from_fn(BudgetPolicy {
            limits: Arc::new(limits),
        })
    }

    /// A budget on what the agents report they spent (a coding CLI's sessions report their
    /// tokens and cost; see [`charge_reported`](super::charge_reported)): no prices are needed,
    /// since none of their model calls passes a meter; a model with a price in `prices` is
    /// still charged by it, one without adds no cost. Fails naming the field for a zero,
    /// negative or absurd budget.
    pub fn reported(config: BudgetConfig) -> Result<Self, ConfigError> {
        let priced = BudgetConfig {
            prices: std::iter::once((String::new(), Price::default())).collect(),
            ..config.clone()
        };
        let mut limits = priced.limits()?;
        limits.prices = config.prices;
        limits.reported = true;
        Ok(Self::of(limits))
    }

    /// The model layer that meters calls for this budget.
    pub fn meter(&self) -> BudgetMeterLayer {
        self.clone()
    }
}
