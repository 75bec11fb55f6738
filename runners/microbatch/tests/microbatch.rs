//! The micro-batch runner's own behaviour: batches and their figures in the result,
//! the record limit, the trigger modes (a job that stops with its state and source
//! positions kept, and resumes), the flags it refuses. The semantics are the
//! conformance suite's (every case at 1, 2 and 3 workers and in 2 processes);
//! exactly-once after crashes and the replay of a logged batch are
//! `examples/tests/crash.rs`.

use std::io::Write;
use std::time::Duration;
use tidewater::{EngineOptions, Pipeline, PipelineOptions, Read};
use tidewater_runners_timely::metrics::ENGINE_STEP;
use tidewater_transforms::{Count, GenerateSequence, TailFile};

fn to_string(kv: (u64, u64)) -> String {
    format!("{} {}", kv.0, kv.1)
}

fn modulo(n: u64) -> u64 {
    n % 10
}

fn counts(options: PipelineOptions, source: GenerateSequence) -> Pipeline {
    tidewater_runner_microbatch::register();
    let p = Pipeline::new(options);
    p.apply("Generate", Read::from(source))
        .map("Mod", modulo)
        .apply("Count", Count::per_element())
        .map("Format", to_string)
        .capture("counts");
    p
}

/// Options of the micro-batch runner: `engine` and its own `flags`.
fn microbatch(engine: EngineOptions, flags: &[(&str, &str)]) -> PipelineOptions {
    let mut options = PipelineOptions {
        engine,
        ..PipelineOptions::for_runner("microbatch")
    };
    for (name, value) in flags {
        options.runner_flags.set(name, *value);
    }
    options
}

fn sorted(r: &tidewater::runner::PipelineResult, name: &str) -> Vec<String> {
    let mut v = r.captured_values::<String>(name).unwrap();
    v.sort();
    v
}

#[test]
fn batches_run_every_interval_and_their_figures_are_in_the_result() {
    let dir = tempfile::tempdir().unwrap();
    let p = counts(
        microbatch(
            EngineOptions {
                workers: 2,
                checkpoint_dir: Some(dir.path().to_path_buf()),
                ..Default::default()
            },
            &[("batch-interval", "50ms")],
        ),
        GenerateSequence::new(0, Some(6_000)).with_rate(20_000.0),
    );
    let r = p.run().unwrap();
    let got = sorted(&r, "counts");
    assert_eq!(got.len(), 10);
    assert!(got.iter().all(|c| c.ends_with(" 600")), "{got:?}");
    let m = &r.metrics;
    // About 0.3 s of input at a batch every 50 ms, on each of 2 workers.
    let batches = m.counter(ENGINE_STEP, "batches").unwrap_or(0);
    assert!(batches >= 6, "{batches} batches: {m:?}");
    let records = m.distribution(ENGINE_STEP, "batch_records").unwrap();
    assert_eq!(records.sum, 6_000, "every record in exactly one batch");
    assert_eq!(records.count, batches);
    assert!(m.distribution(ENGINE_STEP, "batch_ms").is_some());
    assert!(m.distribution(ENGINE_STEP, "scheduling_delay_ms").is_some());
    let state = m.distribution(ENGINE_STEP, "batch_state_bytes").unwrap();
    assert!(state.count > 0 && state.min > 0, "{state:?}");
    assert!(m.counter(ENGINE_STEP, "checkpoints").unwrap_or(0) >= 2);
    // Per operator: the source read every record; one batch in flight at a time, so no
    // worker had more records in flight than its largest batch.
    assert_eq!(m.counter("Generate", "records_in"), Some(6_000));
    let in_flight = m
        .distribution(ENGINE_STEP, "records_in_flight_max")
        .unwrap();
    assert!(in_flight.max <= records.max, "{in_flight:?} {records:?}");
    let size = m.distribution(ENGINE_STEP, "checkpoint_bytes").unwrap();
    assert_eq!(Some(size.count), m.counter(ENGINE_STEP, "checkpoints"));
    assert!(
        dir.path().join("offsets").is_dir(),
        "no write-ahead offset log"
    );
}

#[test]
fn no_batch_reads_more_than_the_record_limit() {
    let p = counts(
        microbatch(
            EngineOptions::default(),
            &[("batch-interval", "1ms"), ("max-records-per-batch", "100")],
        ),
        GenerateSequence::new(0, Some(1_000)),
    );
    let r = p.run().unwrap();
    assert!(sorted(&r, "counts").iter().all(|c| c.ends_with(" 100")));
    let records = r
        .metrics
        .distribution(ENGINE_STEP, "batch_records")
        .unwrap();
    assert_eq!((records.sum, records.max), (1_000, 100), "{records:?}");
    assert!(records.count >= 10);
}

fn append(path: &std::path::Path, from: u32, to: u32) {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    for i in from..to {
        writeln!(f, "line {i}").unwrap();
    }
}

fn tail(input: &std::path::Path, options: PipelineOptions) -> Vec<String> {
    tidewater_runner_microbatch::register();
    let p = Pipeline::new(options);
    p.apply(
        "Tail",
        Read::from_async(TailFile::new(input.to_str().unwrap())),
    )
    .capture("lines");
    sorted(&p.run().unwrap(), "lines")
}

fn lines(from: u32, to: u32) -> Vec<String> {
    let mut v: Vec<String> = (from..to).map(|i| format!("line {i}")).collect();
    v.sort();
    v
}

/// `--trigger once` and `available-now` read what is available and stop, keeping the
/// source's position in the checkpoint directory: the next run reads on from there.
#[test]
fn once_and_available_now_stop_with_the_position_kept_and_resume_from_it() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("input.txt");
    let engine = |trigger: &str, max: Option<u64>| {
        let options = microbatch(
            EngineOptions {
                checkpoint_dir: Some(dir.path().join("ckpt")),
                ..Default::default()
            },
            &[("trigger", trigger), ("batch-interval", "1ms")],
        );
        match max {
            Some(n) => options.with_runner_flag("max-records-per-batch", n.to_string()),
            None => options,
        }
    };
    append(&input, 0, 100);
    assert_eq!(tail(&input, engine("once", None)), lines(0, 100));
    append(&input, 100, 150);
    assert_eq!(tail(&input, engine("once", None)), lines(100, 150));
    append(&input, 150, 195);
    tidewater_runner_microbatch::register();
    let p = Pipeline::new(engine("available-now", Some(20)));
    p.apply(
        "Tail",
        Read::from_async(TailFile::new(input.to_str().unwrap())),
    )
    .capture("lines");
    let r = p.run().unwrap();
    assert_eq!(sorted(&r, "lines"), lines(150, 195));
    let records = r
        .metrics
        .distribution(ENGINE_STEP, "batch_records")
        .unwrap();
    assert_eq!(
        (records.count, records.max, records.sum),
        (3, 20, 45),
        "batches of at most 20 up to the end taken at the start"
    );
    // Nothing new: an empty run.
    assert_eq!(tail(&input, engine("available-now", Some(20))), lines(0, 0));
}

/// Under `available-now` the end of the input is taken once, when the run starts
/// (Spark's `Trigger.AvailableNow`): lines appended while it runs are not read by it,
/// however much room its batches have, and the next run reads exactly them. The run
/// takes ceil(lines / limit) batches: no empty batch to find that nothing is left.
#[test]
fn available_now_reads_up_to_the_end_taken_at_its_start() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("input.txt");
    let options = microbatch(
        EngineOptions {
            checkpoint_dir: Some(dir.path().join("ckpt")),
            ..Default::default()
        },
        &[
            ("trigger", "available-now"),
            ("max-records-per-batch", "10"),
            ("batch-interval", "1ms"),
        ],
    );
    let run = || {
        tidewater_runner_microbatch::register();
        let p = Pipeline::new(options.clone());
        let path = input.to_str().unwrap().to_string();
        p.apply("Tail", Read::from_async(TailFile::new(&path)))
            // The first line of the first run appends 30 more: after the run's start.
            .map_with("AppendOnFirst", path, |path: &String, line: String| {
                if line == "line 0" {
                    append(std::path::Path::new(path), 50, 80);
                }
                line
            })
            .capture("lines");
        let r = p.run().unwrap();
        let batches = r
            .metrics
            .distribution(ENGINE_STEP, "batch_records")
            .unwrap();
        (
            sorted(&r, "lines"),
            (batches.count, batches.max, batches.sum),
        )
    };
    append(&input, 0, 50);
    assert_eq!(run(), (lines(0, 50), (5, 10, 50)));
    assert_eq!(
        std::fs::read_to_string(&input).unwrap().lines().count(),
        80,
        "the lines appended during the first run"
    );
    assert_eq!(run(), (lines(50, 80), (3, 10, 30)));
    assert_eq!(
        run(),
        (lines(0, 0), (1, 0, 0)),
        "nothing new: one empty batch"
    );
}

/// A bounded GenerateSequence says what it has left, so `available-now` over it runs
/// exactly ceil(records / limit) batches: none to find that the partitions are done.
#[test]
fn available_now_over_a_bounded_sequence_runs_exactly_ceil_records_over_limit_batches() {
    for (workers, limit, batches) in [(1, 10, 10), (1, 30, 4), (2, 10, 20)] {
        let r = counts(
            microbatch(
                EngineOptions {
                    workers,
                    ..Default::default()
                },
                &[("trigger", "available-now"), ("batch-interval", "1ms")],
            )
            .with_runner_flag("max-records-per-batch", limit.to_string()),
            GenerateSequence::new(0, Some(100)),
        )
        .run()
        .unwrap();
        assert!(sorted(&r, "counts").iter().all(|c| c.ends_with(" 10")));
        let records = r
            .metrics
            .distribution(ENGINE_STEP, "batch_records")
            .unwrap();
        assert_eq!(
            (records.count, records.sum),
            (batches, 100),
            "{workers} workers, at most {limit} per batch: {records:?}"
        );
    }
}

#[test]
fn flags_of_the_other_runner_are_refused() {
    let run = |runner: &str, engine: EngineOptions, flags: &[(&str, &str)]| {
        tidewater_runner_microbatch::register();
        tidewater_runner_native::register();
        let mut options = PipelineOptions {
            engine,
            ..PipelineOptions::for_runner(runner)
        };
        for (name, value) in flags {
            options.runner_flags.set(name, *value);
        }
        counts(options, GenerateSequence::new(0, Some(10)))
            .run()
            .unwrap_err()
            .to_string()
    };
    let e = run(
        "microbatch",
        EngineOptions {
            checkpoint_interval: Some(Duration::from_secs(1)),
            ..Default::default()
        },
        &[],
    );
    assert_eq!(e, "invalid option --checkpoint-interval: the microbatch runner checkpoints every batch; set --batch-interval");
    let e = run(
        "microbatch",
        EngineOptions {
            guarantee: "at-least-once".into(),
            ..Default::default()
        },
        &[],
    );
    assert_eq!(e, "invalid option --guarantee at-least-once: the microbatch runner is exactly-once by batch; it has no at-least-once mode");
    let e = run("native", EngineOptions::default(), &[("trigger", "once")]);
    assert_eq!(
        e,
        "invalid option --trigger: the native runner does not take this flag; it is for --runner=microbatch"
    );
    // Given in code, a value is checked when the job starts.
    let e = run(
        "microbatch",
        EngineOptions::default(),
        &[("batch-interval", "0ms")],
    );
    assert_eq!(
        e,
        "invalid option --batch-interval 0ms: a batch interval must be positive"
    );
}

#[test]
fn a_checkpoint_whose_state_means_something_else_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let options = microbatch(
        EngineOptions {
            checkpoint_dir: Some(dir.path().to_path_buf()),
            ..Default::default()
        },
        &[("batch-interval", "20ms")],
    );
    counts(options.clone(), GenerateSequence::new(0, Some(100)))
        .run()
        .unwrap();
    // Counted by text now: the count's keys are of another type.
    let p = Pipeline::new(options);
    p.apply("Generate", Read::from(GenerateSequence::new(0, Some(300))))
        .map("Mod", |n: u64| (n % 10).to_string())
        .apply("Count", Count::per_element())
        .map("Format", |(k, n): (String, u64)| format!("{k} {n}"))
        .capture("counts");
    let e = p.run().unwrap_err().to_string();
    assert!(
        e.contains("does not fit this pipeline: 'Count/Combine' changed its input from u64 to String: its state cannot be read"),
        "{e}"
    );
}

fn pair_to_string(kv: (String, u64)) -> String {
    format!("{} {}", kv.0, kv.1)
}

/// A TestStream's every event is a batch of its own (time advances at batch
/// boundaries, so scripted panes equal the direct runner's), but its checkpoints follow
/// the batch interval: with an interval longer than the job, the only checkpoint is the
/// last one and every task wrote one file, its final state.
#[test]
fn a_test_stream_runs_a_batch_per_event_but_checkpoints_every_interval() {
    let dir = tempfile::tempdir().unwrap();
    let r = scripted(dir.path(), Duration::from_secs(600));
    let mut expected = vec!["a 1".to_string(); 10];
    expected.extend(vec!["b 1".to_string(); 10]);
    assert_eq!(sorted(&r, "counts"), expected);
    assert_eq!(r.metrics.counter_total("dropped_due_to_lateness"), 10);
    assert_eq!(r.metrics.counter(ENGINE_STEP, "checkpoints"), Some(1));
    let parts: Vec<String> = std::fs::read_dir(dir.path().join("parts"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        parts.len(),
        4,
        "the TestStream's and the count's, per worker: {parts:?}"
    );
    assert!(
        parts
            .iter()
            .all(|n| n.ends_with(&format!("-{}.snap", u64::MAX))),
        "{parts:?}"
    );
    // With a short interval the script spans several checkpoints (one batch in flight:
    // the next span waits for the previous one), with the same results.
    let dir = tempfile::tempdir().unwrap();
    let r = scripted(dir.path(), Duration::from_millis(1));
    assert_eq!(sorted(&r, "counts"), expected);
    assert_eq!(r.metrics.counter_total("dropped_due_to_lateness"), 10);
    assert!(r.metrics.counter(ENGINE_STEP, "checkpoints").unwrap() > 1);
}

/// Ten windows of a TestStream, the last element of each behind the watermark.
fn scripted(dir: &std::path::Path, interval: Duration) -> tidewater::runner::PipelineResult {
    use tidewater::{TestStream, Timestamp, Window, WindowFn};
    tidewater_runner_microbatch::register();
    let p = Pipeline::new(
        microbatch(
            EngineOptions {
                workers: 2,
                checkpoint_dir: Some(dir.to_path_buf()),
                ..Default::default()
            },
            &[],
        )
        .with_runner_flag("batch-interval", format!("{}ms", interval.as_millis())),
    );
    let at = |k: &str, t: i64| (k.to_string(), Timestamp(t));
    let mut events = TestStream::new();
    for w in 0..10 {
        // The last element of each window is behind the watermark: dropped.
        events = events
            .add_elements(vec![at("a", w * 10 + 1), at("b", w * 10 + 2)])
            .advance_watermark_to(Timestamp(w * 10 + 10))
            .add_elements(vec![at("a", w * 10 + 5)]);
    }
    p.apply("Events", events.advance_watermark_to_infinity())
        .apply("Window", Window::into(WindowFn::fixed(10)))
        .apply("Count", Count::per_element())
        .map("Format", pair_to_string)
        .capture("counts");
    p.run().unwrap()
}

/// A worker whose source starts late (its thread delayed past the batch interval, as
/// under load) still holds the watermark back until it reports: no window closed by
/// the script's watermark takes a late element (it used to report only in a later
/// checkpoint span, and those windows counted "a 2"). Runs in a child process, which
/// the delay applies to.
#[test]
fn a_source_that_starts_late_holds_the_watermark_until_it_reports() {
    if std::env::var_os("TIDEWATER_LATE_SOURCE_CHILD").is_some() {
        let dir = tempfile::tempdir().unwrap();
        let r = scripted(dir.path(), Duration::from_millis(1));
        let mut expected = vec!["a 1".to_string(); 10];
        expected.extend(vec!["b 1".to_string(); 10]);
        assert_eq!(sorted(&r, "counts"), expected);
        assert_eq!(r.metrics.counter_total("dropped_due_to_lateness"), 10);
        return;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_source_that_starts_late_holds_the_watermark_until_it_reports",
            "--nocapture",
        ])
        .env("TIDEWATER_LATE_SOURCE_CHILD", "1")
        .env("TIDEWATER_DELAY", "late-source:200")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("1 passed"), "{stdout}");
}

/// Records [`Watched`] has read, and records the pipeline has processed, in the test
/// that runs it.
static WATCHED_READ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
static WATCHED_SEEN: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
/// The most records read and not yet processed, over the run.
static WATCHED_AHEAD: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// A bounded source of `len` numbers in one partition that counts what it reads and
/// says what it has left.
#[derive(serde::Serialize, serde::Deserialize)]
struct Watched {
    len: u64,
}

impl tidewater::Source for Watched {
    type Output = u64;
    type Position = u64;
    fn is_bounded(&self) -> bool {
        true
    }
    fn partitions(&self, _desired: usize) -> usize {
        1
    }
    fn initial_position(&self, _p: usize, _n: usize) -> u64 {
        0
    }
    fn read(
        &mut self,
        _p: usize,
        _n: usize,
        pos: &mut u64,
        max: usize,
        _now: tidewater::Timestamp,
        out: &mut Vec<(u64, tidewater::Timestamp)>,
    ) -> Result<tidewater::ReadStatus, tidewater::UserError> {
        let end = (*pos + max as u64).min(self.len);
        out.extend((*pos..end).map(|i| (i, tidewater::Timestamp(0))));
        WATCHED_READ.fetch_add(end - *pos, std::sync::atomic::Ordering::SeqCst);
        *pos = end;
        Ok(if end == self.len {
            tidewater::ReadStatus::Done
        } else {
            tidewater::ReadStatus::More
        })
    }
    fn watermark(&self, _p: usize, _n: usize, _pos: &u64) -> tidewater::Timestamp {
        tidewater::Timestamp::MIN
    }
    fn available(
        &self,
        _p: usize,
        _n: usize,
        pos: &u64,
        _now: tidewater::Timestamp,
    ) -> Option<u64> {
        Some(self.len - pos)
    }
}

tidewater::register!(Source Watched);

fn watch(n: u64) -> u64 {
    use std::sync::atomic::Ordering::SeqCst;
    let seen = WATCHED_SEEN.fetch_add(1, SeqCst) + 1;
    WATCHED_AHEAD.fetch_max(WATCHED_READ.load(SeqCst) - seen, SeqCst);
    n % 10
}

/// A batch is cut by size as well as by time: a bounded input larger than the record
/// limit runs in batches of the limit back to back, the next starting at once rather
/// than at the next interval (an hour here: the run would not end for hours), and
/// every record is counted once.
#[test]
fn a_backlog_runs_in_batches_of_the_record_limit_back_to_back() {
    let dir = tempfile::tempdir().unwrap();
    tidewater_runner_microbatch::register();
    let mut engine = EngineOptions {
        checkpoint_dir: Some(dir.path().to_path_buf()),
        ..Default::default()
    };
    engine.workers = 2;
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let p = Pipeline::new(microbatch(
            engine,
            &[("batch-interval", "1h"), ("max-records-per-batch", "50000")],
        ));
        p.apply(
            "Numbers",
            Read::from(GenerateSequence::new(0, Some(200_000))),
        )
        .map("Mod", |n: u64| n % 10)
        .apply("Count", Count::per_element())
        .map("Format", to_string)
        .capture("counts");
        let _ = done.send(p.run());
    });
    let r = finished
        .recv_timeout(Duration::from_secs(120))
        .expect("the batches waited for the interval")
        .unwrap();
    let want: Vec<String> = (0..10).map(|k| format!("{k} 20000")).collect();
    assert_eq!(sorted(&r, "counts"), want);
    let batches = r
        .metrics
        .distribution(ENGINE_STEP, "batch_records")
        .unwrap();
    // Per batch and worker: each of the 2 workers reads its half of every batch.
    assert_eq!(batches.sum, 200_000);
    assert_eq!(batches.max, 25_000, "a worker's share of the limit");
    assert!(batches.count >= 8, "{batches:?}");
}

/// A bounded input within the record limit runs as one batch whose range is fixed
/// (and logged) first and then read a chunk at a time as the batch runs: the records
/// in memory stay within a few chunks, not the whole batch.
#[test]
fn a_large_batch_is_read_a_chunk_at_a_time_as_it_runs() {
    let dir = tempfile::tempdir().unwrap();
    tidewater_runner_microbatch::register();
    let p = Pipeline::new(microbatch(
        EngineOptions {
            checkpoint_dir: Some(dir.path().to_path_buf()),
            ..Default::default()
        },
        &[("max-records-per-batch", "1000000")],
    ));
    p.apply("Watched", Read::from(Watched { len: 200_000 }))
        .map("Watch", watch)
        .apply("Count", Count::per_element())
        .map("Format", to_string)
        .capture("counts");
    let r = p.run().unwrap();
    let want: Vec<String> = (0..10).map(|k| format!("{k} 20000")).collect();
    assert_eq!(sorted(&r, "counts"), want);
    let batches = r
        .metrics
        .distribution(ENGINE_STEP, "batch_records")
        .unwrap();
    assert_eq!((batches.count, batches.sum), (1, 200_000), "one batch");
    let ahead = WATCHED_AHEAD.load(std::sync::atomic::Ordering::SeqCst);
    // The default bundle (a read) is 1,024 records.
    assert!(
        ahead <= 2 * 1024,
        "{ahead} records read ahead of the pipeline"
    );
    // The batch's range was logged before it ran, as it was read.
    let log: Vec<_> = std::fs::read_dir(dir.path().join("offsets"))
        .unwrap()
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
        .collect();
    assert_eq!(log.len(), 1, "{log:?}");
    assert!(log[0].contains("\"count\":200000"), "{log:?}");
}
