//! Benchmarks: workloads × runners × workers in one command, a table, one JSON object
//! per run, and `--report` to render `docs/benchmarks.md` with a chart per workload.
//!
//! ```sh
//! cargo run --release -p tidewater-examples --bin bench -- --runner direct --workers 1,2 --words 2000000
//! cargo run --release -p tidewater-examples --bin bench -- --report --json /tmp/tidewater-bench.json
//! ```
//!
//! Each measurement runs in a child process (this binary again, with hidden flags), so
//! that its peak RSS is its own; Nexmark runs in the `nexmark` binary's process for the
//! same reason (and because `tidewater-nexmark` depends on this crate). Before a
//! setting is timed, its output on a small input is compared with the direct runner's.

use anyhow::{bail, Context};
use clap::{Parser, ValueEnum};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;
use tidewater::{Pipeline, PipelineOptions};
use tidewater_examples::bench::check::compare_outputs;
use tidewater_examples::bench::input::{GenOptions, Input};
use tidewater_examples::bench::record::{read_records, BenchRecord, RunStart};
use tidewater_examples::bench::report::write_report;
use tidewater_examples::bench::workloads::{WordCount, LINES};
use tidewater_examples::outln;

/// Runs workloads on runners and reports throughput and peak RSS.
#[derive(Parser)]
#[command(name = "bench")]
struct Args {
    /// Runners to measure, comma-separated (any registered runner).
    #[arg(long, default_value = "direct", value_delimiter = ',')]
    runner: Vec<String>,
    /// Workers per process, comma-separated; passed as `--workers N` to every runner
    /// but `direct`, which has one.
    #[arg(long, default_value = "1", value_delimiter = ',')]
    workers: Vec<u32>,
    /// Processes, comma-separated: a run with N > 1 launches a local cluster of N
    /// processes on loopback (`--local-cluster N`, word counts on the engine runners
    /// only); its time includes starting the processes and their connection.
    #[arg(long, default_value = "1", value_delimiter = ',')]
    processes: Vec<u32>,
    /// Set by a local cluster's supervisor on each of its processes.
    #[arg(long, hide = true)]
    process_id: Option<u64>,
    /// Set by a local cluster's supervisor on each of its processes.
    #[arg(long, hide = true)]
    hosts: Option<PathBuf>,
    /// A runner option (`KEY=VALUE`, may be repeated) for every runner but `direct`,
    /// e.g. the native runner's `bundle_size=4096`.
    #[arg(long = "runner-option", value_name = "KEY=VALUE", value_parser = tidewater::parse_key_value)]
    runner_options: Vec<(String, String)>,
    /// Checkpoint intervals in milliseconds to measure each distributed runner with,
    /// comma-separated; `0` is without checkpoints (e.g. `0,1000`: the cost of
    /// checkpoints every second). Each checkpointed run writes into a fresh temporary
    /// directory.
    #[arg(long, default_value = "0", value_delimiter = ',')]
    checkpoint_ms: Vec<u64>,
    /// Workloads, comma-separated: stateless, count, stateful, windowed, nexmark-q0 ..
    /// nexmark-q14; or the groups wordcount, nexmark, all.
    #[arg(long, default_value = "wordcount", value_delimiter = ',')]
    workload: Vec<String>,
    /// Words to generate for the word counts (rounded to whole lines of 10 words on
    /// average, as `gen_input.py --lines words/10` writes them).
    #[arg(long, default_value_t = 10_000_000)]
    words: u64,
    /// Generator seed.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Vocabulary size.
    #[arg(long, default_value_t = 10_000)]
    vocab: usize,
    /// Use the files `gen_input.py --out PREFIX` wrote (`PREFIX.txt`, `PREFIX.ts.txt`,
    /// `PREFIX.meta.json`) instead of generating them.
    #[arg(long, value_name = "PREFIX")]
    input: Option<PathBuf>,
    /// Words of the input on which outputs are checked against the direct runner's.
    #[arg(long, default_value_t = 20_000)]
    check_words: u64,
    /// Nexmark events per timed run.
    #[arg(long, default_value_t = 1_000_000)]
    events: u64,
    /// Nexmark events of Q12's timed runs, at most: Q12 replays its events through a
    /// TestStream on a scripted processing clock, which holds them all in memory and
    /// slows down with their number (about 500 MB and 3 s at 50,000 on the direct runner).
    #[arg(long, default_value_t = 50_000)]
    q12_events: u64,
    /// Nexmark events of the output check.
    #[arg(long, default_value_t = 10_000)]
    check_events: u64,
    /// A smoke run: 100,000 words (20,000 checked), 10,000 Nexmark events (2,000
    /// checked), whatever the size flags say.
    #[arg(long)]
    quick: bool,
    /// Timed runs of each setting; each is recorded.
    #[arg(long, default_value_t = 1)]
    reps: u32,
    /// Keep the direct runner's validation on while timing (off by default: this
    /// measures speed; the check's reference run always validates).
    #[arg(long)]
    validate: bool,
    /// Where the runs' records go, one JSON object a line (written anew); `--report`
    /// reads them from here.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Render the report (`DOCS/benchmarks.md`, `DOCS/benchmarks/*.svg`) from `--json`
    /// instead of running anything.
    #[arg(long)]
    report: bool,
    /// The docs directory `--report` writes into.
    #[arg(long, value_name = "DOCS", default_value = "docs")]
    docs: PathBuf,
    /// The `nexmark` binary (by default the one next to this binary: build it with
    /// `cargo build [--release] -p tidewater-nexmark`).
    #[arg(long, value_name = "PATH")]
    nexmark_bin: Option<PathBuf>,
    /// Internal: run one measurement in this process and write its result to
    /// `--child-out` (this is how the parent runs each measurement).
    #[arg(long, value_enum, hide = true)]
    child: Option<ChildMode>,
    #[arg(long, hide = true)]
    child_out: Option<PathBuf>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum ChildMode {
    /// Run and write the output lines.
    Output,
    /// Run into a counting sink and write the record.
    Time,
}

/// What a child runs.
struct Setting<'a> {
    workload: &'a str,
    runner: &'a str,
    workers: u32,
    /// Processes of a local cluster (1: this process only).
    processes: u32,
    /// In a process of a local cluster: its index and the hosts file.
    cluster_process: Option<(u64, PathBuf)>,
    runner_options: &'a [(String, String)],
    /// Checkpoint interval (ms), if checkpointing.
    checkpoint_ms: Option<u64>,
}

impl Setting<'_> {
    fn options(&self, validate: bool) -> PipelineOptions {
        let mut o = PipelineOptions {
            runner: self.runner.to_string(),
            no_validate: !validate,
            ..Default::default()
        };
        if self.runner != "direct" {
            o.engine.workers = u64::from(self.workers);
            if self.processes > 1 {
                match &self.cluster_process {
                    // A process of the cluster its supervisor launched.
                    Some((id, hosts)) => {
                        o.engine.processes = u64::from(self.processes);
                        o.engine.process_id = *id;
                        o.engine.hosts = Some(hosts.clone());
                    }
                    None => o.engine.local_cluster = Some(u64::from(self.processes)),
                }
            }
            o.runner_options = self.runner_options.to_vec();
            if let Some(ms) = self.checkpoint_ms {
                // The micro-batch runner checkpoints every batch: the interval is its
                // batch interval.
                let interval = Some(std::time::Duration::from_millis(ms));
                if self.runner == "microbatch" {
                    o.engine.batch_interval = interval;
                } else {
                    o.engine.checkpoint_interval = interval;
                }
                o.engine.checkpoint_dir = Some(std::env::temp_dir().join(format!(
                    "tidewater-bench-checkpoints-{}",
                    std::process::id()
                )));
            }
        }
        o
    }
}

fn main() -> std::process::ExitCode {
    tidewater_examples::report(run())
}

fn run() -> anyhow::Result<()> {
    tidewater_examples::register_runners();
    let mut args = Args::parse();
    if args.quick {
        (args.words, args.check_words) = (100_000, 20_000);
        (args.events, args.check_events) = (10_000, 2_000);
        args.q12_events = args.q12_events.min(args.events);
    }
    if let Some(mode) = args.child {
        return child(&args, mode);
    }
    let json = args
        .json
        .clone()
        .unwrap_or_else(|| std::env::temp_dir().join("tidewater-bench.json"));
    if args.report {
        let records = read_records(&json)?;
        write_report(&records, &args.docs, &json)?;
        outln!(
            "wrote {} and {} from {} runs in {}",
            args.docs.join("benchmarks.md").display(),
            args.docs.join("benchmarks").join("*.svg").display(),
            records.len(),
            json.display()
        );
        return Ok(());
    }
    for r in &args.runner {
        tidewater::runner::lookup_runner(r)?;
    }
    let workloads = expand_workloads(&args.workload)?;
    let dir = std::env::temp_dir().join("tidewater-bench");
    let (full, small) = inputs(&args, &dir, &workloads)?;
    let mut out = std::fs::File::create(&json)
        .with_context(|| format!("cannot create {}", json.display()))?;
    let mut failures = 0;
    print_header();
    for workload in &workloads {
        let oracle = match reference_output(&args, workload, small.as_ref(), &dir) {
            Ok(lines) => lines,
            Err(e) => {
                failures += 1;
                print_error(
                    workload,
                    "direct",
                    1,
                    &format!("reference run failed: {e:#}"),
                );
                continue;
            }
        };
        for runner in &args.runner {
            let combinations: Vec<(u32, u32, u64)> = args
                .workers
                .iter()
                .flat_map(|&w| args.processes.iter().map(move |&p| (w, p)))
                .flat_map(|(w, p)| args.checkpoint_ms.iter().map(move |&c| (w, p, c)))
                .collect();
            for (workers, processes, checkpoint_ms) in combinations {
                if processes > 1 && (runner == "direct" || nexmark_query(workload).is_some()) {
                    eprintln!("note: skipping {workload} on {runner} with {processes} processes: only word counts on the engine runners run as a local cluster");
                    continue;
                }
                if runner == "direct" && workers != 1 {
                    eprintln!("note: skipping {workload} on direct with {workers} workers: the direct runner has one");
                    continue;
                }
                if runner == "direct" && checkpoint_ms > 0 {
                    continue;
                }
                if workload == "nexmark-q12" && checkpoint_ms > 0 {
                    // Every TestStream event is an epoch of its own on the distributed
                    // runners, so with checkpoints each event writes one: not a figure
                    // worth timing.
                    eprintln!("note: skipping {workload} with checkpoints: a TestStream checkpoints every event");
                    continue;
                }
                let setting = Setting {
                    workload,
                    runner,
                    workers,
                    processes,
                    cluster_process: None,
                    runner_options: &args.runner_options,
                    checkpoint_ms: (checkpoint_ms > 0).then_some(checkpoint_ms),
                };
                let checked = output(&args, &setting, args.validate, small.as_ref(), &dir)
                    .and_then(|lines| {
                        compare_outputs(oracle.clone(), lines).map_err(anyhow::Error::msg)
                    });
                if let Err(e) = checked {
                    failures += 1;
                    eprintln!("{workload} on {runner} W={workers}: {e:#}");
                    print_error(workload, runner, workers, &format!("check failed: {e:#}"));
                    continue;
                }
                for _ in 0..args.reps {
                    match timed(&args, &setting, full.as_ref(), &dir) {
                        Ok(record) => {
                            print_row(&record);
                            use std::io::Write;
                            writeln!(out, "{}", record.to_json_line())?;
                        }
                        Err(e) => {
                            failures += 1;
                            print_error(workload, runner, workers, &format!("{e:#}"));
                            break;
                        }
                    }
                }
            }
        }
    }
    outln!("records in {}", json.display());
    if failures > 0 {
        bail!("{failures} setting(s) failed (see the table)");
    }
    Ok(())
}

/// The workloads named, groups expanded, in the order given.
fn expand_workloads(names: &[String]) -> anyhow::Result<Vec<String>> {
    let nexmark = (0..=14).map(|q| format!("nexmark-q{q}"));
    let wordcount = WordCount::ALL.iter().map(|w| w.name().to_string());
    let mut out: Vec<String> = Vec::new();
    for name in names {
        let add: Vec<String> = match name.as_str() {
            "wordcount" => wordcount.clone().collect(),
            "nexmark" => nexmark.clone().collect(),
            "all" => wordcount.clone().chain(nexmark.clone()).collect(),
            n if WordCount::from_name(n).is_some() || nexmark.clone().any(|q| q == n) => {
                vec![n.to_string()]
            }
            n => bail!("unknown workload '{n}': stateless, count, stateful, windowed, nexmark-q0 .. nexmark-q14, wordcount, nexmark or all"),
        };
        for w in add {
            if !out.contains(&w) {
                out.push(w);
            }
        }
    }
    Ok(out)
}

/// The timed input and the check's, if a word count is among the workloads.
fn inputs(
    args: &Args,
    dir: &Path,
    workloads: &[String],
) -> anyhow::Result<(Option<Input>, Option<Input>)> {
    if !workloads.iter().any(|w| WordCount::from_name(w).is_some()) {
        return Ok((None, None));
    }
    let options = |words: u64| GenOptions {
        lines: words.div_ceil(10).max(1),
        seed: args.seed,
        vocab: args.vocab,
        ..Default::default()
    };
    let t = Instant::now();
    let full = match &args.input {
        Some(prefix) => Input::open(prefix)?,
        None => Input::cached(dir, &options(args.words))?,
    };
    // The check's input is the first lines of the same text (the script's output for
    // fewer lines is a prefix of its output for more).
    let small = Input::cached(dir, &options(args.check_words.min(full.meta.words)))?;
    eprintln!(
        "input: {} words in {} lines ({}), check on {} words; ready in {:.1}s",
        full.meta.words,
        full.meta.lines,
        full.text.display(),
        small.meta.words,
        t.elapsed().as_secs_f64()
    );
    Ok((Some(full), Some(small)))
}

/// The direct runner's output (validation on) for the check.
fn reference_output(
    args: &Args,
    workload: &str,
    small: Option<&Input>,
    dir: &Path,
) -> anyhow::Result<Vec<String>> {
    let setting = Setting {
        workload,
        runner: "direct",
        workers: 1,
        processes: 1,
        cluster_process: None,
        runner_options: &[],
        checkpoint_ms: None,
    };
    output(args, &setting, true, small, dir)
}

/// The output lines of `setting` on the check's input, from a child process.
fn output(
    args: &Args,
    setting: &Setting<'_>,
    validate: bool,
    small: Option<&Input>,
    dir: &Path,
) -> anyhow::Result<Vec<String>> {
    let file = dir.join(format!("output-{}.txt", std::process::id()));
    let _ = std::fs::remove_file(&file);
    let mut cmd = child_command(args, setting, validate, small, args.check_events, &file)?;
    if nexmark_query(setting.workload).is_some() {
        // The nexmark binary writes one file per query into a directory.
        let _ = std::fs::remove_dir_all(&file);
        cmd.arg("--outputs-dir").arg(&file);
    } else {
        cmd.args(["--child", "output"]);
    }
    run_child(cmd)?;
    let path = match nexmark_query(setting.workload) {
        Some(q) => file.join(format!("Q{q}.txt")),
        None => file.clone(),
    };
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("the child wrote no output to {}", path.display()))?;
    let _ = std::fs::remove_dir_all(&file);
    let _ = std::fs::remove_file(&file);
    Ok(text.lines().map(str::to_string).collect())
}

/// One timed run of `setting` on the full input, in a child process.
fn timed(
    args: &Args,
    setting: &Setting<'_>,
    full: Option<&Input>,
    dir: &Path,
) -> anyhow::Result<BenchRecord> {
    let file = dir.join(format!("record-{}.json", std::process::id()));
    let _ = std::fs::remove_file(&file);
    let events = match setting.workload {
        "nexmark-q12" => args.events.min(args.q12_events),
        _ => args.events,
    };
    let mut cmd = child_command(args, setting, args.validate, full, events, &file)?;
    let stdout = if nexmark_query(setting.workload).is_some() {
        cmd.arg("--json");
        run_child(cmd)?
    } else {
        cmd.args(["--child", "time"]);
        run_child(cmd)?;
        std::fs::read_to_string(&file).context("the child wrote no record")?
    };
    let _ = std::fs::remove_file(&file);
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .context("the child printed no record")?;
    serde_json::from_str(line).with_context(|| format!("not a record: {line}"))
}

fn nexmark_query(workload: &str) -> Option<&str> {
    workload.strip_prefix("nexmark-q")
}

/// The command of a child running `setting`: this binary for the word counts, the
/// `nexmark` binary for Nexmark.
fn child_command(
    args: &Args,
    setting: &Setting<'_>,
    validate: bool,
    input: Option<&Input>,
    events: u64,
    out: &Path,
) -> anyhow::Result<Command> {
    let options = setting.options(validate);
    let mut cmd;
    if let Some(q) = nexmark_query(setting.workload) {
        let bin = match &args.nexmark_bin {
            Some(b) => b.clone(),
            None => std::env::current_exe()?.with_file_name("nexmark"),
        };
        if !bin.exists() {
            bail!(
                "no nexmark binary at {}: build it with `cargo build{} -p tidewater-nexmark` or give --nexmark-bin",
                bin.display(),
                if cfg!(debug_assertions) { "" } else { " --release" }
            );
        }
        cmd = Command::new(bin);
        cmd.args(["--query", q, "--events", &events.to_string()]);
    } else {
        let input = input.context("no input was generated")?;
        cmd = Command::new(std::env::current_exe()?);
        cmd.args(["--workload", setting.workload])
            .arg("--input")
            .arg(&input.text)
            .arg("--child-out")
            .arg(out);
    }
    cmd.args(["--runner", &options.runner]);
    if nexmark_query(setting.workload).is_some() {
        if options.no_validate {
            cmd.arg("--no-validate");
        }
        for (k, v) in &options.runner_options {
            cmd.arg("--runner-option").arg(format!("{k}={v}"));
        }
        if options.runner != "direct" {
            cmd.arg(format!("--workers={}", setting.workers));
        }
        if let (Some(ms), Some(dir)) = (setting.checkpoint_ms, &options.engine.checkpoint_dir) {
            let dir = dir.join(setting.workload);
            let _ = std::fs::remove_dir_all(&dir);
            let interval = if options.runner == "microbatch" {
                "--batch-interval"
            } else {
                "--checkpoint-interval"
            };
            cmd.arg(format!("{interval}={ms}ms"))
                .arg(format!("--checkpoint-dir={}", dir.display()));
        }
    } else {
        // This binary's child builds the same options from these flags.
        if validate {
            cmd.arg("--validate");
        }
        cmd.args(["--workers", &setting.workers.to_string()]);
        cmd.args(["--processes", &setting.processes.to_string()]);
        for (k, v) in setting.runner_options {
            cmd.arg("--runner-option").arg(format!("{k}={v}"));
        }
        if let Some(ms) = setting.checkpoint_ms {
            cmd.arg(format!("--checkpoint-ms={ms}"));
        }
    }
    Ok(cmd)
}

/// Runs a child; its stdout on success, its stderr's last lines as the error otherwise.
fn run_child(mut cmd: Command) -> anyhow::Result<String> {
    let out = cmd
        .output()
        .with_context(|| format!("cannot start {:?}", cmd.get_program()))?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
        // The child's error and its causes, else the last lines it printed.
        let from = lines
            .iter()
            .position(|l| l.starts_with("Error: "))
            .unwrap_or(lines.len().saturating_sub(6));
        let mut shown: Vec<&str> = lines[from..].iter().take(8).copied().collect();
        if let Some(first) = shown.first_mut() {
            *first = first.strip_prefix("Error: ").unwrap_or(first);
        }
        if lines.len() - from > shown.len() {
            shown.push("...");
        }
        bail!("{} ({})", shown.join("\n"), out.status);
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// In the child: one run of one word-count setting.
fn child(args: &Args, mode: ChildMode) -> anyhow::Result<()> {
    let [workload] = args.workload.as_slice() else {
        bail!("a child runs one workload");
    };
    let (Some(prefix), Some(out)) = (&args.input, &args.child_out) else {
        bail!("a child needs --input and --child-out");
    };
    let workload = WordCount::from_name(workload).context("not a word-count workload")?;
    let setting = Setting {
        workload: workload.name(),
        runner: &args.runner[0],
        workers: args.workers[0],
        processes: args.processes[0],
        cluster_process: args.process_id.zip(args.hosts.clone()),
        runner_options: &args.runner_options,
        checkpoint_ms: args.checkpoint_ms.first().copied().filter(|ms| *ms > 0),
    };
    let input = Input::open(prefix)?;
    let mut options = setting.options(args.validate);
    if setting.processes > 1 && options.engine.checkpoint_dir.is_some() {
        // The processes of a cluster share one checkpoint directory; the supervisor
        // starts it empty (the name is reused by the next setting: a checkpoint left
        // there would be restored, a finished job running again as a no-op).
        let dir = out.with_extension("checkpoints");
        if setting.cluster_process.is_none() {
            let _ = std::fs::remove_dir_all(&dir);
        }
        options.engine.checkpoint_dir = Some(dir);
    }
    let checkpoint_dir = options.engine.checkpoint_dir.clone();
    let p = Pipeline::new(options);
    let text = input.text.to_str().context("non-UTF-8 path")?;
    let stamped = input.stamped.to_str().context("non-UTF-8 path")?;
    workload.build(&p, text, stamped, mode == ChildMode::Output);
    match mode {
        ChildMode::Output => {
            let result = p.run()?;
            if let Some(dir) = &checkpoint_dir {
                let _ = std::fs::remove_dir_all(dir);
            }
            let mut lines = result.captured_values::<String>(LINES)?;
            lines.push(String::new());
            std::fs::write(out, lines.join("\n"))?;
        }
        ChildMode::Time => {
            let before = tidewater_examples::committed_count();
            let start = RunStart::now();
            let t = Instant::now();
            p.run()?;
            let seconds = t.elapsed().as_secs_f64();
            let expected = workload.expected_outputs(&input.meta);
            // A local cluster's sinks commit in its processes, not here: its output
            // was checked on the small input (captured through process 0).
            let outputs = if setting.processes > 1 {
                expected
            } else {
                tidewater_examples::committed_count() - before
            };
            if outputs != expected {
                bail!("the sink received {outputs} records, {expected} expected");
            }
            let mut record = BenchRecord::measured(
                workload.name(),
                setting.runner,
                setting.workers,
                input.meta.words,
                seconds,
                outputs,
                start,
            );
            record.validate = args.validate;
            if setting.processes > 1 {
                record.processes = setting.processes;
                record.records_per_s_per_core =
                    record.records_per_s / f64::from(setting.workers * setting.processes);
                // This process only supervised: the processes' peak RSS is not known.
                record.peak_rss_mb = None;
            }
            record.checkpoint = setting.checkpoint_ms.is_some();
            record.checkpoint_interval_ms = setting.checkpoint_ms;
            if let Some(dir) = &checkpoint_dir {
                let _ = std::fs::remove_dir_all(dir);
            }
            std::fs::write(out, record.to_json_line())?;
        }
    }
    Ok(())
}

fn print_header() {
    outln!(
        "{:<14} {:<10} {:>2} {:>2} {:>11} {:>8} {:>11} {:>11} {:>8}  note",
        "workload",
        "runner",
        "W",
        "P",
        "records",
        "seconds",
        "records/s",
        "per core",
        "RSS MB"
    );
}

fn print_row(r: &BenchRecord) {
    use tidewater_examples::bench::report::human;
    outln!(
        "{:<14} {:<10} {:>2} {:>2} {:>11} {:>8.3} {:>11} {:>11} {:>8}  {}",
        r.workload,
        r.runner,
        r.workers,
        r.processes,
        r.records,
        r.seconds,
        human(r.records_per_s),
        human(r.records_per_s_per_core),
        r.peak_rss_mb.map_or("-".into(), |m| format!("{m:.0}")),
        format!(
            "ok{}{}",
            r.checkpoint_interval_ms
                .map(|ms| format!(", checkpoints every {ms} ms"))
                .unwrap_or_default(),
            if r.profile == "debug" {
                " (debug build)"
            } else {
                ""
            }
        )
    );
}

fn print_error(workload: &str, runner: &str, workers: u32, error: &str) {
    let first = error.lines().next().unwrap_or("");
    outln!(
        "{:<14} {:<10} {:>2} {:>2} {:>11} {:>8} {:>11} {:>11} {:>8}  error: {first}",
        workload,
        runner,
        workers,
        1,
        "-",
        "-",
        "-",
        "-",
        "-"
    );
}
