//! The routes: pages and live streams (GET, signed in), answers (POST, signed in, CSRF value,
//! own `Origin`). Every response carries a strict Content-Security-Policy: nothing loads from
//! elsewhere, no inline script runs.

use crate::actions::{Answer, Grant, Stop};
use crate::error::ConsoleError;
use crate::{pages, Console};
use axum::extract::rejection::FormRejection;
use axum::extract::{Form, Path, Query, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use futures::Stream;
use serde::Deserialize;
use std::convert::Infallible;
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::set_header::SetResponseHeaderLayer;

const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

pub(crate) fn router(console: Console) -> Router {
    let signed_in = Router::new()
        .route("/", get(runs_page))
        .route("/api/runs", get(runs_json))
        .route("/runs/{run}", get(run_page))
        .route("/live", get(live))
        .route_layer(axum::middleware::from_fn_with_state(
            console.clone(),
            check_read,
        ));
    Router::new()
        .merge(signed_in)
        .route("/login", get(login).post(login_with_passphrase))
        .route("/console.js", get(script))
        .route("/gates/{id}/approve", post(answer::<true>))
        .route("/gates/{id}/deny", post(answer::<false>))
        .route("/runs/{run}/stop", post(stop))
        .route("/stop-all", post(stop_all))
        .route("/overrides", post(grant))
        .fallback(|| async { ConsoleError::NotFound("no such page in the console".into()) })
        .layer(RequestBodyLimitLayer::new(64 * 1024))
        .layer(SetResponseHeaderLayer::overriding(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CSP),
        ))
        .layer(SetResponseHeaderLayer::overriding(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ))
        .layer(SetResponseHeaderLayer::overriding(
            header::REFERRER_POLICY,
            HeaderValue::from_static("same-origin"),
        ))
        .layer(SetResponseHeaderLayer::if_not_present(
            header::CACHE_CONTROL,
            HeaderValue::from_static("no-store"),
        ))
        .with_state(console)
}

impl Console {
    fn check(
        &self,
        method: &Method,
        headers: &HeaderMap,
        csrf: Option<&str>,
    ) -> Result<(), ConsoleError> {
        self.inner.token.check(method, headers, &self.hosts(), csrf)
    }

    fn hosts(&self) -> Vec<String> {
        self.inner
            .hosts
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

async fn check_read(State(c): State<Console>, req: Request, next: Next) -> Response {
    match c.check(req.method(), req.headers(), None) {
        Ok(()) => next.run(req).await,
        Err(e) => e.answer(req.headers()),
    }
}

#[derive(Deserialize)]
struct Login {
    token: Option<String>,
}

async fn login(State(c): State<Console>, headers: HeaderMap, q: Query<Login>) -> Response {
    let host_ok = c.check(&Method::GET, &headers, None);
    if let Err(e @ ConsoleError::WrongHost { .. }) = host_ok {
        return e.answer(&headers);
    }
    match q.token.as_deref() {
        Some(t) if c.inner.token.is(t) => {
            let mut r = Redirect::to("/").into_response();
            if let Ok(v) = HeaderValue::from_str(&c.inner.token.cookie(c.is_secure())) {
                r.headers_mut().insert(header::SET_COOKIE, v);
            }
            r
        }
        // No token: the passphrase form, where one is set.
        None if c.inner.passphrase.is_set() => Html(pages::sign_in_page(None)).into_response(),
        _ => ConsoleError::Unauthenticated {
            token_file: c.inner.token.file().display().to_string(),
        }
        .answer(&headers),
    }
}

#[derive(Deserialize)]
struct PassphraseForm {
    passphrase: String,
}

/// `POST /login` with the passphrase: the token's session cookie, or the form again, saying why.
async fn login_with_passphrase(
    State(c): State<Console>,
    headers: HeaderMap,
    f: Posted<PassphraseForm>,
) -> Response {
    // Not signed in yet, so no CSRF value: the `Host`, `Origin` and `Sec-Fetch-Site` checks.
    if let Err(e) = crate::auth::check_origin(&Method::POST, &headers, &c.hosts()) {
        return e.answer(&headers);
    }
    let given = match form(f) {
        Ok(p) => p.passphrase,
        Err(e) => return e.answer(&headers),
    };
    let checker = c.clone();
    let checked = tokio::task::spawn_blocking(move || {
        checker
            .inner
            .passphrase
            .check(&given, tokio::time::Instant::now())
    })
    .await
    .unwrap_or_else(|e| Err(ConsoleError::Internal(e.to_string())));
    match checked {
        Ok(()) => {
            let mut r = Redirect::to("/").into_response();
            if let Ok(v) = HeaderValue::from_str(&c.inner.token.cookie(c.is_secure())) {
                r.headers_mut().insert(header::SET_COOKIE, v);
            }
            r
        }
        Err(e) => {
            let wants_json = headers
                .get(header::ACCEPT)
                .and_then(|v| v.to_str().ok())
                .is_some_and(|a| a.contains("application/json"));
            if wants_json || !c.inner.passphrase.is_set() {
                return e.answer(&headers);
            }
            let status = e.status();
            let mut r = (status, Html(pages::sign_in_page(Some(&e.to_string())))).into_response();
            if let ConsoleError::TooMany { retry_after_s } = e {
                r.headers_mut()
                    .insert(header::RETRY_AFTER, retry_after_s.into());
            }
            r
        }
    }
}

async fn script() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        pages::JS,
    )
}

fn agents(c: &Console) -> Vec<String> {
    c.inner
        .cfg
        .agents
        .iter()
        .map(|a| a.name.to_string())
        .collect()
}

#[derive(Deserialize)]
struct Done {
    done: Option<String>,
}

/// The overrides waiting to be used (unreadable or unusable ones are `loopward override list`'s).
fn usable(c: &Console) -> Vec<pages::Usable> {
    let Ok(store) = c.inner.custody.overrides() else {
        return vec![];
    };
    store
        .list(&loopward_runner::SystemClock)
        .into_iter()
        .filter(|l| l.problem.is_none())
        .filter_map(|l| l.sentinel)
        .map(|s| pages::Usable {
            id: s.id,
            agent: s.agent,
            path: s.path,
            reason: s.reason,
            expires: crate::watch::rfc3339(s.expires),
        })
        .collect()
}

async fn runs_page(State(c): State<Console>, q: Query<Done>) -> Html<String> {
    let overrides = tokio::task::spawn_blocking({
        let c = c.clone();
        move || usable(&c)
    })
    .await
    .unwrap_or_default();
    Html(pages::runs_page(
        &c.snapshot(),
        c.inner.token.csrf(),
        &agents(&c),
        q.done.as_deref(),
        &overrides,
    ))
}

async fn runs_json(State(c): State<Console>) -> Json<serde_json::Value> {
    let snap = c.snapshot();
    Json(
        serde_json::json!({ "runs": snap.runs, "refused": snap.refused, "remote_problem": snap.remote_problem, "version": snap.version }),
    )
}

async fn run_page(
    State(c): State<Console>,
    Path(run): Path<String>,
    q: Query<Done>,
    headers: HeaderMap,
) -> Response {
    let mut snap = c.snapshot();
    if snap.run(&run).is_none() {
        // A run started since the last tick: look again before saying it is not there.
        let again = c.clone();
        if tokio::task::spawn_blocking(move || again.refresh())
            .await
            .is_ok()
        {
            snap = c.snapshot();
        }
    }
    let Some(row) = snap.run(&run).cloned() else {
        return ConsoleError::NotFound(format!(
            "there is no run {run:?} in {}; it may have been removed",
            c.inner.runs_dir.display()
        ))
        .answer(&headers);
    };
    let (done, version) = (q.0.done, snap.version);
    if row.elsewhere.is_some() {
        let csrf = c.inner.token.csrf();
        return Html(pages::elsewhere_page(&row, csrf, done.as_deref(), version)).into_response();
    }
    let dir = c.inner.runs_dir.join(&row.run);
    let page =
        tokio::task::spawn_blocking(move || render_run(&c, &dir, &row, done.as_deref(), version))
            .await;
    match page {
        Ok(Ok(html)) => Html(html).into_response(),
        Ok(Err(e)) => e.answer(&headers),
        Err(e) => ConsoleError::Internal(e.to_string()).answer(&headers),
    }
}

/// The run's `audit.html`, from its verified records, with the console's panel on top and the
/// live hook at the bottom.
fn render_run(
    c: &Console,
    dir: &std::path::Path,
    row: &crate::RunRow,
    done: Option<&str>,
    version: u64,
) -> Result<String, ConsoleError> {
    use loopward::pages::render_html;
    use loopward_runner::audit::{LedgerState, Record};
    let runs_dir = &c.inner.runs_dir;
    let mut opts = c
        .inner
        .custody
        .verify_options(runs_dir)
        .map_err(|e| ConsoleError::Internal(format!("{e:#}")))?;
    opts.allow_unfinished = true;
    let bytes = std::fs::read(dir.join(loopward_runner::audit::EVENTS_FILE))
        .map_err(|e| ConsoleError::NotFound(format!("run {} cannot be read: {e}", row.run)))?;
    let whole = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    let records: Vec<Record> = bytes[..whole]
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .filter_map(|l| Record::parse_line(l).ok().map(|(r, _)| r))
        .collect();
    let state = match loopward_runner::audit::verify(dir, &opts) {
        Ok(ok) => LedgerState {
            mac: ok.mac.into(),
            key_id: ok.key.map(|k| k.to_string()),
            anchored: ok.anchored,
            problem: None,
        },
        Err(e) => LedgerState {
            problem: Some(e.to_string()),
            ..LedgerState::verified("unknown")
        },
    };
    let page = render_html(&records, &state);
    let runs_it = c
        .inner
        .resumer
        .as_ref()
        .is_some_and(|r| r.pid(&row.run).is_some());
    let panel = pages::run_panel(row, c.inner.token.csrf(), runs_it, done);
    let throttle = if records.len() > 2000 { 3000 } else { 300 };
    let live = pages::run_live(&row.run, version, throttle);
    Ok(page
        .replacen("<main>", &format!("<main>{panel}"), 1)
        .replacen("</body>", &format!("{live}</body>"), 1))
}

#[derive(Deserialize)]
struct LiveQuery {
    run: Option<String>,
    /// The snapshot version the page was rendered from: anything newer is told at once, so a
    /// change between the page and its stream is never missed.
    since: Option<u64>,
}

/// Server-sent events: `changed` whenever the snapshot (or, with `run`, that run's row) changed.
async fn live(
    State(c): State<Console>,
    q: Query<LiveQuery>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let rx = c.inner.snapshot.subscribe();
    let LiveQuery { run, since } = q.0;
    let stream = futures::stream::unfold(
        (rx, None::<crate::RunRow>, run, since),
        |(mut rx, mut last, run, mut since)| async move {
            loop {
                let stale = since
                    .take()
                    .is_some_and(|v| v != rx.borrow_and_update().version);
                if !stale && rx.changed().await.is_err() {
                    return None;
                }
                let snap = rx.borrow_and_update().clone();
                let data = match &run {
                    None => serde_json::json!({ "version": snap.version }),
                    Some(id) => {
                        let row = snap.run(id).cloned();
                        if row == last && !stale {
                            continue;
                        }
                        last.clone_from(&row);
                        serde_json::json!({ "run": id, "records": row.as_ref().map(|r| r.records), "status": row.as_ref().map(|r| r.status.clone()) })
                    }
                };
                let event = Event::default().event("changed").data(data.to_string());
                return Some((Ok(event), (rx, last, run, since)));
            }
        },
    );
    Sse::new(stream).keep_alive(KeepAlive::default())
}

/// A POST's answer: JSON for a client that asked for it, else back to the run's page.
fn done(headers: &HeaderMap, what: &str, run: &str, detail: serde_json::Value) -> Response {
    let json = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("application/json"));
    if json {
        return (StatusCode::OK, Json(pages::done_json(what, run, detail))).into_response();
    }
    let word = match what {
        "approved" => "approved",
        "denied" => "denied",
        "override granted" => "granted",
        _ => "stop",
    };
    let to = if run.is_empty() {
        format!("/?done={word}")
    } else {
        format!("/runs/{run}?done={word}")
    };
    Redirect::to(&to).into_response()
}

/// What a form's action came to: [`done`] with its run (empty for none) and detail, or the
/// error's answer.
fn answered(
    headers: &HeaderMap,
    what: &str,
    result: Result<(String, serde_json::Value), ConsoleError>,
) -> Response {
    match result {
        Ok((run, detail)) => done(headers, what, &run, detail),
        Err(e) => e.answer(headers),
    }
}

/// A form as posted: a malformed one is the console's to answer ([`form`]), not axum's.
type Posted<T> = Result<Form<T>, FormRejection>;

fn form<T>(f: Posted<T>) -> Result<T, ConsoleError> {
    f.map(|Form(t)| t).map_err(|e| {
        ConsoleError::BadRequest(format!(
            "the form is malformed ({e}); nothing changed. Use the console's page"
        ))
    })
}

/// Approve (`APPROVE`) or deny the gate `id`, here or on a remote console.
async fn answer<const APPROVE: bool>(
    State(c): State<Console>,
    Path(id): Path<String>,
    headers: HeaderMap,
    f: Posted<Answer>,
) -> Response {
    let result = match signed(&c, &headers, f) {
        Ok(a) if id.starts_with(crate::remote::ID_PREFIX) => {
            c.answer_remote(&id, APPROVE, &a).await
        }
        Ok(a) => c.answer(&id, APPROVE, &a),
        Err(e) => Err(e),
    };
    let what = if APPROVE { "approved" } else { "denied" };
    answered(
        &headers,
        what,
        result.map(|run| (run, serde_json::json!({ "id": id }))),
    )
}

/// A form that carries the page's CSRF value.
pub(crate) trait Signed {
    /// The form's CSRF value, when it has one.
    fn csrf(&self) -> Option<&str>;
}

/// Signed in and not cross-site: the form's CSRF value is checked after it parsed.
fn signed<T: Signed>(c: &Console, headers: &HeaderMap, f: Posted<T>) -> Result<T, ConsoleError> {
    c.check(&Method::POST, headers, None).or_else(|e| match e {
        ConsoleError::CrossSite { .. } => Ok(()),
        e => Err(e),
    })?;
    let t = form(f)?;
    c.check(&Method::POST, headers, t.csrf())?;
    Ok(t)
}

async fn stop(
    State(c): State<Console>,
    Path(run): Path<String>,
    headers: HeaderMap,
    f: Posted<Stop>,
) -> Response {
    let result = signed(&c, &headers, f).and_then(|s| c.stop(&run, &s));
    let detail = |fresh: bool| (run.clone(), serde_json::json!({ "new": fresh }));
    answered(&headers, "stop requested", result.map(detail))
}

async fn stop_all(State(c): State<Console>, headers: HeaderMap, f: Posted<Stop>) -> Response {
    let result = signed(&c, &headers, f).and_then(|s| c.stop_all(&s));
    let detail = |runs: Vec<String>| (String::new(), serde_json::json!({ "runs": runs }));
    answered(&headers, "stop requested", result.map(detail))
}

async fn grant(State(c): State<Console>, headers: HeaderMap, f: Posted<Grant>) -> Response {
    let result = signed(&c, &headers, f).and_then(|g| c.grant(&g));
    let detail = |id: String| (String::new(), serde_json::json!({ "id": id }));
    answered(&headers, "override granted", result.map(detail))
}
