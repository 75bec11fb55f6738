//! The word count example: its plan and fused stages (snapshots), and its exact output
//! against a plain-Rust oracle, through the library and through the binary.

use std::collections::BTreeMap;
use tidewater::{plan, Pipeline, PipelineOptions};
use tidewater_examples::word_count::{self, extract_words};

fn oracle(text: &str) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    for line in text.lines() {
        for w in extract_words(line.to_string()) {
            *counts.entry(w).or_insert(0) += 1;
        }
    }
    counts
}

#[test]
fn plan_snapshot() {
    let p = Pipeline::new(PipelineOptions::default());
    word_count::build(&p, "data/sample.txt", Some("data/counts"), 10);
    insta::assert_snapshot!("wordcount_plan", plan::encode(&p.to_plan().unwrap()));
}

/// The word count as a Graphviz graph (`--dump-plan-dot`): composites as clusters,
/// fused stages coloured. `dot -Tsvg` draws the snapshot.
#[test]
fn pipeline_graph_snapshot() {
    let p = Pipeline::new(PipelineOptions::default());
    word_count::build(&p, "data/sample.txt", Some("data/counts"), 10);
    insta::assert_snapshot!(
        "wordcount_graph",
        tidewater_runners_core::dot::render_dot(&p.to_plan().unwrap()).unwrap()
    );
}

#[test]
fn fused_stages_snapshot() {
    let p = Pipeline::new(PipelineOptions::default());
    word_count::build(&p, "data/sample.txt", Some("data/counts"), 10);
    let decoded = plan::decode(&plan::encode(&p.to_plan().unwrap())).unwrap();
    let exec = tidewater_runners_core::translate(&decoded).unwrap();
    insta::assert_snapshot!(
        "wordcount_stages",
        tidewater_runners_core::fusion::describe(&exec)
    );
}

/// The job graph the status page draws: the engine's tasks, what each fuses, and how
/// data travels between them.
#[test]
fn job_graph_snapshot() {
    let p = Pipeline::new(PipelineOptions::default());
    word_count::build(&p, "data/sample.txt", Some("data/counts"), 10);
    let graph = tidewater_runners_core::job_graph::job_graph(&p.to_plan().unwrap(), true).unwrap();
    insta::assert_snapshot!(
        "wordcount_job_graph",
        serde_json::to_string_pretty(&graph).unwrap()
    );
}

#[test]
fn counts_equal_the_oracle_on_several_schedules() {
    tidewater_examples::register_runners();
    let expected = oracle(&std::fs::read_to_string(word_count::SAMPLE).unwrap());
    let mut top: Vec<(u64, String)> = expected.iter().map(|(w, c)| (*c, w.clone())).collect();
    top.sort_by(|a, b| b.cmp(a));
    top.truncate(5);
    for (seed, validate) in [(1, true), (2, true), (3, true), (0, false)] {
        let p = Pipeline::new(PipelineOptions {
            seed: Some(seed),
            no_validate: !validate,
            ..Default::default()
        });
        word_count::build(&p, word_count::SAMPLE, None, 5).capture("counts");
        let r = p.run().unwrap();
        let got: BTreeMap<String, u64> = r
            .captured_values::<(String, u64)>("counts")
            .unwrap()
            .into_iter()
            .collect();
        assert_eq!(got, expected, "seed {seed}");
        assert_eq!(
            r.captured_values::<Vec<(u64, String)>>("top").unwrap(),
            vec![top.clone()]
        );
    }
}

#[test]
fn the_binary_prints_the_top_words_and_writes_every_count() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join("counts");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_wordcount"))
        .args([
            "--runner=direct",
            "--top=3",
            "--output",
            prefix.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    let expected = oracle(&std::fs::read_to_string(word_count::SAMPLE).unwrap());
    assert!(
        stdout.contains(&format!("{:>8}  the\n", expected["the"])),
        "{stdout}"
    );
    let written = std::fs::read_to_string(format!("{}-00000-of-00001", prefix.display())).unwrap();
    let mut lines: Vec<&str> = written.lines().collect();
    lines.sort();
    let mut want: Vec<String> = expected.iter().map(|(w, c)| format!("{w}: {c}")).collect();
    want.sort();
    assert_eq!(lines, want);
}

/// The README's first command prints the same on every runner (a runner that cannot
/// run a plan is refused up front: `sdk/tests` and the conformance suite test that).
#[test]
fn the_binary_prints_the_same_on_every_runner() {
    let run = |runner: &str| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_wordcount"))
            .args([&format!("--runner={runner}"), "--workers=2"])
            .env("RUST_BACKTRACE", "0")
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{runner}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let direct = std::process::Command::new(env!("CARGO_BIN_EXE_wordcount"))
        .output()
        .unwrap();
    let direct = String::from_utf8(direct.stdout).unwrap();
    assert!(direct.contains("the"), "{direct}");
    for runner in ["native", "microbatch"] {
        assert_eq!(run(runner), direct, "{runner}");
    }
}

#[test]
fn stateful_plan_snapshot() {
    let p = Pipeline::new(PipelineOptions::default());
    tidewater_examples::stateful_word_count::build(&p, "data/sample.txt");
    insta::assert_snapshot!(
        "stateful_wordcount_plan",
        plan::encode(&p.to_plan().unwrap())
    );
}

#[test]
fn running_counts_reach_the_word_counts() {
    tidewater_examples::register_runners();
    let expected = oracle(&std::fs::read_to_string(word_count::SAMPLE).unwrap());
    let p = Pipeline::new(PipelineOptions {
        seed: Some(9),
        ..Default::default()
    });
    tidewater_examples::stateful_word_count::build(&p, word_count::SAMPLE).capture("running");
    let updates = p
        .run()
        .unwrap()
        .captured_values::<(String, u64)>("running")
        .unwrap();
    // Every word gets exactly the updates 1, 2, ..., its count.
    let mut want: Vec<(String, u64)> = expected
        .iter()
        .flat_map(|(w, c)| (1..=*c).map(move |i| (w.clone(), i)))
        .collect();
    want.sort();
    let mut got = updates;
    got.sort();
    assert_eq!(got, want);
}

#[test]
fn streaming_plan_snapshot() {
    let p = Pipeline::new(PipelineOptions::default());
    tidewater_examples::streaming_word_count::build(&p, 24_000, 2_000.0, 42);
    insta::assert_snapshot!(
        "streaming_wordcount_plan",
        plan::encode(&p.to_plan().unwrap())
    );
}

#[test]
fn streaming_counts_add_up_per_window() {
    tidewater_examples::register_runners();
    let p = Pipeline::new(PipelineOptions {
        seed: Some(4),
        ..Default::default()
    });
    tidewater_examples::streaming_word_count::build(&p, 3_000, 0.0, 42).capture("counts");
    let r = p.run().unwrap();
    // Accumulating panes: each word's last pane in each window holds its full count.
    let mut last: BTreeMap<(String, tidewater::BoundedWindow), (u64, u64)> = BTreeMap::new();
    for wv in r.captured::<(String, u64)>("counts").unwrap() {
        let w = wv.windows.iter().next().unwrap().clone();
        let e = last.entry((wv.value.0.clone(), w)).or_insert((0, 0));
        if wv.pane.index >= e.0 {
            *e = (wv.pane.index, wv.value.1);
        }
    }
    let got: BTreeMap<(String, tidewater::BoundedWindow), u64> =
        last.into_iter().map(|(k, (_, c))| (k, c)).collect();
    assert_eq!(got, streaming_oracle());
}

/// The streaming word count's 3,000 records counted in plain Rust: record i's words, at
/// its event time, per word and 10 s window.
fn streaming_oracle() -> BTreeMap<(String, tidewater::BoundedWindow), u64> {
    let mut oracle: BTreeMap<(String, tidewater::BoundedWindow), u64> = BTreeMap::new();
    let seq = tidewater_transforms::GenerateSequence::new(0, Some(3_000))
        .with_event_time(0, 1)
        .with_late_records(97, 12_000);
    for i in 0..3_000u64 {
        let t = seq.event_time(i).millis();
        let start = t.div_euclid(10_000) * 10_000;
        let w = tidewater::BoundedWindow::Interval {
            start: tidewater::Timestamp(start),
            end: tidewater::Timestamp(start + 10_000),
        };
        for word in tidewater_examples::streaming_word_count::words_of(42, i) {
            *oracle.entry((word, w.clone())).or_insert(0) += 1;
        }
    }
    oracle
}

#[test]
fn streaming_wordcount_prints_each_words_panes_as_they_fire() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_streaming_wordcount"))
        .args([
            "--per-word",
            "--records",
            "3000",
            "--rate",
            "0",
            "--seed",
            "4",
        ])
        .output()
        .expect("runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // `window [  0s,   10s) tide pane 2 Early 591`: per (word, window), its panes in
    // order, each once, counts growing (accumulating); the last holds the full count.
    type Panes = BTreeMap<(String, tidewater::BoundedWindow), Vec<(u64, String, u64)>>;
    let mut panes: Panes = BTreeMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Some(rest) = line.strip_prefix("window [") else {
            continue;
        };
        let (window, rest) = rest.split_once(") ").expect("window, then the pane");
        let start: i64 = window.split('s').next().unwrap().trim().parse().unwrap();
        let f: Vec<&str> = rest.split(' ').collect();
        assert_eq!((f.len(), f[1]), (5, "pane"), "{line}");
        let w = tidewater::BoundedWindow::Interval {
            start: tidewater::Timestamp(start * 1000),
            end: tidewater::Timestamp(start * 1000 + 10_000),
        };
        let timing = f[3].to_string();
        assert!(["Early", "OnTime", "Late"].contains(&f[3]), "{line}");
        panes.entry((f[0].to_string(), w)).or_default().push((
            f[2].parse().unwrap(),
            timing,
            f[4].parse().unwrap(),
        ));
    }
    let mut last = BTreeMap::new();
    for (kw, mut ps) in panes {
        ps.sort();
        let indexes: Vec<u64> = ps.iter().map(|p| p.0).collect();
        assert_eq!(
            indexes,
            (0..ps.len() as u64).collect::<Vec<_>>(),
            "{kw:?}: {ps:?}"
        );
        assert!(ps.windows(2).all(|p| p[0].2 <= p[1].2), "{kw:?}: {ps:?}");
        last.insert(kw, ps.last().unwrap().2);
    }
    assert_eq!(last, streaming_oracle());
}

#[test]
fn an_unknown_runner_is_refused_while_parsing_the_flags() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_wordcount"))
        .arg("--runner=bogus")
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("unknown runner 'bogus'; known runners: direct, microbatch, native"),
        "{stderr}"
    );
}

#[test]
fn a_closed_stdout_ends_the_program_quietly() {
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_wordcount"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("runs");
    // Close the reading end before the program writes: its writes fail with EPIPE.
    drop(child.stdout.take());
    let out = child.wait_with_output().expect("ends");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn dump_plan_says_where_the_plan_went_and_a_failure_names_its_cause_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("plan.json");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_wordcount"))
        .arg("--dump-plan")
        .arg(&path)
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("wrote the plan to {}", path.display())),
        "{stderr}"
    );
    assert!(path.exists());
    let missing = dir.path().join("no/such/dir/plan.json");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_wordcount"))
        .arg("--dump-plan")
        .arg(&missing)
        .env("RUST_BACKTRACE", "1")
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr.matches("No such file or directory").count(),
        1,
        "{stderr}"
    );
    // One clean error, no backtrace even with RUST_BACKTRACE set.
    assert!(!stderr.to_lowercase().contains("backtrace"), "{stderr}");
    assert!(stderr.starts_with("Error: "), "{stderr}");
}

#[test]
fn a_saved_plan_runs_again_and_one_naming_unknown_functions_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("plan.json");
    let run = |args: &[&std::ffi::OsStr]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_wordcount"))
            .args(args)
            .output()
            .expect("runs")
    };
    let first = run(&["--dump-plan".as_ref(), path.as_os_str()]);
    assert!(first.status.success());
    let again = run(&["--plan".as_ref(), path.as_os_str()]);
    assert!(
        again.status.success(),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    assert_eq!(again.stdout, first.stdout);
    assert!(String::from_utf8_lossy(&again.stderr).contains("running the saved plan"));
    // A plan naming a function this binary lacks.
    let json = std::fs::read_to_string(&path).unwrap().replacen(
        "tidewater_examples::word_count::extract_words",
        "somebody_else::extract_words",
        1,
    );
    let other = dir.path().join("other.json");
    std::fs::write(&other, json).unwrap();
    let refused = run(&["--plan".as_ref(), other.as_os_str()]);
    assert_eq!(refused.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("somebody_else::extract_words"), "{stderr}");
}

/// Every line of the files `<prefix>-*`, sorted.
fn output_lines(prefix: &std::path::Path) -> Vec<String> {
    let dir = prefix.parent().unwrap();
    let stem = format!("{}-", prefix.file_name().unwrap().to_string_lossy());
    let mut lines = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with(&stem)
        {
            lines.extend(
                std::fs::read_to_string(&path)
                    .unwrap()
                    .lines()
                    .map(str::to_string),
            );
        }
    }
    lines.sort();
    lines
}

/// The `Format` step is a closure, named in the plan by its call site: a plan saved
/// by one process runs in another that built the same pipeline, on the native runner's
/// two-process cluster too; a process that did not build it refuses the plan.
#[test]
fn a_plan_with_a_closure_runs_in_another_process_and_on_a_local_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&std::ffi::OsStr]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_wordcount"))
            .args(args)
            .output()
            .expect("runs")
    };
    let plan = dir.path().join("plan.json");
    let out = dir.path().join("counts");
    let first = run(&[
        "--output".as_ref(),
        out.as_os_str(),
        "--dump-plan".as_ref(),
        plan.as_os_str(),
    ]);
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let json = std::fs::read_to_string(&plan).unwrap();
    assert!(
        json.contains("{{closure}}, (alloc::string::String, u64), alloc::string::String>@examples/src/word_count.rs:"),
        "{json}"
    );
    let direct = output_lines(&out);
    assert!(direct.iter().any(|l| l.starts_with("the: ")), "{direct:?}");
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let path = entry.unwrap().path();
        if path
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("counts-")
        {
            std::fs::remove_file(path).unwrap();
        }
    }
    // A second process builds the same pipeline, then runs the saved plan.
    let again = run(&[
        "--output".as_ref(),
        out.as_os_str(),
        "--plan".as_ref(),
        plan.as_os_str(),
    ]);
    assert!(
        again.status.success(),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    assert_eq!(output_lines(&out), direct);
    // One that built another pipeline (no --output: no Format, no file sink) is
    // refused before it runs (here by the first type it lacks).
    let refused = run(&["--plan".as_ref(), plan.as_os_str()]);
    assert_eq!(refused.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("must construct the same pipeline first"),
        "{stderr}"
    );
    // Two processes of the native runner, each building the pipeline and decoding it.
    let cluster_out = dir.path().join("cluster");
    let cluster = run(&[
        "--runner=native".as_ref(),
        "--local-cluster=2".as_ref(),
        "--output".as_ref(),
        cluster_out.as_os_str(),
    ]);
    assert!(
        cluster.status.success(),
        "{}",
        String::from_utf8_lossy(&cluster.stderr)
    );
    assert_eq!(output_lines(&cluster_out), direct);
    let top = |out: &[u8]| {
        let text = String::from_utf8_lossy(out).to_string();
        text.lines()
            .filter(|l| !l.starts_with("All counts written"))
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    assert_eq!(top(&cluster.stdout), top(&first.stdout));
}

#[test]
fn ctrl_c_drains_a_streaming_run_and_ends_it_cleanly() {
    use std::io::BufRead;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_streaming_wordcount"))
        .args(["--records", "0", "--max-duration", "120s", "--no-validate"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("runs");
    // Wait for the first pane: the run is streaming.
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().expect("a pane").unwrap();
    assert!(first.starts_with("window ["), "{first}");
    let started = std::time::Instant::now();
    let kill = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(kill.success());
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let out = child.wait_with_output().expect("ends");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("draining"), "{stderr}");
    assert!(started.elapsed() < std::time::Duration::from_secs(30));
    // Draining fires the open windows: their final panes come out.
    assert!(rest.iter().any(|l| l.contains("OnTime")), "{rest:?}");
}

#[test]
fn dump_plan_dot_writes_the_graph() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("wc.dot");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_wordcount"))
        .arg("--dump-plan-dot")
        .arg(&path)
        .output()
        .expect("runs");
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("wrote the pipeline graph to {}", path.display())),
        "{stderr}"
    );
    let dot = std::fs::read_to_string(&path).unwrap();
    assert!(dot.starts_with("digraph pipeline {"), "{dot}");
    assert!(dot.contains("subgraph \"cluster_CountWords\""), "{dot}");
}

/// `stateful_wordcount` prints its summary from captures of combines (not of every
/// update): the updates (one per word occurrence), the distinct words and the top
/// words by the count they reached, the same on every runner.
#[test]
fn the_stateful_binary_prints_the_summary_of_the_running_counts_on_every_runner() {
    let expected = oracle(&std::fs::read_to_string(word_count::SAMPLE).unwrap());
    let mut top: Vec<(u64, &String)> = expected.iter().map(|(w, c)| (*c, w)).collect();
    top.sort_by(|a, b| b.cmp(a));
    let mut want = format!(
        "{} updates for {} words; running counts reached:\n",
        expected.values().sum::<u64>(),
        expected.len()
    );
    for (c, w) in top.into_iter().take(5) {
        want.push_str(&format!("{c:>8}  {w}\n"));
    }
    for runner in ["direct", "native", "microbatch"] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_stateful_wordcount"))
            .args([&format!("--runner={runner}"), "--top=5"])
            .args((runner != "direct").then_some("--workers=2"))
            .env("RUST_BACKTRACE", "0")
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{runner}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(String::from_utf8(out.stdout).unwrap(), want, "{runner}");
    }
}
