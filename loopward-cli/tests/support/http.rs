//! The HTTP/1.1 plumbing the scripted API stand-ins share: a listener on a free port of
//! 127.0.0.1, one thread per connection, keep-alive, `content-length` or chunked bodies read,
//! each request answered by the server's own handler.

#![allow(dead_code, unreachable_pub)]

use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// What a handler answers: status line, content type, body.
pub type Answer = (&'static str, &'static str, Vec<u8>);

/// A request handler: `(method, path, body as JSON, its x-api-key header)` → the answer.
pub type Handler = dyn Fn(&str, &str, Value, Option<String>) -> Answer;

/// A listening server; stops (and joins its accept loop) when dropped.
pub struct Listener {
    /// The port on 127.0.0.1.
    pub port: u16,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A scripted model stand-in, running: it logs the requests it answered with a scripted step,
/// and stops when dropped.
pub struct Scripted {
    log: Arc<Mutex<Vec<Value>>>,
    _listener: Listener,
}

impl Scripted {
    /// The bodies of the requests answered with a scripted step, in order.
    pub fn requests(&self) -> Vec<Value> {
        self.log.lock().unwrap().clone()
    }
}

/// A script of model turns, taken in order by the requests of the agent loop.
pub struct Steps<S> {
    script: Vec<S>,
    done: S,
    log: Arc<Mutex<Vec<Value>>>,
}

impl<S: Clone> Steps<S> {
    /// Logs `body` and takes the next step: its number (from 1) and the step, or the script's
    /// `done` step once it is spent.
    pub fn next(&self, body: Value) -> (usize, S) {
        let mut log = self.log.lock().unwrap();
        log.push(body);
        let n = log.len();
        let step = self.script.get(n - 1).cloned();
        (n, step.unwrap_or_else(|| self.done.clone()))
    }
}

/// Listens as [`listen`] does, `handler` taking `script`'s steps ([`Steps::next`]), then
/// `done` over and over: `(port, server)`.
pub fn scripted<S: Clone + Send + Sync + 'static>(
    script: Vec<S>,
    done: S,
    handler: impl Fn(&str, &str, Value, &Steps<S>) -> Answer + Send + Sync + 'static,
) -> (u16, Scripted) {
    let log = Arc::new(Mutex::new(Vec::new()));
    let steps = Steps {
        script,
        done,
        log: log.clone(),
    };
    let listener = listen(move |method, path, body, _key| handler(method, path, body, &steps));
    let port = listener.port;
    (
        port,
        Scripted {
            log,
            _listener: listener,
        },
    )
}

/// Listens on a free port of 127.0.0.1 and answers every request with `handler(method, path,
/// body as JSON, its x-api-key header)`.
pub fn listen(
    handler: impl Fn(&str, &str, Value, Option<String>) -> Answer + Send + Sync + 'static,
) -> Listener {
    let listener = TcpListener::bind(("127.0.0.1", 0)).expect("binding 127.0.0.1");
    let port = listener.local_addr().unwrap().port();
    let stop = Arc::new(AtomicBool::new(false));
    let handler = Arc::new(handler);
    let thread = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let handler = handler.clone();
                std::thread::spawn(move || {
                    let _ = serve(conn, &*handler);
                });
            }
        })
    };
    Listener {
        port,
        stop,
        thread: Some(thread),
    }
}

/// Answers requests on one connection until the client closes it.
fn serve(conn: TcpStream, handler: &Handler) -> std::io::Result<()> {
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut out = conn;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let mut parts = line.split_whitespace();
        let (Some(method), Some(path)) = (parts.next(), parts.next()) else {
            return Ok(());
        };
        let (method, path) = (method.to_string(), path.to_string());
        let (mut length, mut chunked, mut close) = (0usize, false, false);
        let mut api_key = None;
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h)? == 0 {
                return Ok(());
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            let Some((name, value)) = h.split_once(':') else {
                continue;
            };
            let (name, value) = (name.trim().to_ascii_lowercase(), value.trim());
            match name.as_str() {
                "content-length" => length = value.parse().unwrap_or(0),
                "transfer-encoding" => chunked = value.eq_ignore_ascii_case("chunked"),
                "connection" => close = value.eq_ignore_ascii_case("close"),
                "x-api-key" => api_key = Some(value.to_string()),
                _ => {}
            }
        }
        let body = if chunked {
            read_chunked(&mut reader)?
        } else {
            let mut b = vec![0; length];
            reader.read_exact(&mut b)?;
            b
        };
        let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let (status, ctype, payload) = handler(&method, &path, body, api_key);
        let head = format!(
            "HTTP/1.1 {status}\r\ncontent-type: {ctype}\r\ncontent-length: {}\r\nrequest-id: req_loopward\r\n{}\r\n",
            payload.len(),
            if close { "connection: close\r\n" } else { "" }
        );
        out.write_all(head.as_bytes())?;
        if method != "HEAD" {
            out.write_all(&payload)?;
        }
        out.flush()?;
        if close {
            return Ok(());
        }
    }
}

fn read_chunked(reader: &mut impl BufRead) -> std::io::Result<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let mut size = String::new();
        reader.read_line(&mut size)?;
        let size =
            usize::from_str_radix(size.trim().split(';').next().unwrap_or("0"), 16).unwrap_or(0);
        let mut chunk = vec![0; size + 2];
        reader.read_exact(&mut chunk)?;
        if size == 0 {
            return Ok(body);
        }
        body.extend_from_slice(&chunk[..size]);
    }
}
