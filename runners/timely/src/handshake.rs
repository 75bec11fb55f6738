//! Who may join a cluster: every process proves it holds the job's secret before
//! timely sees its socket (as Spark's `spark.authenticate` does), with a
//! challenge-response over nonces from both sides (HMAC-SHA256):
//!
//! 1. the connecting process sends `TWC1`, its index (big-endian `u64`) and a nonce;
//! 2. the accepting process answers `TWA1`, its own index, its nonce, and the MAC of
//!    (`accept`, both indices, both nonces) under the secret: the connecting process
//!    checks it, so it never hands its socket to a process without the secret;
//! 3. the connecting process sends the MAC of (`connect`, both indices, both nonces),
//!    which the accepting process checks before the socket is its peer's.
//!
//! The nonces make every answer fresh: a recorded exchange cannot be replayed. Without
//! a secret (a `--processes` cluster on loopback that was given none) the key is empty:
//! the exchange still sorts out strangers that speak something else, but anyone can
//! complete it. A local cluster's supervisor makes a fresh secret per job; a `--hosts`
//! cluster on a routable address is refused without one (`launch.rs`).

use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// The environment variable a local cluster's supervisor hands the job's secret to its
/// processes in (hex), and where a `--hosts` process may take it from too.
pub const SECRET_ENV: &str = "TIDEWATER_CLUSTER_SECRET";

/// How long each step of the exchange may take: a silent stranger is dropped after it.
pub const STEP_TIMEOUT: Duration = Duration::from_secs(2);

const CONNECT_MAGIC: &[u8; 4] = b"TWC1";
const ACCEPT_MAGIC: &[u8; 4] = b"TWA1";
const NONCE: usize = 32;
const MAC: usize = 32;

/// A job's secret: the key of the exchange.
#[derive(Clone)]
pub struct Secret(Vec<u8>);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_empty() {
            "Secret(none)"
        } else {
            "Secret(..)"
        })
    }
}

impl Secret {
    /// No secret: the exchange authenticates nothing (loopback clusters given none).
    pub fn none() -> Secret {
        Secret(Vec::new())
    }

    /// 32 fresh random bytes (a local cluster's, per job).
    pub fn fresh() -> io::Result<Secret> {
        Ok(Secret(random::<32>()?.to_vec()))
    }

    /// Whether it is a real secret.
    pub fn is_set(&self) -> bool {
        !self.0.is_empty()
    }

    /// The secret written as hex (for [`SECRET_ENV`]).
    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// A secret given as text: hex of at least 16 bytes, or any text of at least 16
    /// bytes (a passphrase), taken as it is.
    pub fn parse(text: &str) -> Result<Secret, String> {
        let text = text.trim();
        if text.len() < 16 {
            return Err(format!(
                "the cluster secret is {} bytes: at least 16 are needed (e.g. 32 random bytes as hex: `openssl rand -hex 32`)",
                text.len()
            ));
        }
        let hex = text.len().is_multiple_of(2) && text.bytes().all(|b| b.is_ascii_hexdigit());
        if hex {
            let bytes = (0..text.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("hex digits"))
                .collect();
            return Ok(Secret(bytes));
        }
        Ok(Secret(text.as_bytes().to_vec()))
    }

    fn mac(&self, label: &[u8], parts: &[&[u8]]) -> Hmac<Sha256> {
        let mut m = <Hmac<Sha256> as Mac>::new_from_slice(&self.0).expect("HMAC takes any key");
        m.update(label);
        for p in parts {
            m.update(p);
        }
        m
    }
}

/// `N` random bytes from the kernel.
fn random<const N: usize>() -> io::Result<[u8; N]> {
    let mut b = [0u8; N];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut b)?;
    Ok(b)
}

/// Why an exchange failed.
#[derive(Debug)]
pub enum Refused {
    /// The peer went away, stayed silent past [`STEP_TIMEOUT`], or sent too little.
    Io(io::Error),
    /// The peer does not speak the exchange (another program, garbage).
    NotTidewater,
    /// The peer's MAC is wrong: it does not hold the job's secret.
    WrongSecret,
    /// The peer claims an index that is not one this process accepts.
    BadIndex(u64),
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::Io(e) => write!(f, "{e}"),
            Refused::NotTidewater => f.write_str("it does not speak Tidewater's handshake"),
            Refused::WrongSecret => f.write_str("it does not hold the job's secret"),
            Refused::BadIndex(i) => write!(f, "it claims to be process {i}"),
        }
    }
}

impl From<io::Error> for Refused {
    fn from(e: io::Error) -> Self {
        Refused::Io(e)
    }
}

fn steps(stream: &TcpStream) -> io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(STEP_TIMEOUT))?;
    stream.set_write_timeout(Some(STEP_TIMEOUT))
}

/// The handshake is done: the stream carries the job's traffic from now on, without
/// timeouts of its own, but with the kernel watching the peer ([`watch_peer`]).
fn done(stream: &TcpStream) -> io::Result<()> {
    stream.set_read_timeout(None)?;
    stream.set_write_timeout(None)?;
    watch_peer(stream)
}

/// How long a peer may stay silent (no ACK of sent data, no answer to keepalive probes)
/// before its connection fails.
pub const PEER_SILENCE: std::time::Duration = std::time::Duration::from_secs(10);

/// A peer whose host is lost without a word (its link down: no FIN, no RST) fails the
/// connection within about [`PEER_SILENCE`], so the job fails (timely is fail-stop) and
/// is restarted from its last checkpoint, instead of waiting for the kernel's default
/// retries (some 15 minutes of unacknowledged data; never, for an idle connection):
/// keepalive probes on an idle connection (after 5 s, then every second, 5 unanswered
/// fail it), and TCP_USER_TIMEOUT on sent data. Both are the kernel's: a peer whose
/// process is merely busy still answers them.
fn watch_peer(stream: &TcpStream) -> io::Result<()> {
    let socket = socket2::SockRef::from(stream);
    socket.set_tcp_keepalive(
        &socket2::TcpKeepalive::new()
            .with_time(PEER_SILENCE / 2)
            .with_interval(std::time::Duration::from_secs(1))
            .with_retries(5),
    )?;
    socket.set_tcp_user_timeout(Some(PEER_SILENCE))
}

/// The connecting side: process `me` proves itself to process `peer` and checks that
/// `peer` holds the secret too.
pub fn connect(stream: &mut TcpStream, secret: &Secret, me: u64, peer: u64) -> Result<(), Refused> {
    steps(stream)?;
    let nonce_c = random::<NONCE>()?;
    let mut hello = Vec::with_capacity(4 + 8 + NONCE);
    hello.extend_from_slice(CONNECT_MAGIC);
    hello.extend_from_slice(&me.to_be_bytes());
    hello.extend_from_slice(&nonce_c);
    stream.write_all(&hello)?;
    let mut answer = [0u8; 4 + 8 + NONCE + MAC];
    stream.read_exact(&mut answer)?;
    if &answer[..4] != ACCEPT_MAGIC {
        return Err(Refused::NotTidewater);
    }
    let index = u64::from_be_bytes(answer[4..12].try_into().expect("8 bytes"));
    if index != peer {
        return Err(Refused::BadIndex(index));
    }
    let nonce_a = &answer[12..12 + NONCE];
    secret
        .mac(
            b"accept",
            &[&peer.to_be_bytes(), &me.to_be_bytes(), &nonce_c, nonce_a],
        )
        .verify_slice(&answer[12 + NONCE..])
        .map_err(|_| Refused::WrongSecret)?;
    let proof = secret
        .mac(
            b"connect",
            &[&me.to_be_bytes(), &peer.to_be_bytes(), nonce_a, &nonce_c],
        )
        .finalize()
        .into_bytes();
    stream.write_all(&proof)?;
    done(stream)?;
    Ok(())
}

/// The accepting side, process `me`: reads who connects, answers, and checks the
/// connecting process's proof. `wanted` says whether an index is one `me` accepts (a
/// process above it whose slot is free). The connecting process's index.
pub fn accept(
    stream: &mut TcpStream,
    secret: &Secret,
    me: u64,
    wanted: impl Fn(u64) -> bool,
) -> Result<u64, Refused> {
    steps(stream)?;
    let mut hello = [0u8; 4 + 8 + NONCE];
    stream.read_exact(&mut hello)?;
    if &hello[..4] != CONNECT_MAGIC {
        return Err(Refused::NotTidewater);
    }
    let index = u64::from_be_bytes(hello[4..12].try_into().expect("8 bytes"));
    if !wanted(index) {
        return Err(Refused::BadIndex(index));
    }
    let nonce_c = &hello[12..];
    let nonce_a = random::<NONCE>()?;
    let mac = secret
        .mac(
            b"accept",
            &[&me.to_be_bytes(), &index.to_be_bytes(), nonce_c, &nonce_a],
        )
        .finalize()
        .into_bytes();
    let mut answer = Vec::with_capacity(4 + 8 + NONCE + MAC);
    answer.extend_from_slice(ACCEPT_MAGIC);
    answer.extend_from_slice(&me.to_be_bytes());
    answer.extend_from_slice(&nonce_a);
    answer.extend_from_slice(&mac);
    stream.write_all(&answer)?;
    let mut proof = [0u8; MAC];
    stream.read_exact(&mut proof)?;
    secret
        .mac(
            b"connect",
            &[&index.to_be_bytes(), &me.to_be_bytes(), &nonce_a, nonce_c],
        )
        .verify_slice(&proof)
        .map_err(|_| Refused::WrongSecret)?;
    done(stream)?;
    Ok(index)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::net::{Shutdown, TcpListener};

    fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (b, _) = l.accept().unwrap();
        (a, b)
    }

    fn secret() -> Secret {
        Secret::parse("00112233445566778899aabbccddeeff").unwrap()
    }

    #[test]
    fn two_holders_of_the_secret_pass_and_a_third_does_not() {
        let (mut a, mut b) = pair();
        let t = std::thread::spawn(move || connect(&mut a, &secret(), 3, 1));
        assert_eq!(accept(&mut b, &secret(), 1, |i| i == 3).unwrap(), 3);
        t.join().unwrap().unwrap();
        let (mut a, mut b) = pair();
        let other = Secret::parse("a passphrase of some length").unwrap();
        let t = std::thread::spawn(move || connect(&mut a, &other, 3, 1));
        assert!(accept(&mut b, &secret(), 1, |i| i == 3).is_err());
        assert_eq!(
            t.join().unwrap().unwrap_err().to_string(),
            "it does not hold the job's secret"
        );
    }

    #[test]
    fn secrets_are_at_least_sixteen_bytes() {
        assert!(Secret::parse("short").is_err());
        assert_eq!(Secret::parse(&"ab".repeat(16)).unwrap().0, vec![0xab; 16]);
        assert_eq!(Secret::fresh().unwrap().to_hex().len(), 64);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(tidewater::fuzz::cases(64)))]

        /// Fuzz target (`tidewater::fuzz`): whatever a stranger sends (then closing its
        /// side), both ends refuse it without a panic, and neither waits for the step
        /// timeout.
        #[test]
        fn fuzz_handshake_random_bytes_are_refused_on_both_sides(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let (mut stranger, mut acceptor) = pair();
            stranger.write_all(&bytes).unwrap();
            stranger.shutdown(Shutdown::Write).unwrap();
            let started = std::time::Instant::now();
            prop_assert!(accept(&mut acceptor, &secret(), 0, |i| i == 1).is_err());
            prop_assert!(started.elapsed() < STEP_TIMEOUT);
            let (mut connector, mut server) = pair();
            server.write_all(&bytes).unwrap();
            server.shutdown(Shutdown::Write).unwrap();
            prop_assert!(connect(&mut connector, &secret(), 1, 0).is_err());
        }
    }
}
