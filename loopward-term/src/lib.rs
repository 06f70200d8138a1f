//! loopward on a terminal, shared by the `loopward` CLI and the demo: a run's timeline printed
//! as the ledger accepts each event ([`timeline`]), colour on a terminal and plain text elsewhere
//! ([`render`]), the same events as JSON lines for scripts ([`json`]), and the prompt behind
//! `interactive` stop-gates ([`approver`]).

pub mod approver;
pub mod json;
pub mod render;
pub mod timeline;
