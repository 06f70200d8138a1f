//! A workspace with a team whose builder waits at a durable stop-gate, its own state base, and
//! the console over it, driven in-process.

use axum::body::Body;
use axum::http::{HeaderMap, Request, StatusCode};
use http_body_util::BodyExt;
use loopward::state::Custody;
use loopward_console::{Console, ConsoleOptions, Waiting};
use loopward_core::Person;
use loopward_runner::layers::stopgate::PendingApproval;
use std::collections::BTreeMap;
use std::path::PathBuf;
use tower::ServiceExt;

/// The extra header that asks for the console's JSON answer instead of a page.
pub(crate) const JSON: &[(&str, &str)] = &[("accept", "application/json")];

/// The builder writes hello.txt, then is done.
const SCRIPT: &str = r#"
[[agents.builder]]
tool_calls = [{ name = "write_file", arguments = { path = "hello.txt", content = "hi" } }]
[[agents.builder]]
text = "done"
"#;

/// The builder says something, then is done.
const SAYING_SCRIPT: &str = r#"
[[agents.builder]]
tool_calls = [{ name = "say", arguments = { text = "<b>halfway</b> there" } }]
[[agents.builder]]
text = "done"
"#;

/// The team's config: one builder with `tools`, driven by `script.toml`, and `more`.
fn builder_team(tools: &str, more: &str) -> String {
    format!(
        "[run]\nfirst = \"builder\"\n[backend]\nscript = \"script.toml\"\n\
         [[agent]]\nname = \"builder\"\ntools = [\"{tools}\"]\n{more}"
    )
}

/// The builder waits at a durable gate before each turn.
const STOPGATE: &str = r#"
[[stopgate]]
name = "build"
point = "turn"
agent = "builder"
mode = "durable"
"#;

/// The host the console answers to in these tests.
pub(crate) const HOST: &str = "127.0.0.1:8377";

pub(crate) struct Fixture {
    pub(crate) ws: tempfile::TempDir,
    pub(crate) xdg: tempfile::TempDir,
    pub(crate) console: Console,
    pub(crate) run: String,
}

impl Fixture {
    /// A console over the team's workspace, opened with the options `set` changes.
    pub(crate) fn with(set: impl FnOnce(&mut ConsoleOptions)) -> Self {
        Self::over(&builder_team("write_file", STOPGATE), SCRIPT, set)
    }

    /// A console over the team whose builder tells the people watching something (`say`) and
    /// finishes, opened as [`Self::with`].
    pub(crate) fn saying(set: impl FnOnce(&mut ConsoleOptions)) -> Self {
        Self::over(&builder_team("say", ""), SAYING_SCRIPT, set)
    }

    fn over(config: &str, script: &str, set: impl FnOnce(&mut ConsoleOptions)) -> Self {
        let ws = tempfile::tempdir().unwrap();
        let xdg = tempfile::tempdir().unwrap();
        std::fs::write(ws.path().join("loopward.toml"), config).unwrap();
        std::fs::write(ws.path().join("script.toml"), script).unwrap();
        let mut opts = ConsoleOptions::new(
            ws.path().join("loopward.toml"),
            Some(xdg.path().to_path_buf()),
        );
        set(&mut opts);
        let console = Console::open(opts).unwrap();
        console.answer_at(HOST.parse().unwrap());
        Self {
            ws,
            xdg,
            console,
            run: String::new(),
        }
    }

    /// A console over a run paused at the builder's durable gate.
    pub(crate) async fn paused() -> Self {
        let mut f = Self::with(|_| {});
        f.run = f.pause_a_run().await;
        f.console.refresh();
        f
    }

    /// A console over a run paused at its gate, and a person signed in to it: the console, the
    /// cookie and the CSRF value a form must carry.
    pub(crate) async fn paused_and_signed_in() -> (Self, String, String) {
        let f = Self::paused().await;
        let (cookie, csrf) = f.signed_in().await;
        (f, cookie, csrf)
    }

    /// A console that notices to `url`, over no run yet.
    pub(crate) async fn with_webhook(url: &str) -> Self {
        Self::with(|o| o.webhooks = vec![url.to_string()])
    }

    pub(crate) fn config(&self) -> PathBuf {
        self.ws.path().join("loopward.toml")
    }

    pub(crate) fn custody(&self) -> Custody {
        let cfg = loopward::config::Config::load(&self.config()).unwrap();
        Custody::open(&cfg, &self.config(), Some(self.xdg.path())).unwrap()
    }

    /// The workspace's state directory.
    pub(crate) fn state(&self) -> PathBuf {
        self.custody().state().root().to_path_buf()
    }

    /// Runs the team until its builder's gate pauses it; returns the run id.
    pub(crate) async fn pause_a_run(&self) -> String {
        self.run_until("awaiting_approval").await
    }

    /// Runs the team to its end (`status`); returns the run id.
    pub(crate) async fn run_until(&self, status: &str) -> String {
        let report = loopward::Team::from_config(self.config())
            .unwrap()
            .custody(self.custody())
            .run(Person::at_the_keyboard().says("write hello"))
            .await
            .unwrap();
        assert_eq!(report.status.label(), status, "{report:?}");
        let dir = std::fs::read_dir(self.ws.path().join("runs")).unwrap();
        let mut runs: Vec<String> = dir
            .filter_map(Result::ok)
            .filter(|e| e.path().is_dir())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        runs.sort();
        runs.pop().unwrap()
    }

    /// The one gate waiting.
    pub(crate) fn waiting(&self) -> Waiting {
        let snap = self.console.snapshot();
        let row = snap.run(&self.run).expect("the run is listed");
        assert_eq!(row.waiting.len(), 1, "{row:?}");
        row.waiting[0].clone()
    }

    /// The sealed record `id`, as the CLI reads it.
    pub(crate) fn record(&self, id: &str) -> PendingApproval {
        self.custody()
            .approvals()
            .unwrap()
            .read(id)
            .unwrap()
            .unwrap()
    }

    async fn send(&self, req: Request<Body>) -> (StatusCode, HeaderMap, String) {
        let r = self.console.router().oneshot(req).await.unwrap();
        let (parts, body) = r.into_parts();
        let bytes = body.collect().await.unwrap().to_bytes();
        (
            parts.status,
            parts.headers,
            String::from_utf8_lossy(&bytes).into_owned(),
        )
    }

    pub(crate) async fn get(
        &self,
        uri: &str,
        cookie: Option<&str>,
    ) -> (StatusCode, HeaderMap, String) {
        let mut b = Request::get(uri).header("host", HOST);
        if let Some(c) = cookie {
            b = b.header("cookie", c);
        }
        self.send(b.body(Body::empty()).unwrap()).await
    }

    pub(crate) async fn get_with(
        &self,
        uri: &str,
        headers: &[(&str, &str)],
    ) -> (StatusCode, HeaderMap, String) {
        let mut b = Request::get(uri).header("host", HOST);
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        self.send(b.body(Body::empty()).unwrap()).await
    }

    /// A form POST; `extra` headers replace the defaults (a `host` given replaces the console's).
    pub(crate) async fn post(
        &self,
        uri: &str,
        cookie: Option<&str>,
        form: &str,
        extra: &[(&str, &str)],
    ) -> (StatusCode, HeaderMap, String) {
        let mut b = Request::post(uri).header("content-type", "application/x-www-form-urlencoded");
        if !extra.iter().any(|(k, _)| *k == "host") {
            b = b.header("host", HOST);
        }
        if let Some(c) = cookie {
            b = b.header("cookie", c);
        }
        for (k, v) in extra {
            b = b.header(*k, *v);
        }
        self.send(b.body(Body::from(form.to_string())).unwrap())
            .await
    }

    /// The person signed in with `cookie` answers gate `id` with `verb` (`approve`, `deny`),
    /// posting `form` with the `extra` headers.
    pub(crate) async fn answer(
        &self,
        cookie: &str,
        id: &str,
        verb: &str,
        form: &str,
        extra: &[(&str, &str)],
    ) -> (StatusCode, HeaderMap, String) {
        let uri = format!("/gates/{id}/{verb}");
        self.post(&uri, Some(cookie), form, extra).await
    }

    /// Signs in with the token; returns the cookie to send.
    pub(crate) async fn sign_in(&self) -> String {
        let uri = format!("/login?token={}", self.console.token().secret());
        let (status, headers, _) = self.get(&uri, None).await;
        assert_eq!(status, StatusCode::SEE_OTHER);
        let set = headers["set-cookie"].to_str().unwrap();
        assert!(
            set.contains("HttpOnly") && set.contains("SameSite=Strict"),
            "{set}"
        );
        set.split(';').next().unwrap().to_string()
    }

    /// Signs in; returns the cookie and the CSRF token a form must carry.
    pub(crate) async fn signed_in(&self) -> (String, String) {
        let cookie = self.sign_in().await;
        (cookie, self.console.token().csrf().to_string())
    }
}

/// The notice a webhook receiver got within 10 s, once its signature is checked against the
/// console's webhook secret: the notice, and its body as sent.
pub(crate) async fn signed_notice(
    f: &Fixture,
    received: tokio::sync::oneshot::Receiver<(BTreeMap<String, String>, String)>,
) -> (serde_json::Value, String) {
    let (headers, body) = tokio::time::timeout(std::time::Duration::from_secs(10), received)
        .await
        .expect("a notice within 10 s")
        .unwrap();
    let secret = std::fs::read_to_string(f.state().join("console/webhook.secret")).unwrap();
    assert!(loopward_console::notify::signature_matches(
        secret.trim().as_bytes(),
        &headers["x-loopward-timestamp"],
        body.as_bytes(),
        &headers["x-loopward-signature"],
    ));
    (serde_json::from_str(&body).unwrap(), body)
}

/// A webhook receiver on 127.0.0.1: its URL, and the first notice's headers and body.
pub(crate) async fn receiver() -> (
    String,
    tokio::sync::oneshot::Receiver<(BTreeMap<String, String>, String)>,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let (mut sock, _) = listener.accept().await.unwrap();
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            let n = sock.read(&mut chunk).await.unwrap();
            buf.extend_from_slice(&chunk[..n]);
            let text = String::from_utf8_lossy(&buf).into_owned();
            if let Some(end) = text.find("\r\n\r\n") {
                let mut headers = BTreeMap::new();
                for line in text[..end].lines().skip(1) {
                    if let Some((k, v)) = line.split_once(':') {
                        headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
                    }
                }
                let len: usize = headers
                    .get("content-length")
                    .and_then(|l| l.parse().ok())
                    .unwrap_or(0);
                if buf.len() >= end + 4 + len {
                    let body = String::from_utf8_lossy(&buf[end + 4..end + 4 + len]).into_owned();
                    let _ = sock.write_all(b"HTTP/1.1 204 No Content\r\n\r\n").await;
                    let _ = tx.send((headers, body));
                    return;
                }
            }
            if n == 0 {
                return;
            }
        }
    });
    (format!("http://{addr}/hook"), rx)
}
