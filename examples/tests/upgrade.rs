//! Upgrades with state (issue 36): the crash job (`tidewater_examples::crash_job`) is
//! stopped with a savepoint mid-run, mid-window, and another version of it is
//! deployed from that savepoint. Its state is matched by id, not by a hash of the whole
//! plan:
//!
//! - v2 (a map added, closures changed and moved, the windowed count and the sink
//!   renamed with their uids pinned to the old names, another `--rate` and another
//!   `--output`) takes over
//!   every open window and running count: the lines of both runs together are the
//!   direct runner's output exactly, v2's marked `v2`;
//! - v3 (the running count removed) is refused, naming the step whose state would be
//!   lost, until it runs with `--allow-non-restored-state`: then its window lines
//!   complete the direct runner's exactly, and no running count is written.
//!
//! - v4 (the running count's cell `count` holds a struct, not a `u64`) is refused,
//!   naming the cell, its old type and its new one;
//! - v5 (v4's struct with a field added under `#[serde(default)]`) restores v4's
//!   savepoint, reads its values, and the lines of both runs together are exact;
//! - v6 (the cell `count` holds an `i64`, not a `u64`) restores v1's savepoint: the
//!   values held there all read as the new type.
//!
//! `--check-savepoint` says the same before anything runs.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// Stops v1 of the job after 1 s of about 3 on `runner` at 2 workers, with a
/// savepoint in `savepoint`; its lines (fewer than all) go to `out`.
fn stop_v1(runner: &'static str, savepoint: &Path, out: &Path) -> Vec<String> {
    stop(runner, "v1", savepoint, out)
}

/// [`stop_v1`] of `version`.
fn stop(runner: &'static str, version: &str, savepoint: &Path, out: &Path) -> Vec<String> {
    let stopped = Command::new(env!("CARGO_BIN_EXE_crash_job"))
        .args(runner_flags(runner))
        .args([
            &format!("--job-version={version}"),
            "--workers=2",
            "--max-duration=1s",
            &format!("--records={RECORDS}"),
            &format!("--rate={RATE}"),
        ])
        .arg(format!("--savepoint-dir={}", savepoint.display()))
        .arg(format!("--output={}", out.display()))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    finish(stopped, "v1 stopped with a savepoint");
    let lines = crash_job_lines(out);
    assert!(
        !lines.is_empty() && lines.len() < reference().len(),
        "{runner}: the stopped job wrote {} lines of {}: it should have stopped midway",
        lines.len(),
        reference().len()
    );
    lines
}

fn crash_job_lines(out: &Path) -> Vec<String> {
    tidewater_examples::crash_job::committed_lines(out).unwrap()
}

/// Runs `version` of the job on `runner` from `savepoint` into `out`, with `extra`
/// flags; its exit and output.
fn deploy(runner: &str, version: &str, savepoint: &Path, out: &Path, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_crash_job"))
        .args(runner_flags(runner))
        .args([
            "--workers=1",
            &format!("--job-version={version}"),
            &format!("--records={RECORDS}"),
            "--rate=20000",
        ])
        .arg(format!("--from-savepoint={}", savepoint.display()))
        .arg(format!("--output={}", out.display()))
        .args(extra)
        .output()
        .unwrap()
}

/// `--check-savepoint`'s report without its first line (which names the directory),
/// and whether it said the run would restore.
fn check(runner: &str, version: &str, savepoint: &Path, extra: &[&str]) -> (String, bool) {
    let out = Command::new(env!("CARGO_BIN_EXE_crash_job"))
        .args(runner_flags(runner))
        .args([
            &format!("--job-version={version}"),
            "--output=/nonexistent/unused",
        ])
        .arg(format!("--check-savepoint={}", savepoint.display()))
        .args(extra)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let report = text
        .lines()
        .skip_while(|l| !l.contains("checkpoint "))
        .skip(1)
        .collect::<Vec<_>>()
        .join("\n");
    (report, out.status.success())
}

/// A temporary directory, and in it where a savepoint and two runs' outputs go.
fn places() -> (tempfile::TempDir, PathBuf, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let at = |name: &str| dir.path().join(name);
    let (savepoint, o1, o2) = (at("savepoint"), at("o1"), at("o2"));
    (dir, savepoint, o1, o2)
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

#[test]
fn a_job_upgraded_mid_window_with_changed_maps_and_output_resumes_its_state() {
    let _s = serial();
    for runner in RUNNERS {
        let (_dir, savepoint, o1, o2) = places();
        let before = stop_v1(runner, &savepoint, &o1);
        let (report, ok) = check(runner, "v2", &savepoint, &[]);
        assert!(ok, "{runner}: v2 would be refused:\n{report}");
        insta::assert_snapshot!(format!("v2_check_{runner}"), report);
        let run = deploy(runner, "v2", &savepoint, &o2, &[]);
        assert!(
            run.status.success(),
            "{runner}: v2 failed: {}",
            String::from_utf8_lossy(&run.stderr)
        );
        let after = crash_job_lines(&o2);
        assert!(
            before.iter().all(|l| !l.ends_with(" v2")),
            "{runner}: v1 wrote v2's lines"
        );
        assert!(
            after.iter().any(|l| l.ends_with(" v2")),
            "{runner}: v2 wrote no window of its own"
        );
        let both: Vec<String> = before
            .into_iter()
            .chain(after.iter().map(|l| l.trim_end_matches(" v2").to_string()))
            .collect();
        let both = sorted(both);
        assert!(
            both == *reference(),
            "{runner}: v1's lines and v2's together: {}",
            difference(&both, reference())
        );
    }
}

#[test]
fn a_removed_stateful_step_is_refused_and_its_state_dropped_only_when_allowed() {
    let _s = serial();
    let runner = "native";
    let (_dir, savepoint, o1, o2) = places();
    let before = stop_v1(runner, &savepoint, &o1);
    let (report, ok) = check(runner, "v3", &savepoint, &[]);
    assert!(!ok, "v3 would run:\n{report}");
    insta::assert_snapshot!("v3_check", report);
    // The CLI asks the job's binary, and says the same.
    let cli = |extra: &[&str]| {
        let dir = savepoint.display().to_string();
        let mut args = vec!["tidewater", "savepoint", "check", &dir, "--"];
        args.extend([
            env!("CARGO_BIN_EXE_crash_job"),
            "--runner=native",
            "--job-version=v3",
            "--output=/nonexistent/unused",
        ]);
        args.extend(extra);
        tidewater_cli::run(args)
    };
    let refusal = cli(&[]).unwrap_err();
    assert!(refusal.contains(&report), "{refusal}");
    assert!(cli(&["--allow-non-restored-state"]).is_ok());
    let refused = deploy(runner, "v3", &savepoint, &o2, &[]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success()
            && stderr.contains("does not fit this pipeline: 'RunningCount' holds state in the snapshot and is not in the pipeline"),
        "v3 was not refused, naming the step: {stderr}"
    );
    assert!(
        crash_job_lines(&o2).is_empty(),
        "the refused run wrote lines"
    );
    let allow = ["--allow-non-restored-state"];
    let (report, ok) = check(runner, "v3", &savepoint, &allow);
    assert!(ok, "v3 would be refused even when allowed:\n{report}");
    let run = deploy(runner, "v3", &savepoint, &o2, &allow);
    assert!(
        run.status.success(),
        "v3 failed: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    let after = crash_job_lines(&o2);
    assert!(
        after.iter().all(|l| l.starts_with("window ")),
        "v3 wrote totals"
    );
    let windows = |v: &[String]| -> Vec<String> {
        sorted(
            v.iter()
                .filter(|l| l.starts_with("window "))
                .cloned()
                .collect(),
        )
    };
    let both = windows(&[before, after].concat());
    let want = windows(reference());
    assert!(
        both == want,
        "window lines of v1 and v3 together: {}",
        difference(&both, &want)
    );
}

#[test]
fn a_state_cell_of_another_type_is_refused_naming_the_cell() {
    let _s = serial();
    let (_dir, savepoint, o1, o2) = places();
    stop_v1("native", &savepoint, &o1);
    let (report, ok) = check("native", "v4", &savepoint, &["--allow-non-restored-state"]);
    assert!(!ok, "v4 would run:\n{report}");
    insta::assert_snapshot!("v4_check", report);
    let refused = deploy("native", "v4", &savepoint, &o2, &[]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success()
            && stderr.contains("'RunningCount' changed its cell 'count' from value of u64 to value of Tally: its state cannot be read"),
        "v4 was not refused, naming the cell: {stderr}"
    );
    assert!(
        crash_job_lines(&o2).is_empty(),
        "the refused run wrote lines"
    );
}

#[test]
fn a_state_cell_of_another_type_that_reads_the_old_values_restores() {
    let _s = serial();
    let (_dir, savepoint, o1, o2) = places();
    let before = stop_v1("microbatch", &savepoint, &o1);
    // The cell's values are read from the savepoint: every u64 count reads as an i64.
    let (report, ok) = check("native", "v6", &savepoint, &[]);
    assert!(ok, "v6 would be refused:\n{report}");
    assert!(
        report.contains("RunningCount: restored, its values read as their new types (cell 'count' value of u64 -> value of i64)"),
        "{report}"
    );
    let run = deploy("native", "v6", &savepoint, &o2, &[]);
    assert!(
        run.status.success(),
        "v6 failed: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    let both = sorted([before, crash_job_lines(&o2)].concat());
    assert!(
        both == *reference(),
        "v1's lines and v6's together: {}",
        difference(&both, reference())
    );
}

#[test]
fn a_state_struct_that_gains_a_defaulted_field_reads_the_old_values() {
    let _s = serial();
    let (_dir, savepoint, o1, o2) = places();
    let before = stop("native", "v4", &savepoint, &o1);
    let (report, ok) = check("native", "v5", &savepoint, &[]);
    assert!(ok, "v5 would be refused:\n{report}");
    let run = deploy("native", "v5", &savepoint, &o2, &[]);
    assert!(
        run.status.success(),
        "v5 failed: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    let both = sorted([before, crash_job_lines(&o2)].concat());
    assert!(
        both == *reference(),
        "v4's lines and v5's together: {}",
        difference(&both, reference())
    );
}

#[test]
fn a_savepoint_is_read_offline_per_key_and_as_a_pipeline_s_input() {
    use tidewater_runners_core::savepoint::{Filter, Reader};
    let _s = serial();
    let (_dir, savepoint, o1, _) = places();
    let before = stop_v1("native", &savepoint, &o1);
    // Every word's count in the savepoint is its last total the stopped job committed.
    let want = last_totals(&before);
    assert!(want.len() > 10, "{want:?}");
    let inspect = |extra: &[&str]| -> String {
        let out = Command::new(env!("CARGO_BIN_EXE_crash_job"))
            .args(["--runner=native", "--output=/nonexistent/unused"])
            .arg(format!("--inspect-savepoint={}", savepoint.display()))
            .args(extra)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let json = inspect(&["--inspect-id=RunningCount"]);
    let mut got = std::collections::BTreeMap::new();
    for line in json.lines() {
        let e: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(
            (&e["id"], &e["window"], &e["cell"]),
            (&"RunningCount".into(), &"global".into(), &"count".into()),
            "{line}"
        );
        // Keys are the DoFn's String keys, shown as Debug: quoted.
        let word: String = serde_json::from_str(e["key"].as_str().unwrap()).unwrap();
        got.insert(word, e["value"].as_u64().unwrap());
    }
    assert_eq!(got, want);
    // One key, as CSV.
    let (word, n) = want.iter().next().unwrap();
    let csv = inspect(&[
        "--inspect-id=RunningCount",
        &format!("--inspect-key={word}"),
        "--inspect-format=csv",
    ]);
    assert_eq!(
        csv,
        format!("id,key,window,cell,value\nRunningCount,\"\"\"{word}\"\"\",global,count,{n}\n")
    );
    // The CLI reads it without the pipeline's code: the same for text keys.
    let dir = savepoint.display().to_string();
    assert_eq!(
        tidewater_cli::run([
            "tidewater",
            "savepoint",
            "inspect",
            &dir,
            "--uid=RunningCount",
            &format!("--key={word}"),
            "--format=csv",
        ])
        .unwrap(),
        csv
    );
    // The windowed count's open windows, per word and window: each holds part of its
    // final count (the direct runner's line), and none of them has fired yet.
    let finals: std::collections::BTreeMap<(String, String), u64> = reference()
        .iter()
        .filter_map(|l| {
            let mut f = l.strip_prefix("window ")?.split(' ');
            let (start, word, n) = (f.next()?, f.next()?, f.next()?.parse().ok()?);
            Some(((start.to_string(), word.to_string()), n))
        })
        .collect();
    let windows = inspect(&["--inspect-id=CountPerWindow/Combine"]);
    let mut open = 0;
    for line in windows.lines() {
        let e: serde_json::Value = serde_json::from_str(line).unwrap();
        let word: String = serde_json::from_str(e["key"].as_str().unwrap()).unwrap();
        let window = e["window"].as_str().unwrap();
        let start = window
            .strip_prefix('[')
            .and_then(|w| w.split(',').next())
            .unwrap_or_else(|| panic!("not a window: {line}"));
        assert_eq!(
            window,
            format!("[{start}, {})", start.parse::<i64>().unwrap() + 1000)
        );
        let value = &e["value"];
        match e["cell"].as_str().unwrap() {
            "contents" => {
                let n = value.as_u64().unwrap_or_else(|| panic!("{line}"));
                let full = finals[&(start.to_string(), word.clone())];
                assert!(n > 0 && n <= full, "{line}: its final count is {full}");
                assert!(
                    !before
                        .iter()
                        .any(|l| l.starts_with(&format!("window {start} {word} "))),
                    "{line}: the stopped job wrote this window"
                );
                open += 1;
            }
            "panes" => assert_eq!(value["fired"], 0, "{line}"),
            "timer" => assert_eq!(value["clock"], "event time", "{line}"),
            other => panic!("cell {other}: {line}"),
        }
    }
    assert!(open > 0, "no open window in the savepoint:\n{windows}");
    // A pipeline reads the savepoint as its bounded input and counts its keys.
    tidewater_examples::register_runners();
    let reader = Reader::open(&savepoint).unwrap();
    let filter = Filter {
        id: Some("RunningCount".into()),
        key: None,
    };
    let p = tidewater::Pipeline::new(tidewater::PipelineOptions::default());
    p.create("Savepoint", reader.entries(None, &filter).unwrap())
        .map("Key", |e: tidewater_runners_core::savepoint::Entry| e.key)
        .apply("Keys", tidewater_transforms::Count::per_element())
        .map("One", |(_k, _n): (String, u64)| 1u64)
        .apply("Total", tidewater_transforms::Sum::<u64>::globally())
        .capture("keys");
    let keys = p.run().unwrap().captured_values::<u64>("keys").unwrap();
    assert_eq!(keys, vec![want.len() as u64]);
}
