//! What the hook makes durable before its host hears the answer: every reply that lets
//! something happen waits for a sync of the decisions behind it; a denial, which lets nothing
//! happen, is written at once and synced with the session's next commit.

use crate::support::{Project, WrappedLedgers, HOST_POLICY, NOW, SESSION};
use loopward_core::{AuditError, AuditEvent, AuditSink, Scope};
use loopward_hooks::HookContext;
use loopward_runner::gates::PolicyConfig;
use loopward_runner::ManualClock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

/// The session's file ledger, counting its commits (each one a sync of the decisions behind it).
struct Counting {
    file: Arc<dyn AuditSink>,
    commits: Arc<AtomicU32>,
}

impl AuditSink for Counting {
    fn record(&self, scope: &Scope, event: &AuditEvent) -> Result<(), AuditError> {
        self.file.record(scope, event)
    }

    fn commit(&self) -> Result<(), AuditError> {
        self.commits.fetch_add(1, Ordering::SeqCst);
        self.file.commit()
    }
}

#[test]
fn a_denial_is_on_file_before_the_answer_and_waits_for_the_next_commit() {
    let mut p = Project::new(HOST_POLICY);
    let commits = Arc::new(AtomicU32::new(0));
    let counted = commits.clone();
    p.ctx = HookContext::builder(&PolicyConfig::from_toml(HOST_POLICY).unwrap())
        .root(&p.root)
        .clock(Arc::new(ManualClock::new(NOW)))
        .ledgers(Arc::new(WrappedLedgers(move |file| {
            Arc::new(Counting {
                file,
                commits: counted.clone(),
            }) as Arc<dyn AuditSink>
        })))
        .build()
        .unwrap();
    // Call `id` writes `path`: the hook answers `want`; the commits made by then.
    let decide = |id: &str, path: &str, want: &str| {
        let a = p.send(&p.write_event("PreToolUse", id, path, "x", true));
        let said = format!(r#""permissionDecision":"{want}""#);
        assert!(a.stdout.contains(&said), "{a:?}");
        commits.load(Ordering::SeqCst)
    };
    assert_eq!(
        decide("toolu_deny", "plan.md", "deny"),
        0,
        "a denial is not synced on its own"
    );
    // Written before the answer: a hook killed right after it loses nothing.
    let ledger = p.ledger_text(&format!("claude-code-{SESSION}"));
    assert!(ledger.contains("toolu_deny"), "{ledger}");
    assert_eq!(
        decide("toolu_ok", "notes.md", "allow"),
        1,
        "what lets a call run is synced first"
    );
}
