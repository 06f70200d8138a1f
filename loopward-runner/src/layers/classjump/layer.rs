//! The turn layer that ends a run whose subtask ran out of strategies.

use super::tracker::{exhausted, ClassJump};
use crate::layers::from_fn::{from_fn, layer_fn, FromFn, FromFnLayer, NextTurn};
use crate::turn::{TurnError, TurnOutcome, TurnRequest};
use loopward_core::RunStatus;

/// Ends the run `Exhausted` after the turn in which a subtask ran out of strategies (and
/// refuses later turns of the run). The layer is its policy (see
/// [`from_fn`](crate::layers::from_fn)).
pub type ClassJumpLayer = FromFnLayer<ClassJumpPolicy>;

impl ClassJump {
    /// The turn layer that ends the run when a subtask is exhausted.
    pub fn layer(&self) -> ClassJumpLayer {
        from_fn(ClassJumpPolicy)
    }
}

/// See [`ClassJumpLayer`].
pub type ClassJumpService<S> = FromFn<ClassJumpPolicy, S>;

/// The class-jump turn layer's policy: no turn once a subtask is exhausted; a run whose
/// subtask ran out during a turn ends after it.
#[derive(Clone, Copy, Debug, Default)]
pub struct ClassJumpPolicy;

layer_fn!(ClassJumpPolicy, turn(TurnRequest) -> Result<TurnOutcome, TurnError>);

impl ClassJumpPolicy {
    async fn turn(self, req: TurnRequest, next: NextTurn) -> Result<TurnOutcome, TurnError> {
        let run = req.turn.run().clone();
        if exhausted(&run).is_some() {
            return Err(TurnError::Stop(RunStatus::Exhausted));
        }
        let turn = req.turn.clone();
        let result = next.run(req).await;
        // Exhausted in this turn: the runner records the turn (its words, its tokens) and
        // ends the run from the turn state. Exhausted some other way: end it here.
        if exhausted(&run).is_some() && turn.state().run_ends.is_none() {
            return Err(TurnError::Stop(RunStatus::Exhausted));
        }
        result
    }
}
