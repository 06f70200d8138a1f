//! Stop-gates waiting elsewhere (runs on Restate), through a source that stands in for the
//! binary's Restate client: listed beside the local ones, answered once, and every refusal
//! changes nothing. (`loopward-restate`'s test answers a real Restate run through the console.)

use crate::support::Fixture;
use axum::http::StatusCode;
use futures::future::BoxFuture;
use loopward_console::remote::{RemoteGates, RemoteRefusal, RemoteWaiting};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

#[derive(Debug, Default)]
struct Elsewhere {
    waits: Mutex<Vec<RemoteWaiting>>,
    down: AtomicBool,
    /// The verdicts given: (approve, by).
    given: Mutex<Vec<(bool, String)>>,
}

impl RemoteGates for Elsewhere {
    fn describe(&self) -> String {
        "Restate at http://127.0.0.1:1".into()
    }

    fn waiting(&self) -> BoxFuture<'_, Result<Vec<RemoteWaiting>, String>> {
        Box::pin(async move {
            if self.down.load(Ordering::SeqCst) {
                return Err("could not reach Restate".into());
            }
            Ok(self.waits.lock().unwrap().clone())
        })
    }

    fn answer<'a>(
        &'a self,
        w: &'a RemoteWaiting,
        approve: bool,
        by: &'a str,
    ) -> BoxFuture<'a, Result<(), RemoteRefusal>> {
        Box::pin(async move {
            if self.down.load(Ordering::SeqCst) {
                return Err(RemoteRefusal::Unreachable("could not reach Restate".into()));
            }
            if !self.waits.lock().unwrap().contains(w) {
                return Err(RemoteRefusal::NotWaiting("not waiting".into()));
            }
            self.given.lock().unwrap().push((approve, by.to_string()));
            Ok(())
        })
    }
}

fn wait(run: &str, instance: &str) -> RemoteWaiting {
    RemoteWaiting {
        run: run.into(),
        pending_id: "deploy@tool:shell:ab12".into(),
        instance: instance.into(),
        gate: "deploy".into(),
        agent: "builder".into(),
        summary: "shell: make deploy".into(),
        action: "tool:shell:ab12".into(),
        answered: false,
    }
}

#[tokio::test]
async fn a_wait_on_restate_is_listed_answered_once_and_refusals_change_nothing() {
    let source = Arc::new(Elsewhere::default());
    source.waits.lock().unwrap().push(wait("far-1", "sign_1a"));
    let f = Fixture::with(|o| o.remote = Some(source.clone()));
    f.console.refresh_remote().await;
    f.console.refresh();
    let snap = f.console.snapshot();
    let row = snap.run("far-1").expect("the run on Restate is listed");
    assert_eq!(row.status, "awaiting_approval");
    assert!(row.elsewhere.is_some(), "{row:?}");
    let w = row.waiting[0].clone();
    assert_eq!(w.on.as_deref(), Some("Restate at http://127.0.0.1:1"));
    let cookie = f.sign_in().await;
    let (_, _, page) = f.get("/", Some(&cookie)).await;
    assert!(page.contains(&format!("/gates/{}/approve", w.id)), "{page}");
    assert!(page.contains("waits on Restate at"), "{page}");
    let csrf = f.console.token().csrf().to_string();
    let uri = format!("/gates/{}/approve", w.id);
    let form = |action: &str, by: &str| format!("csrf={csrf}&action={action}&by={by}");

    // No token; another action; Restate out of reach: refused, nothing given, nothing kept.
    let (status, _, _) = f.post(&uri, None, &form(&w.action, "ana"), &[]).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, _, body) = f
        .post(&uri, Some(&cookie), &form("tool:shell:0000", "ana"), &[])
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(body.contains("waits to allow tool:shell:ab12"), "{body}");
    source.down.store(true, Ordering::SeqCst);
    let (status, _, body) = f
        .post(&uri, Some(&cookie), &form(&w.action, "ana"), &[])
        .await;
    assert_eq!(status, StatusCode::BAD_GATEWAY, "{body}");
    assert!(body.contains("try again"), "{body}");
    assert!(source.given.lock().unwrap().is_empty());
    // A stop for a run whose ledger is elsewhere is refused.
    let stop = format!("csrf={csrf}&by=ana&reason=late");
    let (status, _, _) = f.post("/runs/far-1/stop", Some(&cookie), &stop, &[]).await;
    assert_eq!(status, StatusCode::CONFLICT);

    // Back in reach: the approval is given once, naming the person.
    source.down.store(false, Ordering::SeqCst);
    let (status, headers, body) = f
        .post(&uri, Some(&cookie), &form(&w.action, "ana"), &[])
        .await;
    assert_eq!(status, StatusCode::SEE_OTHER, "{body}");
    assert_eq!(headers["location"], "/runs/far-1?done=approved");
    assert_eq!(
        *source.given.lock().unwrap(),
        vec![(true, "ana (console)".to_string())]
    );
    let (status, _, page) = f.get("/runs/far-1", Some(&cookie)).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert!(
        page.contains("Answered: approved by ana (console)"),
        "{page}"
    );
    // Replayed, or denied after: refused with what stands, nothing given again.
    let (status, _, body) = f
        .post(&uri, Some(&cookie), &form(&w.action, "ana"), &[])
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(body.contains("approved by ana (console)"), "{body}");
    let deny = format!("/gates/{}/deny", w.id);
    let (status, _, _) = f
        .post(&deny, Some(&cookie), &form(&w.action, "bo"), &[])
        .await;
    assert_eq!(status, StatusCode::CONFLICT);
    // The run took the verdict: the wait is gone, and so is the run from the list.
    source.waits.lock().unwrap().clear();
    let (status, _, body) = f
        .post(&uri, Some(&cookie), &form(&w.action, "ana"), &[])
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(body.contains("went on"), "{body}");
    assert_eq!(source.given.lock().unwrap().len(), 1);
    f.console.refresh();
    assert!(f.console.snapshot().run("far-1").is_none());
    // A later wait of the same gate is another, answered on its own.
    source.waits.lock().unwrap().push(wait("far-1", "sign_1b"));
    f.console.refresh_remote().await;
    f.console.refresh();
    let later = f.console.snapshot().run("far-1").unwrap().waiting[0].clone();
    assert_ne!(later.id, w.id);
    assert!(later.answered.is_none());
}

#[tokio::test]
async fn a_source_out_of_reach_is_said_on_the_runs_page() {
    let source = Arc::new(Elsewhere::default());
    source.down.store(true, Ordering::SeqCst);
    let f = Fixture::with(|o| o.remote = Some(source));
    f.console.refresh_remote().await;
    f.console.refresh();
    let cookie = f.sign_in().await;
    let (_, _, page) = f.get("/", Some(&cookie)).await;
    assert!(
        page.contains("cannot list the waits elsewhere: Restate at http://127.0.0.1:1: could not reach Restate"),
        "{page}"
    );
}

#[tokio::test]
async fn a_wait_answered_elsewhere_shows_so_and_is_not_answered_again() {
    let source = Arc::new(Elsewhere::default());
    let mut w = wait("far-2", "sign_1c");
    w.answered = true;
    source.waits.lock().unwrap().push(w);
    let f = Fixture::with(|o| o.remote = Some(source.clone()));
    f.console.refresh_remote().await;
    f.console.refresh();
    let shown = f.console.snapshot().run("far-2").unwrap().waiting[0].clone();
    assert!(shown
        .answered
        .as_deref()
        .is_some_and(|a| a.contains("elsewhere")));
    let (cookie, csrf) = f.signed_in().await;
    let form = format!("csrf={csrf}&action={}&by=ana", shown.action);
    let (status, _, body) = f.answer(&cookie, &shown.id, "deny", &form, &[]).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(body.contains("answered elsewhere"), "{body}");
    assert!(source.given.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_wait_on_restate_that_starts_later_is_noticed_one_already_there_is_not() {
    let (url, received) = crate::support::receiver().await;
    let source = Arc::new(Elsewhere::default());
    source.waits.lock().unwrap().push(wait("far-3", "sign_1d"));
    let f = Fixture::with(|o| {
        o.webhooks = vec![url];
        o.remote = Some(source.clone());
    });
    f.console.refresh();
    f.console.refresh_remote().await;
    f.console.refresh(); // far-3 waited before the console looked: shown, not noticed
    source.waits.lock().unwrap().push(wait("far-4", "sign_1e"));
    f.console.refresh_remote().await;
    f.console.refresh();
    let (notice, _) = crate::support::signed_notice(&f, received).await;
    assert_eq!(notice["run"], "far-4", "{notice}");
    assert_eq!(notice["action"], "tool:shell:ab12");
}
