//! Audit sinks. The hash-chained file ledger lives in [`ledger`](crate::audit); this module
//! also has an in-memory sink for tests and embedding.

mod memory;

pub use memory::MemorySink;
