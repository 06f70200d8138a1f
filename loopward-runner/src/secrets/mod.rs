//! Secrets kept out of the evidence: every record is masked before it is hashed.
//!
//! A secret printed by a tool (`echo $TOKEN`, `cat .env`) would otherwise land in the ledger,
//! where the keyed chain makes it impossible to remove without breaking verification, and from
//! there in `audit.json`, `audit.md`, the pages and `--json` output. A [`Masker`] knows the
//! values of the configured secrets (`[secrets]` in `loopward.toml`) and replaces each with
//! `[secret:NAME]` wherever it occurs in a record's text. The ledger applies it to every event
//! before sealing it ([`LedgerOptions::masker`](crate::audit::LedgerOptions::masker)), and a
//! [`MaskingSink`] applies it in front of any other sink (the terminal timeline, `--json`), so
//! what is printed is what is hashed.
//!
//! ```
//! use loopward_core::{AuditEvent, AuditSink, RunId, Scope};
//! use loopward_runner::audit::MemorySink;
//! use loopward_runner::secrets::{Masker, MaskingSink};
//! use std::sync::Arc;
//! let masker = Masker::new([("SECRET_TOKEN", "s3cr3t-value-42")]).unwrap();
//! assert_eq!(masker.mask_str("token=s3cr3t-value-42"), "token=[secret:SECRET_TOKEN]");
//! let memory = Arc::new(MemorySink::default());
//! let sink = MaskingSink::new(memory.clone(), masker);
//! let scope = Scope { run: RunId::new("r1").unwrap(), turn: None, agent: None };
//! sink.record(&scope, &AuditEvent::HumanMessage { content: (&loopward_core::Person::at_the_keyboard().says("it is s3cr3t-value-42")).into() }).unwrap();
//! let (_, kept) = memory.events().remove(0);
//! assert_eq!(kept, AuditEvent::HumanMessage { content: (&loopward_core::Person::at_the_keyboard().says("it is [secret:SECRET_TOKEN]")).into() });
//! ```
//!
//! What masking cannot do: a secret transformed before it is printed (base64, split across
//! lines, one character at a time) no longer matches its value. Keeping secrets out of the
//! agent's reach — the sandbox's environment allow-list, reads by allow-list — is the first
//! line; masking is the one that keeps a slip out of evidence that cannot be edited.

mod mask;
mod sink;

pub use mask::{Masker, SecretError, MIN_SECRET_BYTES};
pub use sink::MaskingSink;
