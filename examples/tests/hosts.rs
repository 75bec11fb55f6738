//! Every example binary ends cleanly on every process of a `--hosts` cluster (issue
//! 37): started by hand as 2 processes on loopback, both exit 0, and process 0
//! prints what a single process prints. (Only process 0 holds the captures: the
//! others print nothing of them, rather than failing to find them.)

mod common;

use common::*;
use std::process::{Command, Output, Stdio};

/// Runs `bin` with `args` as a 2-process `--hosts` cluster of 1 worker each; both
/// processes' outputs, process 0's first.
fn on_two_hosts(bin: &str, args: &[&str]) -> [Output; 2] {
    let dir = tempfile::tempdir().unwrap();
    let (_, hosts) = hosts_file(dir.path(), 2);
    let hosts = format!("--hosts={}", hosts.display());
    let start = |id: usize| {
        Command::new(bin)
            .args(["--runner=native", "--workers=1", "--processes=2"])
            .arg(format!("--process-id={id}"))
            .arg(&hosts)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (zero, one) = (start(0), start(1));
    [zero, one].map(|c| c.wait_with_output().unwrap())
}

/// What `bin` prints with `args` on one process.
fn alone(bin: &str, args: &[&str]) -> String {
    let out = Command::new(bin)
        .args(["--runner=native", "--workers=2"])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{bin} alone: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `bin` ends with 0 on both processes; its outputs, process 0's first.
fn both_end(bin: &str, args: &[&str]) -> [String; 2] {
    let [zero, one] = on_two_hosts(bin, args);
    for (id, out) in [(0, &zero), (1, &one)] {
        assert!(
            out.status.success(),
            "{bin} {args:?}: process {id} exited {}:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    [zero, one].map(|o| String::from_utf8(o.stdout).unwrap())
}

/// `bin` ends with 0 on both processes, and process 0 prints what one process does
/// (from its captures), the other nothing.
fn ends_cleanly(bin: &str, args: &[&str]) {
    let _s = serial();
    let [zero, one] = both_end(bin, args);
    assert_eq!(zero, alone(bin, args));
    assert_eq!(one, "");
}

#[test]
fn the_word_count_ends_cleanly_on_every_process() {
    ends_cleanly(env!("CARGO_BIN_EXE_wordcount"), &[]);
}

#[test]
fn the_stateful_word_count_ends_cleanly_on_every_process() {
    ends_cleanly(env!("CARGO_BIN_EXE_stateful_wordcount"), &[]);
}

#[test]
fn the_held_window_job_ends_cleanly_on_every_process() {
    ends_cleanly(
        env!("CARGO_BIN_EXE_held_window"),
        // It holds its windows until stopped: then it drains, and every window fires.
        &["--records=2000", "--rate=100000", "--max-duration=2s"],
    );
}

/// Programs that print from their sinks print on every process: each its own part.
#[test]
fn jobs_printing_from_sinks_end_cleanly_on_every_process() {
    let _s = serial();
    both_end(
        env!("CARGO_BIN_EXE_streaming_wordcount"),
        &["--records=2000", "--rate=0"],
    );
    both_end(
        env!("CARGO_BIN_EXE_latency"),
        &["--rate=20000", "--seconds=1", "--keys=100"],
    );
    let dir = tempfile::tempdir().unwrap();
    let out = format!("--output={}", dir.path().join("out").display());
    both_end(env!("CARGO_BIN_EXE_linked_wordcount"), &[&out]);
    let crash = format!("--output={}", dir.path().join("crash").display());
    both_end(
        env!("CARGO_BIN_EXE_crash_job"),
        &["--records=3000", "--rate=0", &crash],
    );
    assert_eq!(
        tidewater_examples::crash_job::committed_lines(&dir.path().join("crash")).unwrap(),
        reference_of(3000)
    );
}
