//! An in-memory audit sink.

use loopward_core::{AuditError, AuditEvent, AuditSink, Scope};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// Keeps every event in memory, in order. Can be told to fail, to test fail-closed paths.
///
/// ```
/// use loopward_core::{AuditEvent, AuditSink, RunId, Scope};
/// use loopward_runner::audit::MemorySink;
/// let sink = MemorySink::default();
/// let scope = Scope { run: RunId::new("r1").unwrap(), turn: None, agent: None };
/// sink.record(&scope, &AuditEvent::HumanMessage { content: (&loopward_core::Person::at_the_keyboard().says("hi")).into() }).unwrap();
/// assert_eq!(sink.kinds(), vec!["human_message"]);
/// ```
#[derive(Debug)]
pub struct MemorySink {
    events: Mutex<Vec<(Scope, AuditEvent)>>,
    /// Records fail once this many are kept (`usize::MAX`: never).
    fail_after: AtomicUsize,
}

impl Default for MemorySink {
    fn default() -> Self {
        Self {
            events: Mutex::default(),
            fail_after: AtomicUsize::new(usize::MAX),
        }
    }
}

impl MemorySink {
    /// Makes every `record` after the first `n` events fail.
    pub fn fail_after(&self, n: usize) {
        self.fail_after.store(n, Ordering::SeqCst);
    }

    /// A copy of the events so far.
    pub fn events(&self) -> Vec<(Scope, AuditEvent)> {
        self.events
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The kinds of the events so far, in order.
    pub fn kinds(&self) -> Vec<&'static str> {
        self.events().iter().map(|(_, e)| e.kind()).collect()
    }
}

impl AuditSink for MemorySink {
    fn record(&self, scope: &Scope, event: &AuditEvent) -> Result<(), AuditError> {
        self.record_owned(scope, event.clone())
    }

    /// Keeps the event itself, not a copy (the scope's ids are shared, not copied).
    fn record_owned(&self, scope: &Scope, event: AuditEvent) -> Result<(), AuditError> {
        let mut events = self.events.lock().unwrap_or_else(|p| p.into_inner());
        if events.len() >= self.fail_after.load(Ordering::SeqCst) {
            return Err(AuditError(
                "injected failure (MemorySink::fail_after)".into(),
            ));
        }
        events.push((scope.clone(), event));
        Ok(())
    }
}
