//! A cluster across real network namespaces (issue 37): 3 hosts, each a namespace with
//! an address of its own, joined by a bridge; one process of the crash job per host,
//! `--hosts` with the hosts' addresses and the cluster secret, checkpoints in a
//! directory every host sees. A host is lost mid-run (its process killed, its link
//! down): the others stop (timely is fail-stop), and the job restarted on the 2 hosts
//! left resumes from the last checkpoint at 2 processes. The output is the direct
//! runner's, every line exactly once. Where namespaces cannot be made (no
//! privileges), the test says why and skips.

mod common;

use common::netns::Hosts;
use common::*;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

const PORT: u16 = 7000;

/// Starts process `k` of `n` of the crash job on host `k`.
fn start(hosts: &Hosts, run: &Run, k: usize, n: usize, list: &Path, secret: &Path) -> Child {
    hosts
        .command(k, env!("CARGO_BIN_EXE_crash_job"))
        .args(run.args(&[
            "--workers=1",
            &format!("--processes={n}"),
            &format!("--process-id={k}"),
            &format!("--hosts={}", list.display()),
            &format!("--cluster-secret-file={}", secret.display()),
        ]))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// A hosts file in `dir` listing hosts `0..n`.
fn hosts_list(dir: &Path, hosts: &Hosts, n: usize) -> std::path::PathBuf {
    let path = dir.join(format!("hosts-{n}"));
    let text: String = (0..n)
        .map(|k| format!("{}:{PORT}\n", hosts.address(k)))
        .collect();
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn a_cluster_across_namespaces_loses_a_host_and_resumes_on_the_two_left_exactly() {
    let _s = serial();
    let hosts = match Hosts::make(3) {
        Ok(h) => h,
        Err(why) => {
            eprintln!("SKIPPED: network namespaces cannot be made here: {why}");
            return;
        }
    };
    let run = Run::new();
    let dir = tempfile::tempdir().unwrap();
    let secret = secret_file(dir.path(), 0o600);
    let three = hosts_list(dir.path(), &hosts, 3);
    let first: Vec<Child> = (0..3)
        .map(|k| start(&hosts, &run, k, 3, &three, &secret))
        .collect();
    // Lost once the job has a checkpoint and has committed output (about 1 s of 3).
    let started = Instant::now();
    while run.lines().is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the cluster across namespaces wrote nothing"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    hosts.lose(2);
    let lost_at = Instant::now();
    for (k, child) in first.into_iter().enumerate().take(2) {
        let stderr = finish_failing(child, Duration::from_secs(60));
        assert!(
            stderr.is_some(),
            "process {k} did not stop within 60 s of losing host 2"
        );
    }
    let stopped = lost_at.elapsed();
    let partial = run.lines().len();
    assert!(
        partial < reference().len(),
        "the job ended before host 2 was lost"
    );
    // Restarted on the two hosts left: it resumes from the last checkpoint.
    let two = hosts_list(dir.path(), &hosts, 2);
    let second: Vec<Child> = (0..2)
        .map(|k| start(&hosts, &run, k, 2, &two, &secret))
        .collect();
    for (k, child) in second.into_iter().enumerate() {
        finish(child, &format!("process {k} of 2 after the loss"));
    }
    assert_exact(&run, "a cluster across namespaces after losing a host");
    eprintln!(
        "host 2 lost after {partial} lines; the others stopped {:.1} s later; resumed on 2 hosts, exact",
        stopped.as_secs_f64()
    );
}

/// Waits for `child`, which is to fail (at most `limit`): its stderr, or `None` if it
/// did not end (it is killed then).
fn finish_failing(mut child: Child, limit: Duration) -> Option<String> {
    let started = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            let out = child.wait_with_output().unwrap();
            return Some(String::from_utf8_lossy(&out.stderr).into_owned());
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
