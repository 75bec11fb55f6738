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

mod args;
mod children;
mod measure_latency;
mod measure_recovery;
mod table;
mod veth;

use args::*;
use children::*;
use measure_latency::*;
use measure_recovery::*;
use table::*;

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
                            // checks exactly-once output; Q12's TestStream needs its
                            // epochs aligned (at-least-once is refused for it).
                            let at_least_once = g == "at-least-once";
                            if at_least_once
                                && (c.1 == 0
                                    || runner != "native"
                                    || workload == "recovery"
                                    || workload == "nexmark-q12")
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
                    state_backend: args.state_backend,
                    batch_records: args.batch_records,
                    state_value_bytes: args.state_value_bytes,
                    watermark_drift_ms: drift(&args),
                    tls: args.tls(),
                    status_poll: args.status_poll,
                    checkpoint_store: args.checkpoint_store.as_deref(),
                    role: args::Role::Local,
                    over_veth: args.over_veth,
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
        zipf_s: args.zipf_s,
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
        state_backend: tidewater::StateBackendKind::Memory,
        batch_records: None,
        state_value_bytes: None,
        watermark_drift_ms: None,
        tls: None,
        status_poll: false,
        checkpoint_store: None,
        role: args::Role::Local,
        over_veth: false,
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
