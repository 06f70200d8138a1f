//! Stop-gates that wait somewhere other than this workspace's state directory — runs executing
//! on Restate, waiting on an awakeable — listed beside the local ones and answered from the
//! same page. The console knows them only through [`RemoteGates`]; the binary plugs in its
//! Restate client (`loopward serve --restate`), so this crate holds no Restate code.
//!
//! An answer is for one wait, once: the console keeps who answered each wait in
//! `<state>/console/answered/` (made with `create_new`, before the verdict is sent, taken back
//! when it could not be sent), so a replayed or racing answer is refused with the one that
//! stands, even while the run still shows as waiting (until a worker takes the verdict).

use crate::error::ConsoleError;
use futures::future::BoxFuture;
use sha2::{Digest, Sha256};
use std::io::Write;
use std::path::PathBuf;

/// One wait elsewhere, as its source lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemoteWaiting {
    /// The run.
    pub run: String,
    /// The id its source answers it by (`turn:reviewer`, `deploy@tool:deploy:ab12`).
    pub pending_id: String,
    /// This one wait (Restate: its awakeable): a later wait of the same gate is another.
    pub instance: String,
    /// The gate's name.
    pub gate: String,
    /// The agent that asked.
    pub agent: String,
    /// What a person reads before deciding.
    pub summary: String,
    /// The exact action it would allow (`GatedAction::key`).
    pub action: String,
    /// A verdict was given already, from anywhere (its source keeps the first).
    pub answered: bool,
}

impl RemoteWaiting {
    /// The console's id of this wait: `restate~` and a digest of the run and the instance.
    pub fn console_id(&self) -> String {
        let digest = Sha256::digest(format!("{}\n{}", self.run, self.instance).as_bytes());
        format!("{ID_PREFIX}{}", &hex::encode(digest)[..32])
    }
}

/// The prefix of a remote wait's console id (`~` is in no run id, so in no local record's id).
pub(crate) const ID_PREFIX: &str = "restate~";

/// Why a remote answer was not given: nothing was decided.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RemoteRefusal {
    /// The wait is over, or waits for another action than the one answered.
    #[error("{0}")]
    NotWaiting(String),
    /// The source could not be reached or refused the call.
    #[error("{0}")]
    Unreachable(String),
}

/// A source of stop-gates waiting elsewhere (the binary's Restate client).
pub trait RemoteGates: Send + Sync + std::fmt::Debug + 'static {
    /// Where they wait, for a person (`Restate at http://…`).
    fn describe(&self) -> String;

    /// Every wait now.
    fn waiting(&self) -> BoxFuture<'_, Result<Vec<RemoteWaiting>, String>>;

    /// Gives the verdict on `w` — only if that very wait still waits for exactly `w.action` —
    /// naming `by` (approve) or saying `by` denied it (deny).
    fn answer<'a>(
        &'a self,
        w: &'a RemoteWaiting,
        approve: bool,
        by: &'a str,
    ) -> BoxFuture<'a, Result<(), RemoteRefusal>>;
}

/// The console's record of who answered which remote wait (one file per wait).
#[derive(Clone, Debug)]
pub(crate) struct Answered {
    dir: PathBuf,
}

impl Answered {
    pub(crate) fn new(dir: PathBuf) -> Self {
        Self { dir }
    }

    fn file(&self, id: &str) -> Option<PathBuf> {
        let hex = id.strip_prefix(ID_PREFIX)?;
        let ok = !hex.is_empty() && hex.len() <= 64 && hex.bytes().all(|b| b.is_ascii_hexdigit());
        ok.then(|| self.dir.join(hex))
    }

    /// Who answered `id`, if the console did (`approved by ana (console) at …`).
    pub(crate) fn get(&self, id: &str) -> Option<String> {
        std::fs::read_to_string(self.file(id)?)
            .ok()
            .map(|s| s.trim().to_string())
    }

    /// Claims `id` for this answer; refused when it was answered already.
    pub(crate) fn claim(&self, id: &str, text: &str) -> Result<(), ConsoleError> {
        let file = self
            .file(id)
            .ok_or_else(|| ConsoleError::BadRequest(format!("{id:?} is not a stop-gate id")))?;
        let fail = |e: std::io::Error| {
            ConsoleError::Internal(format!(
                "cannot keep the answer in {}: {e}; nothing was decided",
                file.display()
            ))
        };
        std::fs::create_dir_all(&self.dir).map_err(fail)?;
        let mut f = match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&file)
        {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                return Err(ConsoleError::Conflict(format!(
                    "this wait was already answered: {}; a decision cannot be changed, and nothing was decided",
                    self.get(id).unwrap_or_else(|| "by someone else".into())
                )))
            }
            Err(e) => return Err(fail(e)),
        };
        f.write_all(text.as_bytes())
            .and_then(|()| f.sync_all())
            .map_err(|e| {
                let _ = std::fs::remove_file(&file);
                fail(e)
            })
    }

    /// Takes a claim back: its verdict could not be given.
    pub(crate) fn release(&self, id: &str) {
        if let Some(f) = self.file(id) {
            let _ = std::fs::remove_file(f);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_is_answered_once_and_a_failed_answer_is_taken_back() {
        let dir = tempfile::tempdir().unwrap();
        let answered = Answered::new(dir.path().join("answered"));
        let w = RemoteWaiting {
            run: "r1".into(),
            pending_id: "turn:reviewer".into(),
            instance: "sign_1abc".into(),
            gate: "turn:reviewer".into(),
            agent: "reviewer".into(),
            summary: "start a turn of reviewer".into(),
            action: "turn:reviewer".into(),
            answered: false,
        };
        let id = w.console_id();
        assert!(id.starts_with(ID_PREFIX));
        answered.claim(&id, "approved by ana (console)").unwrap();
        let again = answered.claim(&id, "denied by bo (console)").unwrap_err();
        assert!(
            matches!(&again, ConsoleError::Conflict(m) if m.contains("approved by ana")),
            "{again:?}"
        );
        answered.release(&id);
        answered.claim(&id, "denied by bo (console)").unwrap();
        assert_eq!(answered.get(&id).unwrap(), "denied by bo (console)");
        // Another wait of the same gate is another id.
        let later = RemoteWaiting {
            instance: "sign_1def".into(),
            ..w
        };
        assert_ne!(later.console_id(), id);
        assert!(answered.claim("../token", "x").is_err());
    }
}
