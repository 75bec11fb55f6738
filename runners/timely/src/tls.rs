//! TLS between the processes of a `--hosts` cluster (`--tls-cert`, `--tls-key`,
//! `--tls-ca`), as Flink's internal mutual TLS: every connection is encrypted, and each
//! end presents its certificate and checks the other's against the cluster's CA. The
//! connecting process also checks that the certificate names the host it connected to
//! (the host part of its `--hosts` line: a DNS name or an IP address).
//!
//! timely's network threads read and write plain blocking sockets, so a TLS session
//! cannot be handed to them as it is. Each connection, once it has passed the
//! handshake of [`crate::handshake`], is secured here and relayed: timely gets one end
//! of a Unix socket pair, and a task on this process's relay runtime copies between
//! the other end and the TLS session, both ways ([`Relay`]). The pair is private to the
//! process (no address, no listener), so nothing else can reach timely's end.

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// How long a TLS handshake with a peer may take.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// What the accepting end sends first in a session: it took the other's certificate.
const ACCEPTED: &[u8; 4] = b"TWT1";

/// The relay's buffers, each way (timely writes in 64 KiB batches).
const BUFFER: usize = 1 << 16;

/// A process's TLS identity and the CA it trusts its peers by.
pub struct Tls {
    client: Arc<ClientConfig>,
    server: Arc<ServerConfig>,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Tls(..)")
    }
}

/// Which end of a connection this process is.
#[derive(Clone, Copy, Debug)]
pub enum Side<'a> {
    /// It connected, to `host` (a DNS name or an IP address).
    Client {
        /// The host its certificate must name.
        host: &'a str,
    },
    /// It accepted.
    Server,
}

impl Tls {
    /// Reads the certificate chain (PEM), its private key (PEM: PKCS#8, PKCS#1 or
    /// SEC1) and the CA certificates (PEM) peers are checked against. The error is the
    /// option at fault (flag and file) and what is wrong with it.
    pub fn load(cert: &Path, key_file: &Path, ca: &Path) -> Result<Tls, (String, String)> {
        let option = |flag: &str, path: &Path| format!("{flag} {}", path.display());
        let certs = pem_certs(cert).map_err(|m| (option("--tls-cert", cert), m))?;
        let key = PrivateKeyDer::from_pem_file(key_file).map_err(|e| {
            (
                option("--tls-key", key_file),
                format!("no private key could be read from it (PEM): {e}"),
            )
        })?;
        let mut roots = RootCertStore::empty();
        for c in pem_certs(ca).map_err(|m| (option("--tls-ca", ca), m))? {
            roots
                .add(c)
                .map_err(|e| (option("--tls-ca", ca), format!("not a CA certificate: {e}")))?;
        }
        let roots = Arc::new(roots);
        // ring, not aws-lc-rs (whose C build is long, and which brings post-quantum key
        // exchange, the reason rustls marks ring's provider deprecated): classical
        // ECDHE is what Flink's and Spark's internal TLS offer too.
        #[allow(deprecated)]
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mismatch = |e: rustls::Error| {
            (
                option("--tls-key", key_file),
                format!("it is not the key of --tls-cert {}: {e}", cert.display()),
            )
        };
        let internal = |e: rustls::Error| (option("--tls-cert", cert), e.to_string());
        let client = ClientConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()
            .map_err(internal)?
            .with_root_certificates(Arc::clone(&roots))
            .with_client_auth_cert(certs.clone(), key.clone_key())
            .map_err(mismatch)?;
        let verifier = WebPkiClientVerifier::builder_with_provider(roots, Arc::clone(&provider))
            .build()
            .map_err(|e| (option("--tls-ca", ca), e.to_string()))?;
        let server = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(internal)?
            .with_client_cert_verifier(verifier)
            .with_single_cert(certs, key)
            .map_err(mismatch)?;
        Ok(Tls {
            client: Arc::new(client),
            server: Arc::new(server),
        })
    }
}

/// The certificates in the PEM file `path` (at least one).
fn pem_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|i| i.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("cannot read certificates from it: {e}"))?;
    if certs.is_empty() {
        return Err("it holds no certificate (PEM, -----BEGIN CERTIFICATE-----)".into());
    }
    Ok(certs)
}

/// The runtime whose tasks copy between timely's sockets and the TLS sessions; the
/// sessions end with it, so it lives as long as timely's network threads.
///
/// Dropped, it waits (at most [`DRAIN_TIMEOUT`]) for its sessions to end: when
/// timely's threads are done, the last bytes they wrote (the end-of-stream frame) may
/// still be on their way into a session, and a session cut before then is a lost
/// peer to the process at the other end.
pub struct Relay {
    runtime: tokio::runtime::Runtime,
    sessions: std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

/// How long a dropped [`Relay`] waits for its sessions to end.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

impl Drop for Relay {
    fn drop(&mut self) {
        let sessions =
            std::mem::take(&mut *self.sessions.lock().unwrap_or_else(|p| p.into_inner()));
        self.runtime.block_on(async {
            let all = async {
                for s in sessions {
                    let _ = s.await;
                }
            };
            let _ = tokio::time::timeout(DRAIN_TIMEOUT, all).await;
        });
    }
}

impl Relay {
    /// A relay with two threads.
    pub fn new() -> std::io::Result<Relay> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("tidewater:tls")
            .enable_io()
            .enable_time()
            .build()?;
        Ok(Relay {
            runtime,
            sessions: std::sync::Mutex::new(Vec::new()),
        })
    }

    /// Secures `stream` with `tls` on this `side`, and returns the socket timely reads
    /// and writes in plain; the error says why the TLS handshake failed.
    pub fn secure(&self, tls: &Tls, stream: TcpStream, side: Side) -> Result<UnixStream, String> {
        let (plain, relayed) = UnixStream::pair().map_err(|e| e.to_string())?;
        let runtime = &self.runtime;
        let mut session = runtime.block_on(async {
            stream.set_nonblocking(true).map_err(|e| e.to_string())?;
            let tcp = tokio::net::TcpStream::from_std(stream).map_err(|e| e.to_string())?;
            let handshake = async {
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                let session: tokio_rustls::TlsStream<tokio::net::TcpStream> = match side {
                    Side::Client { host } => {
                        let name = ServerName::try_from(host.to_string()).map_err(|e| {
                            format!("'{host}' is neither a DNS name nor an IP address: {e}")
                        })?;
                        let mut session = tokio_rustls::TlsConnector::from(Arc::clone(&tls.client))
                            .connect(name, tcp)
                            .await
                            .map_err(|e| e.to_string())?;
                        // In TLS 1.3 the accepting end checks this end's certificate
                        // after this end's handshake is over: its word that it took it
                        // comes first, or the alert saying why not.
                        let mut word = [0u8; 4];
                        session.read_exact(&mut word).await.map_err(|e| {
                            format!("it did not accept this process's certificate: {e}")
                        })?;
                        if &word != ACCEPTED {
                            return Err("it answered the TLS handshake with something else".into());
                        }
                        session.into()
                    }
                    Side::Server => {
                        let mut session = tokio_rustls::TlsAcceptor::from(Arc::clone(&tls.server))
                            .accept(tcp)
                            .await
                            .map_err(|e| e.to_string())?;
                        session
                            .write_all(ACCEPTED)
                            .await
                            .map_err(|e| e.to_string())?;
                        session.flush().await.map_err(|e| e.to_string())?;
                        session.into()
                    }
                };
                Ok::<_, String>(session)
            };
            tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake)
                .await
                .map_err(|_| format!("no TLS handshake within {HANDSHAKE_TIMEOUT:?}"))?
        })?;
        relayed.set_nonblocking(true).map_err(|e| e.to_string())?;
        let _entered = runtime.enter();
        let mut relayed = tokio::net::UnixStream::from_std(relayed).map_err(|e| e.to_string())?;
        let session = runtime.spawn(async move {
            // Ends when both ways are closed (timely's end-of-stream, then the peer's),
            // or at the first error: the peer gone, or its session broken. Dropping both
            // ends then closes timely's socket, which it reads as a lost peer.
            let _ = tokio::io::copy_bidirectional_with_sizes(
                &mut session,
                &mut relayed,
                BUFFER,
                BUFFER,
            )
            .await;
        });
        self.sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(session);
        Ok(plain)
    }
}

/// The host part of `host:port` (brackets of an IPv6 address taken off).
pub fn host_of(address: &str) -> &str {
    let host = address.rsplit_once(':').map_or(address, |(h, _)| h);
    host.trim_start_matches('[').trim_end_matches(']')
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
    use std::io::{Read, Write};
    use std::net::TcpListener;

    /// A CA's certificate, and a certificate and key it signed for `names`, as PEM
    /// files in `dir` (`ca.pem`, `NAME.pem`, `NAME.key`).
    fn issue(dir: &Path, ca_name: &str, names: &[&str], file: &str) -> std::path::PathBuf {
        let ca_key = KeyPair::generate().unwrap();
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(rcgen::DnType::CommonName, ca_name);
        let ca_cert = ca.self_signed(&ca_key).unwrap();
        std::fs::write(dir.join(format!("{ca_name}.pem")), ca_cert.pem()).unwrap();
        let issuer = Issuer::new(ca, ca_key);
        let key = KeyPair::generate().unwrap();
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let cert = CertificateParams::new(names)
            .unwrap()
            .signed_by(&key, &issuer)
            .unwrap();
        std::fs::write(dir.join(format!("{file}.pem")), cert.pem()).unwrap();
        std::fs::write(dir.join(format!("{file}.key")), key.serialize_pem()).unwrap();
        dir.join(file)
    }

    fn load(dir: &Path, file: &str, ca: &str) -> Tls {
        let base = dir.join(file);
        Tls::load(
            &base.with_extension("pem"),
            &base.with_extension("key"),
            &dir.join(format!("{ca}.pem")),
        )
        .unwrap()
    }

    /// A connected pair of loopback sockets.
    fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        (c, l.accept().unwrap().0)
    }

    /// Secures both ends of a connection (the client checks `host`): the two plain
    /// sockets, or the errors of each side.
    fn secure_both(
        client: Tls,
        server: Tls,
        host: &'static str,
    ) -> (
        Result<UnixStream, String>,
        Result<UnixStream, String>,
        Relay,
    ) {
        let (c, s) = pair();
        let relay = Arc::new(Relay::new().unwrap());
        let r = Arc::clone(&relay);
        let accepting = std::thread::spawn(move || r.secure(&server, s, Side::Server));
        let connected = relay.secure(&client, c, Side::Client { host });
        let accepted = accepting.join().unwrap();
        let relay = Arc::try_unwrap(relay).ok().unwrap();
        (connected, accepted, relay)
    }

    #[test]
    fn bytes_pass_both_ways_through_mutual_tls_and_the_end_of_stream_too() {
        let dir = tempfile::tempdir().unwrap();
        issue(dir.path(), "ca", &["127.0.0.1", "localhost"], "a");
        let (c, s, _relay) = secure_both(
            load(dir.path(), "a", "ca"),
            load(dir.path(), "a", "ca"),
            "127.0.0.1",
        );
        let (mut c, mut s) = (c.unwrap(), s.unwrap());
        let big: Vec<u8> = (0..1_000_000u32).map(|i| (i % 251) as u8).collect();
        let sent = big.clone();
        let writer = std::thread::spawn(move || {
            c.write_all(&sent).unwrap();
            c.shutdown(std::net::Shutdown::Write).unwrap();
            let mut back = Vec::new();
            c.read_to_end(&mut back).unwrap();
            back
        });
        let mut got = Vec::new();
        s.read_to_end(&mut got).unwrap();
        assert!(got == big, "{} bytes of {}", got.len(), big.len());
        s.write_all(b"done").unwrap();
        s.shutdown(std::net::Shutdown::Write).unwrap();
        assert_eq!(writer.join().unwrap(), b"done");
    }

    #[test]
    fn a_peer_of_another_ca_or_a_certificate_for_another_host_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        issue(dir.path(), "ca", &["127.0.0.1"], "a");
        issue(dir.path(), "other-ca", &["127.0.0.1"], "stranger");
        issue(dir.path(), "ca3", &["db.example"], "elsewhere");
        // A stranger with a certificate of another CA, connecting: both sides refuse.
        let (c, s, _r) = secure_both(
            load(dir.path(), "stranger", "ca"),
            load(dir.path(), "a", "ca"),
            "127.0.0.1",
        );
        let err = s.unwrap_err();
        assert!(
            err.contains("invalid peer certificate: UnknownIssuer"),
            "{err}"
        );
        let err = c.unwrap_err();
        assert!(
            err.starts_with("it did not accept this process's certificate: received fatal alert"),
            "{err}"
        );
        // Accepting: the connecting process refuses it.
        let (c, _s, _r) = secure_both(
            load(dir.path(), "a", "ca"),
            load(dir.path(), "stranger", "ca"),
            "127.0.0.1",
        );
        let err = c.unwrap_err();
        assert!(
            err.contains("invalid peer certificate: UnknownIssuer"),
            "{err}"
        );
        // A certificate the right CA made for another host.
        let (c, _s, _r) = secure_both(
            load(dir.path(), "a", "ca3"),
            load(dir.path(), "elsewhere", "ca3"),
            "127.0.0.1",
        );
        let err = c.unwrap_err();
        assert!(err.contains("certificate not valid for name"), "{err}");
    }

    #[test]
    fn files_that_are_not_what_the_flags_say_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let a = issue(dir.path(), "ca", &["127.0.0.1"], "a");
        issue(dir.path(), "ca2", &["127.0.0.1"], "b");
        let (pem, key, ca) = (
            a.with_extension("pem"),
            a.with_extension("key"),
            dir.path().join("ca.pem"),
        );
        let err = |cert: &Path, key: &Path, ca: &Path| Tls::load(cert, key, ca).unwrap_err();
        let (option, message) = err(&key, &key, &ca);
        assert_eq!(option, format!("--tls-cert {}", key.display()));
        assert!(message.contains("holds no certificate"), "{message}");
        let (option, message) = err(&pem, &pem, &ca);
        assert_eq!(option, format!("--tls-key {}", pem.display()));
        assert!(message.contains("no private key"), "{message}");
        let (option, message) = err(&pem, &dir.path().join("b.key"), &ca);
        assert_eq!(
            option,
            format!("--tls-key {}", dir.path().join("b.key").display())
        );
        assert!(
            message.contains("it is not the key of --tls-cert"),
            "{message}"
        );
        let (option, message) = err(&pem, &key, &dir.path().join("missing.pem"));
        assert_eq!(
            option,
            format!("--tls-ca {}", dir.path().join("missing.pem").display())
        );
        assert!(
            message.contains("cannot read certificates from it"),
            "{message}"
        );
    }

    #[test]
    fn hosts_are_taken_from_addresses() {
        assert_eq!(host_of("10.0.0.2:2101"), "10.0.0.2");
        assert_eq!(host_of("[::1]:2101"), "::1");
        assert_eq!(host_of("node-3.example:9000"), "node-3.example");
    }
}
