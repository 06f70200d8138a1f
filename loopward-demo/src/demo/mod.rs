//! The eight chapters of `loopward-demo`.
