//! A cluster only its own processes can join (issue 34): a `--hosts` job of two
//! processes with a secret, while strangers connect to process 0 first — one claims
//! to be process 1 the old way (its index as 8 bytes), one sends garbage, one stays
//! silent — writes exactly the direct runner's output. Before, the first stranger was
//! taken as process 1 and sent the job's data, garbage failed the job at once, and a
//! silent connection stalled it for 10 s and then failed it. The same at a local
//! cluster's start and during its restart. A cluster on a routable address without a
//! secret is refused, and so is a secret file others can read.

mod common;

use common::*;
use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

#[test]
fn strangers_cannot_join_or_stop_a_hosts_cluster() {
    let _s = serial();
    on_each_runner(|runner| {
        let run = Run::on(runner);
        let dir = tempfile::tempdir().unwrap();
        let (ports, hosts) = hosts_file(dir.path(), 2);
        let secret = secret_file(dir.path(), 0o600);
        let process = |i: usize| {
            run.command(&[
                "--processes=2",
                &format!("--process-id={i}"),
                &format!("--hosts={}", hosts.display()),
                &format!("--cluster-secret-file={}", secret.display()),
            ])
            .spawn()
            .unwrap()
        };
        let first = process(0);
        // Strangers get in before process 1.
        let _strangers = strangers(&format!("127.0.0.1:{}", ports[0]));
        std::thread::sleep(Duration::from_millis(200));
        let second = process(1);
        let what = format!("{runner}: a --hosts cluster with strangers");
        let err0 = finish(first, &what);
        finish(second, &what);
        assert!(
            err0.matches("dropped a connection from 127.0.0.1:").count() >= 2,
            "{what}: the strangers were not reported:\n{err0}"
        );
        assert_exact(&run, &what);
    });
}

#[test]
fn a_cluster_across_hosts_needs_a_private_secret() {
    let run = Run::on("native");
    let dir = tempfile::tempdir().unwrap();
    let hosts = dir.path().join("hosts");
    std::fs::write(&hosts, "10.11.12.13:2101\n10.11.12.14:2101\n").unwrap();
    let err = refused(
        run.command(&[
            "--processes=2",
            "--process-id=0",
            &format!("--hosts={}", hosts.display()),
        ]),
        "no secret",
    );
    assert!(
        err.contains("10.11.12.13:2101 is not on loopback")
            && err.contains("--cluster-secret-file"),
        "{err}"
    );
    let readable = secret_file(dir.path(), 0o644);
    let err = refused(
        run.command(&[
            "--processes=2",
            "--process-id=0",
            &format!("--hosts={}", hosts.display()),
            &format!("--cluster-secret-file={}", readable.display()),
        ]),
        "a readable secret",
    );
    assert!(
        err.contains("readable by its owner only")
            || err.contains("only its owner can read (mode 644)"),
        "{err}"
    );
}

/// A savepoint directory that cannot be made is refused at the start, naming it, on
/// a single process and a local cluster alike (before, the job ran to its end and then
/// failed with "checkpoint cannot be restored").
#[test]
fn a_savepoint_directory_that_cannot_be_made_is_refused_at_the_start() {
    let run = Run::on("native");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, "").unwrap();
    let savepoints = format!("--savepoint-dir={}", file.join("sp").display());
    for extra in [vec![], vec!["--local-cluster=2"]] {
        let started = Instant::now();
        let mut args = vec![savepoints.as_str()];
        args.extend(extra.iter().copied());
        let err = refused(run.command(&args), "an impossible savepoint dir");
        assert!(
            err.contains(&format!(
                "invalid option --savepoint-dir {}: cannot create it: Not a directory",
                file.join("sp").display()
            )),
            "{err}"
        );
        assert!(started.elapsed() < Duration::from_secs(2), "{err}");
        assert!(run.lines().is_empty(), "the job ran");
    }
}

/// [`strangers`] at process 0 of the cluster attempt whose processes are `pids` (its
/// port from the hosts file its command line names).
fn strangers_at(pids: &[i32]) -> Vec<TcpStream> {
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", pids[0])).unwrap();
    let hosts = cmdline
        .split(|b| *b == 0)
        .filter_map(|a| std::str::from_utf8(a).ok())
        .find_map(|a| a.strip_prefix("--hosts="))
        .expect("a cluster process has a hosts file")
        .to_string();
    let text = std::fs::read_to_string(&hosts).unwrap();
    strangers(text.lines().next().unwrap())
}

/// Connects strangers to the process listening at `to`: one claiming to be process 1
/// the old way (its index as 8 bytes), one sending garbage, one silent. They are kept
/// open until returned.
fn strangers(to: &str) -> Vec<TcpStream> {
    let started = Instant::now();
    let reach = || loop {
        if let Ok(s) = TcpStream::connect(to) {
            return s;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "process 0 never listened"
        );
        std::thread::sleep(Duration::from_millis(5));
    };
    let mut claims = reach();
    claims.write_all(&1u64.to_be_bytes()).unwrap();
    let mut garbage = reach();
    garbage.write_all(b"\x00\x01garbage\xff").unwrap();
    vec![claims, garbage, reach()]
}

/// Strangers reach process 0 of a local cluster first, at its start and again during
/// a restart after a process was killed (process 1 is held back 1.5 s each time): the
/// job goes on and its output is exact. Before, 8 garbage bytes failed the job at once
/// and a probe of one cluster ended others on the same machine.
#[test]
fn strangers_during_a_local_clusters_start_and_restart_do_not_stop_it() {
    let _s = serial();
    on_each_runner(|runner| {
        let mut run = Run::on(runner);
        run.records = 50_000;
        let supervisor = run
            .command(&["--local-cluster=2"])
            .env("TIDEWATER_DELAY", "connect:1500")
            .spawn()
            .unwrap();
        let wait_for_pids = |not: &[i32]| {
            let started = Instant::now();
            loop {
                let pids = run.pids();
                if pids.len() == 2 && pids != not {
                    return pids;
                }
                assert!(
                    started.elapsed() < Duration::from_secs(30),
                    "no cluster started"
                );
                std::thread::sleep(Duration::from_millis(5));
            }
        };
        let first = wait_for_pids(&[]);
        let _at_start = strangers_at(&first);
        // Once the job runs (and has checkpointed), a process dies: the restart meets
        // strangers too.
        std::thread::sleep(Duration::from_millis(3_000));
        signal(first[1], "-KILL");
        let second = wait_for_pids(&first);
        let _at_restart = strangers_at(&second);
        let what = format!("{runner}: strangers at a local cluster's start and restart");
        let err = finish(supervisor, &what);
        assert!(
            err.contains("restarting all 2 processes")
                && err.matches("dropped a connection from 127.0.0.1:").count() >= 4,
            "{what}:\n{err}"
        );
        let (got, want) = (run.lines(), reference_of(run.records));
        assert!(got == want, "{what}: {}", difference(&got, &want));
    });
}
