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
}

impl std::fmt::Debug for Gateway {
    // Never the value.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway")
            .field(
                "upstream",
                &format!("http://{}:{}{}", self.host, self.port, self.base_path),
            )
            .field("header", &self.header)
            .field("secret", &self.name)
            .finish()
    }
}

impl Gateway {
    /// Forwards to `upstream` (`http://host[:port][/base]`) adding `header: value` (the secret
    /// `name`'s value, `Bearer …` for an `authorization` header). An `https://` upstream is
    /// refused: the proxy does not speak TLS yet.
    pub fn new(upstream: &str, header: &str, value: String, name: &str) -> Result<Self, String> {
        let Some(rest) = upstream.strip_prefix("http://") else {
            return Err(format!(
                "the gateway upstream {upstream:?} is not an http:// URL; loopward's proxy does not speak TLS to an upstream yet, so brokered keys go only to an http gateway (a local LLM gateway, a test server). Otherwise let the program hold its key and list the API host in the agent's `net`"
            ));
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
            None => (authority, 80),
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
        })
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
        let host = if self.port == 80 {
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
    fn the_placeholder_key_is_replaced_and_an_https_upstream_is_refused() {
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
        assert!(
            Gateway::new("https://api.anthropic.com", "x-api-key", "k".into(), "K")
                .unwrap_err()
                .contains("does not speak TLS")
        );
    }
}
