//! Where a snapshot keeps the contents it may have to put back.

use super::SnapshotError;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;

/// Where a snapshot keeps the contents it may have to put back, by SHA-256 (hex).
pub trait ContentStore: Send + Sync {
    /// Keeps `bytes`, whose hash is `sha256`.
    fn put(&self, sha256: &str, bytes: &[u8]) -> Result<(), SnapshotError>;
    /// The bytes kept under `sha256`.
    fn get(&self, sha256: &str) -> Result<Vec<u8>, SnapshotError>;
}

/// Contents kept in memory (the runner: one shell call, one process; or, after a comparison
/// that could not be made, until the next one).
#[derive(Debug, Default)]
pub struct MemoryStore(Mutex<HashMap<String, Vec<u8>>>);

impl ContentStore for MemoryStore {
    fn put(&self, sha256: &str, bytes: &[u8]) -> Result<(), SnapshotError> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(sha256.to_string())
            .or_insert_with(|| bytes.to_vec());
        Ok(())
    }

    fn get(&self, sha256: &str) -> Result<Vec<u8>, SnapshotError> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(sha256)
            .cloned()
            .ok_or_else(|| SnapshotError::Store {
                what: format!("no saved content {sha256}"),
            })
    }
}

/// Contents kept as files named by their hash in a folder (the hook: kept between the
/// `PreToolUse` and `PostToolUse` processes). Each is written to a temporary name, synced and
/// renamed into place, so a reader finds a whole file or none.
#[derive(Clone, Debug)]
pub struct DirStore {
    dir: PathBuf,
}

impl DirStore {
    /// A store in `dir` (created on first use).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }
}

impl ContentStore for DirStore {
    fn put(&self, sha256: &str, bytes: &[u8]) -> Result<(), SnapshotError> {
        let path = self.dir.join(sha256);
        if path.exists() {
            return Ok(());
        }
        let err = |e: std::io::Error| SnapshotError::Store {
            what: format!("cannot keep {}: {e}", path.display()),
        };
        std::fs::create_dir_all(&self.dir).map_err(err)?;
        crate::atomic_file::write_atomic(&path, bytes, 0o600).map_err(err)
    }

    fn get(&self, sha256: &str) -> Result<Vec<u8>, SnapshotError> {
        let path = self.dir.join(sha256);
        std::fs::read(&path).map_err(|e| SnapshotError::Store {
            what: format!("cannot read saved content {}: {e}", path.display()),
        })
    }
}
