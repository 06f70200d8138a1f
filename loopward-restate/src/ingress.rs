//! A client of Restate's HTTP ingress for loopward runs: start a run, see what it waits for,
//! give a verdict, wait for its end; and register a worker with the admin API.
//!
//! Anyone who reaches the ingress can approve: the run is not held by any process while it
//! waits, so the person needs no access to the machine that started it.

use crate::journal::PENDING_STATE;
use crate::wire::{PendingApproval, RunSummary, StartRun, Verdict, Waiting};
use crate::workflow::WORKFLOW;
use loopward_core::RunId;
use serde::de::DeserializeOwned;
use std::time::Duration;

/// A call to Restate failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IngressError {
    /// The URL given is not an `http://` or `https://` URL.
    #[error("{url:?} is not an http:// or https:// URL; give the Restate ingress as http://HOST:PORT (default port 8080)")]
    BadUrl {
        /// What was given.
        url: String,
    },
    /// Restate could not be reached.
    #[error("could not reach Restate at {url}: {error}; is restate-server running and is the URL right?")]
    Unreachable {
        /// The URL called.
        url: String,
        /// The transport error.
        error: String,
    },
    /// Restate answered with an error status.
    #[error("Restate answered {status} to {url}: {body}")]
    Status {
        /// The URL called.
        url: String,
        /// The HTTP status.
        status: u16,
        /// Restate's message.
        body: String,
    },
    /// The run waits for no approval.
    #[error("run {run} is not waiting for an approval (it may be running, finished, or not started); nothing was decided")]
    NotWaiting {
        /// The run.
        run: RunId,
    },
    /// The run waits for another approval than the one named.
    #[error("run {run} waits for approval {waiting:?}, not {given:?}; nothing was decided")]
    OtherApproval {
        /// The run.
        run: RunId,
        /// What it waits for.
        waiting: String,
        /// What was given.
        given: String,
    },
    /// The wait was answered already: Restate keeps the first verdict.
    #[error("run {run} was answered already (Restate keeps the first verdict; the run takes it when a worker is up); a decision cannot be changed, and nothing was decided")]
    Answered {
        /// The run.
        run: RunId,
    },
    /// The answer could not be read.
    #[error("Restate's answer from {url} could not be read: {why}")]
    Body {
        /// The URL called.
        url: String,
        /// Why.
        why: String,
    },
}

/// A client of one Restate server: its ingress (`http://HOST:8080` by default), where runs are
/// started and awakeables resolved, and its admin API (`http://HOST:9070`), where a run's
/// published state is read. Neither needs a worker to be running.
#[derive(Clone, Debug)]
pub struct Ingress {
    base: String,
    admin: String,
    http: reqwest::Client,
}

#[derive(serde::Deserialize)]
struct Rows {
    rows: Vec<Row>,
}

#[derive(serde::Deserialize)]
struct Row {
    #[serde(default)]
    service_key: Option<String>,
    value_utf8: Option<String>,
}

/// A run on Restate waiting at a stop-gate: what it waits for, and the awakeable that answers
/// it. Each wait has its own awakeable: a later wait of the same gate has another.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Awaiting {
    /// The run.
    pub run: RunId,
    /// What it waits for.
    pub approval: PendingApproval,
    /// The awakeable a verdict resolves (this one wait).
    pub awakeable: String,
    /// A verdict was given already (from anywhere); Restate keeps it, and the run takes it when
    /// a worker is up. Another verdict would be ignored.
    pub answered: bool,
}

#[derive(serde::Deserialize)]
struct Entries {
    rows: Vec<Entry>,
}

#[derive(serde::Deserialize)]
struct Entry {
    key: Option<String>,
    idx: Option<u64>,
    kind: Option<String>,
}

impl Ingress {
    /// A client of the ingress at `base` and the admin API at `admin`.
    ///
    /// ```
    /// use loopward_restate::ingress::Ingress;
    /// assert!(Ingress::new("http://127.0.0.1:8080", "http://127.0.0.1:9070").is_ok());
    /// assert!(Ingress::new("127.0.0.1:8080", "http://127.0.0.1:9070").is_err());
    /// ```
    pub fn new(base: &str, admin: &str) -> Result<Self, IngressError> {
        Ok(Self {
            base: base_url(base)?,
            admin: base_url(admin)?,
            http: reqwest::Client::builder()
                .connect_timeout(Duration::from_secs(10))
                .build()
                .map_err(|e| IngressError::Unreachable {
                    url: base.into(),
                    error: e.to_string(),
                })?,
        })
    }

    /// Submits run `run` (once per id: Restate refuses a second `run` of the same workflow).
    pub async fn start(&self, run: &RunId, start: &StartRun) -> Result<(), IngressError> {
        let url = format!("{}/{WORKFLOW}/{run}/run/send", self.base);
        let _: serde_json::Value = send(self.http.post(&url).json(start), &url).await?;
        Ok(())
    }

    /// Asks the admin API's SQL introspection.
    async fn query<T: DeserializeOwned>(&self, query: &str) -> Result<T, IngressError> {
        let url = format!("{}/query", self.admin);
        send(
            self.http
                .post(&url)
                .header("accept", "application/json")
                .json(&serde_json::json!({ "query": query })),
            &url,
        )
        .await
    }

    /// The published waits of `LoopwardRun` (of run `run` only, when given).
    async fn published(&self, run: Option<&RunId>) -> Result<Vec<Awaiting>, IngressError> {
        let only = |column: &str| {
            run.map_or(String::new(), |r| {
                format!(" AND {column} = '{}'", r.as_str().replace('\'', "''"))
            })
        };
        let rows: Rows = self
            .query(&format!(
                "SELECT service_key, value_utf8 FROM state WHERE service_name = '{WORKFLOW}' AND key = '{PENDING_STATE}'{} ORDER BY service_key",
                only("service_key")
            ))
            .await?;
        if rows.rows.is_empty() {
            return Ok(vec![]);
        }
        // A wait is answered once a signal (the awakeable's completion) follows the state
        // entry that published it in the run's journal.
        let entries: Entries = self
            .query(&format!(
                "SELECT i.target_service_key AS key, j.index AS idx, j.entry_type AS kind FROM sys_journal j JOIN sys_invocation i ON j.id = i.id WHERE i.target_service_name = '{WORKFLOW}' AND i.target_handler_name = 'run' AND j.entry_type IN ('Command: SetState', 'Notification: Signal') AND i.target_service_key IN (SELECT service_key FROM state WHERE service_name = '{WORKFLOW}' AND key = '{PENDING_STATE}'){}",
                only("i.target_service_key")
            ))
            .await?;
        let answered = |key: &str| {
            let mine = || {
                entries
                    .rows
                    .iter()
                    .filter(|e| e.key.as_deref() == Some(key))
            };
            let published = mine()
                .filter(|e| e.kind.as_deref() == Some("Command: SetState"))
                .filter_map(|e| e.idx)
                .max();
            mine().any(|e| {
                e.kind.as_deref() == Some("Notification: Signal")
                    && e.idx.zip(published).is_some_and(|(i, p)| i > p)
            })
        };
        let mut all = Vec::with_capacity(rows.rows.len());
        for row in rows.rows {
            let (Some(key), Some(text)) = (row.service_key, row.value_utf8) else {
                continue;
            };
            let Some(id) = RunId::new(&key) else { continue };
            let w: Waiting = serde_json::from_str(&text).map_err(|e| IngressError::Body {
                url: format!("{}/query", self.admin),
                why: format!("the pending approval of run {key} cannot be read: {e}"),
            })?;
            all.push(Awaiting {
                answered: answered(&key),
                run: id,
                approval: w.approval,
                awakeable: w.awakeable,
            });
        }
        Ok(all)
    }

    /// Every run waiting at a stop-gate on this Restate server, by run id. A verdict already
    /// given stays listed until a worker takes it (the run then goes on).
    pub async fn awaiting_all(&self) -> Result<Vec<Awaiting>, IngressError> {
        self.published(None).await
    }

    /// What run `run` waits for, if anything.
    pub async fn awaiting(&self, run: &RunId) -> Result<Option<Awaiting>, IngressError> {
        Ok(self.published(Some(run)).await?.into_iter().next())
    }

    /// The approval run `run` waits for, if any.
    pub async fn pending(&self, run: &RunId) -> Result<Option<PendingApproval>, IngressError> {
        Ok(self.awaiting(run).await?.map(|w| w.approval))
    }

    /// Gives a person's verdict on the approval run `run` waits for, and returns that approval.
    /// The verdict must name the pending id; Restate keeps it durably, and the run goes on as
    /// soon as a worker is up (none needs to be now).
    pub async fn decide(
        &self,
        run: &RunId,
        verdict: &Verdict,
    ) -> Result<PendingApproval, IngressError> {
        let Some(waiting) = self.awaiting(run).await? else {
            return Err(IngressError::NotWaiting { run: run.clone() });
        };
        self.resolve(&waiting, verdict).await?;
        Ok(waiting.approval)
    }

    /// Gives `verdict` to the one wait `waiting` (as [`awaiting`](Self::awaiting) read it).
    /// The verdict must name its pending id.
    /// Refused when it was answered already (Restate would keep the first verdict).
    pub async fn resolve(&self, waiting: &Awaiting, verdict: &Verdict) -> Result<(), IngressError> {
        if waiting.answered {
            return Err(IngressError::Answered {
                run: waiting.run.clone(),
            });
        }
        if waiting.approval.id != verdict.id() {
            return Err(IngressError::OtherApproval {
                run: waiting.run.clone(),
                waiting: waiting.approval.id.clone(),
                given: verdict.id().into(),
            });
        }
        let url = format!(
            "{}/restate/awakeables/{}/resolve",
            self.base, waiting.awakeable
        );
        let _: serde_json::Value = send(self.http.post(&url).json(verdict), &url).await?;
        Ok(())
    }

    /// Waits for run `run` to end and returns how it ended.
    pub async fn outcome(&self, run: &RunId) -> Result<RunSummary, IngressError> {
        let url = format!("{}/restate/workflow/{WORKFLOW}/{run}/attach", self.base);
        send(self.http.get(&url), &url).await
    }
}

/// Registers the worker (deployment) at `worker` with the Restate admin API at `admin`
/// (`http://HOST:9070` by default). Workers behind one address (a load balancer) are one
/// deployment: register the address once.
pub async fn register(admin: &str, worker: &str) -> Result<(), IngressError> {
    let url = format!("{}/deployments", base_url(admin)?);
    let http = reqwest::Client::new();
    let body = serde_json::json!({ "uri": worker, "force": true });
    let _: serde_json::Value = send(http.post(&url).json(&body), &url).await?;
    Ok(())
}

fn base_url(base: &str) -> Result<String, IngressError> {
    let trimmed = base.trim_end_matches('/');
    if !(trimmed.starts_with("http://") || trimmed.starts_with("https://")) {
        return Err(IngressError::BadUrl { url: base.into() });
    }
    Ok(trimmed.to_string())
}

async fn send<T: DeserializeOwned>(
    req: reqwest::RequestBuilder,
    url: &str,
) -> Result<T, IngressError> {
    let resp = req.send().await.map_err(|e| IngressError::Unreachable {
        url: url.into(),
        error: e.to_string(),
    })?;
    let status = resp.status();
    let body = resp.bytes().await.map_err(|e| IngressError::Body {
        url: url.into(),
        why: e.to_string(),
    })?;
    if !status.is_success() {
        return Err(IngressError::Status {
            url: url.into(),
            status: status.as_u16(),
            body: String::from_utf8_lossy(&body).chars().take(2000).collect(),
        });
    }
    serde_json::from_slice(if body.is_empty() { b"null" } else { &body }).map_err(|e| {
        IngressError::Body {
            url: url.into(),
            why: e.to_string(),
        }
    })
}
