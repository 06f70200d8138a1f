//! The CLI's client of the stop-gates runs on Restate wait at (the `restate` feature): what they
//! wait for, read from the admin API, and a person's verdict, given at the ingress. One code path
//! for `loopward approve|deny --restate` and for the console (`loopward serve --restate`), so a
//! verdict from either is the same: approved `by` the person, or denied with `denied by <who>`.

use anyhow::{bail, Result};
use futures::future::BoxFuture;
use loopward_console::remote::{RemoteGates, RemoteRefusal, RemoteWaiting};
use loopward_core::RunId;
use loopward_restate::ingress::{Awaiting, Ingress, IngressError};
use loopward_restate::{PendingApproval, Verdict};

/// The admin URL: given, or the ingress's host on Restate's default admin port.
pub(super) fn admin_url(ingress: &str, admin: Option<&str>) -> Result<String> {
    if let Some(a) = admin {
        return Ok(a.to_string());
    }
    let (scheme, rest) = ingress.split_once("://").ok_or_else(|| {
        anyhow::anyhow!("--restate {ingress:?} is not a URL like http://HOST:8080")
    })?;
    let authority = rest.split('/').next().unwrap_or(rest);
    let host = match authority.rsplit_once(':') {
        Some((h, port)) if port.chars().all(|c| c.is_ascii_digit()) => h,
        _ => authority,
    };
    Ok(format!("{scheme}://{host}:9070"))
}

/// One Restate server's waiting stop-gates.
#[derive(Clone, Debug)]
pub struct Restate {
    client: Ingress,
    ingress: String,
}

impl Restate {
    /// The server whose ingress is `ingress`, its admin API at `admin` (default: the ingress's
    /// host, port 9070).
    pub fn new(ingress: &str, admin: Option<&str>) -> Result<Self> {
        let admin = admin_url(ingress, admin)?;
        Ok(Self {
            client: Ingress::new(ingress, &admin)?,
            ingress: ingress.to_string(),
        })
    }

    /// The verdict on pending approval `id`: approved by `by`, or denied saying `by` denied it.
    fn verdict(id: &str, approve: bool, by: &str) -> Verdict {
        if approve {
            Verdict::Approve {
                id: id.into(),
                by: by.into(),
            }
        } else {
            Verdict::Deny {
                id: id.into(),
                reason: format!("denied by {by}"),
            }
        }
    }

    /// Gives the verdict on what `run` waits for, once `accept` found that wait the one meant.
    /// Returns the approval decided.
    pub(super) async fn decide(
        &self,
        run: &RunId,
        approve: bool,
        by: &str,
        accept: impl FnOnce(&Awaiting) -> Result<()>,
    ) -> Result<PendingApproval> {
        let Some(waiting) = self.client.awaiting(run).await? else {
            bail!(
                "run {run} is not waiting for an approval on Restate at {} (it may be running, finished, or not started); nothing was decided",
                self.ingress
            );
        };
        accept(&waiting)?;
        let verdict = Self::verdict(&waiting.approval.id, approve, by);
        self.client.resolve(&waiting, &verdict).await?;
        Ok(waiting.approval)
    }
}

impl RemoteGates for Restate {
    fn describe(&self) -> String {
        format!("Restate at {}", self.ingress)
    }

    fn waiting(&self) -> BoxFuture<'_, Result<Vec<RemoteWaiting>, String>> {
        Box::pin(async move {
            let all = self
                .client
                .awaiting_all()
                .await
                .map_err(|e| e.to_string())?;
            Ok(all
                .into_iter()
                .map(|w| RemoteWaiting {
                    run: w.run.to_string(),
                    pending_id: w.approval.id,
                    instance: w.awakeable,
                    gate: w.approval.gate,
                    agent: w.approval.agent.to_string(),
                    summary: w.approval.summary,
                    action: w.approval.action.key(),
                    answered: w.answered,
                })
                .collect())
        })
    }

    fn answer<'a>(
        &'a self,
        w: &'a RemoteWaiting,
        approve: bool,
        by: &'a str,
    ) -> BoxFuture<'a, Result<(), RemoteRefusal>> {
        Box::pin(async move {
            let run = RunId::new(&w.run)
                .ok_or_else(|| RemoteRefusal::NotWaiting(format!("{:?} is not a run id", w.run)))?;
            let refused = |e: anyhow::Error| match e.downcast_ref::<IngressError>() {
                None
                | Some(IngressError::NotWaiting { .. } | IngressError::OtherApproval { .. }) => {
                    RemoteRefusal::NotWaiting(format!("{e:#}"))
                }
                Some(_) => RemoteRefusal::Unreachable(format!("{e:#}")),
            };
            self.decide(&run, approve, by, |now| {
                // That very wait, for that very action: a later wait is answered on its own.
                if now.awakeable != w.instance || now.approval.action.key() != w.action {
                    bail!(
                        "run {run} now waits at gate {} for {} ({}), not the wait answered",
                        now.approval.gate,
                        now.approval.action.key(),
                        now.approval.summary
                    );
                }
                Ok(())
            })
            .await
            .map(|_| ())
            .map_err(refused)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::admin_url;

    #[test]
    fn the_admin_api_defaults_to_the_ingress_host_on_port_9070() {
        assert_eq!(
            admin_url("http://restate.internal:8080", None).unwrap(),
            "http://restate.internal:9070"
        );
        assert_eq!(
            admin_url("https://r.example/", Some("https://admin.example")).unwrap(),
            "https://admin.example"
        );
        assert_eq!(
            admin_url("https://r.example/", None).unwrap(),
            "https://r.example:9070"
        );
        assert!(admin_url("restate:8080", None).is_err());
    }
}
