//! What a console request can meet: each error says what was wrong and what to do, as a page
//! for a browser and as JSON for a client that asked for it; none changes anything.

use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};

/// A request the console refused, or could not serve.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConsoleError {
    /// No credentials, or the wrong ones.
    #[error("not signed in: open the console with the link `loopward serve` printed (it carries the token), or send `Authorization: Bearer <token>`; the token is in {token_file}")]
    Unauthenticated {
        /// Where the token is kept.
        token_file: String,
    },
    /// A state-changing request that did not come from the console's own pages.
    #[error("refused a cross-site request: {why}; nothing changed. Use the console's own page")]
    CrossSite {
        /// What was missing or wrong.
        why: String,
    },
    /// The `Host` header names another server (a DNS-rebinding attempt, or a wrong address).
    #[error("this console answers to {expected}, not to Host {got:?}; open it at the address `loopward serve` printed")]
    WrongHost {
        /// The host the request named.
        got: String,
        /// What the console answers to.
        expected: String,
    },
    /// The thing named does not exist (a run that is gone, an unknown gate).
    #[error("{0}")]
    NotFound(String),
    /// The request is well-formed but cannot be done now (a gate no longer waiting, another
    /// action than the one waiting, a finished run).
    #[error("{0}")]
    Conflict(String),
    /// The request is malformed (a missing field, a bad value).
    #[error("{0}")]
    BadRequest(String),
    /// Something on disk could not be read or written.
    #[error("{0}")]
    Internal(String),
    /// A wrong passphrase.
    #[error("wrong passphrase; nobody was signed in")]
    WrongPassphrase,
    /// Too many wrong passphrases lately: sign-ins by passphrase wait.
    #[error("too many wrong passphrases in the last minute: try again in {retry_after_s} s (or sign in with the link `loopward serve` printed)")]
    TooMany {
        /// Seconds until a passphrase is checked again.
        retry_after_s: u64,
    },
    /// A server the console relies on (Restate) could not be reached or refused the call.
    #[error("{0}")]
    Unavailable(String),
}

impl ConsoleError {
    /// The HTTP status this error answers with.
    pub fn status(&self) -> StatusCode {
        match self {
            Self::Unauthenticated { .. } | Self::WrongPassphrase => StatusCode::UNAUTHORIZED,
            Self::TooMany { .. } => StatusCode::TOO_MANY_REQUESTS,
            Self::CrossSite { .. } | Self::WrongHost { .. } => StatusCode::FORBIDDEN,
            Self::NotFound(_) => StatusCode::NOT_FOUND,
            Self::Conflict(_) => StatusCode::CONFLICT,
            Self::BadRequest(_) => StatusCode::BAD_REQUEST,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
            Self::Unavailable(_) => StatusCode::BAD_GATEWAY,
        }
    }

    /// As JSON (`{"error": …, "status": …}`) when the request asked for JSON, else as a page.
    pub fn answer(self, headers: &HeaderMap) -> Response {
        let wants_json = headers
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|a| a.contains("application/json") && !a.contains("text/html"));
        let status = self.status();
        let retry = match &self {
            Self::TooMany { retry_after_s } => Some(*retry_after_s),
            _ => None,
        };
        let mut r = self.respond(wants_json, status);
        if let Some(s) = retry {
            r.headers_mut().insert(header::RETRY_AFTER, s.into());
        }
        r
    }

    fn respond(self, wants_json: bool, status: StatusCode) -> Response {
        if wants_json {
            let body = serde_json::json!({ "error": self.to_string(), "status": status.as_u16() });
            return (status, axum::Json(body)).into_response();
        }
        let page = crate::pages::error_page(status, &self.to_string());
        (status, Html(page)).into_response()
    }
}

impl IntoResponse for ConsoleError {
    fn into_response(self) -> Response {
        self.answer(&HeaderMap::new())
    }
}
