//! Ledger keys: the secret every ledger, anchor, override and approval is authenticated under.
//!
//! A key is 32 random bytes in a file readable by its owner only (0600), kept in loopward's state
//! directory, outside the workspace. Its [`KeyId`] (`k` and 16 hex digits of a domain-separated
//! SHA-256 of the key) is public: it is written in each ledger's first record and in each anchor,
//! so a verifier knows which key to use and says which key verified a run.
//!
//! A [`KeyRing`] is the folder of keys (`<state>/keys/<id>.key`) with one current key (`current`
//! names its id). Rotating adds a key and makes it current; old keys stay, so runs chained under
//! them still verify. Removing an old key is how its runs stop verifying on this machine.
//!
//! ```
//! use loopward_runner::audit::KeyRing;
//! let state = tempfile::tempdir().unwrap();
//! let ring = KeyRing::load_or_create(&state.path().join("keys")).unwrap();
//! let first = ring.current().unwrap().id().clone();
//! // The same folder gives the same key next time.
//! assert_eq!(KeyRing::load_or_create(&state.path().join("keys")).unwrap().current().unwrap().id(), &first);
//! // Rotation: a new current key; the old one still verifies old runs.
//! let ring = ring.rotate().unwrap();
//! assert_ne!(ring.current().unwrap().id(), &first);
//! assert!(ring.get(&first).is_some());
//! ```

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The smallest key accepted, in bytes.
pub const MIN_KEY_BYTES: usize = 32;

/// The name of the file in a key folder that names the current key.
const CURRENT: &str = "current";

/// A key's public name: `k` and 16 hex digits of `SHA-256("loopward.key-id.v1\0" ‖ key)`.
#[derive(
    Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(transparent)]
pub struct KeyId(String);

impl KeyId {
    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Parses an id as written in a ledger (`k` and 16 lowercase hex digits).
    pub fn parse(text: &str) -> Option<Self> {
        let hex = text.strip_prefix('k')?;
        (hex.len() == 16
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
        .then(|| Self(text.to_string()))
    }
}

impl std::fmt::Display for KeyId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A secret key. Its `Debug` shows its id, never the key.
#[derive(Clone)]
pub struct LedgerKey {
    bytes: Vec<u8>,
    id: KeyId,
    /// An HMAC keyed with `bytes`, cloned for each MAC: keying one hashes two blocks, which
    /// every ledger record would otherwise pay again. Boxed: it is larger than the rest.
    keyed: Box<Hmac<Sha256>>,
}

impl std::fmt::Debug for LedgerKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LedgerKey({}, <redacted>)", self.id)
    }
}

impl PartialEq for LedgerKey {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id
    }
}

impl Eq for LedgerKey {}

/// A key could not be created, loaded or used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KeyError {
    /// A file could not be read or written.
    #[error("ledger key {path}: {source}")]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The key file lies inside the workspace, where agents could read it.
    #[error("the ledger key {path} lies inside the workspace {workspace}; keep it outside, where no agent can read it")]
    InsideWorkspace {
        /// The key file.
        path: PathBuf,
        /// The workspace root.
        workspace: PathBuf,
    },
    /// The key is too short.
    #[error("the ledger key {path} has {len} bytes; use at least {MIN_KEY_BYTES} random bytes (e.g. `head -c 32 /dev/urandom > key`)")]
    TooShort {
        /// The key file.
        path: PathBuf,
        /// Its length after trimming.
        len: usize,
    },
    /// Group or others may read or write the key file.
    #[error("the ledger key {path} has mode {mode:o}; anyone but its owner may read it. Run `chmod 600 {path}`")]
    Exposed {
        /// The key file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// The folder's `current` file names a key that is not there, or is not a key id.
    #[error("{path} names {named:?}, which is not a key in that folder; restore the key file or point `current` at a key that is there")]
    BadCurrent {
        /// The `current` file.
        path: PathBuf,
        /// What it names.
        named: String,
    },
    /// No random bytes could be had.
    #[error("cannot draw random bytes for a new ledger key: {0}")]
    Random(String),
}

impl LedgerKey {
    /// A key from bytes; `None` when shorter than [`MIN_KEY_BYTES`].
    pub fn from_bytes(bytes: impl Into<Vec<u8>>) -> Option<Self> {
        let bytes = bytes.into();
        if bytes.len() < MIN_KEY_BYTES {
            return None;
        }
        let mut h = Sha256::new();
        h.update(b"loopward.key-id.v1\0");
        h.update(&bytes);
        let id = KeyId(format!("k{}", &hex::encode(h.finalize())[..16]));
        let keyed =
            Box::new(Hmac::<Sha256>::new_from_slice(&bytes).expect("HMAC takes any key length"));
        Some(Self { bytes, id, keyed })
    }

    /// A new random key.
    pub fn generate() -> Result<Self, KeyError> {
        let mut bytes = vec![0u8; MIN_KEY_BYTES];
        // A key file is read without a trailing newline: a key ending in one would not read
        // back as itself, so such a draw (2 in 256) is drawn again.
        loop {
            getrandom::fill(&mut bytes).map_err(|e| KeyError::Random(e.to_string()))?;
            if !matches!(bytes.last(), Some(b'\n' | b'\r')) {
                break;
            }
        }
        Ok(Self::from_bytes(bytes).expect("MIN_KEY_BYTES bytes"))
    }

    /// The key's public id.
    pub fn id(&self) -> &KeyId {
        &self.id
    }

    /// The hex HMAC-SHA256 of `domain ‖ bytes` under this key. Every MAC loopward writes goes
    /// through here, each kind of record with its own `domain`.
    pub fn mac(&self, domain: &[u8], bytes: &[u8]) -> String {
        hex::encode(self.mac_raw(domain, bytes))
    }

    /// The MAC of `domain ‖ bytes`, as bytes.
    pub(crate) fn mac_raw(&self, domain: &[u8], bytes: &[u8]) -> [u8; 32] {
        let mut m = Hmac::clone(&self.keyed);
        m.update(domain);
        m.update(bytes);
        m.finalize().into_bytes().into()
    }

    /// Whether `tag` is the MAC of `domain ‖ bytes` (compared in constant time).
    pub fn check(&self, domain: &[u8], bytes: &[u8], tag: &str) -> bool {
        let Ok(tag) = hex::decode(tag) else {
            return false;
        };
        let mut m = Hmac::clone(&self.keyed);
        m.update(domain);
        m.update(bytes);
        m.verify_slice(&tag).is_ok()
    }

    /// Reads a key file (its bytes, without a trailing newline). When `workspace` is given, a
    /// key inside it is refused: agents can read the workspace. A key file that group or others
    /// may read is refused.
    pub fn from_file(path: &Path, workspace: Option<&Path>) -> Result<Self, KeyError> {
        let io = |source| KeyError::Io {
            path: path.to_path_buf(),
            source,
        };
        if let Some(ws) = workspace {
            let real = path.canonicalize().map_err(io)?;
            let root = ws.canonicalize().map_err(io)?;
            if real.starts_with(&root) {
                return Err(KeyError::InsideWorkspace {
                    path: path.to_path_buf(),
                    workspace: ws.to_path_buf(),
                });
            }
        }
        let mode = std::fs::metadata(path).map_err(io)?.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(KeyError::Exposed {
                path: path.to_path_buf(),
                mode,
            });
        }
        let mut bytes = std::fs::read(path).map_err(io)?;
        // A trailing newline (a key pasted into a file) is not part of the key, unless dropping
        // it would leave too few bytes: then the bytes are the key (`head -c 32 /dev/urandom`
        // may end in one).
        while bytes.len() > MIN_KEY_BYTES && matches!(bytes.last(), Some(b'\n' | b'\r')) {
            bytes.pop();
        }
        let len = bytes.len();
        Self::from_bytes(bytes).ok_or(KeyError::TooShort {
            path: path.to_path_buf(),
            len,
        })
    }
}

/// The authentication tag on a record loopward keeps outside the ledger (an override, an
/// approval): the key's id and the MAC of the record's canonical bytes under it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Seal {
    /// The key.
    pub key: KeyId,
    /// The hex HMAC-SHA256 of `domain ‖ canonical bytes`.
    pub mac: String,
}

/// A record loopward keeps outside the ledger and seals (an override, a stop request, an
/// approval): its seal covers its JSON without the seal, in a domain of its own.
pub(crate) trait Sealed: serde::Serialize + Clone {
    /// Domain separation prefix of its seal.
    const DOMAIN: &'static [u8];
    /// Its seal.
    fn seal_mut(&mut self) -> &mut Option<Seal>;
}

/// The bytes `record`'s seal covers, and its seal.
fn unsealed<R: Sealed>(record: &R) -> (Vec<u8>, Option<Seal>) {
    let mut bare = record.clone();
    let seal = bare.seal_mut().take();
    (serde_json::to_vec(&bare).unwrap_or_default(), seal)
}

/// The keys a machine holds: a folder of `<id>.key` files and the id of the current one.
#[derive(Clone, Debug, Default)]
pub struct KeyRing {
    dir: Option<PathBuf>,
    keys: BTreeMap<KeyId, LedgerKey>,
    current: Option<KeyId>,
}

impl KeyRing {
    /// A ring holding just `key` (current), kept in memory.
    pub fn single(key: LedgerKey) -> Self {
        let mut ring = Self {
            current: Some(key.id().clone()),
            ..Self::default()
        };
        ring.keys.insert(key.id().clone(), key);
        ring
    }

    /// An empty ring: only keyless chains can be written or verified with it.
    pub fn empty() -> Self {
        Self::default()
    }

    /// Adds `key` (not current), e.g. an old key given on the command line.
    pub fn with(mut self, key: LedgerKey) -> Self {
        self.keys.insert(key.id().clone(), key);
        self
    }

    /// Loads the keys in `dir`; an absent folder is an empty ring.
    pub fn load(dir: &Path) -> Result<Self, KeyError> {
        let mut ring = Self {
            dir: Some(dir.to_path_buf()),
            ..Self::default()
        };
        let entries = match std::fs::read_dir(dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(ring),
            Err(source) => {
                return Err(KeyError::Io {
                    path: dir.to_path_buf(),
                    source,
                })
            }
        };
        for entry in entries.filter_map(Result::ok) {
            let path = entry.path();
            if path.extension().is_some_and(|e| e == "key") {
                let key = LedgerKey::from_file(&path, None)?;
                ring.keys.insert(key.id().clone(), key);
            }
        }
        let current_file = dir.join(CURRENT);
        match std::fs::read_to_string(&current_file) {
            Ok(text) => {
                let named = text.trim().to_string();
                match KeyId::parse(&named).filter(|id| ring.keys.contains_key(id)) {
                    Some(id) => ring.current = Some(id),
                    None => {
                        return Err(KeyError::BadCurrent {
                            path: current_file,
                            named,
                        })
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => {
                return Err(KeyError::Io {
                    path: current_file,
                    source,
                })
            }
        }
        Ok(ring)
    }

    /// Loads the keys in `dir`, creating the folder (0700) and a first key (0600) when it has no
    /// current key: what `loopward init` and the runner do when no key exists yet.
    pub fn load_or_create(dir: &Path) -> Result<Self, KeyError> {
        let ring = Self::load(dir)?;
        if ring.current.is_some() {
            return Ok(ring);
        }
        ring.rotate()
    }

    /// Adds a new random key to the folder and makes it current. Old keys stay, so the runs
    /// chained under them still verify. An in-memory ring rotates in memory.
    pub fn rotate(mut self) -> Result<Self, KeyError> {
        let key = LedgerKey::generate()?;
        if let Some(dir) = &self.dir {
            write_key(dir, &key)?;
        }
        self.current = Some(key.id().clone());
        self.keys.insert(key.id().clone(), key);
        Ok(self)
    }

    /// The current key (what new ledgers and capabilities are authenticated under).
    pub fn current(&self) -> Option<&LedgerKey> {
        self.current.as_ref().and_then(|id| self.keys.get(id))
    }

    /// The key with this id, if the ring holds it.
    pub fn get(&self, id: &KeyId) -> Option<&LedgerKey> {
        self.keys.get(id)
    }

    /// Every key held, by id.
    pub fn keys(&self) -> impl Iterator<Item = &LedgerKey> {
        self.keys.values()
    }

    /// Seals `bytes` (a record's canonical bytes) in `domain` under the current key; `None`
    /// when the ring has no current key.
    pub fn seal(&self, domain: &[u8], bytes: &[u8]) -> Option<Seal> {
        self.current().map(|k| Seal {
            key: k.id().clone(),
            mac: k.mac(domain, bytes),
        })
    }

    /// Checks a seal; the error says why it does not hold, for a refusal.
    pub fn check_seal(
        &self,
        domain: &[u8],
        bytes: &[u8],
        seal: Option<&Seal>,
    ) -> Result<(), String> {
        let Some(seal) = seal else {
            return Err("it carries no seal".into());
        };
        let Some(key) = self.get(&seal.key) else {
            return Err(format!(
                "it is sealed with key {}, which this machine does not hold",
                seal.key
            ));
        };
        if key.check(domain, bytes, &seal.mac) {
            Ok(())
        } else {
            Err(format!(
                "its seal does not verify under key {}: it was forged or edited",
                seal.key
            ))
        }
    }

    /// Seals `record` under the current key; `None` when the ring has no current key.
    pub(crate) fn seal_record<R: Sealed>(&self, record: &R) -> Option<Seal> {
        self.seal(R::DOMAIN, &unsealed(record).0)
    }

    /// Checks `record`'s seal; the error says why it does not hold, for a refusal.
    pub(crate) fn check_record<R: Sealed>(&self, record: &R) -> Result<(), String> {
        let (bytes, seal) = unsealed(record);
        self.check_seal(R::DOMAIN, &bytes, seal.as_ref())
    }

    /// The folder the ring was loaded from.
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }
}

fn write_key(dir: &Path, key: &LedgerKey) -> Result<(), KeyError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| KeyError::Io { path, source }
    };
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(io(dir))?;
    // Written whole under a temporary name, then linked into place: a process killed midway
    // leaves a stray temporary file, never a short `<id>.key` that would stop every later run.
    let path = dir.join(format!("{}.key", key.id()));
    let part = dir.join(format!(".{}.{}.part", key.id(), std::process::id()));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&part)
        .map_err(io(&part))?;
    f.write_all(&key.bytes).map_err(io(&part))?;
    f.sync_all().map_err(io(&part))?;
    let linked = std::fs::hard_link(&part, &path);
    let _ = std::fs::remove_file(&part);
    linked.map_err(io(&path))?;
    // `current` is replaced by a rename, so a reader sees the old id or the new one.
    let current = dir.join(CURRENT);
    crate::atomic_file::write_atomic(&current, format!("{}\n", key.id()).as_bytes(), 0o600)
        .map_err(io(&current))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mac_is_hmac_sha256_of_the_domain_and_the_bytes() {
        // RFC 4231, test case 6: a 131-byte key, split here between domain and bytes.
        let key = LedgerKey::from_bytes(vec![0xaa; 131]).unwrap();
        let (domain, bytes) = (
            &b"Test Using Larger"[..],
            &b" Than Block-Size Key - Hash Key First"[..],
        );
        let want = "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54";
        for _ in 0..2 {
            // The keyed state is cloned, not consumed: the second MAC is the same.
            assert_eq!(key.mac(domain, bytes), want);
            assert!(key.check(domain, bytes, want));
        }
        assert!(!key.check(domain, b"other bytes", want));
        let copy = key.clone();
        assert_eq!(copy.mac(b"", b"x"), key.mac(b"", b"x"));
    }

    #[test]
    fn new_keys_are_owner_only_and_reload_to_the_same_id() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("keys");
        let ring = KeyRing::load_or_create(&dir).unwrap();
        let id = ring.current().unwrap().id().clone();
        let file = dir.join(format!("{id}.key"));
        assert_eq!(
            std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(
            std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777,
            0o700
        );
        assert_eq!(KeyRing::load(&dir).unwrap().current().unwrap().id(), &id);
    }

    #[test]
    fn a_32_byte_key_ending_in_a_newline_reads_back_as_itself() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("k.key");
        let mut bytes = vec![9u8; 31];
        bytes.push(b'\n');
        std::fs::write(&path, &bytes).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let read = LedgerKey::from_file(&path, None).unwrap();
        assert_eq!(read.id(), LedgerKey::from_bytes(bytes).unwrap().id());
        // A longer key pasted with a newline loses the newline.
        let mut pasted = vec![7u8; 40];
        std::fs::write(&path, [&pasted[..], b"\n"].concat()).unwrap();
        let read = LedgerKey::from_file(&path, None).unwrap();
        pasted.truncate(40);
        assert_eq!(read.id(), LedgerKey::from_bytes(pasted).unwrap().id());
        for _ in 0..2000 {
            let k = LedgerKey::generate().unwrap();
            assert!(!matches!(k.bytes.last(), Some(b'\n' | b'\r')));
        }
    }

    #[test]
    fn a_key_file_appears_whole_or_not_at_all() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("keys");
        let ring = KeyRing::load_or_create(&dir).unwrap();
        // Only the key and `current` are left: no temporary file a reader could take for a key.
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        let id = ring.current().unwrap().id().to_string();
        assert_eq!(names, vec![CURRENT.to_string(), format!("{id}.key")]);
        // A stray partial file from a killed process is not read as a key.
        std::fs::write(dir.join(format!(".{id}.99.part")), b"").unwrap();
        assert_eq!(KeyRing::load(&dir).unwrap().keys().count(), 1);
    }

    #[test]
    fn a_key_others_can_read_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("k.key");
        std::fs::write(&path, [7u8; 32]).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let err = LedgerKey::from_file(&path, None).unwrap_err();
        assert!(err.to_string().contains("chmod 600"), "{err}");
    }

    #[test]
    fn macs_differ_by_key_and_domain_and_check_in_constant_time() {
        let a = LedgerKey::from_bytes(vec![1u8; 32]).unwrap();
        let b = LedgerKey::from_bytes(vec![2u8; 32]).unwrap();
        let tag = a.mac(b"d1\0", b"x");
        assert!(a.check(b"d1\0", b"x", &tag));
        assert!(!a.check(b"d2\0", b"x", &tag));
        assert!(!b.check(b"d1\0", b"x", &tag));
        assert!(!a.check(b"d1\0", b"x", "zz"));
        assert_ne!(a.id(), b.id());
        assert!(KeyId::parse(a.id().as_str()).is_some());
        assert!(format!("{a:?}").contains("redacted"));
    }
}
