//! Notices to a person's relay: when a stop-gate starts waiting, or an agent says something to
//! the people watching its run (`say`), the console POSTs a JSON notice to each configured
//! webhook. The notice carries a link (to the approval, to the record), never the power to
//! approve (the link needs the console's sign-in like any other page). Each is signed so the
//! receiver can check it came from this console:
//!
//! - `X-Loopward-Timestamp: <unix seconds>`
//! - `X-Loopward-Signature: sha256=<hex HMAC-SHA256(secret, "<timestamp>.<body>")>`
//!
//! The secret is kept in `<state>/console/webhook.secret` (0600); give it to the receiver.
//!
//! ```
//! use loopward_console::notify::{sign, signature_matches};
//! let sig = sign(b"secret", 1_700_000_000, br#"{"kind":"gate_waiting"}"#);
//! assert!(signature_matches(b"secret", "1700000000", br#"{"kind":"gate_waiting"}"#, &sig));
//! assert!(!signature_matches(b"secret", "1700000001", br#"{"kind":"gate_waiting"}"#, &sig));
//! ```

use crate::watch::{Spoken, Waiting};
use hmac::{Hmac, Mac};
use serde::Serialize;
use sha2::Sha256;
use std::time::Duration;

/// The signature header's value for `body` sent at `timestamp` (unix seconds).
pub fn sign(secret: &[u8], timestamp: u64, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("any key length");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

/// What a receiver checks: `signature` is this body's, at this timestamp, under `secret`.
pub fn signature_matches(secret: &[u8], timestamp: &str, body: &[u8], signature: &str) -> bool {
    let Ok(t) = timestamp.parse::<u64>() else {
        return false;
    };
    crate::auth::same(sign(secret, t, body).as_bytes(), signature.as_bytes())
}

/// The notice a webhook receives.
#[derive(Clone, Debug, Serialize)]
pub struct Notice<'a> {
    /// Always `gate_waiting`.
    pub kind: &'static str,
    /// The run.
    pub run: &'a str,
    /// The waiting gate and the action it would allow.
    #[serde(flatten)]
    pub waiting: &'a Waiting,
    /// Where a person answers it (the console's sign-in applies).
    pub url: String,
}

/// The notice a webhook receives when an agent of a run says something to the people watching
/// it (its `say` tool). It carries the words and a link, and asks for no answer: a `say` decides
/// nothing.
#[derive(Clone, Debug, Serialize)]
pub struct SaidNotice<'a> {
    /// Always `agent_said`.
    pub kind: &'static str,
    /// The run.
    pub run: &'a str,
    /// The agent that said it.
    pub agent: &'a str,
    /// What it said (secrets masked, as in every record).
    pub text: &'a str,
    /// Its record on the run's page (the console's sign-in applies).
    pub url: String,
}

/// Sends notices to the configured webhooks.
#[derive(Clone, Debug)]
pub struct Notifier {
    hooks: Vec<String>,
    secret: Vec<u8>,
    client: reqwest::Client,
}

impl Notifier {
    /// Notices go to `hooks`, signed with `secret`.
    pub fn new(hooks: Vec<String>, secret: &str) -> Self {
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap_or_default();
        Self {
            hooks,
            secret: secret.as_bytes().to_vec(),
            client,
        }
    }

    /// Whether any webhook is configured.
    pub fn is_on(&self) -> bool {
        !self.hooks.is_empty()
    }

    /// POSTs the notice that `waiting` (of `run`) started waiting; `base` is the console's URL.
    /// Each webhook is tried once, in the background; a failure is traced, never retried into a
    /// storm.
    pub fn gate_waiting(&self, run: &str, waiting: &Waiting, base: &str) {
        let notice = Notice {
            kind: "gate_waiting",
            run,
            waiting,
            url: format!("{base}/runs/{run}#gate-{}", waiting.id),
        };
        self.post(serde_json::to_vec(&notice).unwrap_or_default());
    }

    /// POSTs the notice that an agent said something to the people watching its run, as
    /// [`gate_waiting`](Self::gate_waiting) does: its words and a link to the record.
    pub(crate) fn agent_said(&self, spoken: &Spoken, base: &str) {
        let notice = SaidNotice {
            kind: "agent_said",
            run: &spoken.run,
            agent: spoken.said.speaker(),
            text: &spoken.said.text,
            url: format!("{base}/runs/{}#seq-{}", spoken.run, spoken.seq),
        };
        self.post(serde_json::to_vec(&notice).unwrap_or_default());
    }

    /// Sends `body`, signed, to every webhook once, in the background.
    fn post(&self, body: Vec<u8>) {
        let now = loopward_runner::Clock::now_millis(&loopward_runner::SystemClock) / 1000;
        let signature = sign(&self.secret, now, &body);
        for hook in &self.hooks {
            let request = self
                .client
                .post(hook)
                .header("content-type", "application/json")
                .header("x-loopward-timestamp", now.to_string())
                .header("x-loopward-signature", signature.clone())
                .body(body.clone());
            let hook = hook.clone();
            tokio::spawn(async move {
                match request.send().await {
                    Ok(r) if r.status().is_success() => {}
                    Ok(r) => {
                        tracing::warn!(%hook, status = %r.status(), "webhook refused the notice")
                    }
                    Err(e) => tracing::warn!(%hook, error = %e, "webhook unreachable"),
                }
            });
        }
    }
}
