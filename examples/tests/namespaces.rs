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

/// The records of the coordinated run: enough for a loss, a rescale down and one up.
const COORDINATED_RECORDS: u64 = 60_000;

/// A job coordinated across namespaces (issue 37): hosts 0-2 run agents, host 3 the
/// coordinator and an S3 server (moto, `.ci/s3-server`, on host 3's address) that holds
/// the checkpoints. Host 2 is lost mid-run: the coordinator restarts the job on the two
/// hosts left (`--min-hosts 2`) from the last checkpoint; host 2 comes back and its new
/// agent registers: the job is restarted on all three. Every line exactly once.
#[test]
fn a_coordinated_job_loses_a_host_goes_on_with_two_and_takes_it_back_exactly() {
    let _s = serial();
    let hosts = match Hosts::make(4) {
        Ok(h) => h,
        Err(why) => {
            eprintln!("SKIPPED: network namespaces cannot be made here: {why}");
            return;
        }
    };
    let want = reference_of(COORDINATED_RECORDS);
    let control = hosts.address(3);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../.ci/s3-server");
    let mut s3 = hosts
        .command(3, script.to_str().unwrap())
        .arg("9000")
        .env("TIDEWATER_S3_HOST", &control)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let endpoint = format!("http://{control}:9000");
    let bucket = format!(
        "import time, urllib.request as u\nfor _ in range(1200):\n    try:\n        u.urlopen(u.Request('{endpoint}/coordinated', method='PUT')); break\n    except Exception: time.sleep(0.1)\nelse: raise SystemExit('no S3 server')"
    );
    let made = hosts
        .command(3, "python3")
        .args(["-c", &bucket])
        .status()
        .unwrap();
    assert!(made.success(), "the S3 server on host 3 did not start");
    let mut run = Run::new();
    run.records = COORDINATED_RECORDS;
    run.ckpt = "s3://coordinated/checkpoints".into();
    run.env = vec![
        ("AWS_ENDPOINT", endpoint.clone()),
        ("AWS_ALLOW_HTTP", "true".into()),
        ("AWS_ACCESS_KEY_ID", "testing".into()),
        ("AWS_SECRET_ACCESS_KEY", "testing".into()),
        ("AWS_REGION", "us-east-1".into()),
    ];
    let dir = tempfile::tempdir().unwrap();
    let secret = secret_file(dir.path(), 0o600);
    let coordinator = format!("{control}:7100");
    let secret_flag = format!("--cluster-secret-file={}", secret.display());
    let job = |k: usize, role: &[&str]| -> Child {
        let mut args = vec!["--workers=1", secret_flag.as_str()];
        args.extend_from_slice(role);
        hosts
            .command(k, env!("CARGO_BIN_EXE_crash_job"))
            .args(run.args(&args))
            .envs(run.env.iter().map(|(k, v)| (*k, v.as_str())))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let mut coordinating = job(
        3,
        &[
            &format!("--coordinate={coordinator}"),
            "--expect-hosts=3",
            "--min-hosts=2",
        ],
    );
    let said = stderr_lines(&mut coordinating);
    let agent = |k: usize| job(k, &[&format!("--coordinator={coordinator}")]);
    let mut agents: Vec<Child> = (0..3).map(agent).collect();
    let mut log = Vec::new();
    let wait_for = |what: &str, log: &mut Vec<String>| {
        let started = Instant::now();
        loop {
            match said.recv_timeout(Duration::from_millis(100)) {
                Ok(line) => {
                    let found = line.contains(what);
                    log.push(line);
                    if found {
                        return;
                    }
                }
                Err(_) => assert!(
                    started.elapsed() < Duration::from_secs(90),
                    "the coordinator did not say '{what}' within 90 s:\n{}",
                    log.join("\n")
                ),
            }
        }
    };
    wait_for("on 3 host(s)", &mut log);
    let started = Instant::now();
    while run.lines().is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the coordinated job wrote nothing"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    hosts.lose(2);
    let lost_at = Instant::now();
    let _ = agents[2].wait();
    wait_for("on 2 host(s)", &mut log);
    let down = lost_at.elapsed();
    assert!(
        run.lines().len() < want.len(),
        "the job ended before it went on with 2 hosts: give it more records"
    );
    hosts.returns(2);
    agents[2] = agent(2);
    wait_for("on 3 host(s)", &mut log);
    let status = coordinating.wait().unwrap();
    while let Ok(line) = said.recv_timeout(Duration::from_millis(200)) {
        log.push(line);
    }
    assert!(
        status.success(),
        "the coordinator failed:\n{}",
        log.join("\n")
    );
    for (k, a) in agents.into_iter().enumerate() {
        finish(a, &format!("the agent on host {k}"));
    }
    let got = run.lines();
    assert!(
        got == want,
        "a coordinated job that lost a host and took it back: {}\n{}",
        difference(&got, &want),
        log.join("\n")
    );
    let _ = s3.kill();
    let _ = s3.wait();
    eprintln!(
        "host 2 lost; the job went on with 2 hosts {:.1} s later, took host 2 back, exact",
        down.as_secs_f64()
    );
}
