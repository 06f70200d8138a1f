//! Signing in with a passphrase, the alternative to the token's link: a person chooses one
//! (`loopward serve --set-passphrase`, read from standard input), and the console keeps only its
//! Argon2id hash, in `<state>/console/passphrase` (0600, outside every sandbox). `POST /login`
//! with it sets the same session cookie as the token's link. A wrong one is refused; after
//! [`MAX_WRONG`] wrong ones within [`WINDOW`], every passphrase sign-in is refused until the
//! oldest of them is a window old, without being checked.

use crate::error::ConsoleError;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::Argon2;
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;
use tokio::time::Instant;

/// Wrong passphrases allowed within [`WINDOW`] before sign-ins by passphrase are refused.
pub const MAX_WRONG: usize = 5;
/// The window wrong passphrases are counted in.
pub const WINDOW: Duration = Duration::from_secs(60);
/// The shortest passphrase taken.
pub const MIN_CHARS: usize = 12;

/// The passphrase's hash, if one is set, and the wrong tries counted.
#[derive(Debug)]
pub struct Passphrase {
    file: PathBuf,
    hash: Option<String>,
    wrong: Mutex<VecDeque<Instant>>,
}

fn keep(file: &Path, e: impl std::fmt::Display) -> ConsoleError {
    ConsoleError::Internal(format!(
        "cannot keep the console passphrase in {}: {e}",
        file.display()
    ))
}

impl Passphrase {
    /// The hash kept in `file`, if any.
    pub fn load(file: &Path) -> Result<Self, ConsoleError> {
        let hash = match std::fs::read_to_string(file) {
            Ok(h) => {
                let h = h.trim().to_string();
                PasswordHash::new(&h).map_err(|e| {
                    keep(file, format!("it holds no Argon2 hash ({e}); set it again with `loopward serve --set-passphrase`, or remove the file"))
                })?;
                Some(h)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(keep(file, e)),
        };
        Ok(Self {
            file: file.to_path_buf(),
            hash,
            wrong: Mutex::new(VecDeque::new()),
        })
    }

    /// Keeps the hash of `passphrase` in `file` (0600), replacing any other.
    pub fn set(file: &Path, passphrase: &str) -> Result<(), ConsoleError> {
        let passphrase = passphrase.trim_end_matches(['\r', '\n']);
        if passphrase.chars().count() < MIN_CHARS {
            return Err(ConsoleError::BadRequest(format!(
                "a console passphrase has at least {MIN_CHARS} characters; nothing was set"
            )));
        }
        let mut salt = [0u8; 16];
        getrandom::fill(&mut salt)
            .map_err(|e| ConsoleError::Internal(format!("no randomness for the salt: {e}")))?;
        let salt = SaltString::encode_b64(&salt).map_err(|e| keep(file, e))?;
        let hash = Argon2::default()
            .hash_password(passphrase.as_bytes(), &salt)
            .map_err(|e| keep(file, e))?
            .to_string();
        crate::auth::write_private(file, hash.as_bytes()).map_err(|e| keep(file, e))
    }

    /// Whether a passphrase is set.
    pub fn is_set(&self) -> bool {
        self.hash.is_some()
    }

    /// Where it is kept.
    pub fn file(&self) -> &Path {
        &self.file
    }

    /// Checks `given` (slow by design: call it off the async threads). Refused unchecked while
    /// too many wrong ones were given lately.
    pub fn check(&self, given: &str, now: Instant) -> Result<(), ConsoleError> {
        let Some(hash) = &self.hash else {
            return Err(ConsoleError::NotFound(
                "no passphrase is set for this console: sign in with the link `loopward serve` printed, or set one with `loopward serve --set-passphrase`".into(),
            ));
        };
        {
            let mut wrong = self.wrong.lock().unwrap_or_else(|p| p.into_inner());
            while wrong
                .front()
                .is_some_and(|t| now.duration_since(*t) >= WINDOW)
            {
                wrong.pop_front();
            }
            if wrong.len() >= MAX_WRONG {
                let oldest = wrong.front().copied().unwrap_or(now);
                let wait = WINDOW.saturating_sub(now.duration_since(oldest));
                return Err(ConsoleError::TooMany {
                    retry_after_s: wait.as_secs().max(1),
                });
            }
        }
        let right = PasswordHash::new(hash).is_ok_and(|h| {
            Argon2::default()
                .verify_password(given.as_bytes(), &h)
                .is_ok()
        });
        if right {
            return Ok(());
        }
        self.wrong
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push_back(now);
        Err(ConsoleError::WrongPassphrase)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_hash_is_kept_and_wrong_tries_are_limited() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("console/passphrase");
        assert!(!Passphrase::load(&file).unwrap().is_set());
        assert!(Passphrase::set(&file, "short").is_err());
        Passphrase::set(&file, "correct horse battery\n").unwrap();
        let kept = std::fs::read_to_string(&file).unwrap();
        assert!(
            kept.starts_with("$argon2id$") && !kept.contains("horse"),
            "{kept}"
        );
        let mode = std::fs::metadata(&file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let p = Passphrase::load(&file).unwrap();
        let t0 = tokio::time::Instant::now();
        p.check("correct horse battery", t0).unwrap();
        for _ in 0..MAX_WRONG {
            assert_eq!(
                p.check("wrong horse battery", t0),
                Err(ConsoleError::WrongPassphrase)
            );
        }
        // Too many: refused, even the right one, until the window has passed.
        assert!(matches!(
            p.check("correct horse battery", t0 + Duration::from_secs(10)),
            Err(ConsoleError::TooMany { retry_after_s: 50 })
        ));
        p.check("correct horse battery", t0 + WINDOW).unwrap();
        std::fs::write(&file, "not a hash").unwrap();
        assert!(Passphrase::load(&file).is_err());
    }
}
