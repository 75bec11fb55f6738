//! Control of a running job over its status server (issue 35), with the `tidewater`
//! command (tools/cli, called as a library: the binary is its thin wrapper):
//!
//! - a 2-process local cluster, on both engine runners, takes a savepoint and then
//!   stops with one when the command asks; a job started from the final savepoint
//!   writes the rest, and the output of both is the direct runner's, line for line;
//! - without the job's token, control is refused (401), and the job runs on;
//! - cancel ends a local cluster at once, leaving no process behind;
//! - a `--hosts` cluster's process 0 stops every process (the drain travels over the
//!   job's own channel), and a restart from its savepoint is exact.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const RECORDS_6S: u64 = 60_000;

/// A token file only its owner can read.
fn token_file(dir: &Path) -> PathBuf {
    use std::os::unix::fs::OpenOptionsExt;
    let path = dir.join("token");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .unwrap();
    std::io::Write::write_all(&mut f, b"3f9c2e71a0b84d56c1e07a9b2d4f6e83\n").unwrap();
    path
}

/// Starts the job with its status served and control on; its base URL (from its first
/// line; its stderr is read all along, and collected).
fn start(run: &Run, extra: &[&str]) -> (std::process::Child, String, mpsc::Receiver<String>) {
    let mut child = run.command(extra).spawn().unwrap();
    let (base, seen) = status_base(&mut child, run.runner);
    (child, base, seen)
}

/// Waits (at most 30 s) until the job has read records and completed a checkpoint.
fn checkpointing(base: &str) {
    let job = tidewater_cli::Job::at(base).unwrap();
    let started = Instant::now();
    loop {
        let s = job.status().unwrap();
        if s["workers"][0]["checkpoints_completed"]
            .as_u64()
            .unwrap_or(0)
            >= 1
        {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no checkpoint: {s}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits (at most 30 s) for `child` to end with success; what it printed on stderr.
fn ended(mut child: std::process::Child, stderr: mpsc::Receiver<String>, what: &str) -> String {
    let started = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if started.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            panic!(
                "{what}: did not end within 30 s: {:?}",
                stderr.try_iter().collect::<Vec<_>>()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let text = stderr.iter().collect::<Vec<_>>().join("\n");
    assert!(status.success(), "{what}: {status}\n{text}");
    text
}

/// Checks that the stopped job wrote only part of its output, then runs the rest of
/// `run`'s job from the savepoint in `savepoints`, in one process (a new checkpoint dir
/// in `dir`), and checks the output of both runs together: the direct runner's, every
/// line once.
fn resume_exact(run: &Run, savepoints: &Path, dir: &Path, what: &str) {
    let want = reference_of(run.records);
    let stopped = run.lines();
    assert!(
        stopped.len() < want.len(),
        "{what}: the stopped job wrote everything ({} lines)",
        stopped.len()
    );
    let resumed = Command::new(env!("CARGO_BIN_EXE_crash_job"))
        .args(runner_flags(run.runner))
        .args([
            &format!("--records={}", run.records),
            &format!("--rate={RATE}"),
            "--workers=1",
        ])
        .arg(format!("--from-savepoint={}", savepoints.display()))
        .arg(format!("--checkpoint-dir={}", dir.join("ckpt2").display()))
        .arg(format!("--output={}", run.out.display()))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    finish(resumed, &format!("{what}: resumed from its savepoint"));
    let got = run.lines();
    assert!(
        got == want,
        "{what}, resumed from its savepoint: {}",
        difference(&got, &want)
    );
}

fn cli(args: &[&str]) -> Result<String, String> {
    tidewater_cli::run(std::iter::once("tidewater").chain(args.iter().copied()))
}

#[test]
fn the_cli_takes_a_savepoint_and_stops_a_cluster_and_a_restart_from_it_is_exact() {
    let _s = serial();
    on_each_runner(|runner| {
        let mut run = Run::on(runner);
        run.records = RECORDS_6S;
        let dir = tempfile::tempdir().unwrap();
        let token = token_file(dir.path());
        let token_arg = token.display().to_string();
        let savepoints = dir.path().join("savepoints");
        let (child, base, stderr) = start(
            &run,
            &[
                "--local-cluster=2",
                "--status-addr=127.0.0.1:0",
                "--status-linger=3s",
                &format!("--control-token-file={token_arg}"),
                &format!("--savepoint-dir={}", savepoints.display()),
            ],
        );
        checkpointing(&base);
        // Control without the token, or with another, is refused; the job runs on.
        let job = tidewater_cli::Job::at(&base).unwrap();
        let refused = job.control("stop", "not-the-token-0000").unwrap_err();
        assert!(refused.contains("401"), "{runner}: {refused}");
        let no_token = ureq::post(format!("{base}/api/cancel"))
            .send_empty()
            .unwrap_err()
            .to_string();
        assert!(no_token.contains("401"), "{runner}: {no_token}");
        let status = cli(&["status", "--job", &base]).unwrap();
        assert!(
            status.contains(&format!("({runner} runner): running")),
            "{runner}: {status}"
        );
        // A savepoint while it runs: its path, once written.
        let out = cli(&["savepoint", "--job", &base, "--token-file", &token_arg])
            .unwrap_or_else(|e| panic!("{runner}: savepoint: {e}"));
        let path = out
            .lines()
            .find_map(|l| l.strip_prefix("savepoint: "))
            .unwrap_or_else(|| panic!("{runner}: no savepoint path in {out}"));
        assert!(
            path.starts_with(&savepoints.join("savepoint-").display().to_string()),
            "{runner}: {out}"
        );
        assert!(
            std::fs::read_dir(path).unwrap().any(|e| e
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "manifest")),
            "{runner}: no manifest in {path}"
        );
        // Stop: it ends with its last checkpoint as a savepoint, long before its input's end.
        let out = cli(&["stop", "--job", &base, "--token-file", &token_arg])
            .unwrap_or_else(|e| panic!("{runner}: stop: {e}"));
        assert!(
            out.contains(&format!("stopped; savepoint: {}", savepoints.display())),
            "{runner}: {out}"
        );
        let status = ended(child, stderr, &format!("{runner}: stopped by the CLI"));
        assert!(
            status.contains("stop asked over the control API: draining the job"),
            "{runner}: {status}"
        );
        // The rest, from the final savepoint, in one process: every line once.
        resume_exact(
            &run,
            &savepoints,
            dir.path(),
            &format!("{runner}: stopped by the CLI"),
        );
    });
}

#[test]
fn cancel_ends_a_local_cluster_at_once_leaving_no_process() {
    let _s = serial();
    let mut run = Run::on("native");
    run.records = RECORDS_6S;
    let dir = tempfile::tempdir().unwrap();
    let token = token_file(dir.path()).display().to_string();
    let (mut child, base, _stderr) = start(
        &run,
        &[
            "--local-cluster=2",
            "--status-addr=127.0.0.1:0",
            &format!("--control-token-file={token}"),
        ],
    );
    checkpointing(&base);
    let pids = run.pids();
    let out = cli(&["cancel", "--job", &base, "--token-file", &token]).unwrap();
    assert!(out.contains("cancelling the local cluster"), "{out}");
    let asked = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(asked.elapsed() < Duration::from_secs(10), "not cancelled");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(130), "{status}");
    let started = Instant::now();
    while !pids.iter().all(|p| gone(*p)) {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "processes left behind: {pids:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(run.lines().len() < reference_of(RECORDS_6S).len());
}

/// A `--hosts` cluster of 2 processes started by hand: `stop` to process 0 drains both
/// (process 0 passes the drain to every worker over the job's channel), and the job
/// resumed from the final savepoint writes the rest: the direct runner's output.
#[test]
fn the_cli_stops_a_hosts_cluster_through_process_0_and_a_restart_from_it_is_exact() {
    let _s = serial();
    let mut run = Run::on("native");
    run.records = RECORDS_6S;
    let dir = tempfile::tempdir().unwrap();
    let token = token_file(dir.path()).display().to_string();
    let savepoints = dir.path().join("savepoints");
    let savepoint_dir = format!("--savepoint-dir={}", savepoints.display());
    let (_, hosts) = hosts_file(dir.path(), 2);
    let hosts = format!("--hosts={}", hosts.display());
    let common = [
        "--processes=2",
        &hosts,
        "--status-addr=127.0.0.1:0",
        &savepoint_dir,
    ];
    let (first, base, stderr) = start(
        &run,
        &[
            &common[..],
            &[
                "--process-id=0",
                "--status-linger=3s",
                &format!("--control-token-file={token}"),
            ],
        ]
        .concat(),
    );
    let _kill = KillOnDrop(first.id());
    let mut second = run
        .command(&[&common[..], &["--process-id=1"]].concat())
        .spawn()
        .unwrap();
    let _kill_second = KillOnDrop(second.id());
    let second_stderr = stderr_lines(&mut second);
    checkpointing(&base);
    let out = cli(&["stop", "--job", &base, "--token-file", &token])
        .unwrap_or_else(|e| panic!("stop: {e}"));
    assert!(
        out.contains(&format!("stopped; savepoint: {}", savepoints.display())),
        "{out}"
    );
    ended(first, stderr, "process 0, stopped by the CLI");
    let text = ended(
        second,
        second_stderr,
        "process 1, stopped through process 0",
    );
    assert!(
        text.contains("the job's process 0 asked every process to drain"),
        "{text}"
    );
    resume_exact(
        &run,
        &savepoints,
        dir.path(),
        "a --hosts cluster stopped by the CLI",
    );
}

/// The last running total of each word among `out`'s committed files of epochs up to
/// `epoch` (`part-<epoch>-<instance>-<job>.txt`).
fn totals_through(out: &Path, epoch: u64) -> std::collections::BTreeMap<String, u64> {
    let mut lines = Vec::new();
    for e in std::fs::read_dir(out).unwrap() {
        let path = e.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let Some(e) = name.strip_prefix("part-").and_then(|n| n.split('-').next()) else {
            continue;
        };
        if e.parse::<u64>().unwrap() > epoch {
            continue;
        }
        lines.extend(
            std::fs::read_to_string(&path)
                .unwrap()
                .lines()
                .map(String::from),
        );
    }
    last_totals(lines)
}

/// Issue 36: a running job's state is looked up by key through its API (`tidewater
/// state`), as of its last completed checkpoint, and only with the job's token: the
/// running count the lookup answers for a word is the last total the job committed
/// for it through that checkpoint.
#[test]
fn the_cli_looks_up_a_key_s_state_as_of_the_last_checkpoint_with_the_token_only() {
    let _s = serial();
    let dir = tempfile::tempdir().unwrap();
    let token = token_file(dir.path());
    let mut run = Run::new();
    run.records = RECORDS_6S;
    let (child, base, seen) = start(
        &run,
        &[
            "--status-addr=127.0.0.1:0",
            &format!("--control-token-file={}", token.display()),
        ],
    );
    let _kill = KillOnDrop(child.id());
    checkpointing(&base);
    let token_arg = format!("--token-file={}", token.display());
    let (mut asked, mut held) = (0, 0);
    let started = Instant::now();
    while asked < 5 {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no word to ask for"
        );
        let Some(word) = totals_through(&run.out, u64::MAX)
            .keys()
            .nth(asked)
            .cloned()
        else {
            std::thread::sleep(Duration::from_millis(100));
            continue;
        };
        let out = cli(&[
            "state",
            "--job",
            &base,
            &token_arg,
            "--id",
            "RunningCount",
            "--key",
            &word,
        ])
        .unwrap();
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        let epoch = v["checkpoint"].as_u64().unwrap();
        // The checkpoint's epoch is committed right after its manifest.
        std::thread::sleep(Duration::from_millis(500));
        let want = match totals_through(&run.out, epoch).get(&word) {
            Some(n) => serde_json::json!([{ "window": "global", "cell": "count", "value": n }]),
            None => serde_json::json!([]),
        };
        assert_eq!(v["entries"], want, "{word} at checkpoint {epoch}: {out}");
        held += usize::from(want != serde_json::json!([]));
        asked += 1;
    }
    assert!(held > 0, "no word asked for had a count yet");
    // Without the token, or with another, the state is not read.
    let e = tidewater_cli::Job::at(&base)
        .unwrap()
        .state("RunningCount", "a", "0000000000000000")
        .unwrap_err();
    assert!(e.contains("401") && e.contains("not this job's"), "{e}");
    // An id no step keeps state under is named, with the ids there are.
    let e = cli(&[
        "state", "--job", &base, &token_arg, "--id", "Nope", "--key", "a",
    ])
    .unwrap_err();
    assert!(
        e.contains("no step keeps state under that id; the ids are ") && e.contains("RunningCount"),
        "{e}"
    );
    ended(child, seen, "the job whose state was looked up");
}
