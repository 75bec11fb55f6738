//! Logs through `tracing` (issue 35): one line per event with the job, the process and
//! the worker; JSON for log shippers (`--log-format json`); `RUST_LOG` filters. The
//! event: a savepoint asked of a running job (SIGUSR1), which worker 0 keeps.

mod common;

use common::*;
use std::time::{Duration, Instant};

/// Runs the crash job on one process with `extra` and `env`, asks for a savepoint once
/// it checkpoints; its stderr, and whether the savepoint was kept.
fn savepoint_run(extra: &[&str], env: &[(&str, &str)]) -> (String, bool) {
    let run = Run::on("native");
    let savepoints = run.ckpt.with_extension("savepoints");
    let mut command = run.command(extra);
    command.arg(format!("--savepoint-dir={}", savepoints.display()));
    command.env_remove("RUST_LOG");
    for (k, v) in env {
        command.env(k, v);
    }
    let child = command.spawn().unwrap();
    let _kill = KillOnDrop(child.id());
    let started = Instant::now();
    while !run.ckpt.exists()
        || !std::fs::read_dir(&run.ckpt).unwrap().any(|e| {
            e.unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "manifest")
        })
    {
        assert!(started.elapsed() < Duration::from_secs(30), "no checkpoint");
        std::thread::sleep(Duration::from_millis(20));
    }
    signal(child.id() as i32, "-USR1");
    let stderr = finish(child, "the job a savepoint was asked of");
    let kept = std::fs::read_dir(&savepoints).is_ok_and(|mut d| {
        d.any(|e| {
            e.unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with("savepoint-")
        })
    });
    (stderr, kept)
}

#[test]
fn a_log_line_names_its_job_process_and_worker_as_text_and_as_json() {
    let _s = serial();
    let (text, kept) = savepoint_run(&[], &[]);
    assert!(kept, "{text}");
    let line = text
        .lines()
        .find(|l| l.contains("savepoint of checkpoint"))
        .unwrap_or_else(|| panic!("no log line of the savepoint:\n{text}"));
    let fields = line
        .split_once("  INFO job{job=j")
        .and_then(|(_, rest)| {
            rest.split_once(" process=0}:worker{worker=0}: savepoint of checkpoint ")
        })
        .unwrap_or_else(|| panic!("not a line with its job, process and worker: {line}"));
    assert_eq!(fields.0.len(), 16, "{line}");

    let (json, kept) = savepoint_run(&["--log-format=json"], &[]);
    assert!(kept, "{json}");
    let event: serde_json::Value = json
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| {
            v["fields"]["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("savepoint of checkpoint"))
        })
        .unwrap_or_else(|| panic!("no JSON line of the savepoint:\n{json}"));
    assert_eq!(event["level"], "INFO", "{event}");
    let spans = event["spans"].as_array().unwrap();
    assert_eq!(spans[0]["name"], "job", "{event}");
    assert!(
        spans[0]["job"].as_str().is_some_and(|j| j.starts_with('j')),
        "{event}"
    );
    assert_eq!(spans[0]["process"], 0, "{event}");
    assert_eq!(spans[1]["name"], "worker", "{event}");
    assert_eq!(spans[1]["worker"], 0, "{event}");
    // Every line of the run is a JSON object.
    for l in json.lines().filter(|l| !l.trim().is_empty()) {
        assert!(
            serde_json::from_str::<serde_json::Value>(l).is_ok(),
            "not JSON: {l}"
        );
    }

    // RUST_LOG filters: at warn, the info line goes (the savepoint does not).
    let (quiet, kept) = savepoint_run(&[], &[("RUST_LOG", "warn")]);
    assert!(kept);
    assert!(!quiet.contains("savepoint of checkpoint"), "{quiet}");
}
