//! Jobs run by a coordinator across network namespaces (issue 37; `common::coordinated`):
//! agents on 2 or 3 hosts, the coordinator and an S3 server holding the checkpoints on a
//! control host. A host lost and taken back; processes and hosts killed at random; a
//! savepoint of 3 hosts restored into 1 process and into a local cluster. Every output
//! line is compared with the direct runner's. Where namespaces cannot be made (no
//! privileges), each test says why and skips.

mod common;

use common::coordinated::Coordinated;
use common::netns::Hosts;
use common::*;
use std::process::Child;
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

fn hosts(n: usize) -> Option<Hosts> {
    match Hosts::make(n) {
        Ok(h) => Some(h),
        Err(why) => {
            eprintln!("SKIPPED: network namespaces cannot be made here: {why}");
            None
        }
    }
}

/// The coordinator's log lines, read as it runs.
struct Log {
    lines: Receiver<String>,
    seen: Vec<String>,
}

impl Log {
    fn of(child: &mut Child) -> Log {
        Log {
            lines: stderr_lines(child),
            seen: Vec::new(),
        }
    }

    /// Waits (at most 90 s) for a line holding `what`.
    fn wait_for(&mut self, what: &str) {
        let started = Instant::now();
        loop {
            match self.lines.recv_timeout(Duration::from_millis(100)) {
                Ok(line) => {
                    let found = line.contains(what);
                    self.seen.push(line);
                    if found {
                        return;
                    }
                }
                Err(_) => assert!(
                    started.elapsed() < Duration::from_secs(90),
                    "the coordinator did not say '{what}' within 90 s:\n{}",
                    self.seen.join("\n")
                ),
            }
        }
    }

    /// Everything it said, once it has ended.
    fn all(mut self) -> String {
        while let Ok(line) = self.lines.recv_timeout(Duration::from_millis(200)) {
            self.seen.push(line);
        }
        self.seen.join("\n")
    }
}

/// Waits until the run has committed output.
fn until_output(run: &Run) {
    let started = Instant::now();
    while run.lines().is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the coordinated job wrote nothing"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The coordinator ends cleanly, then every agent; the output is `want`.
fn finish_all(
    c: &Coordinated,
    coordinator: Child,
    log: Log,
    agents: Vec<Child>,
    want: &[String],
    what: &str,
) {
    let mut coordinator = coordinator;
    let status = coordinator.wait().unwrap();
    let log = log.all();
    assert!(status.success(), "{what}: the coordinator failed:\n{log}");
    for (k, a) in agents.into_iter().enumerate() {
        finish(a, &format!("{what}: the agent on host {k}"));
    }
    let got = c.run.lines();
    assert!(got == want, "{what}: {}\n{log}", difference(&got, want));
}

/// Host 2 of 3 is lost mid-run: the coordinator restarts the job on the two hosts left
/// (`--min-hosts 2`) from the last checkpoint; host 2 comes back and its new agent
/// registers: the job is restarted on all three. Every line exactly once. The time
/// from the loss to the first output committed after it is the recovery time.
#[test]
fn a_coordinated_job_loses_a_host_goes_on_with_two_and_takes_it_back_exactly() {
    let _s = serial();
    let Some(hosts) = hosts(4) else { return };
    const RECORDS: u64 = 60_000;
    let want = reference_of(RECORDS);
    let c = Coordinated::new(&hosts, 3, RECORDS);
    let mut coordinator = c.coordinator(3, 2, &[]);
    let mut log = Log::of(&mut coordinator);
    let mut agents: Vec<Child> = (0..3).map(|k| c.agent(k, &[])).collect();
    log.wait_for("on 3 host(s)");
    until_output(&c.run);
    hosts.lose(2);
    let lost_at = Instant::now();
    let before = c.run.lines().len();
    let _ = agents[2].wait();
    log.wait_for("on 2 host(s)");
    let restarted = lost_at.elapsed();
    while c.run.lines().len() == before {
        assert!(
            lost_at.elapsed() < Duration::from_secs(60),
            "no output after the loss"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let committed = lost_at.elapsed();
    assert!(
        c.run.lines().len() < want.len(),
        "the job ended before it went on with 2 hosts: give it more records"
    );
    hosts.returns(2);
    agents[2] = c.agent(2, &[]);
    log.wait_for("on 3 host(s)");
    finish_all(
        &c,
        coordinator,
        log,
        agents,
        &want,
        "a host lost and taken back",
    );
    eprintln!(
        "host 2 lost: the job restarted on 2 hosts {:.1} s later and committed again {:.1} s after the loss; host 2 taken back; exact",
        restarted.as_secs_f64(),
        committed.as_secs_f64()
    );
}

/// Kills at random in jobs of 2 and 3 hosts with checkpoints on S3: mostly a host's job
/// process (SIGKILL), sometimes the whole host (link down, its agent and process
/// killed; it comes back a second later with a new agent). Each kill waits for the
/// restart it causes. `TIDEWATER_HOST_KILLS=N`: N kills in a job of 2 hosts, then in
/// one of 3 (the trial: 25 each); by default 3 kills in one of the two, drawn.
#[test]
fn random_kills_in_coordinated_jobs_of_two_and_three_hosts_leave_every_line_exactly_once() {
    let _s = serial();
    let asked: Option<usize> = std::env::var("TIDEWATER_HOST_KILLS")
        .ok()
        .and_then(|s| s.parse().ok());
    let kills = asked.unwrap_or(3);
    let (mut rng, seed) = Rng::new();
    // Both sizes when asked for a number of kills; one, drawn, in a plain test run.
    let sizes = match asked {
        Some(_) => vec![2usize, 3],
        None => vec![2 + rng.below(2) as usize],
    };
    for n in sizes {
        let Some(hosts) = hosts(n + 1) else { return };
        // Some 3 s of input a kill, so that the job outlasts them.
        let records = 30_000 + 30_000 * kills as u64;
        let want = reference_of(records);
        let c = Coordinated::new(&hosts, n, records);
        let mut coordinator = c.coordinator(n, 1, &[]);
        let mut log = Log::of(&mut coordinator);
        let mut agents: Vec<Child> = (0..n).map(|k| c.agent(k, &[])).collect();
        log.wait_for(&format!("on {n} host(s)"));
        let (mut processes, mut whole) = (0, 0);
        while processes + whole < kills {
            std::thread::sleep(Duration::from_millis(300 + rng.below(1_200)));
            if coordinator.try_wait().unwrap().is_some() {
                break;
            }
            let k = rng.below(n as u64) as usize;
            if rng.below(5) == 0 {
                hosts.lose(k);
                let _ = agents[k].wait();
                // Lost while an attempt runs, it restarts the job; lost while one
                // starts (during a restart's delay), the attempt starts without it.
                log.wait_for(&format!("host {} is lost", hosts.address(k)));
                std::thread::sleep(Duration::from_millis(1_000));
                hosts.returns(k);
                agents[k] = c.agent(k, &[]);
                log.wait_for(&format!("on {n} host(s)"));
                whole += 1;
            } else if let Some(pid) = c.job_pid(k) {
                signal(pid, "-KILL");
                log.wait_for("restarting all");
                processes += 1;
            }
        }
        assert_eq!(
            processes + whole,
            kills,
            "{n} hosts, seed {seed}: the job ended before every kill"
        );
        finish_all(
            &c,
            coordinator,
            log,
            agents,
            &want,
            &format!("{n} hosts, seed {seed}"),
        );
        eprintln!(
            "{n} hosts (seed {seed}): {processes} processes and {whole} hosts killed, every line exactly once"
        );
    }
}

/// A job of 3 hosts stopped after 1 s with a savepoint kept on S3: the savepoint
/// restores into one process on one host, and into a local cluster of 2 on another;
/// each run's output, with the stopped job's, is the direct runner's.
#[test]
fn a_savepoint_of_three_hosts_on_s3_restores_into_one_process_and_into_a_local_cluster() {
    let _s = serial();
    let Some(hosts) = hosts(4) else { return };
    let c = Coordinated::new(&hosts, 3, RECORDS);
    c.bucket("savepoints");
    let stop = ["--max-duration=1s", "--savepoint-dir=s3://savepoints/job"];
    let mut coordinator = c.coordinator(3, 3, &stop);
    let log = Log::of(&mut coordinator);
    let agents: Vec<Child> = (0..3).map(|k| c.agent(k, &stop)).collect();
    finish_all_partial(coordinator, log, agents, "");
    let partial = c.run.lines();
    assert!(
        !partial.is_empty() && partial.len() < reference().len(),
        "the stopped job wrote {} lines of {}",
        partial.len(),
        reference().len()
    );
    for (k, what, cluster) in [
        (0, "one process", None),
        (1, "a local cluster of 2", Some("--local-cluster=2")),
    ] {
        let mut resumed = Run::new();
        resumed.ckpt = format!("s3://coordinated/restore-{k}").into();
        resumed.env = c.run.env.clone();
        for f in std::fs::read_dir(&c.run.out).unwrap() {
            let f = f.unwrap();
            std::fs::copy(f.path(), resumed.out.join(f.file_name())).unwrap();
        }
        let mut args = vec!["--from-savepoint=s3://savepoints/job"];
        args.extend(cluster);
        let child = c.command_of(&resumed, k, &args).spawn().unwrap();
        finish(child, &format!("restored into {what}"));
        assert_exact(
            &resumed,
            &format!("a 3-host savepoint restored into {what}"),
        );
    }
}

/// The coordinator serves the job's status (process 0's host hands it over to it) and
/// its control: a savepoint asked with SIGUSR1 while the job runs, written to S3 by the
/// hosts; a stop over the API, refused without the token, that drains the job on every
/// host into a last savepoint. The rest of the input, from that savepoint in one
/// process, makes the output exact.
#[test]
fn a_coordinator_serves_the_status_keeps_a_savepoint_and_stops_the_job_when_asked() {
    let _s = serial();
    let Some(hosts) = hosts(4) else { return };
    let c = Coordinated::new(&hosts, 3, 120_000);
    c.bucket("savepoints");
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    const TOKEN: &str = "7d1e4c9a02b35f86e1c0a4b9d27f3e58";
    std::fs::write(&token_file, format!("{TOKEN}\n")).unwrap();
    std::fs::set_permissions(
        &token_file,
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .unwrap();
    let base = format!("http://{}:7200", hosts.address(3));
    let savepoints = "--savepoint-dir=s3://savepoints/job";
    let mut coordinator = c.coordinator(
        3,
        3,
        &[
            savepoints,
            &format!("--status-addr={}:7200", hosts.address(3)),
            &format!("--control-token-file={}", token_file.display()),
        ],
    );
    let mut log = Log::of(&mut coordinator);
    let agents: Vec<Child> = (0..3).map(|k| c.agent(k, &[savepoints])).collect();
    log.wait_for("on 3 host(s)");
    // The status: 3 processes, a worker on each, checkpoints completing.
    let status = |what: &str, done: &dyn Fn(&serde_json::Value) -> bool| -> serde_json::Value {
        let started = Instant::now();
        let mut last = String::new();
        loop {
            let (code, body) = c.http("GET", &format!("{base}/api/job"), None);
            if code == 200 {
                let s: serde_json::Value = serde_json::from_str(&body).unwrap();
                if done(&s) {
                    return s;
                }
                last = format!(
                    "{} process(es), checkpoints completed by worker: {:?}, savepoints {}",
                    s["processes"],
                    s["workers"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|w| (w["worker"].clone(), w["checkpoints_completed"].clone()))
                        .collect::<Vec<_>>(),
                    s["savepoints"]
                );
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "{what}: not within 60 s (the last answer {code}: {body}; the last status: {last})"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    };
    let s = status("3 processes checkpointing", &|s| {
        s["workers"].as_array().is_some_and(|w| {
            w.len() == 3
                && w.iter()
                    .all(|w| w["checkpoints_completed"].as_u64().unwrap_or(0) >= 1)
        })
    });
    assert_eq!(s["state"], "running", "{s}");
    assert_eq!(s["processes"], 3, "{s}");
    // A savepoint while it runs, asked of the coordinator with SIGUSR1.
    signal(coordinator.id() as i32, "-USR1");
    let s = status("a savepoint listed", &|s| {
        s["savepoints"].as_array().is_some_and(|l| !l.is_empty())
    });
    let path = s["savepoints"][0]["path"].as_str().unwrap().to_string();
    assert!(path.starts_with("s3://savepoints/job/savepoint-"), "{s}");
    // A stop: without the token refused, and the job runs on; with it, drained.
    let (code, body) = c.http("POST", &format!("{base}/api/stop"), None);
    assert_eq!(code, 401, "{body}");
    let (code, body) = c.http("POST", &format!("{base}/api/stop"), Some(TOKEN));
    assert_eq!(code, 202, "{body}");
    finish_all_partial(coordinator, log, agents, "stop asked over the control API");
    let partial = c.run.lines();
    let want = reference_of(c.run.records);
    assert!(
        !partial.is_empty() && partial.len() < want.len(),
        "the stopped job wrote {} lines of {}",
        partial.len(),
        want.len()
    );
    let mut resumed = Run::new();
    resumed.records = c.run.records;
    resumed.ckpt = "s3://coordinated/resumed".into();
    resumed.env = c.run.env.clone();
    for f in std::fs::read_dir(&c.run.out).unwrap() {
        let f = f.unwrap();
        std::fs::copy(f.path(), resumed.out.join(f.file_name())).unwrap();
    }
    let child = c
        .command_of(&resumed, 0, &["--from-savepoint=s3://savepoints/job"])
        .spawn()
        .unwrap();
    finish(child, "resumed from the stop's savepoint");
    assert_exact(&resumed, "stopped through the coordinator, resumed");
}

/// The coordinator killed mid-job (SIGKILL) and started again: every agent ends its
/// host's process, registers with the new coordinator, and the job resumes from its
/// last checkpoint on S3. Every line exactly once.
#[test]
fn a_coordinator_killed_mid_job_and_started_again_resumes_the_job_exactly() {
    let _s = serial();
    let Some(hosts) = hosts(4) else { return };
    const RECORDS: u64 = 60_000;
    let want = reference_of(RECORDS);
    let c = Coordinated::new(&hosts, 3, RECORDS);
    let mut coordinator = c.coordinator(3, 3, &[]);
    let mut log = Log::of(&mut coordinator);
    let agents: Vec<Child> = (0..3).map(|k| c.agent(k, &[])).collect();
    log.wait_for("on 3 host(s)");
    until_output(&c.run);
    signal(coordinator.id() as i32, "-KILL");
    let _ = coordinator.wait();
    let killed_at = Instant::now();
    let before = c.run.lines().len();
    assert!(before < want.len(), "the job ended before the kill");
    let mut coordinator = c.coordinator(3, 3, &[]);
    let mut log = Log::of(&mut coordinator);
    log.wait_for("on 3 host(s)");
    let restarted = killed_at.elapsed();
    finish_all(
        &c,
        coordinator,
        log,
        agents,
        &want,
        "the coordinator killed and started again",
    );
    eprintln!(
        "the coordinator killed: the new one ran the job on 3 hosts {:.1} s later; exact",
        restarted.as_secs_f64()
    );
}

/// The coordinator and agents of a job that stops (with a savepoint) end cleanly.
/// Its log says `said`.
fn finish_all_partial(mut coordinator: Child, log: Log, agents: Vec<Child>, said: &str) {
    let status = coordinator.wait().unwrap();
    let log = log.all();
    assert!(status.success(), "the coordinator failed:\n{log}");
    assert!(
        log.contains(said),
        "the coordinator did not say '{said}':\n{log}"
    );
    for (k, a) in agents.into_iter().enumerate() {
        finish(a, &format!("the agent on host {k}"));
    }
}
