//! Runs Nexmark queries: `cargo run --release -p tidewater-nexmark --bin nexmark -- --query all --events 100000 --verify`.

use anyhow::bail;
use clap::Parser;
use std::sync::atomic::Ordering;
use std::time::Instant;
use tidewater::{Element, PCollection, Pipeline, PipelineOptions, Read};
use tidewater_examples::bench::record::{BenchRecord, RunStart};
use tidewater_nexmark::{checksum, oracle, queries, sorted_by_encoding, Event, NexmarkSource};

/// Nexmark queries on any runner.
#[derive(Parser)]
#[command(name = "nexmark")]
struct Args {
    #[command(flatten)]
    options: PipelineOptions,
    /// Query number, or `all`.
    #[arg(long, default_value = "all")]
    query: String,
    /// Events to generate; 0 runs unbounded: it then needs `--max-duration`, cannot be
    /// combined with `--verify` or `--scripted-clock`, prints its progress every 5 s and counts the
    /// outputs instead of keeping them.
    #[arg(long, default_value_t = 100_000)]
    events: u64,
    /// Events per second of event time.
    #[arg(long, default_value_t = 10_000)]
    rate: usize,
    /// Compare each query's output with its plain-Rust oracle (Q12 on its scripted
    /// clock).
    #[arg(long)]
    verify: bool,
    /// Q12 replays its events through a TestStream on a scripted processing clock (one
    /// second of events per second), so that its output is the same on every runner
    /// (what `bench` compares), instead of reading the source on the processing clock.
    /// The TestStream travels in the plan (at most 64 MB: some 100,000 events).
    #[arg(long)]
    scripted_clock: bool,
    /// Keep Q10's output files in this directory (by default they go to a temporary
    /// directory that is removed after the run).
    #[arg(long, value_name = "DIR")]
    q10_dir: Option<std::path::PathBuf>,
    /// Move each event's time back by up to this many ms (seeded by `--seed`, 0 if
    /// absent); the watermark trails by the bound, so no event is late.
    #[arg(long, default_value_t = 0)]
    out_of_order_ms: u64,
    /// Print one JSON object per query (the `bench` binary's record: events/s, peak
    /// RSS, ...) instead of the text line; outputs are counted in a sink, not kept,
    /// unless `--verify` or `--outputs-dir` needs them.
    #[arg(long)]
    json: bool,
    /// Write each query's outputs, one `Debug` line each, to `DIR/Q<n>.txt` (what
    /// `bench` compares between runners).
    #[arg(long, value_name = "DIR")]
    outputs_dir: Option<std::path::PathBuf>,
}

impl Args {
    /// Whether the outputs must be kept (captured) rather than counted.
    fn keeps_outputs(&self) -> bool {
        !self.json || self.verify || self.outputs_dir.is_some()
    }

    /// Reports a bounded run: its JSON record or its text line; writes its outputs to
    /// `--outputs-dir`.
    fn report<T: Element>(
        &self,
        name: &str,
        out: Option<&[T]>,
        outputs: u64,
        run: &Timed,
        note: &str,
    ) -> anyhow::Result<()> {
        let Timed {
            secs,
            start,
            ref result,
        } = *run;
        if self.json {
            let workers = u32::try_from(self.options.engine.workers).unwrap_or(u32::MAX);
            let mut record = BenchRecord::measured(
                &format!("nexmark-{}", name.to_lowercase()),
                &self.options.runner,
                workers,
                self.events,
                secs,
                outputs,
                start,
            );
            record.validate = !self.options.no_validate;
            if let Some(n) = self.options.engine.local_cluster {
                record.on_cluster(u32::try_from(n).unwrap_or(u32::MAX), result);
            }
            if self.options.engine.checkpoint_dir.is_some() {
                let e = &self.options.engine;
                record.checkpoint = true;
                // The micro-batch runner checkpoints every batch (500 ms by default).
                record.checkpoint_interval_ms = Some(if self.options.runner == "microbatch" {
                    self.options
                        .runner_flags
                        .get("batch-interval")
                        .and_then(|v| tidewater::parse_duration(v).ok())
                        .map_or(500, |d| d.as_millis() as u64)
                } else {
                    e.checkpoint_interval.map_or(1000, |d| d.as_millis() as u64)
                });
                record.at_least_once = self.options.engine.guarantee == "at-least-once";
            }
            tidewater_examples::outln!("{}", record.to_json_line());
        } else {
            let checksum = out.map_or(String::new(), |o| format!(" checksum={:016x}", checksum(o)));
            tidewater_examples::outln!(
                "{name}: events={} outputs={outputs} time={secs:.3}s events/s={:.0}{checksum}{note}",
                self.events,
                self.events as f64 / secs,
            );
        }
        if let (Some(dir), Some(out)) = (&self.outputs_dir, out) {
            std::fs::create_dir_all(dir)?;
            let mut text = String::new();
            for x in out {
                text.push_str(&format!("{x:?}\n"));
            }
            let path = dir.join(format!("{name}.txt"));
            std::fs::write(&path, text)
                .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
        }
        Ok(())
    }
}

/// A finished run: how long it took, when it started, what it returned.
struct Timed {
    secs: f64,
    start: RunStart,
    result: tidewater::PipelineResult,
}

/// The events the options describe.
fn source(args: &Args) -> NexmarkSource {
    let s = NexmarkSource::new(args.events, args.rate);
    if args.out_of_order_ms > 0 {
        s.with_out_of_order(args.out_of_order_ms, args.options.seed.unwrap_or(0))
    } else {
        s
    }
}

/// An unbounded run: outputs counted, progress every 5 s.
fn run_unbounded<T: Element>(
    args: &Args,
    name: &str,
    build: impl Fn(&PCollection<Event>) -> PCollection<T>,
) -> anyhow::Result<()> {
    let p = Pipeline::new(args.options.clone());
    let events = p.apply("Events", Read::from(source(args)));
    build(&events).write_to("Count", tidewater_examples::CountingSink::<T>::default());
    let before = tidewater_examples::committed_count();
    let started = Instant::now();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let progress = {
        let (done, name) = (done.clone(), name.to_string());
        std::thread::spawn(move || {
            let mut next = 5;
            while !done.load(Ordering::Relaxed) {
                std::thread::sleep(std::time::Duration::from_millis(100));
                if started.elapsed().as_secs() >= next {
                    tidewater_examples::outln!(
                        "{name}: {next}s, {} outputs so far",
                        tidewater_examples::committed_count() - before
                    );
                    next += 5;
                }
            }
        })
    };
    let result = p.run();
    done.store(true, Ordering::Relaxed);
    let _ = progress.join();
    result?;
    tidewater_examples::outln!(
        "{name}: unbounded for {:.1}s, outputs={}",
        started.elapsed().as_secs_f64(),
        tidewater_examples::committed_count() - before
    );
    Ok(())
}

/// Whether this is a process of a local cluster (its supervisor launched it).
fn in_cluster_process() -> bool {
    std::env::var_os(tidewater_runner_native::CLUSTER_CHILD_ENV).is_some()
}

/// This run's id, the same in a local cluster's supervisor and its processes (whose
/// plans must be equal, and which name files after it): the supervisor's process id.
fn job_id() -> u32 {
    match in_cluster_process() {
        true => std::os::unix::process::parent_id(),
        false => std::process::id(),
    }
}

/// Under `--local-cluster`: the directory in which its processes leave what their
/// sinks counted for the supervisor (which makes it before the run and removes it
/// after); `None` otherwise.
fn cluster_scratch(args: &Args) -> Option<std::path::PathBuf> {
    (args.options.engine.local_cluster.is_some() || in_cluster_process())
        .then(|| std::env::temp_dir().join(format!("tidewater-nexmark-{}", job_id())))
}

fn run<T: Element + PartialEq>(
    args: &Args,
    name: &str,
    build: impl Fn(&PCollection<Event>) -> PCollection<T>,
    oracle: fn(&[Event]) -> Vec<T>,
) -> anyhow::Result<()> {
    if args.events == 0 {
        return run_unbounded(args, name, build);
    }
    let source = source(args);
    let p = Pipeline::new(args.options.clone());
    let events = p.apply("Events", Read::from(source.clone()));
    // A local cluster's sinks count in its processes, which hand the counts back in
    // files (the same path in every process: it is part of the plan).
    let spill = cluster_scratch(args).map(|dir| dir.join(format!("count-{name}")));
    if args.keeps_outputs() {
        build(&events).capture("out");
    } else {
        let sink = match &spill {
            Some(spill) => tidewater_examples::CountingSink::<T>::spilling(spill.clone()),
            None => tidewater_examples::CountingSink::<T>::default(),
        };
        build(&events).write_to("Count", sink);
    }
    let before = tidewater_examples::committed_count();
    let start = RunStart::now();
    let started = Instant::now();
    let result = p.run()?;
    let secs = started.elapsed().as_secs_f64();
    // Another process of a --hosts cluster: process 0 holds the outputs and reports.
    if !result.holds_captures {
        return Ok(());
    }
    let out = match args.keeps_outputs() {
        true => result.captured_values::<T>("out")?,
        false => Vec::new(),
    };
    let outputs = match (args.keeps_outputs(), &spill) {
        (true, _) => out.len() as u64,
        (false, Some(spill)) => tidewater_examples::spilled_count(spill)?,
        (false, None) => tidewater_examples::committed_count() - before,
    };
    args.report(
        name,
        args.keeps_outputs().then_some(&out[..]),
        outputs,
        &Timed {
            secs,
            start,
            result,
        },
        "",
    )?;
    if args.verify {
        let expected = sorted_by_encoding(oracle(&source.all_events()));
        if out != expected {
            bail!("{name}: the output differs from the oracle ({} vs {} records, checksums {:016x} vs {:016x})", out.len(), expected.len(), checksum(&out), checksum(&expected));
        }
        tidewater_examples::outln!("{name}: verified against the oracle");
    }
    Ok(())
}

/// Where Q10 writes its files, and whether they are kept after the run.
static Q10_DIR: std::sync::OnceLock<(std::path::PathBuf, bool)> = std::sync::OnceLock::new();

/// Q10's directory (emptied first, but not by a process of a local cluster: its
/// supervisor did): `--q10-dir`, kept; or `<temp dir>/tidewater-nexmark-q10-<job>`
/// (see [`job_id`]), removed after the run.
fn q10_dir() -> String {
    let (dir, keep) = Q10_DIR.get_or_init(|| {
        (
            std::env::temp_dir().join(format!("tidewater-nexmark-q10-{}", job_id())),
            false,
        )
    });
    if !*keep && !in_cluster_process() {
        let _ = std::fs::remove_dir_all(dir);
    }
    let _ = std::fs::create_dir_all(dir);
    dir.to_string_lossy().into_owned()
}

fn q10_to_dir(events: &PCollection<Event>) -> PCollection<queries::OutputFile> {
    queries::q10(events, &q10_dir())
}

/// Q12 depends on the processing clock: under `--verify` or `--scripted-clock` it runs
/// on a TestStream of the same events with a scripted clock (one second of events,
/// `--rate` of them, per second of processing time), whose output the oracle knows and
/// every runner gives. The TestStream travels in the plan, which holds at most 64 MB:
/// some 100,000 events. (Otherwise Q12 reads the source on the processing clock, as the
/// other queries do.)
fn run_q12(args: &Args) -> anyhow::Result<()> {
    if args.events == 0 {
        bail!("Q12's scripted clock replays its events and needs a bounded run (--events N)");
    }
    let events = source(args).all_events();
    let p = Pipeline::new(args.options.clone());
    let stream = p.apply(
        "Events",
        queries::q12_test_stream(&events, args.rate, 1_000),
    );
    queries::q12(&stream).capture("out");
    let start = RunStart::now();
    let started = Instant::now();
    let result = p.run()?;
    let secs = started.elapsed().as_secs_f64();
    if !result.holds_captures {
        return Ok(());
    }
    let out = result.captured_values::<(usize, u64)>("out")?;
    args.report(
        "Q12",
        Some(&out[..]),
        out.len() as u64,
        &Timed {
            secs,
            start,
            result,
        },
        " (TestStream, scripted clock)",
    )?;
    if args.verify {
        let expected = sorted_by_encoding(oracle::q12_scripted(
            &events,
            args.rate,
            1_000,
            queries::Q12_DELAY_MS,
        ));
        if out != expected {
            bail!(
                "Q12: the output differs from the oracle ({} vs {} records)",
                out.len(),
                expected.len()
            );
        }
        tidewater_examples::outln!("Q12: verified against the oracle");
    }
    Ok(())
}

fn main() -> std::process::ExitCode {
    tidewater_examples::report(run_queries())
}

fn run_queries() -> anyhow::Result<()> {
    // Runners first, so that --runner is checked against them while parsing.
    tidewater_nexmark::register_runners();
    let args = Args::parse();
    if args.events == 0 {
        if args.verify {
            bail!("--verify needs a bounded run to compare with the oracle: give --events N (0 is unbounded)");
        }
        if args.options.max_duration.is_none() {
            bail!("--events 0 runs unbounded: give --max-duration (e.g. --max-duration 30s) to stop it");
        }
    }
    let all = args.query == "all";
    if all && args.options.engine.local_cluster.is_some() {
        return each_query_on_its_cluster();
    }
    let scratch = cluster_scratch(&args);
    if let (Some(dir), false) = (&scratch, in_cluster_process()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| anyhow::anyhow!("cannot make {}: {e}", dir.display()))?;
    }
    let result = run_wanted(&args);
    if let (Some(dir), false) = (&scratch, in_cluster_process()) {
        let _ = std::fs::remove_dir_all(dir);
    }
    result
}

/// `--query all` under `--local-cluster`: a process of a cluster runs one pipeline and
/// ends, so each query runs on a cluster of its own, launched by this binary run again
/// with `--query N` and otherwise the same arguments.
fn each_query_on_its_cluster() -> anyhow::Result<()> {
    let mut rest = Vec::new();
    let mut given = std::env::args_os().skip(1);
    while let Some(a) = given.next() {
        if a == "--query" {
            given.next();
        } else if !a.to_string_lossy().starts_with("--query=") {
            rest.push(a);
        }
    }
    let exe = std::env::current_exe()?;
    for q in 0..=14 {
        let status = std::process::Command::new(&exe)
            .args(&rest)
            .arg(format!("--query={q}"))
            .status()
            .map_err(|e| anyhow::anyhow!("cannot run {}: {e}", exe.display()))?;
        if !status.success() {
            bail!("Q{q} failed on its local cluster ({status})");
        }
    }
    Ok(())
}

/// Runs the queries `--query` names.
fn run_wanted(args: &Args) -> anyhow::Result<()> {
    let all = args.query == "all";
    let want = |q: &str| all || args.query == q;
    // Q4, Q6 and Q9 size their bid windows by the generator's configuration (Beam's
    // expected auction duration).
    let config = source(args).config();
    let mut ran = false;
    if want("0") {
        run(args, "Q0", queries::q0, oracle::q0)?;
        ran = true;
    }
    if want("1") {
        run(args, "Q1", queries::q1, oracle::q1)?;
        ran = true;
    }
    if want("2") {
        run(args, "Q2", queries::q2, oracle::q2)?;
        ran = true;
    }
    if want("3") {
        run(args, "Q3", queries::q3, oracle::q3)?;
        ran = true;
    }
    if want("4") {
        run(args, "Q4", |e| queries::q4(e, &config), oracle::q4)?;
        ran = true;
    }
    if want("5") {
        run(args, "Q5", queries::q5, oracle::q5)?;
        ran = true;
    }
    if want("6") {
        run(args, "Q6", |e| queries::q6(e, &config), oracle::q6)?;
        ran = true;
    }
    if want("7") {
        run(args, "Q7", queries::q7, oracle::q7)?;
        ran = true;
    }
    if want("8") {
        run(args, "Q8", queries::q8, oracle::q8)?;
        ran = true;
    }
    if want("9") {
        run(args, "Q9", |e| queries::q9(e, &config), oracle::q9)?;
        ran = true;
    }
    if want("10") {
        if let Some(dir) = &args.q10_dir {
            let _ = Q10_DIR.set((dir.clone(), true));
        }
        let dir = q10_dir();
        let result = run(args, "Q10", q10_to_dir, oracle::q10);
        // With --json, stdout holds only records.
        let note = |line: String| match args.json {
            true => eprintln!("{line}"),
            false => tidewater_examples::outln!("{line}"),
        };
        if args.q10_dir.is_some() {
            note(format!("Q10: files in {dir}"));
        } else {
            let _ = std::fs::remove_dir_all(&dir);
            note("Q10: files removed after the run (--q10-dir DIR keeps them)".into());
        }
        result?;
        ran = true;
    }
    if want("11") {
        run(args, "Q11", queries::q11, oracle::q11)?;
        ran = true;
    }
    if want("12") {
        if args.verify || args.scripted_clock {
            run_q12(args)?;
        } else {
            // On the source and the processing clock, as a Beam or Flink job runs it
            // (its panes depend on how fast the job runs, so nothing to verify).
            run(args, "Q12", queries::q12, |_| {
                unreachable!("--verify runs Q12 on its scripted clock (run_q12)")
            })?;
        }
        ran = true;
    }
    if want("13") {
        run(args, "Q13", queries::q13, oracle::q13)?;
        ran = true;
    }
    if want("14") {
        run(args, "Q14", queries::q14, oracle::q14)?;
        ran = true;
    }
    if !ran {
        bail!(
            "unknown query '{}': implemented so far are 0-14 and all",
            args.query
        );
    }
    Ok(())
}
