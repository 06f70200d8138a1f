//! Examples of embedding loopward; each file beside this one is one way:
//!
//! | example | shows |
//! |---|---|
//! | `from_config` | a governed team from its `loopward.toml`, embedded in a few lines |
//! | `minimal` | the smallest embedded runner: two scripted agents and an audit sink |
//! | `custom_layer` | a turn layer of your own that ends runs and records its decisions |
//! | `custom_gate` | a tool-stack gate of your own, stacked with the built-in territories |
//! | `custom_stack` | the recommended layers built from `loopward.toml` tables |
//! | `llama_team` | a team on a local GGUF model (feature `llama`) |
