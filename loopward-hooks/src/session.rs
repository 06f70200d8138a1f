//! Per-session turn state, kept on disk between hook processes.
//!
//! Claude Code starts one hook process per event, and runs hooks of parallel tool calls at the
//! same time. Each process takes an exclusive advisory lock on the session folder's `lock`
//! (`<state dir>/sessions/<session>/lock`) for the whole event (state read, gates, ledger append,
//! state write), so events of one session are handled one at a time and the ledger has one writer.
//! The wait for that lock is bounded ([`LOCK_WAIT`]): a lock held by a stuck hook or by a tool
//! outside the sandbox makes the event fail ([`SessionError::Busy`], which the hook answers with
//! a blocking exit status 2) well inside Claude Code's hook timeout, instead of waiting until
//! the client gives up on the hook and lets the call go ahead.
//! The state file is replaced atomically (write, fsync, rename), so a killed hook leaves either
//! the old state or the new one.
//!
//! ```
//! use loopward_hooks::session::SessionKey;
//! assert_eq!(SessionKey::new("0b5f-11ee").unwrap().as_str(), "0b5f-11ee");
//! let odd = SessionKey::new("../../etc/passwd").unwrap();
//! assert!(odd.as_str().bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'));
//! assert!(SessionKey::new("").is_err());
//! ```

use loopward_core::{CallId, RunId};
use loopward_runner::gates::SprawlTracker;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, OpenOptions};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The longest session id used verbatim; longer or unusual ids are shortened and hashed.
const MAX_VERBATIM: usize = 64;

/// How long a hook waits for its session's lock before it gives up and blocks the call: far
/// inside the hook `timeout` that `loopward hook install` writes (60 s), since a hook the client
/// stops for taking too long is one whose call goes ahead.
pub const LOCK_WAIT: Duration = Duration::from_secs(5);

/// The first pause between two tries for a held lock; each next one is twice as long, up to
/// [`MAX_LOCK_PAUSE`].
const FIRST_LOCK_PAUSE: Duration = Duration::from_millis(5);
/// The longest pause between two tries for a held lock.
const MAX_LOCK_PAUSE: Duration = Duration::from_millis(200);

/// Why the session state could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    /// The session id is empty.
    #[error("the hook input has an empty session_id")]
    EmptyId,
    /// The state directory or a file in it could not be read or written.
    #[error("session state {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The session's lock was still held by another process when the wait for it ran out.
    #[error("session lock {path} is still held by another process after waiting {waited:?} (another hook of this session still busy, such as one hashing a large workspace around a Bash call, or stuck, or a tool outside the sandbox holding it); the call is refused rather than left to Claude Code's hook timeout, which would let it go ahead. What to do: make the call again; if this keeps happening, find the holder (`fuser {path}`) and end it by its PID", path = path.display())]
    Busy {
        /// The lock file.
        path: PathBuf,
        /// How long the hook waited.
        waited: Duration,
    },
    /// The state file is not valid.
    #[error("session state {path} is corrupt ({why}); a person can inspect it, and remove the session folder to start the session's turn state afresh")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// The parse error.
        why: String,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> SessionError + '_ {
    move |source| SessionError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// A session id made safe to use as a file name and a run id.
///
/// Ids of `[A-Za-z0-9_-]`, at most 64 bytes, are kept as they are (Claude Code's are UUIDs);
/// anything else keeps its safe characters (at most 32) followed by a hash of the whole id, so
/// two different ids never share a folder and no id can climb out of it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SessionKey(String);

impl SessionKey {
    /// Sanitises a session id.
    pub fn new(id: &str) -> Result<Self, SessionError> {
        if id.is_empty() {
            return Err(SessionError::EmptyId);
        }
        let safe = |b: u8| b.is_ascii_alphanumeric() || b == b'-' || b == b'_';
        if id.len() <= MAX_VERBATIM && id.bytes().all(safe) {
            return Ok(Self(id.to_string()));
        }
        let kept: String = id
            .bytes()
            .filter(|b| safe(*b))
            .take(32)
            .map(char::from)
            .collect();
        let hash = hex::encode(&Sha256::digest(id.as_bytes())[..8]);
        Ok(Self(if kept.is_empty() {
            format!("h-{hash}")
        } else {
            format!("{kept}-{hash}")
        }))
    }

    /// The sanitised id.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The ledger's run id for this Claude Code session: `claude-code-<session>`.
    pub fn run_id(&self) -> RunId {
        self.run_id_of("claude-code")
    }

    /// The ledger's run id for this session of the host whose runs are named `prefix`
    /// (`claude-code`, `codex`, `gemini`): `<prefix>-<session>`.
    pub(crate) fn run_id_of(&self, prefix: &str) -> RunId {
        // Only [A-Za-z0-9_-] and at most 64 + 12 + 17 bytes: always a valid run id.
        RunId::new(format!("{prefix}-{}", self.0))
            .unwrap_or_else(|| unreachable!("sanitised session ids are valid run ids"))
    }
}

/// The turn state of one Claude Code session.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionState {
    /// Human prompts so far; the current turn's number (0 before the first prompt).
    pub turn: u32,
    /// Watch starts and ends so far; each gets the next number (decides "newer than"). An
    /// event that starts or ends no watch (a denial, a read) leaves it, and the state, alone.
    pub events: u64,
    /// Whether the ledger has its `run_started` event.
    #[serde(default)]
    pub ledger_started: bool,
    /// File-tool calls allowed at `PreToolUse` whose `PostToolUse` has not come yet.
    #[serde(default)]
    pub allowed_calls: BTreeSet<CallId>,
    /// Allowed file-tool calls whose workspace was recorded at `PreToolUse`: call id → the
    /// workspace-relative path the call was allowed to write (judged then, not again).
    #[serde(default)]
    pub write_targets: BTreeMap<CallId, String>,
    /// The sprawl gate's memory: human prompts and plans in order, each agent's units of work
    /// this turn (the same type the runner keeps in memory).
    #[serde(default)]
    pub sprawl: SprawlTracker,
    /// Watched calls (shell commands, allowed file writes) between their `PreToolUse` and
    /// `PostToolUse`: call id → who and since when ([`super::concurrent`]).
    #[serde(default)]
    pub live: BTreeMap<CallId, super::concurrent::WatchedCall>,
    /// Watched calls that finished while others were live, with what they judged as their own.
    #[serde(default)]
    pub finished: Vec<super::concurrent::FinishedCall>,
    /// The policy version last recorded in the session's ledger ([`PolicyConfig::version`](loopward_runner::gates::PolicyConfig::version)).
    #[serde(default)]
    pub policy_version: String,
    /// Allowed patch calls (Codex's `apply_patch`): call id → the paths besides the first
    /// (in [`SessionState::write_targets`]) it was allowed to write.
    #[serde(default)]
    pub patch_targets: BTreeMap<CallId, Vec<String>>,
}

impl SessionState {
    /// Starts a new turn: a person spoke.
    pub fn human_prompt(&mut self) {
        self.turn += 1;
        self.sprawl.human();
        // A call whose PostToolUse never came (the person interrupted it) must not stand as
        // "overlapping" forever: the overlap bookkeeping starts afresh each human turn.
        self.live.clear();
        self.finished.clear();
    }
}

/// The on-disk home of one session's state: `<sessions>/<key>/`, where `<sessions>` is the
/// state directory's `sessions/` (or, without one, `<root>/.loopward/sessions/`).
#[derive(Clone, Debug)]
pub struct SessionDir {
    key: SessionKey,
    dir: PathBuf,
    wait: Duration,
}

impl SessionDir {
    /// The folder for `key` under the project `root`'s `.loopward/sessions/` (created on
    /// first use).
    pub fn new(root: &Path, key: SessionKey) -> Self {
        Self::under(&root.join(".loopward").join("sessions"), key)
    }

    /// The folder for `key` in the sessions folder `sessions` (created on first use).
    pub fn under(sessions: &Path, key: SessionKey) -> Self {
        let dir = sessions.join(key.as_str());
        Self {
            key,
            dir,
            wait: LOCK_WAIT,
        }
    }

    /// How long [`SessionDir::locked`] waits for a lock another process holds (default
    /// [`LOCK_WAIT`]).
    pub fn lock_wait(mut self, wait: Duration) -> Self {
        self.wait = wait;
        self
    }

    /// The session's key.
    pub fn key(&self) -> &SessionKey {
        &self.key
    }

    /// The folder.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Runs `f` on the session's state while holding the session's exclusive lock; the state is
    /// saved only when `f` succeeds. Concurrent hook processes of one session wait their turn,
    /// each at most the lock wait ([`SessionDir::lock_wait`]); past it, [`SessionError::Busy`].
    pub fn locked<T, E: From<SessionError>>(
        &self,
        f: impl FnOnce(&mut SessionState) -> Result<T, E>,
    ) -> Result<T, E> {
        fs::create_dir_all(&self.dir).map_err(io(&self.dir))?;
        let lock_path = self.dir.join("lock");
        let lock_file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(io(&lock_path))?;
        let _held = lock_within(lock_file, &lock_path, self.wait)?;
        let (mut state, stored) = self.load()?;
        let out = f(&mut state)?;
        // A call that changed nothing (a denial, a read) writes and syncs nothing.
        let bytes = self.bytes(&state)?;
        if stored.as_deref() != Some(bytes.as_slice()) {
            let path = self.state_path();
            loopward_runner::write_atomic(&path, &bytes, 0o600).map_err(io(&path))?;
        }
        Ok(out)
    }

    fn state_path(&self) -> PathBuf {
        self.dir.join("state.json")
    }

    /// The state and the bytes it was read from (`None`: no state yet).
    fn load(&self) -> Result<(SessionState, Option<Vec<u8>>), SessionError> {
        let path = self.state_path();
        match fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map(|s| (s, Some(bytes)))
                .map_err(|e| SessionError::Corrupt {
                    path,
                    why: e.to_string(),
                }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                Ok((SessionState::default(), None))
            }
            Err(e) => Err(io(&path)(e)),
        }
    }

    /// The state as stored.
    fn bytes(&self, state: &SessionState) -> Result<Vec<u8>, SessionError> {
        serde_json::to_vec_pretty(state).map_err(|e| SessionError::Corrupt {
            path: self.state_path(),
            why: e.to_string(),
        })
    }
}

/// Takes the exclusive lock on `file`, trying again with growing pauses until they add up to
/// `wait`. The pauses are counted, not the clock read: each try is non-blocking, so the time
/// spent is the pauses' sum and a little more.
fn lock_within(
    file: std::fs::File,
    path: &Path,
    wait: Duration,
) -> Result<nix::fcntl::Flock<std::fs::File>, SessionError> {
    use nix::errno::Errno;
    use nix::fcntl::{Flock, FlockArg};
    let mut waited = Duration::ZERO;
    let mut pause = FIRST_LOCK_PAUSE;
    let mut file = file;
    loop {
        match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(held) => return Ok(held),
            Err((back, Errno::EWOULDBLOCK | Errno::EINTR)) => file = back,
            Err((_, errno)) => return Err(io(path)(std::io::Error::from(errno))),
        }
        if waited >= wait {
            return Err(SessionError::Busy {
                path: path.to_path_buf(),
                waited,
            });
        }
        let step = pause.min(wait - waited);
        std::thread::sleep(step);
        waited += step;
        pause = (pause * 2).min(MAX_LOCK_PAUSE);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn different_odd_ids_never_share_a_folder() {
        let a = SessionKey::new("a/b").unwrap();
        let b = SessionKey::new("a\\b").unwrap();
        assert_ne!(a, b);
        assert!(a.as_str().starts_with("ab-"));
        let long = "x".repeat(500);
        assert!(SessionKey::new(&long).unwrap().as_str().len() < 64);
        assert_eq!(SessionKey::new("..").unwrap().as_str().len(), 18);
    }

    #[test]
    fn state_survives_between_processes_and_failures_do_not_save() {
        let d = tempfile::tempdir().unwrap();
        let s = SessionDir::new(d.path(), SessionKey::new("s1").unwrap());
        s.locked(|st| {
            st.human_prompt();
            Ok::<_, SessionError>(())
        })
        .unwrap();
        let r: Result<(), SessionError> = s.locked(|st| {
            st.human_prompt();
            Err(SessionError::EmptyId)
        });
        assert!(r.is_err());
        let turn = s.locked(|st| Ok::<_, SessionError>(st.turn)).unwrap();
        assert_eq!(turn, 1);
    }

    #[test]
    fn corrupt_state_is_an_error_not_a_fresh_start() {
        let d = tempfile::tempdir().unwrap();
        let s = SessionDir::new(d.path(), SessionKey::new("s1").unwrap());
        fs::create_dir_all(s.path()).unwrap();
        fs::write(s.path().join("state.json"), "{not json").unwrap();
        let r = s.locked(|_| Ok::<_, SessionError>(()));
        assert!(matches!(r, Err(SessionError::Corrupt { .. })));
    }

    #[test]
    fn a_lock_held_elsewhere_is_waited_on_only_up_to_the_bound_and_then_refused() {
        let d = tempfile::tempdir().unwrap();
        let s = SessionDir::new(d.path(), SessionKey::new("s1").unwrap())
            .lock_wait(Duration::from_millis(100));
        fs::create_dir_all(s.path()).unwrap();
        // Another open file description: a lock held by someone else, as flock(2) sees it.
        let other = fs::File::create(s.path().join("lock")).unwrap();
        let held = nix::fcntl::Flock::lock(other, nix::fcntl::FlockArg::LockExclusive).unwrap();
        let r = s.locked(|st| {
            st.events += 1;
            Ok::<_, SessionError>(())
        });
        let Err(SessionError::Busy { path, waited }) = r else {
            panic!("{r:?}")
        };
        assert_eq!(path, s.path().join("lock"));
        assert!(waited >= Duration::from_millis(100), "{waited:?}");
        let shown = SessionError::Busy { path, waited }.to_string();
        assert!(shown.contains("still held by another process"), "{shown}");
        assert!(shown.contains("What to do"), "{shown}");
        // Released, the same session goes on, and the refused event changed nothing.
        drop(held);
        assert_eq!(s.locked(|st| Ok::<_, SessionError>(st.events)).unwrap(), 0);
    }

    #[test]
    fn concurrent_hooks_of_one_session_do_not_lose_updates() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().to_path_buf();
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let root = root.clone();
                std::thread::spawn(move || {
                    let s = SessionDir::new(&root, SessionKey::new("s1").unwrap());
                    for _ in 0..10 {
                        s.locked(|st| {
                            st.events += 1;
                            Ok::<_, SessionError>(())
                        })
                        .unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let s = SessionDir::new(&root, SessionKey::new("s1").unwrap());
        assert_eq!(s.locked(|st| Ok::<_, SessionError>(st.events)).unwrap(), 80);
    }
}
