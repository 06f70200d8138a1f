//! A person's kill switch: a request to stop a run, taken by the runner at its next turn
//! boundary, recorded as the person's decision (`layer_decision` of layer `stop`, verdict
//! `stopped`, with who and why) and ending the run [`Stopped`](loopward_core::RunStatus::Stopped).
//!
//! A request is one file, `<dir>/<run>.json`, written by a person's tool (the console's Stop
//! button, `loopward serve`) in loopward's state directory, outside every agent's reach. In a
//! keyed store ([`StopRequests::keyed`]) each request is sealed under the ledger key; a file
//! whose seal does not verify is refused, recorded, moved to `rejected/` and never honoured, so an
//! agent cannot stop (or pretend to have been stopped in) another run. A request is claimed
//! (renamed to `honoured/`) before it is recorded: it is honoured once. The record names the
//! turns the run had taken (`turns`), so a replay ([`StopRequests::recorded`]) stops where the
//! run did.
//!
//! ```
//! use loopward_core::RunId;
//! use loopward_runner::stop::StopRequests;
//! let dir = tempfile::tempdir().unwrap();
//! let stops = StopRequests::folder(dir.path());
//! let run = RunId::new("r1").unwrap();
//! assert!(!stops.is_requested(&run));
//! stops.request(&run, "ana", "it is looping", 5).unwrap();
//! assert!(stops.is_requested(&run));
//! let taken = stops.take(&run, 6).unwrap().unwrap();
//! assert_eq!((taken.by.as_str(), taken.reason.as_str()), ("ana", "it is looping"));
//! assert!(stops.take(&run, 7).is_none()); // honoured once
//! ```

use crate::audit::{KeyRing, Seal, Sealed};
use crate::claimed_file::{claim, read_addressed, Addressed};
use crate::context::RunContext;
use loopward_core::{
    AuditError, AuditEvent, LayerDetail, LayerVerdict, RunId, RunStatus, StopRefusedDetail,
    StoppedDetail,
};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The largest request file read, in bytes.
const MAX_FILE_BYTES: u64 = 16 * 1024;

/// The longest name or reason a request may carry, in bytes.
pub const MAX_FIELD_BYTES: usize = 1000;

/// A person's request to stop one run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StopRequest {
    /// The run to stop.
    pub run: RunId,
    /// Who asked, as they named themselves.
    pub by: String,
    /// Why.
    pub reason: String,
    /// When (ms since the epoch).
    pub at_ms: u64,
    /// The seal over everything above (absent in a keyless store).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seal: Option<Seal>,
}

impl Addressed for StopRequest {
    fn run(&self) -> &RunId {
        &self.run
    }
}

impl Sealed for StopRequest {
    const DOMAIN: &'static [u8] = b"loopward.stop.v1\0";
    fn seal_mut(&mut self) -> &mut Option<Seal> {
        &mut self.seal
    }
}

/// A stop request could not be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StopError {
    /// The name or the reason is empty, too long, or more than one line.
    #[error("the {field} of a stop request must be 1 to {MAX_FIELD_BYTES} bytes of one line; got {len} bytes")]
    BadField {
        /// `by` or `reason`.
        field: &'static str,
        /// Its length.
        len: usize,
    },
    /// The keyed store has no key to seal with.
    #[error("the stop requests are keyed but the key ring has no current key to seal with; run `loopward init`")]
    NoKey,
    /// A recorded store replays what was asked; nothing new can be asked of it.
    #[error("these stop requests replay a recorded run; nothing new can be asked")]
    Recorded,
    /// The folder could not be written.
    #[error("cannot write the stop request {path}: {why}")]
    Io {
        /// The file or folder.
        path: String,
        /// Why.
        why: String,
    },
}

/// A stop request as a run recorded it: after how many turns, and what became of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordedStop {
    /// The turns the run had taken when it took the request.
    pub after_turns: u32,
    /// Honoured (the request) or refused (why).
    pub outcome: Result<StopRequest, String>,
}

/// The stop requests of one workspace: a folder, and the keys requests are sealed under (or,
/// for a replay, the requests a recorded run took).
#[derive(Clone, Debug)]
pub struct StopRequests {
    dir: PathBuf,
    keys: Option<KeyRing>,
    recorded: Option<Arc<Mutex<VecDeque<RecordedStop>>>>,
}

impl StopRequests {
    /// An unkeyed store in `dir` (any well-formed file is honoured: for embedding and tests).
    pub fn folder(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            keys: None,
            recorded: None,
        }
    }

    /// What a recorded run took, for replaying it: each entry is taken at the boundary where
    /// the run had taken as many turns as it says, and nothing else is.
    pub fn recorded(stops: Vec<RecordedStop>) -> Self {
        Self {
            dir: PathBuf::new(),
            keys: None,
            recorded: Some(Arc::new(Mutex::new(stops.into()))),
        }
    }

    /// Seals every request under the current key of `keys`, and honours only requests whose
    /// seal verifies.
    pub fn keyed(mut self, keys: KeyRing) -> Self {
        self.keys = Some(keys);
        self
    }

    /// The folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, run: &RunId) -> PathBuf {
        self.dir.join(format!("{run}.json"))
    }

    /// Asks `run` to stop at its next turn boundary, as `by`, because of `reason`, at `now_ms`.
    /// `Ok(false)`: a request for the run is already waiting (it stands; nothing was written).
    pub fn request(
        &self,
        run: &RunId,
        by: &str,
        reason: &str,
        now_ms: u64,
    ) -> Result<bool, StopError> {
        if self.recorded.is_some() {
            return Err(StopError::Recorded);
        }
        for (field, value) in [("name", by), ("reason", reason)] {
            if value.trim().is_empty() || value.len() > MAX_FIELD_BYTES || value.contains('\n') {
                return Err(StopError::BadField {
                    field,
                    len: value.len(),
                });
            }
        }
        let mut record = StopRequest {
            run: run.clone(),
            by: by.trim().into(),
            reason: reason.trim().into(),
            at_ms: now_ms,
            seal: None,
        };
        if let Some(keys) = &self.keys {
            record.seal = Some(keys.seal_record(&record).ok_or(StopError::NoKey)?);
        }
        let io = |path: &Path, e: std::io::Error| StopError::Io {
            path: path.display().to_string(),
            why: e.to_string(),
        };
        std::fs::create_dir_all(&self.dir).map_err(|e| io(&self.dir, e))?;
        let path = self.path(run);
        let text = serde_json::to_vec_pretty(&record).unwrap_or_default();
        crate::atomic_file::publish_new(&path, &text, 0o600).map_err(|e| io(&path, e))
    }

    /// Whether a request for `run` waits to be taken (unchecked: the runner checks it).
    pub fn is_requested(&self, run: &RunId) -> bool {
        self.recorded.is_none() && self.path(run).exists()
    }

    /// Claims the request waiting for `run`, if any: `Ok` with the request when it is honoured,
    /// `Err` with why it is refused (a bad seal, a link, too big, malformed, another run's).
    /// Either way the file is moved out of the way first, so a request is taken once.
    pub fn take(&self, run: &RunId, now_ms: u64) -> Option<Result<StopRequest, String>> {
        self.take_after(run, now_ms, None)
    }

    /// [`take`](Self::take) at a boundary after `turns` turns (what a recorded store matches).
    fn take_after(
        &self,
        run: &RunId,
        now_ms: u64,
        turns: Option<u32>,
    ) -> Option<Result<StopRequest, String>> {
        if let Some(recorded) = &self.recorded {
            let mut queue = recorded.lock().unwrap_or_else(|p| p.into_inner());
            let due = queue
                .front()
                .is_some_and(|r| turns.is_none_or(|t| t == r.after_turns));
            return due.then(|| queue.pop_front()).flatten().map(|r| r.outcome);
        }
        let from = self.path(run);
        let claimed = self
            .dir
            .join("honoured")
            .join(format!("{now_ms}-{run}.json"));
        match claim(&from, &claimed) {
            Ok(true) => {}
            Ok(false) => return None,
            Err(why) => return Some(Err(format!("{}: {why}", from.display()))),
        }
        Some(read(&claimed, run, self.keys.as_ref()).map_err(|why| {
            let rejected = self
                .dir
                .join("rejected")
                .join(format!("{now_ms}-{run}.json"));
            let moved = claim(&claimed, &rejected).map_or_else(
                |e| format!(" (left in honoured/: {e})"),
                |_| " (moved to rejected/)".into(),
            );
            format!("{}: {why}; not honoured{moved}", from.display())
        }))
    }
}

/// Takes `run`'s request at a turn boundary: honoured, it is recorded (layer `stop`, verdict
/// `stopped`, who and why) and the run ends `Stopped`; refused (a forged or damaged file), it is
/// recorded and the run goes on. A failed record is the caller's to end the run on.
pub(crate) fn honour(
    stops: &StopRequests,
    ctx: &RunContext,
    now_ms: u64,
    turns: u32,
) -> Result<Option<RunStatus>, AuditError> {
    let Some(taken) = stops.take_after(ctx.run(), now_ms, Some(turns)) else {
        return Ok(None);
    };
    let (decision, detail) = match &taken {
        Err(why) => (
            LayerVerdict::Refused,
            LayerDetail::StopRefused(StopRefusedDetail {
                turns,
                why: why.clone(),
            }),
        ),
        Ok(r) => (
            LayerVerdict::Stopped,
            LayerDetail::Stopped(StoppedDetail {
                by: r.by.clone(),
                reason: r.reason.clone(),
                requested_at: crate::audit::rfc3339(r.at_ms),
                turns,
            }),
        ),
    };
    ctx.record_owned(AuditEvent::LayerDecision {
        layer: loopward_core::LayerId::Stop,
        decision,
        detail,
    })?;
    Ok(taken.ok().map(|r| RunStatus::Stopped {
        reason: format!("stopped by {}: {}", r.by, r.reason),
    }))
}

/// Reads one claimed request: a small regular file (no link), well-formed, for this run, and
/// sealed when the store is keyed.
fn read(path: &Path, run: &RunId, keys: Option<&KeyRing>) -> Result<StopRequest, String> {
    let record: StopRequest = read_addressed(path, MAX_FILE_BYTES, "a stop request", run)?;
    if let Some(keys) = keys {
        keys.check_record(&record)?;
    }
    Ok(record)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::LedgerKey;

    fn keyed(dir: &Path) -> StopRequests {
        StopRequests::folder(dir).keyed(KeyRing::single(LedgerKey::generate().unwrap()))
    }

    #[test]
    fn a_request_edited_after_sealing_is_refused_and_moved_aside() {
        let dir = tempfile::tempdir().unwrap();
        let stops = keyed(dir.path());
        let run = RunId::new("r1").unwrap();
        stops.request(&run, "ana", "looping", 1).unwrap();
        let file = dir.path().join("r1.json");
        let text = std::fs::read_to_string(&file)
            .unwrap()
            .replace("ana", "bob");
        std::fs::write(&file, text).unwrap();
        let why = stops.take(&run, 2).unwrap().unwrap_err();
        assert!(why.contains("not honoured (moved to rejected/)"), "{why}");
        assert!(stops.take(&run, 3).is_none());
    }

    #[test]
    fn a_hand_written_request_in_a_keyed_store_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let run = RunId::new("r1").unwrap();
        StopRequests::folder(dir.path())
            .request(&run, "agent", "let me out", 1)
            .unwrap();
        let why = keyed(dir.path()).take(&run, 2).unwrap().unwrap_err();
        assert!(why.contains("not honoured"), "{why}");
    }

    #[test]
    fn a_second_request_leaves_the_first_standing() {
        let dir = tempfile::tempdir().unwrap();
        let stops = keyed(dir.path());
        let run = RunId::new("r1").unwrap();
        assert!(stops.request(&run, "ana", "first", 1).unwrap());
        assert!(!stops.request(&run, "bob", "second", 2).unwrap());
        assert_eq!(stops.take(&run, 3).unwrap().unwrap().by, "ana");
    }

    #[test]
    fn empty_or_multi_line_names_and_reasons_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let stops = keyed(dir.path());
        let run = RunId::new("r1").unwrap();
        for (by, reason) in [(" ", "x"), ("ana", ""), ("a\nb", "x"), ("ana", "a\nb")] {
            assert!(matches!(
                stops.request(&run, by, reason, 1),
                Err(StopError::BadField { .. })
            ));
        }
        assert!(!stops.is_requested(&run));
    }
}
