//! Brokered credentials: the proxy as a model API's base URL, adding the real key upstream.
//!
//! The program is given the proxy as its base URL (`ANTHROPIC_BASE_URL`, `OPENAI_BASE_URL`)
//! and a placeholder key. A request it sends there (origin-form, or absolute-form to the
//! proxy's own address) is forwarded to the gateway's upstream with the key header replaced by
//! the real one; the program never holds the value, and it is never sent anywhere else.

/// Where brokered requests go, and the credential added to them.
#[derive(Clone, PartialEq, Eq)]
pub struct Gateway {
    pub(super) host: String,
    pub(super) port: u16,
    pub(super) base_path: String,
    pub(super) header: String,
    pub(super) value: String,
    pub(super) name: String,
    /// `https://`: spoken to over TLS, its certificate checked against the web's roots and
    /// `roots`.
    tls: bool,
    roots: Vec<Vec<u8>>,
}

impl std::fmt::Debug for Gateway {
    // Never the value.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway")
            .field(
                "upstream",
                &format!(
                    "{}://{}:{}{}",
                    if self.tls { "https" } else { "http" },
                    self.host,
                    self.port,
                    self.base_path
                ),
            )
            .field("header", &self.header)
            .field("secret", &self.name)
            .finish()
    }
}

impl Gateway {
    /// Forwards to `upstream` (`https://host[:port][/base]`, or `http://` for a gateway on the
    /// local network) adding `header: value` (the secret `name`'s value, `Bearer …` for an
    /// `authorization` header). An `https://` upstream needs the `http` feature (TLS).
    pub fn new(upstream: &str, header: &str, value: String, name: &str) -> Result<Self, String> {
        let (tls, rest) = match (
            upstream.strip_prefix("https://"),
            upstream.strip_prefix("http://"),
        ) {
            (Some(rest), _) if cfg!(feature = "http") => (true, rest),
            (Some(_), _) => {
                return Err(format!(
                    "the gateway upstream {upstream:?} needs TLS, which this loopward was built without: build it with the `http` feature (`cargo install --path loopward-cli --features http`), or point upstream at an http:// gateway"
                ))
            }
            (None, Some(rest)) => (false, rest),
            (None, None) => {
                return Err(format!(
                    "the gateway upstream {upstream:?} is not an https:// or http:// URL"
                ))
            }
        };
        let (authority, base) = match rest.find('/') {
            Some(i) => (&rest[..i], rest[i..].trim_end_matches('/')),
            None => (rest, ""),
        };
        let (host, port) = match authority.rsplit_once(':') {
            Some((h, p)) => (
                h,
                p.parse::<u16>()
                    .map_err(|_| format!("bad port in the gateway upstream {upstream:?}"))?,
            ),
            None => (authority, if tls { 443 } else { 80 }),
        };
        if host.is_empty() {
            return Err(format!("the gateway upstream {upstream:?} names no host"));
        }
        Ok(Self {
            host: host.to_ascii_lowercase(),
            port,
            base_path: base.to_string(),
            header: header.to_ascii_lowercase(),
            value,
            name: name.to_string(),
            tls,
            roots: vec![],
        })
    }

    /// Also trusts this root certificate (DER) for an `https://` upstream (a private CA).
    pub fn with_root_certificate(mut self, der: Vec<u8>) -> Self {
        self.roots.push(der);
        self
    }

    /// Whether the upstream is spoken to over TLS.
    pub fn tls(&self) -> bool {
        self.tls
    }

    /// TLS over `tcp` to the upstream, its name checked against its certificate.
    #[cfg(feature = "http")]
    pub(super) async fn tls_connect(
        &self,
        tcp: tokio::net::TcpStream,
    ) -> std::io::Result<tokio_rustls::client::TlsStream<tokio::net::TcpStream>> {
        use tokio_rustls::rustls::{self, pki_types};
        let bad = |e: &dyn std::fmt::Display| std::io::Error::other(e.to_string());
        let mut roots = rustls::RootCertStore::empty();
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        for der in &self.roots {
            roots
                .add(pki_types::CertificateDer::from(der.clone()))
                .map_err(|e| bad(&e))?;
        }
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| bad(&e))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        let name = pki_types::ServerName::try_from(self.host.clone()).map_err(|e| bad(&e))?;
        tokio_rustls::TlsConnector::from(std::sync::Arc::new(config))
            .connect(name, tcp)
            .await
    }

    /// Without the `http` feature an `https://` gateway is never made.
    #[cfg(not(feature = "http"))]
    pub(super) async fn tls_connect(
        &self,
        tcp: tokio::net::TcpStream,
    ) -> std::io::Result<tokio::net::TcpStream> {
        let _ = tcp;
        Err(std::io::Error::other(
            "built without TLS (the `http` feature)",
        ))
    }

    /// The request head to send upstream for `method path version` and the client's header
    /// lines: its own credential headers and `Host` replaced, one request per connection.
    pub(super) fn head(
        &self,
        method: &str,
        path: &str,
        version: &str,
        headers: &[&str],
    ) -> Vec<u8> {
        let mut out = format!("{method} {}{path} {version}\r\n", self.base_path);
        for line in headers.iter().filter(|l| !l.is_empty()) {
            let name = line
                .split(':')
                .next()
                .unwrap_or_default()
                .trim()
                .to_ascii_lowercase();
            let dropped = [
                "host",
                "connection",
                "keep-alive",
                "x-api-key",
                "authorization",
            ];
            if dropped.contains(&name.as_str()) || name.starts_with("proxy-") {
                continue;
            }
            out.push_str(line);
            out.push_str("\r\n");
        }
        let default = if self.tls { 443 } else { 80 };
        let host = if self.port == default {
            self.host.clone()
        } else {
            format!("{}:{}", self.host, self.port)
        };
        out.push_str(&format!(
            "Host: {host}\r\n{}: {}\r\nConnection: close\r\n\r\n",
            self.header, self.value
        ));
        out.into_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_placeholder_key_is_replaced_and_an_https_upstream_needs_tls() {
        let g = Gateway::new(
            "http://127.0.0.1:9/api",
            "x-api-key",
            "real-key-123".into(),
            "K",
        )
        .unwrap();
        let head = String::from_utf8(g.head(
            "POST",
            "/v1/messages",
            "HTTP/1.1",
            &[
                "x-api-key: placeholder",
                "Host: 127.0.0.1:5",
                "content-length: 2",
            ],
        ))
        .unwrap();
        assert_eq!(
            head,
            "POST /api/v1/messages HTTP/1.1\r\ncontent-length: 2\r\nHost: 127.0.0.1:9\r\nx-api-key: real-key-123\r\nConnection: close\r\n\r\n"
        );
        assert!(!format!("{g:?}").contains("real-key-123"));
        let https = Gateway::new("https://api.anthropic.com", "x-api-key", "k".into(), "K");
        match https {
            Ok(g) => assert!(cfg!(feature = "http") && g.tls() && g.port == 443),
            Err(why) => assert!(!cfg!(feature = "http") && why.contains("`http` feature")),
        }
    }
}
