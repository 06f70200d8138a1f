//! What the peers' test suites specify (the Python loopward's, pipeline-moe's) that this
//! loopward also claims, in its own words: one test binary for the area.

#[path = "../gates/support.rs"]
mod gates_support;
mod loopward_py;
#[path = "../one_agent/mod.rs"]
mod one_agent;
mod pipeline_moe;
