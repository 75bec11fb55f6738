//! TLS between a `--hosts` cluster's processes, and frames checked before timely reads
//! them (issue 34):
//!
//! - a 2-process `--hosts` job on loopback with the secret and mutual TLS writes exactly
//!   the direct runner's output, on both engine runners;
//! - a process whose certificate another CA signed is refused, the error naming TLS,
//!   the peer and why;
//! - a peer that holds the secret but sends a frame for workers that are not the
//!   receiver's fails the job with an error naming the peer and the field (before:
//!   an index out of bounds in timely's receive thread).

mod common;

use common::*;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use std::io::Write;
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};
use tidewater_runners_timely::handshake::{self, Secret};

/// A CA in `dir` (`CA.pem`), and for each name in `processes` a certificate it signed
/// for 127.0.0.1 (`NAME.pem`, `NAME.key`).
fn certificates(dir: &Path, ca_name: &str, processes: &[&str]) {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name.push(DnType::CommonName, ca_name);
    std::fs::write(
        dir.join(format!("{ca_name}.pem")),
        ca.self_signed(&ca_key).unwrap().pem(),
    )
    .unwrap();
    let issuer = Issuer::new(ca, ca_key);
    for name in processes {
        let key = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(vec!["127.0.0.1".to_string()])
            .unwrap()
            .signed_by(&key, &issuer)
            .unwrap();
        std::fs::write(dir.join(format!("{name}.pem")), cert.pem()).unwrap();
        std::fs::write(dir.join(format!("{name}.key")), key.serialize_pem()).unwrap();
    }
}

fn tls_flags(dir: &Path, name: &str, ca: &str) -> [String; 3] {
    [
        format!("--tls-cert={}", dir.join(format!("{name}.pem")).display()),
        format!("--tls-key={}", dir.join(format!("{name}.key")).display()),
        format!("--tls-ca={}", dir.join(format!("{ca}.pem")).display()),
    ]
}

/// The flags of process `i` of a 2-process `--hosts` cluster.
fn cluster_flags(i: usize, hosts: &Path, secret: &Path) -> [String; 4] {
    [
        "--processes=2".into(),
        format!("--process-id={i}"),
        format!("--hosts={}", hosts.display()),
        format!("--cluster-secret-file={}", secret.display()),
    ]
}

fn args(parts: &[&[String]]) -> Vec<String> {
    parts.iter().flat_map(|p| p.iter().cloned()).collect()
}

fn start(run: &Run, args: &[String]) -> std::process::Child {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    run.command(&args).spawn().unwrap()
}

#[test]
fn a_hosts_cluster_with_the_secret_and_tls_writes_the_direct_runners_output() {
    let _s = serial();
    for runner in RUNNERS {
        let run = Run::on(runner);
        let dir = tempfile::tempdir().unwrap();
        certificates(dir.path(), "ca", &["p0", "p1"]);
        let (_, hosts) = hosts_file(dir.path(), 2);
        let secret = secret_file(dir.path(), 0o600);
        let processes: Vec<_> = (0..2)
            .map(|i| {
                let flags = args(&[
                    &cluster_flags(i, &hosts, &secret),
                    &tls_flags(dir.path(), &format!("p{i}"), "ca"),
                ]);
                start(&run, &flags)
            })
            .collect();
        let what = format!("{runner}: a --hosts cluster with TLS");
        for p in processes {
            finish(p, &what);
        }
        assert_exact(&run, &what);
    }
}

#[test]
fn a_process_whose_certificate_another_ca_signed_is_refused() {
    let _s = serial();
    let run = Run::on("native");
    let dir = tempfile::tempdir().unwrap();
    certificates(dir.path(), "ca", &["p0"]);
    certificates(dir.path(), "other-ca", &["stranger"]);
    let (_, hosts) = hosts_file(dir.path(), 2);
    let secret = secret_file(dir.path(), 0o600);
    let first = start(
        &run,
        &args(&[
            &cluster_flags(0, &hosts, &secret),
            &tls_flags(dir.path(), "p0", "ca"),
        ]),
    );
    let second = start(
        &run,
        &args(&[
            &cluster_flags(1, &hosts, &secret),
            &tls_flags(dir.path(), "stranger", "ca"),
        ]),
    );
    let out = |child: std::process::Child| {
        let out = child.wait_with_output().unwrap();
        assert!(
            !out.status.success(),
            "a process with a stranger's certificate ran"
        );
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let (err0, err1) = (out(first), out(second));
    assert!(
        err0.contains("cluster: process 0: TLS with process 1 at 127.0.0.1:")
            && err0.contains("invalid peer certificate: UnknownIssuer"),
        "{err0}"
    );
    assert!(
        err1.contains("process 1: TLS with process 0 at 127.0.0.1:")
            && err1.contains("it did not accept this process's certificate: received fatal alert"),
        "{err1}"
    );
    assert!(run.lines().is_empty(), "the job wrote output");
}

/// A crafted peer: passes the handshake as process 1 (it holds the secret), then
/// sends one frame addressed to worker 99.
#[test]
fn a_malformed_frame_from_a_peer_fails_the_job_naming_it() {
    let _s = serial();
    let run = Run::on("native");
    let dir = tempfile::tempdir().unwrap();
    let (ports, hosts) = hosts_file(dir.path(), 2);
    let secret_path = secret_file(dir.path(), 0o600);
    let secret = Secret::parse(&std::fs::read_to_string(&secret_path).unwrap()).unwrap();
    let process0 = start(&run, &cluster_flags(0, &hosts, &secret_path));
    let mut peer = reach(&format!("127.0.0.1:{}", ports[0]));
    handshake::connect(&mut peer, &secret, 1, 0).unwrap();
    let header: Vec<u8> = [0u64, 1, 99, 100, 8, 0]
        .iter()
        .flat_map(|f| f.to_be_bytes())
        .collect();
    peer.write_all(&header).unwrap();
    peer.write_all(&[0; 8]).unwrap();
    let started = Instant::now();
    let out = process0.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the job ran on:\n{err}");
    assert!(
        err.contains("process 1 sent a malformed frame: a frame's target workers are 99..100, not a range of this process's workers 0..1; its connection is closed"),
        "{err}"
    );
    assert!(
        err.contains("Error: cluster: process 0 lost a peer: timely communication error: reading data: process 1 sent a malformed frame"),
        "{err}"
    );
    assert!(
        !err.contains("index out of bounds") && !err.contains("panicked at"),
        "{err}"
    );
    assert!(started.elapsed() < Duration::from_secs(30));
    drop(peer);
}

/// A connection to `address`, retried while nothing listens there yet.
fn reach(address: &str) -> TcpStream {
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        match TcpStream::connect(address) {
            Ok(s) => return s,
            Err(_) if Instant::now() < until => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => panic!("nothing listens at {address}: {e}"),
        }
    }
}
