//! The built-in tools through the tool boundary, and writes that land where they were judged:
//! one test binary for the area.

mod beneath;
mod builtin;
#[path = "../gates/support.rs"]
mod gates_support;
