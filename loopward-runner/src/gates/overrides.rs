//! One-shot overrides: a person authorises exactly one write by one agent to one path, for a
//! short time, with a reason.
//!
//! A grant is a sentinel file `<store>/<id>.json`, made only by [`OverrideStore::grant`] (behind
//! `loopward override grant`). In a keyed store ([`OverrideStore::keyed`]) it is sealed under the
//! current ledger key, and a sentinel whose seal does not verify (written by hand or by an
//! agent's process, or edited since) is refused with the reason, which the territory gate
//! records. `loopward` keeps the store in its state directory, outside the agents' reach;
//! [`OverrideStore::for_workspace`] is the keyless in-workspace default for embedding and tests.
//! Its validity comes from its content (`not_before`, `expires`), never from its mtime; its
//! limits (reason length, TTL, size) are checked when granting, so a granted override is usable. Taking it moves it into
//! `consumed/` with a no-replace link, so among any number of concurrent takers exactly one wins,
//! and an id already in `consumed/` is never honoured again (a sentinel put back is refused).
//! The policy layer records the consumption before the write it authorises runs.
//!
//! ```
//! use loopward_core::AgentId;
//! use loopward_runner::{gates::OverrideStore, ManualClock, Workspace};
//! use std::time::Duration;
//! let dir = tempfile::tempdir().unwrap();
//! let ws = Workspace::new(dir.path()).unwrap();
//! let store = OverrideStore::for_workspace(&ws);
//! let clock = ManualClock::new(1_000_000);
//! let builder = AgentId::new("builder").unwrap();
//! let path = ws.resolve("plan.md").unwrap();
//! let g = store.grant(&builder, &path, "fix a typo", Duration::from_secs(600), &clock).unwrap();
//! assert_eq!(store.list(&clock).len(), 1);
//! let taken = store.take(&builder, "plan.md", &clock).unwrap();
//! assert_eq!(taken.id, g.id);
//! // One action per sentinel: a second take finds nothing.
//! assert!(store.take(&builder, "plan.md", &clock).is_err());
//! ```

use crate::audit::{KeyRing, Seal, Sealed};
use crate::clock::Clock;
use crate::workspace::{WorkPath, Workspace};
use loopward_core::AgentId;
use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::config::{DEFAULT_MAX_TTL, TTL_CEILING};

/// The largest sentinel file read, in bytes.
pub const MAX_SENTINEL_BYTES: u64 = 4096;

/// The longest reason a grant may carry, in bytes (a sentinel must stay under
/// [`MAX_SENTINEL_BYTES`] with its path and seal).
pub const MAX_REASON_BYTES: usize = 1000;

/// What a sentinel file holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sentinel {
    /// The id (equals the file stem).
    pub id: String,
    /// The agent it authorises.
    pub agent: String,
    /// The canonical workspace-relative path it covers.
    pub path: String,
    /// Why a person granted it.
    pub reason: String,
    /// Valid from (ms since the epoch).
    pub not_before: u64,
    /// Valid until, exclusive (ms since the epoch).
    pub expires: u64,
    /// The seal over everything above (absent in a keyless store).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seal: Option<Seal>,
}

impl Sealed for Sentinel {
    const DOMAIN: &'static [u8] = b"loopward.override.v1\0";
    fn seal_mut(&mut self) -> &mut Option<Seal> {
        &mut self.seal
    }
}

/// Why an override could not be granted, listed, revoked or taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OverrideError {
    /// The reason is empty.
    #[error("an override needs a non-empty reason")]
    EmptyReason,
    /// The TTL is zero or over the maximum.
    #[error("ttl {ttl} is not allowed: it must be more than zero and at most {max}")]
    BadTtl {
        /// The TTL asked for.
        ttl: String,
        /// The maximum.
        max: String,
    },
    /// The path names the workspace root or a control file.
    #[error("{0} cannot be overridden: control files and the workspace root are never writable by agents")]
    NotOverridable(String),
    /// The reason is longer than [`MAX_REASON_BYTES`].
    #[error("the reason is {len} bytes; an override reason may be at most {max} bytes. Say it in one or two sentences")]
    ReasonTooLong {
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The sentinel would be larger than [`MAX_SENTINEL_BYTES`] (a very long path).
    #[error("the override would take {len} bytes; a sentinel may be at most {max}. Shorten the reason or the path")]
    TooLarge {
        /// Its size.
        len: usize,
        /// The limit.
        max: u64,
    },
    /// The id is not a valid sentinel id.
    #[error("{0:?} is not an override id (ids are letters, digits, '-' and '_')")]
    BadId(String),
    /// No usable sentinel matched; each rejection says why.
    #[error("no valid override for {agent} on {path}{}", rejections_text(.rejections))]
    NoneValid {
        /// The agent.
        agent: String,
        /// The path.
        path: String,
        /// Sentinels considered and why each was refused.
        rejections: Vec<Rejection>,
    },
    /// Filesystem trouble.
    #[error("override store {dir}: {why}")]
    Io {
        /// The store.
        dir: String,
        /// The error.
        why: String,
    },
}

fn rejections_text(r: &[Rejection]) -> String {
    if r.is_empty() {
        return String::new();
    }
    let parts: Vec<String> = r
        .iter()
        .map(|x| format!("{} ({})", x.file, x.why))
        .collect();
    format!("; refused sentinels: {}", parts.join("; "))
}

/// A sentinel that was looked at and refused, with the precise reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rejection {
    /// The file name.
    pub file: String,
    /// Why it was refused.
    pub why: String,
}

/// A sentinel as listed, with whether it could be used now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listed {
    /// The file name.
    pub file: String,
    /// The content, when it parsed.
    pub sentinel: Option<Sentinel>,
    /// `None` when usable now; otherwise why not.
    pub problem: Option<String>,
}

/// The sentinels of one workspace.
#[derive(Clone, Debug)]
pub struct OverrideStore {
    dir: PathBuf,
    max_ttl: Duration,
    keys: Option<KeyRing>,
}

impl OverrideStore {
    /// The store at `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            max_ttl: DEFAULT_MAX_TTL,
            keys: None,
        }
    }

    /// Seals every grant under the current key of `keys`, and honours only sentinels whose seal
    /// verifies under one of them.
    pub fn keyed(mut self, keys: KeyRing) -> Self {
        self.keys = Some(keys);
        self
    }

    /// Whether grants are sealed and checked.
    pub fn is_keyed(&self) -> bool {
        self.keys.is_some()
    }

    /// The store at `<workspace>/.loopward/overrides`.
    pub fn for_workspace(ws: &Workspace) -> Self {
        Self::new(ws.root().join(".loopward").join("overrides"))
    }

    /// Sets the longest TTL a grant may have (capped at 24h).
    pub fn max_ttl(mut self, ttl: Duration) -> Self {
        self.max_ttl = ttl.min(TTL_CEILING);
        self
    }

    /// The longest TTL a grant may have.
    pub fn ttl_limit(&self) -> Duration {
        self.max_ttl
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn io(&self, why: impl std::fmt::Display) -> OverrideError {
        OverrideError::Io {
            dir: self.dir.display().to_string(),
            why: why.to_string(),
        }
    }

    /// Writes a sentinel authorising one write by `agent` to `path`, valid from now for `ttl`.
    pub fn grant(
        &self,
        agent: &AgentId,
        path: &WorkPath,
        reason: &str,
        ttl: Duration,
        clock: &dyn Clock,
    ) -> Result<Sentinel, OverrideError> {
        let reason = reason.trim();
        if reason.is_empty() {
            return Err(OverrideError::EmptyReason);
        }
        if reason.len() > MAX_REASON_BYTES {
            return Err(OverrideError::ReasonTooLong {
                len: reason.len(),
                max: MAX_REASON_BYTES,
            });
        }
        if self.keys.as_ref().is_some_and(|k| k.current().is_none()) {
            return Err(self.io(
                "the key ring has no current key to seal the grant with; run `loopward init`",
            ));
        }
        if ttl.is_zero() || ttl > self.max_ttl {
            return Err(OverrideError::BadTtl {
                ttl: humantime::format_duration(ttl).to_string(),
                max: humantime::format_duration(self.max_ttl).to_string(),
            });
        }
        if path.is_root() || super::ControlFiles::default().covers(path.rel()) {
            return Err(OverrideError::NotOverridable(path.rel().into()));
        }
        std::fs::create_dir_all(&self.dir).map_err(|e| self.io(e))?;
        let now = clock.now_millis();
        let ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        for n in 0u32..1000 {
            let id = format!("ov-{now}-{n}");
            let mut s = Sentinel {
                id: id.clone(),
                agent: agent.to_string(),
                path: path.rel().to_string(),
                reason: reason.to_string(),
                not_before: now,
                expires: now.saturating_add(ttl_ms),
                seal: None,
            };
            if let Some(keys) = &self.keys {
                s.seal = keys.seal_record(&s);
            }
            if self.consumed_dir().join(format!("{id}.json")).exists() {
                continue;
            }
            let body = serde_json::to_vec_pretty(&s).map_err(|e| self.io(e))?;
            // What can be granted can be used: the reader's size limit is checked here.
            if body.len() as u64 > MAX_SENTINEL_BYTES {
                return Err(OverrideError::TooLarge {
                    len: body.len(),
                    max: MAX_SENTINEL_BYTES,
                });
            }
            let dest = self.dir.join(format!("{id}.json"));
            // A no-replace publish: a taken id is left alone and the next one tried.
            match crate::atomic_file::publish_new(&dest, &body, 0o600) {
                Ok(true) => return Ok(s),
                Ok(false) => continue,
                Err(e) => return Err(self.io(e)),
            }
        }
        Err(self.io("could not find a free override id"))
    }

    /// Every sentinel waiting in the store, sorted by file name, with any problem it has.
    pub fn list(&self, clock: &dyn Clock) -> Vec<Listed> {
        let mut out = Vec::new();
        for file in self.sentinel_files() {
            match self.read(&file, clock) {
                Ok(s) => out.push(Listed {
                    file,
                    sentinel: Some(s),
                    problem: None,
                }),
                Err((s, why)) => out.push(Listed {
                    file,
                    sentinel: s.map(|b| *b),
                    problem: Some(why),
                }),
            }
        }
        out
    }

    /// The sentinels already used (moved into `consumed/`), sorted by id. Files that do not
    /// parse are left out: this is a listing for people, not a check.
    pub fn list_consumed(&self) -> Vec<Sentinel> {
        let Ok(rd) = std::fs::read_dir(self.consumed_dir()) else {
            return vec![];
        };
        let mut out: Vec<Sentinel> = rd
            .filter_map(Result::ok)
            .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
            .filter(|e| e.metadata().is_ok_and(|m| m.len() <= MAX_SENTINEL_BYTES))
            .filter_map(|e| std::fs::read(e.path()).ok())
            .filter_map(|b| serde_json::from_slice(&b).ok())
            .collect();
        out.sort_by(|a, b| a.id.cmp(&b.id));
        out
    }

    /// Deletes a waiting sentinel.
    pub fn revoke(&self, id: &str) -> Result<(), OverrideError> {
        if !valid_id(id) {
            return Err(OverrideError::BadId(id.into()));
        }
        std::fs::remove_file(self.dir.join(format!("{id}.json"))).map_err(|e| self.io(e))
    }

    /// Finds a valid sentinel for `agent` on `path` without taking it.
    pub fn find(
        &self,
        agent: &AgentId,
        path: &str,
        clock: &dyn Clock,
    ) -> Result<Sentinel, OverrideError> {
        let mut rejections = Vec::new();
        let mut found = None;
        for file in self.sentinel_files() {
            match self.read(&file, clock) {
                Ok(s) if s.agent == agent.as_str() && s.path == path => {
                    if found.is_none() {
                        found = Some(s);
                    }
                }
                Ok(s) if s.agent == agent.as_str() => rejections.push(Rejection {
                    file,
                    why: format!("it covers {}, not {path}", s.path),
                }),
                Ok(s) if s.path == path => rejections.push(Rejection {
                    file,
                    why: format!("it is for agent {}, not {agent}", s.agent),
                }),
                Ok(_) => {}
                Err((Some(s), why)) if s.agent == agent.as_str() || s.path == path => {
                    rejections.push(Rejection { file, why });
                }
                Err((Some(_), _)) => {}
                Err((None, why)) => rejections.push(Rejection { file, why }),
            }
        }
        found.ok_or_else(|| OverrideError::NoneValid {
            agent: agent.to_string(),
            path: path.into(),
            rejections,
        })
    }

    /// Takes (consumes) a valid sentinel for `agent` on `path`: exactly one taker of a sentinel
    /// succeeds; the others get an error.
    pub fn take(
        &self,
        agent: &AgentId,
        path: &str,
        clock: &dyn Clock,
    ) -> Result<Sentinel, OverrideError> {
        let s = self.find(agent, path, clock)?;
        match self.claim(&s) {
            Ok(()) => Ok(s),
            Err(why) => Err(OverrideError::NoneValid {
                agent: agent.to_string(),
                path: path.into(),
                rejections: vec![Rejection {
                    file: format!("{}.json", s.id),
                    why,
                }],
            }),
        }
    }

    fn consumed_dir(&self) -> PathBuf {
        self.dir.join("consumed")
    }

    /// Moves `<id>.json` into `consumed/` with no-replace semantics.
    fn claim(&self, s: &Sentinel) -> Result<(), String> {
        let consumed = self.consumed_dir();
        match std::fs::symlink_metadata(&consumed) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => return Err("consumed/ is not a directory; refusing to consume".into()),
            Err(_) => std::fs::create_dir_all(&consumed)
                .map_err(|e| format!("cannot create consumed/: {e}"))?,
        }
        let src = self.dir.join(format!("{}.json", s.id));
        let dst = consumed.join(format!("{}.json", s.id));
        let before =
            std::fs::symlink_metadata(&src).map_err(|_| "taken by another call".to_string())?;
        match std::fs::hard_link(&src, &dst) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                return Err("already consumed (a replayed sentinel is not honoured twice)".into())
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err("taken by another call".into())
            }
            Err(e) => return Err(format!("cannot consume: {e}")),
        }
        let after = std::fs::symlink_metadata(&dst).map_err(|e| format!("cannot consume: {e}"))?;
        let _ = std::fs::remove_file(&src);
        if before.ino() != after.ino() || before.dev() != after.dev() {
            return Err("the sentinel changed while it was being consumed".into());
        }
        Ok(())
    }

    fn sentinel_files(&self) -> Vec<String> {
        let Ok(rd) = std::fs::read_dir(&self.dir) else {
            return vec![];
        };
        let mut names: Vec<String> = rd
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".json") && !n.starts_with('.'))
            .collect();
        names.sort();
        names
    }

    /// Reads and validates one sentinel. Never follows links, never blocks on a FIFO.
    fn read(&self, file: &str, clock: &dyn Clock) -> Result<Sentinel, Unusable> {
        let path = self.dir.join(file);
        let meta =
            std::fs::symlink_metadata(&path).map_err(|e| (None, format!("unreadable: {e}")))?;
        let ft = meta.file_type();
        if ft.is_symlink() {
            return Err((None, "a symbolic link, not a regular file".into()));
        }
        if ft.is_dir() {
            return Err((None, "a directory, not a regular file".into()));
        }
        if !ft.is_file() {
            return Err((None, "not a regular file (FIFO, socket or device)".into()));
        }
        if meta.len() > MAX_SENTINEL_BYTES {
            return Err((
                None,
                format!("{} bytes; the limit is {MAX_SENTINEL_BYTES}", meta.len()),
            ));
        }
        let flags = nix::fcntl::OFlag::O_NOFOLLOW | nix::fcntl::OFlag::O_NONBLOCK;
        let mut f: File = OpenOptions::new()
            .read(true)
            .custom_flags(flags.bits())
            .open(&path)
            .map_err(|e| (None, format!("cannot open without following links: {e}")))?;
        let m = f
            .metadata()
            .map_err(|e| (None, format!("unreadable: {e}")))?;
        if !m.is_file() {
            return Err((None, "not a regular file".into()));
        }
        let mut body = Vec::new();
        (&mut f)
            .take(MAX_SENTINEL_BYTES + 1)
            .read_to_end(&mut body)
            .map_err(|e| (None, format!("unreadable: {e}")))?;
        if body.len() as u64 > MAX_SENTINEL_BYTES {
            return Err((None, format!("over {MAX_SENTINEL_BYTES} bytes")));
        }
        let s: Sentinel =
            serde_json::from_slice(&body).map_err(|e| (None, format!("malformed: {e}")))?;
        let stem = file.trim_end_matches(".json");
        let bad = |why: String| Err((Some(Box::new(s.clone())), why));
        if s.id != stem || !valid_id(&s.id) {
            return bad(format!("its id {:?} does not match its file name", s.id));
        }
        if let Some(keys) = &self.keys {
            if let Err(why) = keys.check_record(&s) {
                return bad(format!(
                    "not a grant: {why}; only `loopward override grant` makes overrides"
                ));
            }
        }
        if consumed_exists(&self.consumed_dir(), &s.id) {
            return bad("already consumed (a replayed sentinel is not honoured twice)".into());
        }
        if s.reason.trim().is_empty() {
            return bad("its reason is empty".into());
        }
        if AgentId::new(s.agent.clone()).is_err() {
            return bad(format!("its agent {:?} is not a valid agent name", s.agent));
        }
        let now = clock.now_millis();
        if now < s.not_before {
            return bad(format!(
                "not valid yet (from {} ms, now {now} ms)",
                s.not_before
            ));
        }
        if now >= s.expires {
            return bad(format!("expired at {} ms (now {now} ms)", s.expires));
        }
        let max_ms = u64::try_from(self.max_ttl.as_millis()).unwrap_or(u64::MAX);
        if s.expires.saturating_sub(s.not_before) > max_ms {
            return bad(format!(
                "its lifetime exceeds the maximum TTL of {}",
                humantime::format_duration(self.max_ttl)
            ));
        }
        Ok(s)
    }
}

/// A sentinel that cannot be used: its content when it parsed, and why.
type Unusable = (Option<Box<Sentinel>>, String);

fn consumed_exists(dir: &Path, id: &str) -> bool {
    std::fs::symlink_metadata(dir.join(format!("{id}.json"))).is_ok()
}

fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}
