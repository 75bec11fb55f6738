//! Link-time registration: a plan written by `linked_wordcount` runs in `run_plan`, a
//! binary that constructs no pipeline and resolves the functions it links
//! (`tidewater::register!`), with the same output lines as the normal run.

use std::ffi::OsStr;
use std::path::Path;
use std::process::{Command, Output};

fn run(bin: &str, args: &[&OsStr]) -> Output {
    let out = Command::new(bin).args(args).output().expect("runs");
    assert!(
        out.status.success(),
        "{bin} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Every line of every committed file in `dir`, sorted; the files are removed.
fn take_lines(dir: &Path) -> Vec<String> {
    let mut lines = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with("part-") {
            lines.extend(
                std::fs::read_to_string(&path)
                    .unwrap()
                    .lines()
                    .map(str::to_string),
            );
        }
        std::fs::remove_file(&path).unwrap();
    }
    lines.sort();
    lines
}

#[test]
fn a_saved_plan_of_linked_functions_runs_in_a_binary_that_constructs_no_pipeline() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let plan = dir.path().join("plan.json");
    let normal = |runner: &str| {
        run(
            env!("CARGO_BIN_EXE_linked_wordcount"),
            &[
                format!("--runner={runner}").as_ref(),
                "--output".as_ref(),
                out.as_os_str(),
                "--dump-plan".as_ref(),
                plan.as_os_str(),
            ],
        );
        take_lines(&out)
    };
    let from_plan = |args: &[&str]| {
        let mut all: Vec<&OsStr> = vec!["--plan".as_ref(), plan.as_os_str()];
        all.extend(args.iter().map(|a| OsStr::new(*a)));
        let o = run(env!("CARGO_BIN_EXE_run_plan"), &all);
        assert!(String::from_utf8_lossy(&o.stderr).contains("running the saved plan"));
        take_lines(&out)
    };
    let direct = normal("direct");
    assert!(direct.contains(&"the: 1".to_string()), "{direct:?}");
    assert!(
        direct.iter().any(|l| l.starts_with("total the: ")),
        "{direct:?}"
    );
    assert!(direct.len() > 100, "{direct:?}");
    assert_eq!(from_plan(&["--runner=direct"]), direct);
    let native = normal("native");
    assert_eq!(native, direct);
    assert_eq!(from_plan(&["--runner=native"]), native);
    // Two processes of the native runner, each decoding the plan alone.
    assert_eq!(from_plan(&["--runner=native", "--local-cluster=2"]), native);
    let microbatch = normal("microbatch");
    assert_eq!(microbatch, direct);
    assert_eq!(from_plan(&["--runner=microbatch"]), microbatch);
}

#[test]
fn run_plan_refuses_unlinked_functions_by_name_before_running() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let plan = dir.path().join("plan.json");
    run(
        env!("CARGO_BIN_EXE_linked_wordcount"),
        &[
            "--output".as_ref(),
            out.as_os_str(),
            "--dump-plan".as_ref(),
            plan.as_os_str(),
        ],
    );
    take_lines(&out);
    let refused = |plan: &Path| {
        let o = Command::new(env!("CARGO_BIN_EXE_run_plan"))
            .arg("--plan")
            .arg(plan)
            .output()
            .expect("runs");
        assert_eq!(o.status.code(), Some(1));
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    // A plan from another binary: a DoFn this one does not link.
    let other = dir.path().join("other.json");
    let json = std::fs::read_to_string(&plan).unwrap().replace(
        "tidewater_examples::linked_word_count::FormatCount",
        "somebody_else::FormatCount",
    );
    std::fs::write(&other, json).unwrap();
    let stderr = refused(&other);
    assert!(
        stderr.contains(
            "unknown DoFn 'somebody_else::FormatCount' in transform 'Format': this binary has not registered it"
        ),
        "{stderr}"
    );
    assert!(stderr.contains("tidewater::register!(DoFn T)"), "{stderr}");
    // Linked fields that do not decode name the function.
    let bad = dir.path().join("bad.json");
    let json = std::fs::read_to_string(&plan)
        .unwrap()
        .replace("\"min_len\": 1", "\"min_len\": \"one\"");
    std::fs::write(&bad, json).unwrap();
    let stderr = refused(&bad);
    assert!(
        stderr.contains(
            "cannot decode the fields of tidewater_examples::linked_word_count::ExtractWords in transform 'ExtractWords'"
        ),
        "{stderr}"
    );
    // The word count's plan has closures and generic functions: they register only
    // when the pipeline is constructed, which run_plan does not do.
    let wc = dir.path().join("wordcount.json");
    run(
        env!("CARGO_BIN_EXE_wordcount"),
        &["--dump-plan".as_ref(), wc.as_os_str()],
    );
    let stderr = refused(&wc);
    assert!(stderr.contains("unknown "), "{stderr}");
    assert!(
        stderr.contains("a generic function cannot be registered at link time")
            || stderr.contains("The plan names a closure by the place it was given"),
        "{stderr}"
    );
    // Nothing ran: no output was committed.
    assert!(std::fs::read_dir(&out).unwrap().next().is_none());
}
