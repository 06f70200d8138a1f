//! A session's Unix sockets (its MCP relay, its hook): bound in loopward's state directory,
//! out of the agent's reach, or in a private temporary folder when that path is too long, and
//! answered in the session's own task, beside its stream reader ([`serve_beside`]).

use crate::context::TurnContext;
use crate::turn::TurnError;
use futures::stream::{FuturesUnordered, StreamExt};
use std::future::Future;
use std::path::{Path, PathBuf};

/// The longest socket path the kernel binds (`sun_path` is 108 bytes, with its NUL).
const MAX_SOCKET_PATH: usize = 100;

/// Binds `name` in `scratch` (made if missing), or in a private temporary folder (kept alive
/// by the returned guard) when that path is too long; a stale socket of the name is replaced.
/// `what` (`mcp`, `hook`) names the socket in errors and the temporary folder.
pub(super) fn bind(
    scratch: &Path,
    name: &str,
    what: &str,
) -> Result<(tokio::net::UnixListener, PathBuf, Option<tempfile::TempDir>), String> {
    std::fs::create_dir_all(scratch).map_err(|e| {
        format!(
            "cannot make loopward's state directory {}: {e}",
            scratch.display()
        )
    })?;
    let mut socket = scratch.join(name);
    let mut dir = None;
    if socket.as_os_str().len() > MAX_SOCKET_PATH {
        let d = tempfile::Builder::new()
            .prefix(&format!("loopward-{what}-"))
            .tempdir()
            .map_err(|e| format!("cannot make a directory for the session's {what} socket: {e}"))?;
        socket = d.path().join(name);
        dir = Some(d);
    }
    let _ = std::fs::remove_file(&socket);
    let listener = tokio::net::UnixListener::bind(&socket).map_err(|e| {
        format!(
            "cannot open the session's {what} socket {}: {e}",
            socket.display()
        )
    })?;
    Ok((listener, socket, dir))
}

/// A session's socket server (its hook, its MCP relay): where it listens, and how it answers
/// one connection.
pub(super) trait Answer {
    /// Where it listens.
    fn listener(&self) -> &tokio::net::UnixListener;

    /// Answers one connection, under `turn`; an error (a record the ledger could not take)
    /// ends the turn.
    fn answer(
        &self,
        turn: &TurnContext,
        stream: tokio::net::UnixStream,
    ) -> impl Future<Output = Result<(), TurnError>>;
}

/// Runs `main` (the session's stream reader), answering `server`, when the session has one,
/// beside it in the same task until `main` ends ([`serve_beside`]).
pub(super) async fn serve<T>(
    server: Option<&impl Answer>,
    turn: &TurnContext,
    main: impl Future<Output = Result<T, TurnError>>,
) -> Result<T, TurnError> {
    match server {
        None => main.await,
        Some(s) => serve_beside(s.listener(), main, |c| s.answer(turn, c)).await,
    }
}

/// Runs `main` (the session's stream reader), answering each connection to `listener` with
/// `answer` beside it in the same task until `main` ends: so an answer's records never fall
/// between two records of the stream's. An answer that fails (a record the ledger could not
/// take) ends the turn.
pub(super) async fn serve_beside<T, A, F>(
    listener: &tokio::net::UnixListener,
    main: impl Future<Output = Result<T, TurnError>>,
    answer: A,
) -> Result<T, TurnError>
where
    A: Fn(tokio::net::UnixStream) -> F,
    F: Future<Output = Result<(), TurnError>>,
{
    let mut main = std::pin::pin!(main);
    let mut answering = FuturesUnordered::new();
    loop {
        tokio::select! {
            out = &mut main => return out,
            Some(done) = answering.next(), if !answering.is_empty() => done?,
            conn = listener.accept() => {
                if let Ok((stream, _)) = conn {
                    answering.push(answer(stream));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_path_too_long_to_bind_moves_to_a_private_folder() {
        let d = tempfile::tempdir().unwrap();
        let deep = d.path().join("x".repeat(120));
        let (_l, socket, dir) = bind(&deep, "hook-s.sock", "hook").unwrap();
        assert!(dir.is_some() && socket.as_os_str().len() <= MAX_SOCKET_PATH);
        let (_l, socket, dir) = bind(d.path(), "hook-s.sock", "hook").unwrap();
        assert!(dir.is_none() && socket.starts_with(d.path()));
    }
}
