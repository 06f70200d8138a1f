//! Serving the proxy: one task per connection, one decision per connection.

use super::EgressPolicy;
use loopward_core::{AuditError, AuditEvent, CallId};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The longest request head the proxy reads.
const MAX_HEAD: usize = 16 * 1024;
/// How long a client has to send its request head, and the proxy to connect.
const WAIT: Duration = Duration::from_secs(15);

/// One event the proxy asks its owner to record, and where to say how that went.
#[derive(Debug)]
pub struct Record {
    /// The event.
    pub event: AuditEvent,
    /// The answer: `Ok` once recorded (and, for a decision, durable).
    pub done: tokio::sync::oneshot::Sender<Result<(), AuditError>>,
}

/// Where the proxy sends its events: to the task that owns the ledger (the shell call), which
/// records each and answers. The proxy holds no reference to the ledger, so a proxy outliving
/// its call keeps nothing open; once the call has stopped listening, every connection is
/// refused (fail closed).
#[derive(Clone, Debug)]
pub struct Recorder(tokio::sync::mpsc::Sender<Record>);

impl Recorder {
    /// A recorder and the receiving end its owner drains.
    pub fn channel() -> (Self, tokio::sync::mpsc::Receiver<Record>) {
        let (tx, rx) = tokio::sync::mpsc::channel(16);
        (Self(tx), rx)
    }

    async fn record(&self, event: AuditEvent) -> Result<(), AuditError> {
        let (done, answer) = tokio::sync::oneshot::channel();
        let gone = || AuditError("the call that owns this proxy has ended".into());
        self.0
            .send(Record { event, done })
            .await
            .map_err(|_| gone())?;
        answer.await.map_err(|_| gone())?
    }
}

/// Serves the proxy on `listener` until the returned future is dropped (abort its task when
/// the command's call ends). `call_id` names the shell call in every record.
pub async fn serve(
    listener: TcpListener,
    policy: Arc<EgressPolicy>,
    recorder: Recorder,
    call_id: Option<CallId>,
) {
    let own = listener.local_addr().ok();
    let mut tasks = tokio::task::JoinSet::new();
    while let Ok((stream, _)) = listener.accept().await {
        let (policy, recorder, call_id) = (policy.clone(), recorder.clone(), call_id.clone());
        tasks.spawn(async move {
            let _ = handle(stream, &policy, &recorder, call_id, own).await;
        });
        // Reap finished connections as they end.
        while tasks.try_join_next().is_some() {}
    }
}

/// A request as the proxy judges it.
struct Request {
    host: String,
    port: u16,
    /// `None` for CONNECT; the head to send upstream for plain HTTP.
    forward: Option<Vec<u8>>,
    /// For the gateway: the upstream, spoken to over TLS when it is `https://`.
    gateway: Option<super::Gateway>,
}

/// A request for the gateway (origin-form, or absolute to the proxy's own address).
struct ForGateway {
    method: String,
    path: String,
    version: String,
    headers: Vec<String>,
}

/// The parts of a request line, and the header lines.
type Head = (String, String, String, Vec<String>);

/// Splits a head into its request line's parts and its header lines.
fn request_line(head: &[u8]) -> Result<Head, String> {
    let text =
        std::str::from_utf8(head).map_err(|_| "the request head is not UTF-8".to_string())?;
    let mut lines = text.split("\r\n");
    let first = lines.next().unwrap_or_default();
    let mut parts = first.split(' ');
    match (parts.next(), parts.next(), parts.next()) {
        (Some(m), Some(t), Some(v)) => Ok((
            m.to_string(),
            t.to_string(),
            v.to_string(),
            lines.map(str::to_string).collect(),
        )),
        _ => Err(format!("not an HTTP request line: {first:?}")),
    }
}

/// The request, when it is for the gateway: origin-form, or absolute-form naming the proxy's
/// own address (`own`).
fn for_gateway(head: &[u8], own: Option<std::net::SocketAddr>) -> Option<ForGateway> {
    let (method, target, version, headers) = request_line(head).ok()?;
    let path = if target.starts_with('/') {
        target
    } else {
        let after = target.strip_prefix("http://")?;
        let (authority, path) = match after.find('/') {
            Some(i) => (&after[..i], &after[i..]),
            None => (after, "/"),
        };
        let (host, port) = split_host(authority, Some(80)).ok()?;
        let local = host == "127.0.0.1" || host == "localhost";
        if !(local && port == own?.port()) {
            return None;
        }
        path.to_string()
    };
    Some(ForGateway {
        method,
        path,
        version,
        headers,
    })
}

async fn handle(
    mut client: TcpStream,
    policy: &EgressPolicy,
    recorder: &Recorder,
    call_id: Option<CallId>,
    own: Option<std::net::SocketAddr>,
) -> std::io::Result<()> {
    let (head, rest) = match tokio::time::timeout(WAIT, read_head(&mut client)).await {
        Ok(Ok(h)) => h,
        _ => return answer(&mut client, "400 Bad Request", "no request head").await,
    };
    let (req, decision) = match (for_gateway(&head, own), policy.gateway()) {
        (Some(g), Some(gw)) => {
            let headers: Vec<&str> = g.headers.iter().map(String::as_str).collect();
            let req = Request {
                host: gw.host.clone(),
                port: gw.port,
                forward: Some(gw.head(&g.method, &g.path, &g.version, &headers)),
                gateway: Some(gw.clone()),
            };
            let decision = match tokio::net::lookup_host((gw.host.as_str(), gw.port)).await {
                Ok(a) => Ok(a.collect::<Vec<_>>()),
                Err(e) => Err(format!(
                    "the gateway upstream {} could not be resolved: {e}",
                    gw.host
                )),
            };
            (
                req,
                decision.map(|a| (a, format!("gateway with {}", gw.name))),
            )
        }
        (Some(_), None) => {
            return answer(
                &mut client,
                "400 Bad Request",
                "this proxy brokers no credential: send CONNECT or absolute http:// requests",
            )
            .await
        }
        (None, _) => {
            let req = match parse(&head) {
                Ok(r) => r,
                Err(why) => return answer(&mut client, "400 Bad Request", &why).await,
            };
            let decision = policy.resolve(&req.host, req.port).await;
            (req, decision.map(|a| (a, "listed".to_string())))
        }
    };
    let recorded = recorder
        .record(AuditEvent::EgressDecided {
            allowed: decision.is_ok(),
            call_id: call_id.clone(),
            host: req.host.clone(),
            port: req.port,
            reason: match &decision {
                Ok((_, why)) | Err(why) => why.clone(),
            },
        })
        .await;
    if let Err(e) = recorded {
        return answer(
            &mut client,
            "502 Bad Gateway",
            &format!("not recorded: {e}"),
        )
        .await;
    }
    let addrs = match decision {
        Ok((a, _)) => a,
        Err(why) => {
            return answer(
                &mut client,
                "403 Forbidden",
                &format!(
                "{why}. A command reaches only the hosts its agent's `net` lists in loopward.toml"
            ),
            )
            .await
        }
    };
    let mut upstream = None;
    for addr in &addrs {
        if let Ok(Ok(s)) = tokio::time::timeout(WAIT, TcpStream::connect(addr)).await {
            upstream = Some(s);
            break;
        }
    }
    let Some(upstream) = upstream else {
        return answer(&mut client, "502 Bad Gateway", "the host did not answer").await;
    };
    let piped = match req.gateway.as_ref().filter(|g| g.tls()) {
        Some(g) => match g.tls_connect(upstream).await {
            Ok(tls) => pipe(&mut client, tls, req.forward.as_deref(), &rest).await,
            Err(e) => {
                let why = format!("TLS to the gateway upstream {} failed: {e}", req.host);
                return answer(&mut client, "502 Bad Gateway", &why).await;
            }
        },
        None => pipe(&mut client, upstream, req.forward.as_deref(), &rest).await,
    };
    let (bytes_in, bytes_out) = piped?;
    let _ = recorder
        .record(AuditEvent::EgressClosed {
            bytes_in,
            bytes_out,
            call_id,
            host: req.host,
            port: req.port,
        })
        .await;
    Ok(())
}

/// Sends `head` (plain HTTP; `None`: a CONNECT tunnel, answered here) and `rest` upstream, then
/// copies both ways until either side closes; returns the bytes in and out.
async fn pipe<S>(
    client: &mut TcpStream,
    mut upstream: S,
    head: Option<&[u8]>,
    rest: &[u8],
) -> std::io::Result<(u64, u64)>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let mut bytes_out = 0u64;
    match head {
        None => {
            client
                .write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
                .await?
        }
        Some(head) => {
            upstream.write_all(head).await?;
            bytes_out += head.len() as u64;
        }
    }
    upstream.write_all(rest).await?;
    bytes_out += rest.len() as u64;
    let (out, bytes_in) = tokio::io::copy_bidirectional(client, &mut upstream)
        .await
        .unwrap_or((0, 0));
    Ok((bytes_in, bytes_out + out))
}

/// Reads up to the end of the head (`\r\n\r\n`); returns the head and what came after it.
async fn read_head(client: &mut TcpStream) -> std::io::Result<(Vec<u8>, Vec<u8>)> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 2048];
    loop {
        let n = client.read(&mut chunk).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let rest = buf.split_off(end + 4);
            return Ok((buf, rest));
        }
        if buf.len() > MAX_HEAD {
            return Err(std::io::ErrorKind::InvalidData.into());
        }
    }
}

/// `host:port`, `[v6]:port`, or a host alone with `default` port.
fn split_host(authority: &str, default: Option<u16>) -> Result<(String, u16), String> {
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) if !h.is_empty() && (!h.contains(':') || h.ends_with(']')) => (
            h,
            p.parse::<u16>()
                .map_err(|_| format!("bad port in {authority:?}"))?,
        ),
        _ => (
            authority,
            default.ok_or_else(|| format!("{authority:?} names no port"))?,
        ),
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() || host.contains(['/', '@', ' ']) {
        return Err(format!("{authority:?} is not a host"));
    }
    Ok((host.to_ascii_lowercase(), port))
}

fn parse(head: &[u8]) -> Result<Request, String> {
    let (method, target, version, lines) = request_line(head)?;
    let (method, target, version) = (method.as_str(), target.as_str(), version.as_str());
    if method == "CONNECT" {
        let (host, port) = split_host(target, None)?;
        return Ok(Request {
            host,
            port,
            forward: None,
            gateway: None,
        });
    }
    let Some(after) = target.strip_prefix("http://") else {
        return Err(format!(
            "{target:?}: only CONNECT and absolute http:// requests go through the proxy"
        ));
    };
    let (authority, path) = match after.find('/') {
        Some(i) => (&after[..i], &after[i..]),
        None => (after, "/"),
    };
    let (host, port) = split_host(authority, Some(80))?;
    // Origin-form upstream; every request on its own connection, so each is judged.
    let mut out = format!("{method} {path} {version}\r\n");
    for line in lines.iter().filter(|l| !l.is_empty()) {
        let name = line
            .split(':')
            .next()
            .unwrap_or_default()
            .to_ascii_lowercase();
        if name.starts_with("proxy-") || name == "connection" || name == "keep-alive" {
            continue;
        }
        out.push_str(line);
        out.push_str("\r\n");
    }
    out.push_str("Connection: close\r\n\r\n");
    Ok(Request {
        host,
        port,
        forward: Some(out.into_bytes()),
        gateway: None,
    })
}

async fn answer(client: &mut TcpStream, status: &str, why: &str) -> std::io::Result<()> {
    let body = format!("loopward egress: {why}\n");
    let msg = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    client.write_all(msg.as_bytes()).await?;
    client.shutdown().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connect_and_absolute_requests_name_their_host_and_port() {
        let r = parse(b"CONNECT api.example.com:443 HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        assert_eq!(
            (r.host.as_str(), r.port, r.forward.is_none()),
            ("api.example.com", 443, true)
        );
        let r = parse(b"GET http://[::1]:8080/a?b HTTP/1.1\r\nHost: x\r\nProxy-Authorization: y\r\nConnection: keep-alive\r\n\r\n").unwrap();
        assert_eq!((r.host.as_str(), r.port), ("::1", 8080));
        let head = String::from_utf8(r.forward.unwrap()).unwrap();
        assert_eq!(
            head,
            "GET /a?b HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        );
        assert!(parse(b"GET /relative HTTP/1.1\r\n\r\n").is_err());
        assert!(parse(b"CONNECT user@host:443 HTTP/1.1\r\n\r\n").is_err());
    }
}
