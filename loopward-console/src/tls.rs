//! TLS for a console served beyond loopback: a certificate chain and its key (PEM files the
//! person provides), rustls on the `ring` provider. Handshakes run in their own tasks, each
//! bounded, so a client that connects and says nothing holds up no one else.

use crate::error::ConsoleError;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

/// The longest a client may take to finish its handshake.
const HANDSHAKE: Duration = Duration::from_secs(10);

/// The server side of TLS, from a certificate chain and its private key.
#[derive(Clone)]
pub struct Tls {
    config: Arc<ServerConfig>,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls").finish_non_exhaustive()
    }
}

impl Tls {
    /// Reads the PEM certificate chain at `cert` and the PEM private key at `key`.
    pub fn from_pem_files(cert: &Path, key: &Path) -> Result<Self, ConsoleError> {
        let bad = |what: &str, path: &Path, e: &dyn std::fmt::Display| {
            ConsoleError::BadRequest(format!(
                "cannot use {} as the console's TLS {what}: {e}; give a PEM file",
                path.display()
            ))
        };
        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
            .map_err(|e| bad("certificate", cert, &e))?
            .collect::<Result<_, _>>()
            .map_err(|e| bad("certificate", cert, &e))?;
        if chain.is_empty() {
            return Err(bad("certificate", cert, &"it holds no certificate"));
        }
        let key_der = PrivateKeyDer::from_pem_file(key).map_err(|e| bad("key", key, &e))?;
        let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
        let config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| bad("certificate", cert, &e))?
            .with_no_client_auth()
            .with_single_cert(chain, key_der)
            .map_err(|e| bad("key", key, &e))?;
        Ok(Self {
            config: Arc::new(config),
        })
    }
}

/// A listener that hands axum only connections whose TLS handshake finished.
pub(crate) struct TlsListener {
    local: SocketAddr,
    ready: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
}

impl TlsListener {
    /// Accepts on `tcp` in the background; each handshake in its own task, bounded.
    pub(crate) fn new(tcp: TcpListener, tls: &Tls) -> std::io::Result<Self> {
        let local = tcp.local_addr()?;
        let acceptor = TlsAcceptor::from(tls.config.clone());
        let (tx, ready) = mpsc::channel(64);
        tokio::spawn(async move {
            loop {
                let Ok((stream, peer)) = tcp.accept().await else {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                };
                let (acceptor, sender) = (acceptor.clone(), tx.clone());
                tokio::spawn(async move {
                    match tokio::time::timeout(HANDSHAKE, acceptor.accept(stream)).await {
                        Ok(Ok(s)) => {
                            let _ = sender.send((s, peer)).await;
                        }
                        Ok(Err(e)) => tracing::debug!(%peer, error = %e, "TLS handshake failed"),
                        Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
                    }
                });
                if tx.is_closed() {
                    break;
                }
            }
        });
        Ok(Self { local, ready })
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(c) => c,
            // The acceptor task never ends while this listener lives.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.local)
    }
}
