//! Examples of embedding loopward; each file under `examples/` is one way.
