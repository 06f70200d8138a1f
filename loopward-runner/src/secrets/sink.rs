//! A sink that masks secrets before the sink it wraps sees an event.

use super::Masker;
use loopward_core::{AuditError, AuditEvent, AuditSink, Scope};
use std::sync::Arc;

/// Masks every event with its [`Masker`] and hands the masked event on. Put it outermost, in
/// front of the terminal or JSON sinks and the ledger, so that every one of them records and
/// shows the same masked text.
pub struct MaskingSink {
    inner: Arc<dyn AuditSink>,
    masker: Masker,
}

impl MaskingSink {
    /// Masks what reaches `inner`.
    pub fn new(inner: Arc<dyn AuditSink>, masker: Masker) -> Self {
        Self { inner, masker }
    }
}

impl AuditSink for MaskingSink {
    fn record(&self, scope: &Scope, event: &AuditEvent) -> Result<(), AuditError> {
        match self.masker.mask_event(event)? {
            Some(masked) => self.inner.record_owned(scope, masked),
            None => self.inner.record(scope, event),
        }
    }

    fn record_owned(&self, scope: &Scope, event: AuditEvent) -> Result<(), AuditError> {
        match self.masker.mask_event(&event)? {
            Some(masked) => self.inner.record_owned(scope, masked),
            None => self.inner.record_owned(scope, event),
        }
    }

    fn commit(&self) -> Result<(), AuditError> {
        self.inner.commit()
    }
}
