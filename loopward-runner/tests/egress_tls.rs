//! The gateway brokers a model key to an `https://` upstream: TLS checked against the roots it
//! trusts, the placeholder replaced by the real key inside the tunnel it opens itself.
#![cfg(feature = "http")]

use loopward_runner::egress::{self, EgressPolicy, Gateway, Recorder};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::rustls::{self, pki_types::pem::PemObject, pki_types::CertificateDer};

const REAL: &str = "sk-real-key-for-the-tls-upstream";
const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/tls");

/// A TLS server on 127.0.0.1 (the fixtures' leaf certificate) that answers every request and
/// keeps the `x-api-key` it saw.
async fn tls_server() -> (u16, Arc<Mutex<Vec<String>>>) {
    let certs = CertificateDer::pem_file_iter(format!("{FIXTURES}/leaf.pem"))
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = rustls::pki_types::PrivateKeyDer::from_pem_file(format!(
        "{FIXTURES}/leaf-test-only-key.pem"
    ))
    .unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let keys = Arc::new(Mutex::new(Vec::new()));
    let seen = keys.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (acceptor, seen) = (acceptor.clone(), seen.clone());
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let mut buf = vec![0u8; 8192];
                let n = tls.read(&mut buf).await.unwrap_or(0);
                let head = String::from_utf8_lossy(&buf[..n]).to_string();
                if let Some(k) = head.lines().find_map(|l| l.strip_prefix("x-api-key: ")) {
                    seen.lock().unwrap().push(k.to_string());
                }
                let body = "brokered-ok";
                let _ = tls
                    .write_all(
                        format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len())
                            .as_bytes(),
                    )
                    .await;
                let _ = tls.shutdown().await;
            });
        }
    });
    (port, keys)
}

/// The proxy with `gateway`, its records acknowledged in memory; returns its address.
async fn proxy(gateway: Gateway) -> std::net::SocketAddr {
    let listener = TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (recorder, mut records) = Recorder::channel();
    tokio::spawn(async move {
        while let Some(r) = records.recv().await {
            let _ = r.done.send(Ok(()));
        }
    });
    let policy = Arc::new(EgressPolicy::new(Vec::<String>::new()).with_gateway(gateway));
    tokio::spawn(egress::serve(listener, policy, recorder, None));
    addr
}

async fn post(proxy: std::net::SocketAddr) -> String {
    let mut s = TcpStream::connect(proxy).await.unwrap();
    s.write_all(b"POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nx-api-key: loopward-brokered-K\r\nContent-Length: 2\r\n\r\n{}")
        .await
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    out
}

#[tokio::test]
async fn the_gateway_speaks_tls_to_an_https_upstream_and_adds_the_real_key_there() {
    let (port, keys) = tls_server().await;
    let ca = CertificateDer::from_pem_file(format!("{FIXTURES}/ca.pem")).unwrap();
    let upstream = format!("https://127.0.0.1:{port}");
    let trusted = Gateway::new(&upstream, "x-api-key", REAL.into(), "K")
        .unwrap()
        .with_root_certificate(ca.to_vec());
    let answer = post(proxy(trusted).await).await;
    assert!(answer.contains("brokered-ok"), "{answer}");
    assert_eq!(*keys.lock().unwrap(), [REAL.to_string()]);
    // A certificate no trusted root signed: no tunnel, no key sent.
    let untrusted = Gateway::new(&upstream, "x-api-key", REAL.into(), "K").unwrap();
    let answer = post(proxy(untrusted).await).await;
    assert!(answer.starts_with("HTTP/1.1 502"), "{answer}");
    assert!(
        answer.contains("TLS to the gateway upstream 127.0.0.1 failed"),
        "{answer}"
    );
    assert_eq!(keys.lock().unwrap().len(), 1);
}
