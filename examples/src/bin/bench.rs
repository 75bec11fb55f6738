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
//! The `latency` workload measures a setting's peak and then its latency at half of
//! it; `recovery` kills a process of a local cluster and times the restarted job's
//! first checkpoint. `--compare-peers` runs the peer kit's `run.sh` on the same input
//! afterwards and prints ours/peer ratios (`tidewater_examples::bench::peers`).

use anyhow::{bail, Context};
use clap::{Parser, ValueEnum};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use tidewater::{Pipeline, PipelineOptions};
use tidewater_examples::bench::check::compare_outputs;
use tidewater_examples::bench::input::{GenOptions, Input};
use tidewater_examples::bench::peers::{peer_workloads, ratios, ratios_text, Kit};
use tidewater_examples::bench::record::{read_records, BenchRecord, RunStart};
use tidewater_examples::bench::report::human;
use tidewater_examples::bench::report::write_report;
use tidewater_examples::bench::workloads::{WordCount, LINES};
use tidewater_examples::{crash_job, latency, outln};

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
    /// processes on loopback (`--local-cluster N`, on the engine runners only); its time
    /// includes starting the processes and their connection (a latency run's
    /// percentiles do not: each process counts from its first record).
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
    /// Guarantees to measure the native runner's checkpointed runs with,
    /// comma-separated: `exactly-once` (barrier alignment) and `at-least-once` (no
    /// alignment: duplicates after a failure, for latency), e.g. both to see what
    /// alignment costs. Runs without checkpoints, on other runners and `recovery`
    /// (which checks exactly-once output) are exactly-once only.
    #[arg(long, default_value = "exactly-once", value_delimiter = ',', value_parser = ["exactly-once", "at-least-once"])]
    guarantee: Vec<String>,
    /// Workloads, comma-separated: stateless, count, stateful, windowed, latency,
    /// recovery, nexmark-q0 .. nexmark-q14; or the groups wordcount, nexmark, all.
    /// `latency` measures the peak of a keyed stateful pipeline (`--words` generated
    /// records as fast as they go), then p50/p99/max latency from creation to sink at
    /// half that rate for `--latency-seconds`; `recovery` runs the crash job on an
    /// engine runner in a local cluster (2 processes, or `--processes` if more) with
    /// checkpoints (`--checkpoint-ms`, 1000 if only 0 is given), SIGKILLs one process
    /// and times the restarted job's first checkpoint.
    #[arg(long, default_value = "wordcount", value_delimiter = ',')]
    workload: Vec<String>,
    /// How long the `latency` workload's run at half the peak rate lasts (the first
    /// 10% of its records are not counted: start-up).
    #[arg(long, default_value_t = 5.0, value_name = "SECONDS")]
    latency_seconds: f64,
    /// Also run the peer kit's `run.sh` (Flink, Spark, the hand-written timely
    /// program, ...) on the same input, after our runs: its runs are recorded next to
    /// ours (with the peer's version) and ours/peer ratios are printed per workload
    /// and parallelism (`--workers` is the peers' parallelism, `--reps` their
    /// repetitions). The input is the kit's `PEERS_ROOT/data/wc<lines>` (generated
    /// there, byte for byte as the kit's `gen_input.py` writes it, if missing).
    #[arg(long)]
    compare_peers: bool,
    /// The peer kit: the directory holding `run.sh` and `setup.sh` (not part of this
    /// repository). By default `../shared/peers` next to the repository, if it is there.
    #[arg(long, value_name = "DIR")]
    peers_dir: Option<PathBuf>,
    /// Where the kit's `setup.sh` installed the peers (its `PEERS_ROOT`); by default
    /// `$PEERS_ROOT`, else `$TMPDIR/peers-bench`.
    #[arg(long, value_name = "DIR")]
    peers_root: Option<PathBuf>,
    /// The peers `--compare-peers` runs, comma-separated (`run.sh`'s `PEERS`):
    /// rust-plain, timely, java-plain, flink, spark, bytewax, beam, pyflink-table.
    #[arg(long, default_value = "timely,flink,spark", value_delimiter = ',')]
    peers: Vec<String>,
    /// Words to generate for the word counts (rounded to whole lines of 10 words on
    /// average, as `gen_input.py --lines words/10` writes them).
    #[arg(long, default_value_t = 10_000_000)]
    words: u64,
    /// Also measure what fault tolerance costs on a longer input of this many words
    /// (e.g. 50000000: some ten checkpoints a run at 1 s, where a run of the standard
    /// 10 million takes 0 to 2). After the main runs, each word count's native and
    /// micro-batch single-process settings with and without checkpoints
    /// (`--checkpoint-ms` with 0 among them) run `--cost-reps` times again on it, rep
    /// by rep; their records are marked `cost_run`: the report judges the costs from
    /// them and keeps them out of the throughput tables. The micro-batch runner would
    /// read the bounded input in one batch, so in this pass it runs ten batches of a
    /// tenth of the lines each, on and off alike (`--batch-records`).
    #[arg(long, value_name = "WORDS")]
    cost_words: Option<u64>,
    /// Reps of each setting in the `--cost-words` pass (default: `--reps`). The costs
    /// are medians of rep-by-rep costs, and one long run still swings by some 10% on a
    /// shared VM: more reps narrow the median where the targets sit near the noise.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    cost_reps: Option<u32>,
    /// Micro-batch runs read at most N lines per batch, in batches back to back until
    /// the input's end (Spark's `Trigger.AvailableNow` with a record limit: the
    /// runner's `--trigger available-now --max-records-per-batch N`), instead of the
    /// whole bounded input in one batch. The `--cost-words` pass sets it to a tenth of
    /// its input for the micro-batch runner.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    batch_records: Option<u64>,
    /// The native runner's watermark alignment (its runner option
    /// `max_watermark_drift_ms`, Flink's maxAllowedDrift): an instance of a source
    /// whose watermark runs more than N ms ahead of the slowest instance pauses. The
    /// windowed word count's event times span 500 s that two workers read at
    /// different speeds; without it their reducers hold tens of seconds more windows.
    /// 0: off.
    #[arg(long, value_name = "N", default_value_t = 2000)]
    watermark_drift_ms: u64,
    /// A latency run during which the hypervisor's steal (`/proc/stat`) exceeded this
    /// many percent of the CPU time is recorded as disturbed (`steal_rerun_above`) and
    /// run again, up to `--steal-retries` times: a stall of the VM lands in the p99,
    /// which then measures the host rather than the runner. The report leaves such
    /// runs out of its tables and targets and lists them. A negative limit runs every
    /// latency run again.
    #[arg(
        long,
        value_name = "PCT",
        default_value_t = 5.0,
        allow_negative_numbers = true
    )]
    max_steal: f64,
    /// How many times a latency run disturbed by steal (`--max-steal`) runs again.
    #[arg(long, value_name = "N", default_value_t = 2)]
    steal_retries: u32,
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
    /// Internal: records of a `latency` or `recovery` child.
    #[arg(long, hide = true)]
    child_records: Option<u64>,
    /// Internal: records/s of a `latency` or `recovery` child (0: as fast as possible).
    #[arg(long, hide = true, default_value_t = 0.0)]
    child_rate: f64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum ChildMode {
    /// Run and write the output lines.
    Output,
    /// Run into a counting sink and write the record.
    Time,
    /// Run the crash job in a local cluster (the parent kills one of its processes).
    Recovery,
}

/// What a child runs.
#[derive(Clone)]
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
    /// Checkpoints without alignment (`--guarantee at-least-once`).
    at_least_once: bool,
    /// Micro-batches of at most this many lines, back to back (`--batch-records`).
    batch_records: Option<u64>,
    /// The native runner's watermark alignment (`--watermark-drift-ms`), if on.
    watermark_drift_ms: Option<u64>,
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
            if let (Some(ms), "native") = (self.watermark_drift_ms, self.runner) {
                o.runner_options
                    .push(("max_watermark_drift_ms".into(), ms.to_string()));
            }
            if let (Some(n), "microbatch") = (self.batch_records, self.runner) {
                o.runner_flags.set("trigger", "available-now");
                o.runner_flags.set("max-records-per-batch", n.to_string());
            }
            if let Some(ms) = self.checkpoint_ms {
                // The micro-batch runner checkpoints every batch: the interval is its
                // batch interval.
                if self.runner == "microbatch" {
                    o.runner_flags.set("batch-interval", format!("{ms}ms"));
                } else {
                    o.engine.checkpoint_interval = Some(std::time::Duration::from_millis(ms));
                }
                o.engine.checkpoint_dir = Some(std::env::temp_dir().join(format!(
                    "tidewater-bench-checkpoints-{}",
                    std::process::id()
                )));
                if self.at_least_once {
                    o.engine.guarantee = "at-least-once".into();
                }
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
        args.latency_seconds = args.latency_seconds.min(1.0);
        args.cost_words = args.cost_words.map(|w| w.min(200_000));
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
    // Everything about the peers is checked before anything runs.
    let peers = match args.compare_peers {
        true => {
            if peer_workloads(&workloads).is_empty() {
                bail!("--compare-peers compares the word counts (stateless, count, stateful, windowed): none of them is among the workloads");
            }
            Some(Kit::locate(
                args.peers_dir.as_deref(),
                args.peers_root.as_deref(),
                &args.peers,
            )?)
        }
        false => None,
    };
    let dir = std::env::temp_dir().join("tidewater-bench");
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let (full, small) = inputs(&args, &dir, &workloads, peers.as_ref())?;
    let mut out = std::fs::File::create(&json)
        .with_context(|| format!("cannot create {}", json.display()))?;
    let mut records: Vec<BenchRecord> = Vec::new();
    let mut record = |r: BenchRecord, out: &mut std::fs::File| -> anyhow::Result<()> {
        use std::io::Write;
        print_row(&r);
        writeln!(out, "{}", r.to_json_line())?;
        records.push(r);
        Ok(())
    };
    // Settings that failed (counted from the closures below too).
    let failures = std::cell::Cell::new(0);
    // Latency runs disturbed by steal and run again, recorded before the next outcome.
    let disturbed: std::cell::RefCell<Vec<BenchRecord>> = Default::default();
    // A timed run's record, or its failure counted and shown (after `context`).
    let mut outcome = |setting: &Setting<'_>,
                       result: anyhow::Result<BenchRecord>,
                       context: &str|
     -> anyhow::Result<()> {
        // What the parent set rather than the child measured.
        let mark = |mut r: BenchRecord| {
            if setting.runner == "native" {
                r.max_watermark_drift_ms = setting.watermark_drift_ms;
            }
            r
        };
        for r in disturbed.borrow_mut().drain(..) {
            record(mark(r), &mut out)?;
        }
        match result {
            Ok(r) => record(mark(r), &mut out),
            Err(e) => {
                failures.set(failures.get() + 1);
                print_error(
                    setting.workload,
                    setting.runner,
                    setting.workers,
                    &format!("{context}{e:#}"),
                );
                Ok(())
            }
        }
    };
    // The settings the fault-tolerance pass runs again (`--cost-words`), checked.
    let mut cost_settings: Vec<Vec<Setting<'_>>> = Vec::new();
    print_header();
    for workload in &workloads {
        // The word counts and Nexmark are checked against the direct runner's output;
        // `latency` checks that every record reached the sink, `recovery` that the
        // committed output equals the direct runner's (both in their runs).
        let checked_by_run = matches!(workload.as_str(), "latency" | "recovery");
        let oracle = match checked_by_run {
            true => Vec::new(),
            false => match reference_output(&args, workload, small.as_ref(), &dir) {
                Ok(lines) => lines,
                Err(e) => {
                    failures.set(failures.get() + 1);
                    print_error(
                        workload,
                        "direct",
                        1,
                        &format!("reference run failed: {e:#}"),
                    );
                    continue;
                }
            },
        };
        for runner in &args.runner {
            let mut combinations: Vec<(u32, u32, u64, bool)> = Vec::new();
            for &w in &args.workers {
                for &p in &args.processes {
                    for &c in &args.checkpoint_ms {
                        // A recovery needs a cluster to kill a process of and a
                        // checkpoint to recover from.
                        let c = match workload.as_str() {
                            "recovery" => (p.max(2), if c == 0 { 1000 } else { c }),
                            _ => (p, c),
                        };
                        for g in &args.guarantee {
                            // Only the native runner's checkpoints align; recovery
                            // checks exactly-once output.
                            let at_least_once = g == "at-least-once";
                            if at_least_once
                                && (c.1 == 0 || runner != "native" || workload == "recovery")
                            {
                                continue;
                            }
                            if !combinations.contains(&(w, c.0, c.1, at_least_once)) {
                                combinations.push((w, c.0, c.1, at_least_once));
                            }
                        }
                    }
                }
            }
            // Settings that differ only in their checkpoint interval are what a
            // fault-tolerance cost compares: their runs alternate (off, on, off, on,
            // ...) rather than follow each other, so that the machine's drift over
            // minutes (other load, thermal, page cache) falls on both alike.
            let mut settings: Vec<Setting<'_>> = Vec::new();
            for (workers, processes, checkpoint_ms, at_least_once) in combinations {
                if workload == "recovery" && runner == "direct" {
                    eprintln!(
                        "note: skipping recovery on direct: it has no checkpoints to recover from"
                    );
                    break;
                }
                if processes > 1 && workload != "recovery" && runner == "direct" {
                    eprintln!("note: skipping {workload} on {runner} with {processes} processes: only the engine runners run as a local cluster");
                    continue;
                }
                if runner == "direct" && workers != 1 {
                    eprintln!("note: skipping {workload} on direct with {workers} workers: the direct runner has one");
                    continue;
                }
                if runner == "direct" && checkpoint_ms > 0 {
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
                    at_least_once,
                    batch_records: args.batch_records,
                    watermark_drift_ms: drift(&args),
                };
                if !checked_by_run {
                    let checked = output(&args, &setting, args.validate, small.as_ref(), &dir)
                        .and_then(|lines| {
                            compare_outputs(oracle.clone(), lines).map_err(anyhow::Error::msg)
                        });
                    if let Err(e) = checked {
                        failures.set(failures.get() + 1);
                        eprintln!("{workload} on {runner} W={workers}: {e:#}");
                        print_error(workload, runner, workers, &format!("check failed: {e:#}"));
                        continue;
                    }
                }
                settings.push(setting);
            }
            // The combinations come workers first, then processes: a group is a run of
            // neighbours.
            for group in
                settings.chunk_by(|a, b| (a.workers, a.processes) == (b.workers, b.processes))
            {
                alternate(
                    group,
                    args.reps,
                    |setting| match workload.as_str() {
                        "latency" => {
                            let mut r = timed_latency(&args, setting, &dir)?;
                            for _ in 0..args.steal_retries {
                                match r.steal_pct {
                                    Some(steal) if steal > args.max_steal => eprintln!(
                                        "latency on {} W={} P={}: steal {steal:.1}% during the run, over --max-steal {}%: it runs again",
                                        setting.runner, setting.workers, setting.processes, args.max_steal
                                    ),
                                    _ => break,
                                }
                                r.steal_rerun_above = Some(args.max_steal);
                                disturbed.borrow_mut().push(r);
                                r = timed_latency(&args, setting, &dir)?;
                            }
                            Ok(r)
                        }
                        "recovery" => timed_recovery(setting, &dir),
                        _ => timed(&args, setting, full.as_ref(), &dir),
                    },
                    |setting, result| outcome(setting, result, ""),
                )?;
                let costs = |s: &Setting<'_>| {
                    WordCount::from_name(workload).is_some()
                        && matches!(s.runner, "native" | "microbatch")
                        && s.processes == 1
                };
                if group.iter().all(costs)
                    && group.iter().any(|s| s.checkpoint_ms.is_some())
                    && group.iter().any(|s| s.checkpoint_ms.is_none())
                {
                    cost_settings.push(group.to_vec());
                }
            }
        }
    }
    if let Some(words) = args.cost_words {
        if cost_settings.is_empty() {
            eprintln!("note: --cost-words: no word count ran on native or micro-batch in one process with and without checkpoints (--checkpoint-ms 0,1000): nothing to measure again");
        } else {
            let input = Input::cached(&dir, &gen_options(&args, words))?;
            eprintln!(
                "fault-tolerance pass: {} settings again on {} words ({})",
                cost_settings.iter().map(Vec::len).sum::<usize>(),
                input.meta.words,
                input.text.display()
            );
            for group in &cost_settings {
                // Ten batches of a tenth of the lines: a commit each, as the native
                // runner takes some ten checkpoints.
                let group: Vec<Setting<'_>> = group
                    .iter()
                    .map(|s| Setting {
                        batch_records: (s.runner == "microbatch")
                            .then(|| input.meta.lines.div_ceil(10)),
                        ..s.clone()
                    })
                    .collect();
                alternate(
                    &group,
                    args.cost_reps.unwrap_or(args.reps),
                    |setting| {
                        let mut r = timed(&args, setting, Some(&input), &dir)?;
                        r.cost_run = true;
                        Ok(r)
                    },
                    |setting, result| outcome(setting, result, "fault-tolerance pass: "),
                )?;
            }
        }
    }
    if let Some(kit) = &peers {
        let input = full.as_ref().context("no input was generated")?;
        eprintln!(
            "peers: {} through {}/run.sh (PEERS_ROOT={}), on {}",
            kit.peers.join(", "),
            kit.dir.display(),
            kit.root.display(),
            input.text.display()
        );
        match kit.run(&workloads, &args.workers, args.reps, input) {
            Ok(outcome) => {
                for r in outcome.records {
                    record(r, &mut out)?;
                }
                for (run, e) in outcome.failed {
                    failures.set(failures.get() + 1);
                    print_error(
                        &format!("{} ({})", run.workload, run.variant),
                        &run.peer,
                        run.par,
                        &format!("peer run {} failed: {e}", run.rep),
                    );
                }
            }
            Err(e) => {
                failures.set(failures.get() + 1);
                print_error("peers", "run.sh", 0, &format!("{e:#}"));
            }
        }
        let ratios = ratios(&records);
        outln!(
            "\nours / peer: records/s inside the job of the median run of each setting, same input, same machine, this run"
        );
        tidewater_examples::write_line(format_args!("{}", ratios_text(&ratios).trim_end()));
    }
    outln!("records in {}", json.display());
    if failures.get() > 0 {
        bail!("{} setting(s) failed (see the table)", failures.get());
    }
    Ok(())
}

/// Runs each setting of `group` `reps` times, rep by rep (off, on, off, on, ...), and
/// hands each run's outcome to `each`; a setting that failed is not run again.
fn alternate<'a>(
    group: &[Setting<'a>],
    reps: u32,
    mut run: impl FnMut(&Setting<'a>) -> anyhow::Result<BenchRecord>,
    mut each: impl FnMut(&Setting<'a>, anyhow::Result<BenchRecord>) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let mut failed = vec![false; group.len()];
    for _ in 0..reps {
        for (setting, failed) in group.iter().zip(failed.iter_mut()) {
            if *failed {
                continue;
            }
            let result = run(setting);
            *failed = result.is_err();
            each(setting, result)?;
        }
    }
    Ok(())
}

/// The generator's options for about `words` words.
fn gen_options(args: &Args, words: u64) -> GenOptions {
    GenOptions {
        lines: words.div_ceil(10).max(1),
        seed: args.seed,
        vocab: args.vocab,
        ..Default::default()
    }
}

/// The workloads named, groups expanded, in the order given.
fn expand_workloads(names: &[String]) -> anyhow::Result<Vec<String>> {
    let nexmark = (0..=14).map(|q| format!("nexmark-q{q}"));
    let wordcount = WordCount::ALL.iter().map(|w| w.name().to_string());
    let figures = ["latency", "recovery"].map(String::from);
    let mut out: Vec<String> = Vec::new();
    for name in names {
        let add: Vec<String> = match name.as_str() {
            "wordcount" => wordcount.clone().collect(),
            "nexmark" => nexmark.clone().collect(),
            "all" => wordcount
                .clone()
                .chain(figures.iter().cloned())
                .chain(nexmark.clone())
                .collect(),
            n if WordCount::from_name(n).is_some()
                || figures.iter().any(|f| f == n)
                || nexmark.clone().any(|q| q == n) =>
            {
                vec![n.to_string()]
            }
            n => bail!("unknown workload '{n}': stateless, count, stateful, windowed, latency, recovery, nexmark-q0 .. nexmark-q14, wordcount, nexmark or all"),
        };
        for w in add {
            if !out.contains(&w) {
                out.push(w);
            }
        }
    }
    Ok(out)
}

/// The timed input and the check's, if a word count is among the workloads. With
/// `--compare-peers` the timed input is the kit's, which the peers read.
fn inputs(
    args: &Args,
    dir: &Path,
    workloads: &[String],
    peers: Option<&Kit>,
) -> anyhow::Result<(Option<Input>, Option<Input>)> {
    if !workloads.iter().any(|w| WordCount::from_name(w).is_some()) {
        return Ok((None, None));
    }
    let options = |words: u64| gen_options(args, words);
    let t = Instant::now();
    let full = match (&args.input, peers) {
        (given, Some(kit)) => kit.input(given.as_deref(), &options(args.words))?,
        (Some(prefix), None) => Input::open(prefix)?,
        (None, None) => Input::cached(dir, &options(args.words))?,
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
        at_least_once: false,
        batch_records: None,
        watermark_drift_ms: None,
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
    if nexmark_query(setting.workload).is_some() {
        cmd.args(["--runner", &options.runner]);
        if options.no_validate {
            cmd.arg("--no-validate");
        }
        for (k, v) in &options.runner_options {
            cmd.arg("--runner-option").arg(format!("{k}={v}"));
        }
        if options.runner != "direct" {
            cmd.arg(format!("--workers={}", setting.workers));
            if setting.processes > 1 {
                cmd.arg(format!("--local-cluster={}", setting.processes));
            }
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
            if setting.at_least_once {
                cmd.arg("--guarantee=at-least-once");
            }
        }
    } else {
        setting_flags(&mut cmd, setting, validate);
    }
    Ok(cmd)
}

/// The flags from which this binary's child builds `setting`'s options again.
fn setting_flags(cmd: &mut Command, setting: &Setting<'_>, validate: bool) {
    if validate {
        cmd.arg("--validate");
    }
    cmd.args(["--runner", setting.runner]);
    cmd.args(["--workers", &setting.workers.to_string()]);
    cmd.args(["--processes", &setting.processes.to_string()]);
    for (k, v) in setting.runner_options {
        cmd.arg("--runner-option").arg(format!("{k}={v}"));
    }
    if let Some(ms) = setting.checkpoint_ms {
        cmd.arg(format!("--checkpoint-ms={ms}"));
    }
    if setting.at_least_once {
        cmd.arg("--guarantee=at-least-once");
    }
    if let Some(n) = setting.batch_records {
        cmd.arg(format!("--batch-records={n}"));
    }
    cmd.arg(format!(
        "--watermark-drift-ms={}",
        setting.watermark_drift_ms.unwrap_or(0)
    ));
}

/// The native runner's watermark alignment `args` ask for, if on.
fn drift(args: &Args) -> Option<u64> {
    (args.watermark_drift_ms > 0).then_some(args.watermark_drift_ms)
}

/// Distinct keys of the `latency` workload's stateful step.
const LATENCY_KEYS: u64 = 10_000;

/// The `latency` workload on `setting`: its peak first (`--words` records as fast as
/// they go), then its latencies at half that rate for `--latency-seconds`, each run in
/// a child of its own.
fn timed_latency(args: &Args, setting: &Setting<'_>, dir: &Path) -> anyhow::Result<BenchRecord> {
    let peak = latency_child(args, setting, dir, args.words, 0.0).context("the peak run")?;
    let rate = peak.records_per_s / 2.0;
    let records = ((rate * args.latency_seconds) as u64).max(1);
    eprintln!(
        "latency on {} W={} P={}: peak {}/s ({} records in {:.2}s); measuring at half of it, {}/s for {}s",
        setting.runner,
        setting.workers,
        setting.processes,
        human(peak.records_per_s),
        peak.records,
        peak.seconds,
        human(rate),
        args.latency_seconds
    );
    latency_child(args, setting, dir, records, rate).context("the run at half the peak")
}

/// One run of the latency pipeline in a child: `records` at `rate` (0: unpaced).
fn latency_child(
    args: &Args,
    setting: &Setting<'_>,
    dir: &Path,
    records: u64,
    rate: f64,
) -> anyhow::Result<BenchRecord> {
    let file = dir.join(format!("record-{}.json", std::process::id()));
    let _ = std::fs::remove_file(&file);
    let mut cmd = Command::new(std::env::current_exe()?);
    cmd.args(["--child", "time", "--workload", "latency"])
        .arg(format!("--child-records={records}"))
        .arg(format!("--child-rate={rate}"))
        .arg("--child-out")
        .arg(&file);
    setting_flags(&mut cmd, setting, args.validate);
    run_child(cmd)?;
    let line = std::fs::read_to_string(&file).context("the child wrote no record")?;
    let _ = std::fs::remove_file(&file);
    serde_json::from_str(&line).with_context(|| format!("not a record: {line}"))
}

/// The crash job's records per second in a `recovery` run: well below any runner's
/// peak, so that what is timed is recovery, not a backlog.
const RECOVERY_RATE: f64 = 20_000.0;

/// The `recovery` workload on `setting`: the crash job in a local cluster with
/// checkpoints; once it has checkpointed for two intervals, one of its processes
/// (the last the supervisor lists) is SIGKILLed, and the time from the kill to the
/// first checkpoint completed after it (a new manifest: the restarted job's first
/// committed progress) is its recovery time. Its committed output must then equal
/// the direct runner's: exactly once through the kill.
fn timed_recovery(setting: &Setting<'_>, dir: &Path) -> anyhow::Result<BenchRecord> {
    let interval = setting.checkpoint_ms.unwrap_or(1000);
    let poll = Duration::from_millis(2);
    // Start-up, two intervals before the kill, recovery, and the rest.
    let records = (RECOVERY_RATE * (3.0 + 4.0 * interval as f64 / 1000.0)) as u64;
    let work = dir.join(format!("recovery-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).with_context(|| format!("cannot create {}", work.display()))?;
    let (ckpt, committed) = (work.join("checkpoints"), work.join("output"));
    let mut cmd = Command::new(std::env::current_exe()?);
    cmd.args(["--child", "recovery", "--workload", "recovery"])
        .arg(format!("--child-records={records}"))
        .arg(format!("--child-rate={RECOVERY_RATE}"))
        .arg("--child-out")
        .arg(&work)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    setting_flags(&mut cmd, setting, false);
    let start = RunStart::now();
    let started = Instant::now();
    let mut child = cmd.spawn().context("cannot start the recovery job")?;
    let stderr = child.stderr.take().map(|mut e| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = std::io::Read::read_to_string(&mut e, &mut s);
            s
        })
    });
    let measured = (|| -> anyhow::Result<(f64, f64)> {
        let deadline = started + Duration::from_secs(120);
        let mut first_checkpoint = None;
        let pids = loop {
            if let Some(status) = child.try_wait()? {
                bail!("the job ended ({status}) before a process was killed");
            }
            let now = Instant::now();
            if first_checkpoint.is_none() && !manifests(&ckpt).is_empty() {
                first_checkpoint = Some(now);
            }
            let pids = std::fs::read_to_string(ckpt.join("pids")).unwrap_or_default();
            if first_checkpoint.is_some_and(|t| now - t >= Duration::from_millis(2 * interval))
                && !pids.trim().is_empty()
            {
                break pids;
            }
            if now > deadline {
                bail!("no checkpoint within 2 minutes");
            }
            std::thread::sleep(poll);
        };
        let victim = pids.lines().last().unwrap_or("").trim().to_string();
        let status = Command::new("kill").args(["-KILL", &victim]).status()?;
        let killed = Instant::now();
        if !status.success() {
            bail!("kill -KILL {victim} failed ({status})");
        }
        let mut restarted: Option<(Duration, Option<u64>)> = None;
        loop {
            let now = Instant::now();
            if restarted.is_none()
                && std::fs::read_to_string(ckpt.join("pids")).is_ok_and(|p| p != pids)
            {
                // The supervisor killed every old process before it started the new
                // ones: a checkpoint the old job completed after the kill is not the
                // restarted job's progress, so only one newer than what is here now is.
                restarted = Some((now - killed, manifests(&ckpt).last().copied()));
            }
            if let Some((restart, newest)) = restarted {
                if manifests(&ckpt).last().copied() > newest {
                    return Ok((
                        restart.as_secs_f64() * 1000.0,
                        (now - killed).as_secs_f64() * 1000.0,
                    ));
                }
            }
            if child.try_wait()?.is_some() {
                bail!("the job ended without a checkpoint after the kill");
            }
            if now > deadline {
                bail!("no checkpoint after the kill within 2 minutes");
            }
            std::thread::sleep(poll);
        }
    })();
    if measured.is_err() && child.try_wait()?.is_none() {
        // The supervisor and the processes it started (alive while it is): none
        // outlives a failed run.
        let pids = std::fs::read_to_string(ckpt.join("pids")).unwrap_or_default();
        let _ = child.kill();
        for pid in pids.lines().map(str::trim).filter(|p| !p.is_empty()) {
            let _ = Command::new("kill").args(["-KILL", pid]).status();
        }
    }
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if started.elapsed() > Duration::from_secs(180) {
            let _ = child.kill();
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let seconds = started.elapsed().as_secs_f64();
    let stderr = stderr.and_then(|t| t.join().ok()).unwrap_or_default();
    let (restart_ms, recovery_ms) = measured?;
    if !status.success() {
        bail!("the job failed ({status}): {}", stderr.trim());
    }
    if !stderr.contains("restarting all") {
        bail!(
            "the cluster did not restart after the kill: {}",
            stderr.trim()
        );
    }
    let lines = crash_job::committed_lines(&committed)?;
    let reference = recovery_reference(records)?;
    compare_outputs(reference, lines.clone())
        .map_err(|m| anyhow::anyhow!("after the kill the committed {m}"))?;
    let _ = std::fs::remove_dir_all(&work);
    let mut record = BenchRecord::measured(
        "recovery",
        setting.runner,
        setting.workers,
        records,
        seconds,
        lines.len() as u64,
        start,
    );
    record.processes = setting.processes;
    record.records_per_s_per_core =
        record.records_per_s / f64::from(setting.workers * setting.processes);
    // This process only watched: the cluster's RSS is not measured.
    record.peak_rss_mb = None;
    record.checkpoint = true;
    record.checkpoint_interval_ms = Some(interval);
    record.recovery_ms = Some(recovery_ms);
    record.restart_ms = Some(restart_ms);
    Ok(record)
}

/// The epochs of the checkpoints completed in `dir` (their manifests), oldest first.
fn manifests(dir: &Path) -> Vec<u64> {
    let mut epochs: Vec<u64> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.strip_prefix("checkpoint-")?
                .strip_suffix(".manifest")?
                .parse()
                .ok()
        })
        .collect();
    epochs.sort_unstable();
    epochs
}

/// The direct runner's committed output of the crash job on `records` records (once
/// per size).
fn recovery_reference(records: u64) -> anyhow::Result<Vec<String>> {
    static CACHE: std::sync::Mutex<Option<(u64, Vec<String>)>> = std::sync::Mutex::new(None);
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((n, lines)) = cache.as_ref() {
        if *n == records {
            return Ok(lines.clone());
        }
    }
    let dir =
        std::env::temp_dir().join(format!("tidewater-bench-reference-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let p = Pipeline::new(PipelineOptions {
        no_validate: true,
        ..PipelineOptions::default()
    });
    crash_job::build(&p, records, 0.0, &dir);
    p.run()
        .context("the direct runner's reference run of the crash job")?;
    let lines = crash_job::committed_lines(&dir)?;
    let _ = std::fs::remove_dir_all(&dir);
    *cache = Some((records, lines.clone()));
    Ok(lines)
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
    let out = args
        .child_out
        .as_ref()
        .context("a child needs --child-out")?;
    let setting = Setting {
        workload,
        runner: &args.runner[0],
        workers: args.workers[0],
        processes: args.processes[0],
        cluster_process: args.process_id.zip(args.hosts.clone()),
        runner_options: &args.runner_options,
        checkpoint_ms: args.checkpoint_ms.first().copied().filter(|ms| *ms > 0),
        at_least_once: args.guarantee.first().is_some_and(|g| g == "at-least-once"),
        batch_records: args.batch_records,
        watermark_drift_ms: drift(args),
    };
    match (mode, workload.as_str()) {
        (ChildMode::Recovery, _) => return recovery_child(args, &setting, out),
        (ChildMode::Time, "latency") => return latency_run(args, &setting, out),
        _ => {}
    }
    let prefix = args.input.as_ref().context("a child needs --input")?;
    let workload = WordCount::from_name(workload).context("not a word-count workload")?;
    let input = Input::open(prefix)?;
    let options = cluster_options(&setting, args.validate, out);
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
            let result = p.run()?;
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
            record.on_cluster(setting.processes, &result);
            record.checkpoint = setting.checkpoint_ms.is_some();
            record.checkpoint_interval_ms = setting.checkpoint_ms;
            record.at_least_once = setting.at_least_once;
            record.batch_records = setting
                .batch_records
                .filter(|_| setting.runner == "microbatch");
            if let Some(dir) = &checkpoint_dir {
                let _ = std::fs::remove_dir_all(dir);
            }
            std::fs::write(out, record.to_json_line())?;
        }
        ChildMode::Recovery => unreachable!("a recovery child returned above"),
    }
    Ok(())
}

/// The fraction of a latency run's first records not counted (start-up).
const LATENCY_WARMUP: f64 = 0.1;

/// `setting`'s options in a child; the processes of a local cluster share one
/// checkpoint directory next to `out`, which the supervisor starts empty (the name is
/// reused by the next setting: a checkpoint left there would be restored, a finished
/// job running again as a no-op).
fn cluster_options(setting: &Setting<'_>, validate: bool, out: &Path) -> PipelineOptions {
    let mut options = setting.options(validate);
    if setting.processes > 1 && options.engine.checkpoint_dir.is_some() {
        let dir = out.with_extension("checkpoints");
        if setting.cluster_process.is_none() {
            let _ = std::fs::remove_dir_all(&dir);
        }
        options.engine.checkpoint_dir = Some(dir);
    }
    options
}

/// In a child: one run of the latency pipeline, `--child-records` at `--child-rate`
/// (0: as fast as they go, for the peak).
fn latency_run(args: &Args, setting: &Setting<'_>, out: &Path) -> anyhow::Result<()> {
    let records = args
        .child_records
        .context("a latency child needs --child-records")?;
    let rate = (args.child_rate > 0.0).then_some(args.child_rate);
    let options = cluster_options(setting, args.validate, out);
    let checkpoint_dir = options.engine.checkpoint_dir.clone();
    let p = Pipeline::new(options);
    // A local cluster's sinks run in its processes, which end inside the run: they
    // spill what they saw to files next to `out`, merged here (each process without
    // its own start-up).
    let spill = (setting.processes > 1).then(|| out.with_extension("latencies"));
    if let (Some(spill), None) = (&spill, &setting.cluster_process) {
        tidewater_examples::spill::clear(spill)?;
    }
    latency::build_records(&p, records, rate, LATENCY_KEYS, spill.as_deref());
    let start = RunStart::now();
    let t = Instant::now();
    let result = p.run();
    let seconds = t.elapsed().as_secs_f64();
    if let Some(dir) = &checkpoint_dir {
        let _ = std::fs::remove_dir_all(dir);
    }
    let result = result?;
    let seen: Vec<u32> = match spill {
        None => {
            let seen = latency::all_seen();
            if seen.len() as u64 != records {
                bail!(
                    "the sink received {} records, {records} expected",
                    seen.len()
                );
            }
            latency::after_warmup(seen, LATENCY_WARMUP)
        }
        Some(spill) => {
            let per_process = latency::read_spilled(&spill)
                .with_context(|| format!("reading the latencies at {}", spill.display()))?;
            let count: usize = per_process.iter().map(Vec::len).sum();
            if count as u64 != records {
                bail!(
                    "the sinks of the {} processes committed {count} records, {records} expected",
                    per_process.len()
                );
            }
            per_process
                .into_iter()
                .flat_map(|v| latency::after_warmup(v, LATENCY_WARMUP))
                .collect()
        }
    };
    let mut record = BenchRecord::measured(
        "latency",
        setting.runner,
        setting.workers,
        records,
        seconds,
        records,
        start,
    );
    record.validate = args.validate;
    record.on_cluster(setting.processes, &result);
    record.checkpoint = setting.checkpoint_ms.is_some();
    record.checkpoint_interval_ms = setting.checkpoint_ms;
    record.at_least_once = setting.at_least_once;
    if let Some(rate) = rate {
        let (p50, p99, max) = latency::percentiles_of(seen).context("no latency was measured")?;
        record.p50_latency_ms = Some(p50);
        record.p99_latency_ms = Some(p99);
        record.max_latency_ms = Some(max);
        record.latency_rate_per_s = Some(rate);
    }
    std::fs::write(out, record.to_json_line())?;
    Ok(())
}

/// In a child (the local cluster's supervisor, and each of its processes): the crash
/// job, committed into `WORK/output`, checkpointing into `WORK/checkpoints`.
fn recovery_child(args: &Args, setting: &Setting<'_>, work: &Path) -> anyhow::Result<()> {
    let records = args
        .child_records
        .context("a recovery child needs --child-records")?;
    let mut options = setting.options(false);
    // Every process of the cluster shares the directories (the parent made them).
    options.engine.checkpoint_dir = Some(work.join("checkpoints"));
    let output = work.join("output");
    std::fs::create_dir_all(&output)?;
    let p = Pipeline::new(options);
    crash_job::build(&p, records, args.child_rate, &output);
    p.run()?;
    Ok(())
}

fn print_header() {
    outln!(
        "{:<14} {:<11} {:>2} {:>2} {:>11} {:>8} {:>11} {:>11} {:>8}  note",
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
    outln!(
        "{:<14} {:<11} {:>2} {:>2} {:>11} {:>8.3} {:>11} {:>11} {:>8}  {}",
        r.workload,
        r.runner,
        r.workers,
        r.processes,
        r.records,
        r.seconds,
        human(r.records_per_s),
        human(r.records_per_s_per_core),
        r.peak_rss_mb.map_or("-".into(), |m| format!("{m:.0}")),
        note(r)
    );
}

/// The note column: what else the run measured.
fn note(r: &BenchRecord) -> String {
    let mut s = String::from("ok");
    if let Some(peer) = &r.peer {
        s = format!("peer: {peer}");
    }
    if let (Some(rate), Some(p50), Some(p99), Some(max)) = (
        r.latency_rate_per_s,
        r.p50_latency_ms,
        r.p99_latency_ms,
        r.max_latency_ms,
    ) {
        s.push_str(&format!(
            ", at {}/s: latency p50 {p50:.2} ms, p99 {p99:.2} ms, max {max:.2} ms",
            human(rate)
        ));
    } else if r.workload == "latency" {
        s.push_str(", peak");
    }
    if let (Some(rec), Some(restart)) = (r.recovery_ms, r.restart_ms) {
        s.push_str(&format!(
            ", recovered in {rec:.0} ms (processes restarted after {restart:.0} ms)"
        ));
    }
    match (r.checkpoint, r.checkpoint_interval_ms) {
        (true, Some(ms)) => s.push_str(&format!(", checkpoints every {ms} ms")),
        (true, None) => s.push_str(", checkpoints"),
        _ => {}
    }
    if r.at_least_once {
        s.push_str(", at-least-once");
    }
    if let (Some(limit), Some(steal)) = (r.steal_rerun_above, r.steal_pct) {
        s.push_str(&format!(", steal {steal:.1}% > {limit}%: run again"));
    }
    if r.profile == "debug" {
        s.push_str(" (debug build)");
    }
    s
}

fn print_error(workload: &str, runner: &str, workers: u32, error: &str) {
    let first = error.lines().next().unwrap_or("");
    outln!(
        "{:<14} {:<11} {:>2} {:>2} {:>11} {:>8} {:>11} {:>11} {:>8}  error: {first}",
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
