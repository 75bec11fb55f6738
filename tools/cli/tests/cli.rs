//! The `tidewater` binary itself: help, and clear errors for a bad URL, a job that is
//! not there, and a missing token.

use std::process::Command;

fn tidewater(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_tidewater"))
        .args(args)
        .env_remove("TIDEWATER_CONTROL_TOKEN")
        .env_remove("TIDEWATER_JOB")
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn help_lists_the_commands() {
    let (ok, out, _) = tidewater(&["--help"]);
    assert!(ok);
    for c in ["status", "explain", "savepoint", "stop", "cancel"] {
        assert!(out.contains(c), "{out}");
    }
}

#[test]
fn bad_targets_and_a_missing_token_are_clear_errors() {
    let (ok, _, err) = tidewater(&["status", "--job", "127.0.0.1:1"]);
    assert!(!ok);
    assert!(
        err.contains("--job 127.0.0.1:1: give the status server's URL"),
        "{err}"
    );
    // Nothing listens on port 1 of loopback.
    let (ok, _, err) = tidewater(&["status", "--job", "http://127.0.0.1:1"]);
    assert!(!ok);
    assert!(
        err.contains("cannot reach the job at http://127.0.0.1:1"),
        "{err}"
    );
    let (ok, _, err) = tidewater(&["stop", "--job", "http://127.0.0.1:1"]);
    assert!(!ok);
    assert!(
        err.contains("control needs the job's token: --token-file FILE or TIDEWATER_CONTROL_TOKEN"),
        "{err}"
    );
}
