//! The console in-process (its router driven request by request, no network but a 127.0.0.1
//! webhook receiver): what a signed-in person can do, and every refusal the issue names — no
//! token, a wrong token, a cross-site POST, a replayed approval, an approval for another action,
//! bad input — each changing nothing.

mod passphrase;
mod remote;
mod support;

use axum::http::StatusCode;
use loopward_runner::layers::stopgate::PendingState;
use support::{Fixture, JSON};

#[tokio::test]
async fn without_a_token_every_page_and_answer_is_refused() {
    let f = Fixture::paused().await;
    let w = f.waiting();
    for uri in ["/", "/api/runs", "/live", &format!("/runs/{}", f.run)] {
        let (status, _, body) = f.get(uri, None).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{uri}: {body}");
        assert!(body.contains("not signed in"), "{body}");
    }
    let form = format!("action={}&by=mallory", w.action);
    let (status, _, _) = f
        .post(&format!("/gates/{}/approve", w.id), None, &form, &[])
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(f.record(&w.id).state, PendingState::Pending);
}

#[tokio::test]
async fn a_wrong_token_signs_nobody_in() {
    let f = Fixture::paused().await;
    let (status, headers, _) = f
        .get("/login?token=0123456789abcdef0123456789abcdef", None)
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(headers.get("set-cookie").is_none());
    let (status, _, _) = f
        .get_with("/api/runs", &[("authorization", "Bearer not-the-token")])
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let forged =
        "loopward_console=0000000000000000000000000000000000000000000000000000000000000000";
    let (status, _, _) = f.get("/", Some(forged)).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn a_cross_site_post_is_refused_and_decides_nothing() {
    let (f, cookie, csrf) = Fixture::paused_and_signed_in().await;
    let w = f.waiting();
    let form = format!("csrf={csrf}&action={}&by=ana", w.action);
    let uri = format!("/gates/{}/approve", w.id);
    // Another site's page posting with the person's cookie: refused by its Origin…
    let (status, _, body) = f
        .post(
            &uri,
            Some(&cookie),
            &form,
            &[("origin", "http://evil.example")],
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert!(body.contains("cross-site"), "{body}");
    // …and, where a browser sends no Origin, by the CSRF value it cannot know.
    let without = format!("action={}&by=ana", w.action);
    let (status, _, _) = f.post(&uri, Some(&cookie), &without, &[]).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    // A rebinding name for the console's address.
    let (status, _, _) = f
        .post(&uri, Some(&cookie), &form, &[("host", "evil.example:8377")])
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(f.record(&w.id).state, PendingState::Pending);
}

#[tokio::test]
async fn an_approval_is_the_clis_sealed_decision_with_its_approver_and_a_replay_is_refused() {
    let (f, cookie, csrf) = Fixture::paused_and_signed_in().await;
    let w = f.waiting();
    let form = format!("csrf={csrf}&action={}&by=ana", w.action);
    let uri = format!("/gates/{}/approve", w.id);
    let (status, headers, body) = f.post(&uri, Some(&cookie), &form, &[]).await;
    assert_eq!(status, StatusCode::SEE_OTHER, "{body}");
    assert_eq!(
        headers["location"],
        format!("/runs/{}?done=approved", f.run)
    );
    let (_, _, page) = f
        .get(headers["location"].to_str().unwrap(), Some(&cookie))
        .await;
    assert!(
        page.contains("Approved. The run goes on"),
        "the page says what was done"
    );
    let record = f.record(&w.id);
    assert_eq!(record.state, PendingState::Approved);
    assert_eq!(record.decided.unwrap().by, "ana (console)");
    // The same request again: the gate no longer waits; the first decision stands.
    let (status, _, body) = f.post(&uri, Some(&cookie), &form, &[]).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(body.contains("no longer waiting"), "{body}");
    let deny = format!("csrf={csrf}&action={}&by=bob", w.action);
    let (status, _, _) = f.answer(&cookie, &w.id, "deny", &deny, &[]).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(f.record(&w.id).state, PendingState::Approved);
}

#[tokio::test]
async fn an_approval_for_another_action_than_the_one_waiting_is_refused() {
    let (f, cookie, csrf) = Fixture::paused_and_signed_in().await;
    let w = f.waiting();
    let form = format!("csrf={csrf}&action=turn:someone-else&by=ana");
    let (status, _, body) = f.answer(&cookie, &w.id, "approve", &form, &[]).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(
        body.contains(&format!("waits to allow {}", w.action)),
        "{body}"
    );
    assert_eq!(f.record(&w.id).state, PendingState::Pending);
}

#[tokio::test]
async fn bad_input_gets_a_clear_error_and_changes_nothing() {
    let (f, cookie, csrf) = Fixture::paused_and_signed_in().await;
    let w = f.waiting();
    // A form without the action.
    let (status, _, body) = f
        .answer(
            &cookie,
            &w.id,
            "approve",
            &format!("csrf={csrf}&by=ana"),
            JSON,
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let err: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert!(
        err["error"].as_str().unwrap().contains("malformed"),
        "{body}"
    );
    // A gate that does not exist; a run that is gone.
    let form = format!("csrf={csrf}&action={}&by=ana", w.action);
    let (status, _, _) = f
        .post(
            "/gates/r0-0000000000000000/approve",
            Some(&cookie),
            &form,
            JSON,
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _, body) = f.get("/runs/no-such-run", Some(&cookie)).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(body.contains("there is no run"), "{body}");
    // No name: the ledger must say who answered.
    let (status, _, _) = f
        .answer(
            &cookie,
            &w.id,
            "approve",
            &format!("csrf={csrf}&action={}&by=+", w.action),
            JSON,
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(f.record(&w.id).state, PendingState::Pending);
    // An override the CLI would refuse (an agent not in the team) is refused the same way.
    let grant = format!("csrf={csrf}&agent=stranger&path=hello.txt&reason=typo&ttl=10m");
    let (status, _, body) = f.post("/overrides", Some(&cookie), &grant, JSON).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(body.contains("not an [[agent]]"), "{body}");
}

#[tokio::test]
async fn a_signed_in_person_sees_the_waiting_gate_and_its_exact_action() {
    let f = Fixture::paused().await;
    let w = f.waiting();
    let cookie = f.sign_in().await;
    let (status, headers, page) = f.get("/", Some(&cookie)).await;
    assert_eq!(status, StatusCode::OK);
    assert!(headers["content-security-policy"]
        .to_str()
        .unwrap()
        .contains("default-src 'none'"));
    assert!(
        page.contains(&w.action) && page.contains("Approve"),
        "{page}"
    );
    let (status, _, page) = f.get(&format!("/runs/{}", f.run), Some(&cookie)).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        page.contains(&format!("id=\"gate-{}\"", w.id)),
        "the gate is on the run page"
    );
    assert!(page.contains("id=\"seq-1\""), "each record is linked");
}

#[tokio::test]
async fn a_stop_from_the_console_is_a_sealed_request_naming_who_asked() {
    let (f, cookie, csrf) = Fixture::paused_and_signed_in().await;
    let form = format!("csrf={csrf}&by=ana&reason=going+to+bed");
    let (status, _, body) = f
        .post(&format!("/runs/{}/stop", f.run), Some(&cookie), &form, &[])
        .await;
    assert_eq!(status, StatusCode::SEE_OTHER, "{body}");
    let run = loopward_core::RunId::new(&f.run).unwrap();
    let taken = f.custody().stops().unwrap().take(&run, 1).unwrap().unwrap();
    assert_eq!(
        (taken.by.as_str(), taken.reason.as_str()),
        ("ana (console)", "going to bed")
    );
}

#[tokio::test]
async fn a_gate_that_starts_waiting_is_noticed_to_the_webhook_signed_with_a_link_not_the_token() {
    let (url, received) = support::receiver().await;
    let f = Fixture::with_webhook(&url).await;
    f.console.refresh(); // the first look notices nothing already there
    f.pause_a_run().await;
    f.console.refresh();
    let (notice, body) = support::signed_notice(&f, received).await;
    assert_eq!(notice["kind"], "gate_waiting");
    assert_eq!(notice["gate"], "build");
    assert!(
        notice["url"].as_str().unwrap().contains("/runs/"),
        "{notice}"
    );
    assert!(
        !body.contains(f.console.token().secret()),
        "the notice never carries the token"
    );
}

/// An agent's `say` reaches a person two ways: the run's page shows it (as text), and the
/// webhook is told, signed, with the words and a link, asking for nothing.
#[tokio::test]
async fn an_agents_say_shows_on_its_run_page_as_text_and_is_noticed_to_the_webhook() {
    let (url, received) = support::receiver().await;
    let f = Fixture::saying(|o| o.webhooks = vec![url.clone()]);
    f.console.refresh(); // the first look notices nothing already there
    let run = f.run_until("completed").await;
    f.console.refresh();
    let (notice, body) = support::signed_notice(&f, received).await;
    assert_eq!(notice["kind"], "agent_said", "{notice}");
    assert_eq!(
        (&notice["run"], &notice["agent"], &notice["text"]),
        (
            &serde_json::json!(run),
            &serde_json::json!("builder"),
            &serde_json::json!("<b>halfway</b> there")
        )
    );
    let link = notice["url"].as_str().unwrap();
    assert!(link.contains(&format!("/runs/{run}#seq-")), "{link}");
    assert!(!body.contains(f.console.token().secret()));

    let cookie = f.sign_in().await;
    let (status, _, page) = f.get(&format!("/runs/{run}"), Some(&cookie)).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        page.contains("builder said: &lt;b&gt;halfway&lt;/b&gt; there"),
        "{page}"
    );
    assert!(
        !page.contains("<b>halfway"),
        "the words are text, not markup"
    );
    let seq = link.rsplit("#seq-").next().unwrap();
    assert!(
        page.contains(&format!("id=\"seq-{seq}\"")),
        "the link lands on its record"
    );
}

#[tokio::test]
async fn stop_every_run_asks_each_run_not_yet_ended_and_a_finished_run_cannot_be_stopped() {
    let (f, cookie, csrf) = Fixture::paused_and_signed_in().await;
    let form = format!("csrf={csrf}&by=ana&reason=night");
    let (status, _, body) = f.post("/stop-all", Some(&cookie), &form, JSON).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let done: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(done["detail"]["runs"], serde_json::json!([f.run.clone()]));
    let run = loopward_core::RunId::new(&f.run).unwrap();
    assert!(f.custody().stops().unwrap().is_requested(&run));
    // A run whose ledger says it ended: refused, nothing written.
    let ended = "r-ended";
    let runs = f.ws.path().join("runs");
    let ledger = loopward_runner::audit::Ledger::create(
        &runs,
        &loopward_core::RunId::new(ended).unwrap(),
        loopward_runner::audit::LedgerOptions::default(),
    )
    .unwrap();
    let scope = loopward_core::Scope {
        run: loopward_core::RunId::new(ended).unwrap(),
        turn: None,
        agent: None,
    };
    use loopward_core::AuditSink;
    ledger
        .record(
            &scope,
            &loopward_core::AuditEvent::RunEnded {
                cost_micros: None,
                status: loopward_core::RunStatus::Completed,
                usage: loopward_core::Usage::default(),
            },
        )
        .unwrap();
    ledger.finish().unwrap();
    drop(ledger);
    let (status, _, body) = f
        .post(&format!("/runs/{ended}/stop"), Some(&cookie), &form, JSON)
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(body.contains("already ended"), "{body}");
}

#[tokio::test]
async fn an_override_granted_from_the_console_is_the_clis_sealed_one_shot_grant() {
    let (f, cookie, csrf) = Fixture::paused_and_signed_in().await;
    let too_long = format!("csrf={csrf}&agent=builder&path=hello.txt&reason=typo&ttl=48h");
    let (status, _, body) = f.post("/overrides", Some(&cookie), &too_long, JSON).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(body.contains("longer than the longest override"), "{body}");
    let form = format!("csrf={csrf}&agent=builder&path=hello.txt&reason=fix+a+typo&ttl=10m");
    let (status, _, body) = f.post("/overrides", Some(&cookie), &form, JSON).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let listed = f
        .custody()
        .overrides()
        .unwrap()
        .list(&loopward_runner::SystemClock);
    assert_eq!(listed.len(), 1, "{listed:?}");
    let sentinel = listed[0].sentinel.as_ref().expect("sealed and readable");
    assert_eq!(
        (sentinel.agent.as_str(), sentinel.reason.as_str()),
        ("builder", "fix a typo")
    );
    assert!(listed[0].problem.is_none(), "{listed:?}");
    // The runs page lists it, and a text put in the URL is not shown as it came.
    let (_, _, page) = f.get("/?done=granted", Some(&cookie)).await;
    assert!(
        page.contains("Override granted") && page.contains(&sentinel.id),
        "{page}"
    );
    let (_, _, page) = f
        .get("/?done=%3Cb%3Eyou+were+hacked%3C%2Fb%3E", Some(&cookie))
        .await;
    assert!(!page.contains("hacked"));
}

#[tokio::test]
async fn over_tls_the_console_answers_only_after_a_handshake_and_its_cookie_is_secure() {
    let f = Fixture::paused().await;
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (cert_file, key_file) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    std::fs::write(&cert_file, cert.cert.pem()).unwrap();
    std::fs::write(&key_file, cert.key_pair.serialize_pem()).unwrap();
    let tls = loopward_console::tls::Tls::from_pem_files(&cert_file, &key_file).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let console = f.console.clone();
    let server = tokio::spawn(async move { console.serve_tls(listener, &tls).await });
    let client = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(cert.cert.pem().as_bytes()).unwrap())
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let base = format!("https://localhost:{port}");
    let r = client
        .get(format!("{base}/api/runs"))
        .bearer_auth(f.console.token().secret())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), reqwest::StatusCode::OK);
    let login = client
        .get(format!("{base}/login?token={}", f.console.token().secret()))
        .send()
        .await
        .unwrap();
    let cookie = login.headers()["set-cookie"].to_str().unwrap().to_string();
    assert!(cookie.contains("; Secure"), "{cookie}");
    assert!(f.console.login_url().starts_with("https://"));
    // Plain HTTP to the TLS port gets no answer from the console.
    let plain = reqwest::Client::new()
        .get(format!("http://localhost:{port}/api/runs"))
        .bearer_auth(f.console.token().secret())
        .timeout(std::time::Duration::from_secs(15))
        .send()
        .await;
    assert!(plain.is_err(), "{plain:?}");
    server.abort();
}

#[tokio::test]
async fn a_live_stream_opened_after_a_change_is_told_at_once_and_an_up_to_date_one_waits() {
    use http_body_util::BodyExt;
    use tower::ServiceExt;
    let f = Fixture::paused().await;
    let version = f.console.snapshot().version;
    let first_frame = |since: u64| {
        let router = f.console.router();
        let token = f.console.token().secret().to_string();
        async move {
            let req = axum::http::Request::get(format!("/live?run=x&since={since}"))
                .header("host", support::HOST)
                .header("authorization", format!("Bearer {token}"))
                .body(axum::body::Body::empty())
                .unwrap();
            let mut body = router.oneshot(req).await.unwrap().into_body();
            tokio::time::timeout(std::time::Duration::from_millis(500), body.frame())
                .await
                .ok()
                .flatten()
                .and_then(Result::ok)
                .and_then(|frame| frame.into_data().ok())
                .map(|d| String::from_utf8_lossy(&d).into_owned())
        }
    };
    let told = first_frame(version - 1).await.expect("told at once");
    assert!(told.starts_with("event: changed"), "{told}");
    assert_eq!(first_frame(version).await, None, "nothing new: it waits");
}

#[tokio::test]
async fn every_page_is_self_contained_nothing_loads_from_elsewhere() {
    let f = Fixture::paused().await;
    let cookie = f.sign_in().await;
    for uri in [
        "/",
        &format!("/runs/{}", f.run),
        "/console.js",
        "/no-such-page",
    ] {
        let (_, headers, page) = f.get(uri, Some(&cookie)).await;
        let csp = headers["content-security-policy"].to_str().unwrap();
        assert!(csp.starts_with("default-src 'none'"), "{uri}: {csp}");
        let lower = page.to_ascii_lowercase();
        for external in [
            "src=\"http",
            "src=\"//",
            "href=\"http",
            "href=\"//",
            "url(http",
            "url(//",
            "@import",
            "fetch('http",
        ] {
            assert!(!lower.contains(external), "{uri} loads {external}…");
        }
    }
}
