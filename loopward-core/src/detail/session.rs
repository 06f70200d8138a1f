//! The details a CLI agent's session writes: its verifier's verdicts, the session's start, end
//! and changes, its hook ledger and hook events.

use crate::effect::Effect;
use crate::id::RunId;
use serde::{Deserialize, Serialize};

/// The verifier's verdict on a session's work:
/// `{claimed_done, code, command, passed, workspace_after, workspace_before}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerifyDetail {
    /// Whether the session said it was done.
    pub claimed_done: bool,
    /// The verifier's exit status (`null`: ended by a signal, timed out, or not run).
    pub code: Option<i32>,
    /// The verifier's command.
    pub command: String,
    /// Whether it passed.
    pub passed: bool,
    /// The workspace's fingerprint after the session.
    pub workspace_after: String,
    /// The workspace's fingerprint before the session.
    pub workspace_before: String,
}

/// Sessions that made no progress, in a row: `{evidence, in_a_row, limit}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NoProgressDetail {
    /// What showed no progress, in words.
    pub evidence: String,
    /// Such sessions in a row.
    pub in_a_row: u32,
    /// How many in a row end the run.
    pub limit: u32,
}

/// A session started: `{pid, session}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionStartedDetail {
    /// The client's process id.
    pub pid: u32,
    /// The session's id.
    pub session: String,
}

/// A session a killed loop left behind, ended:
/// `{ended, left_running, marked_ended, pid, session}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionEndedDetail {
    /// Whether its process group was ended.
    pub ended: bool,
    /// Whether its client was still running.
    pub left_running: bool,
    /// Processes carrying the session's mark that were ended.
    pub marked_ended: u64,
    /// The recorded process id.
    pub pid: u32,
    /// The session's id.
    pub session: String,
}

/// What a session changed in the workspace so far: `{changed}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionChangesDetail {
    /// The changes, as the turn's effects.
    pub changed: Vec<Effect>,
}

/// A session's own hook ledger, linked: `{error?, final_hash?, records?, run}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionLedgerDetail {
    /// Why it could not be closed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Its last record's hash.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub final_hash: Option<String>,
    /// Its records (0: the hook recorded nothing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub records: Option<u64>,
    /// The ledger's run (`runs/<run>`).
    pub run: RunId,
}

/// One hook event of a session, judged by the loop: `{host, records}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HookDetail {
    /// The client the event came from.
    pub host: String,
    /// How many records that follow are the event's decision.
    pub records: u64,
}
