//! Who may use the console, and from where.
//!
//! - **A token** (32 random bytes, hex) kept in `<state>/console/token` (0600), in loopward's
//!   state directory: outside every sandbox, unreadable to agents. `GET /login?token=…` trades it
//!   for a session cookie (`HttpOnly`, `SameSite=Strict`); a client may send
//!   `Authorization: Bearer <token>` instead. Both are compared in constant time.
//! - **Cross-site requests**: a state-changing request with the cookie must also carry the
//!   CSRF value (a hidden form field or the `X-Loopward-Csrf` header, derived from the token, so
//!   another site cannot know it), and its `Origin`, when sent, must be the console's own.
//! - **DNS rebinding**: every request's `Host` must be an address the console answers to.

use crate::error::ConsoleError;
use axum::http::{header, HeaderMap, Method};
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::path::{Path, PathBuf};

/// The session cookie's name.
pub const COOKIE: &str = "loopward_console";

/// The header a script sends the CSRF value in.
pub const CSRF_HEADER: &str = "x-loopward-csrf";

/// The console's secret and what is derived from it.
#[derive(Clone)]
pub struct Token {
    secret: String,
    file: PathBuf,
    session: String,
    csrf: String,
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Token")
            .field("file", &self.file)
            .finish_non_exhaustive()
    }
}

fn derive(secret: &str, what: &str) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("any key length");
    mac.update(what.as_bytes());
    hex::encode(mac.finalize().into_bytes())
}

/// Equal in constant time (for equal lengths; lengths are not secret).
pub(crate) fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

impl Token {
    /// The token in `file`, made (32 random bytes, 0600) when there is none. `fresh`: replace
    /// it, signing out every browser that held the old one.
    pub fn load_or_create(file: &Path, fresh: bool) -> Result<Self, ConsoleError> {
        let fail = |e: std::io::Error| {
            ConsoleError::Internal(format!(
                "cannot keep the console token in {}: {e}",
                file.display()
            ))
        };
        if !fresh {
            match std::fs::read_to_string(file) {
                Ok(t) if t.trim().len() >= 32 => return Ok(Self::from_secret(t.trim(), file)),
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(fail(e)),
            }
        }
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes)
            .map_err(|e| ConsoleError::Internal(format!("no randomness for the token: {e}")))?;
        let secret = hex::encode(bytes);
        write_private(file, secret.as_bytes()).map_err(fail)?;
        Ok(Self::from_secret(&secret, file))
    }

    fn from_secret(secret: &str, file: &Path) -> Self {
        Self {
            secret: secret.to_string(),
            file: file.to_path_buf(),
            session: derive(secret, "loopward.console.session.v1"),
            csrf: derive(secret, "loopward.console.csrf.v1"),
        }
    }

    /// The secret itself (what `loopward serve` prints in the sign-in link).
    pub fn secret(&self) -> &str {
        &self.secret
    }

    /// Where it is kept.
    pub fn file(&self) -> &Path {
        &self.file
    }

    /// The value the pages carry in their forms.
    pub fn csrf(&self) -> &str {
        &self.csrf
    }

    /// Whether `given` is the token.
    pub fn is(&self, given: &str) -> bool {
        same(given.as_bytes(), self.secret.as_bytes())
    }

    /// The `Set-Cookie` value that signs a browser in.
    pub fn cookie(&self, secure: bool) -> String {
        format!(
            "{COOKIE}={}; Path=/; HttpOnly; SameSite=Strict{}",
            self.session,
            if secure { "; Secure" } else { "" }
        )
    }

    fn unauthenticated(&self) -> ConsoleError {
        ConsoleError::Unauthenticated {
            token_file: self.file.display().to_string(),
        }
    }

    /// Checks a request: its `Host`, its credentials and, when it changes state with a cookie,
    /// its CSRF value and `Origin`. `form_csrf` is the form's `csrf` field, when it has one.
    pub fn check(
        &self,
        method: &Method,
        headers: &HeaderMap,
        hosts: &[String],
        form_csrf: Option<&str>,
    ) -> Result<(), ConsoleError> {
        check_origin(method, headers, hosts)?;
        let changes = !matches!(*method, Method::GET | Method::HEAD);
        if let Some(bearer) = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
        {
            // A browser never adds this header by itself: no CSRF value is needed.
            return if self.is(bearer.trim()) {
                Ok(())
            } else {
                Err(self.unauthenticated())
            };
        }
        let signed_in = cookies(headers)
            .find(|(k, _)| *k == COOKIE)
            .is_some_and(|(_, v)| same(v.as_bytes(), self.session.as_bytes()));
        if !signed_in {
            return Err(self.unauthenticated());
        }
        if changes {
            let sent = headers
                .get(CSRF_HEADER)
                .and_then(|v| v.to_str().ok())
                .or(form_csrf);
            if !sent.is_some_and(|c| same(c.as_bytes(), self.csrf.as_bytes())) {
                return Err(ConsoleError::CrossSite {
                    why: "it carries no valid CSRF value (the console's forms and script send one)"
                        .into(),
                });
            }
        }
        Ok(())
    }
}

/// The checks a request passes before its credentials are looked at: its `Host` is one the
/// console answers to and, when it changes state, it comes from the console's own pages (its
/// `Origin`, when sent, is the console's; the browser does not call it cross-site).
pub(crate) fn check_origin(
    method: &Method,
    headers: &HeaderMap,
    hosts: &[String],
) -> Result<(), ConsoleError> {
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("");
    if !hosts.iter().any(|h| h.eq_ignore_ascii_case(host)) {
        return Err(ConsoleError::WrongHost {
            got: host.into(),
            expected: hosts.join(" or "),
        });
    }
    let changes = !matches!(*method, Method::GET | Method::HEAD);
    if changes {
        if let Some(origin) = headers.get(header::ORIGIN) {
            let origin = origin.to_str().unwrap_or("");
            let own = hosts
                .iter()
                .any(|h| origin == format!("http://{h}") || origin == format!("https://{h}"));
            if !own {
                return Err(ConsoleError::CrossSite {
                    why: format!("the request came from {origin:?}, not from this console"),
                });
            }
        }
        if headers
            .get("sec-fetch-site")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|s| s == "cross-site" || s == "same-site")
        {
            return Err(ConsoleError::CrossSite {
                why: "the browser says it came from another site".into(),
            });
        }
    }
    Ok(())
}

/// Replaces `file` with `bytes`, readable by this user only (0600), whole or not at all.
pub(crate) fn write_private(file: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir)?;
    }
    loopward_runner::write_atomic(file, bytes, 0o600)
}

fn cookies(headers: &HeaderMap) -> impl Iterator<Item = (&str, &str)> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token() -> (tempfile::TempDir, Token) {
        let dir = tempfile::tempdir().unwrap();
        let t = Token::load_or_create(&dir.path().join("console/token"), false).unwrap();
        (dir, t)
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn the_token_is_kept_private_and_reused_until_replaced() {
        use std::os::unix::fs::PermissionsExt;
        let (dir, t) = token();
        let file = dir.path().join("console/token");
        let mode = std::fs::metadata(&file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let again = Token::load_or_create(&file, false).unwrap();
        assert!(again.is(t.secret()));
        let fresh = Token::load_or_create(&file, true).unwrap();
        assert!(!fresh.is(t.secret()));
    }

    #[test]
    fn a_request_for_another_host_is_refused_even_with_credentials() {
        let (_d, t) = token();
        let bearer = format!("Bearer {}", t.secret());
        let h = headers(&[("host", "evil.example:80"), ("authorization", &bearer)]);
        let hosts = vec!["127.0.0.1:9".to_string()];
        assert!(matches!(
            t.check(&Method::GET, &h, &hosts, None),
            Err(ConsoleError::WrongHost { .. })
        ));
    }

    #[test]
    fn a_cookie_post_without_the_csrf_value_or_from_another_origin_is_refused() {
        let (_d, t) = token();
        let cookie = format!("{COOKIE}={}", t.session);
        let hosts = vec!["127.0.0.1:9".to_string()];
        let plain = headers(&[("host", "127.0.0.1:9"), ("cookie", &cookie)]);
        assert!(t.check(&Method::GET, &plain, &hosts, None).is_ok());
        assert!(matches!(
            t.check(&Method::POST, &plain, &hosts, None),
            Err(ConsoleError::CrossSite { .. })
        ));
        assert!(t
            .check(&Method::POST, &plain, &hosts, Some(t.csrf()))
            .is_ok());
        let foreign = headers(&[
            ("host", "127.0.0.1:9"),
            ("cookie", &cookie),
            ("origin", "http://evil.example"),
        ]);
        assert!(matches!(
            t.check(&Method::POST, &foreign, &hosts, Some(t.csrf())),
            Err(ConsoleError::CrossSite { .. })
        ));
    }
}
