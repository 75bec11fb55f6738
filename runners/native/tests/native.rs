//! The native runner's own behaviour: options, checkpoints and their metrics, restoring
//! the wrong pipeline. The semantics are the conformance suite's (every case at 1, 2
//! and 3 workers and in 2 processes), exactly-once after crashes is
//! `examples/tests/crash.rs`.

use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use tidewater::{
    EngineOptions, FlattenExt, Pipeline, PipelineOptions, Read, StateContext, StatefulDoFn,
    StatefulParDo, TestStream, Timestamp, UserError, Window, WindowFn,
};
use tidewater_transforms::{Count, GenerateSequence};

fn to_string(kv: (u64, u64)) -> String {
    format!("{} {}", kv.0, kv.1)
}

fn modulo(n: u64) -> u64 {
    n % 10
}

fn pipeline(options: PipelineOptions, records: u64) -> Pipeline {
    counted(options, records, "Count", None)
}

/// [`pipeline`] with its count named `count`, its state pinned to `uid` if given.
fn counted(options: PipelineOptions, records: u64, count: &str, uid: Option<&str>) -> Pipeline {
    tidewater_runner_native::register();
    let p = Pipeline::new(options);
    p.apply(
        "Generate",
        Read::from(GenerateSequence::new(0, Some(records)).with_rate(20_000.0)),
    )
    .map("Mod", modulo)
    .apply(count, Count::per_element())
    .with_uid(uid.unwrap_or(count))
    .map("Format", to_string)
    .capture("counts");
    p
}

fn native(engine: EngineOptions) -> PipelineOptions {
    PipelineOptions {
        engine,
        ..PipelineOptions::for_runner("native")
    }
}

#[test]
fn a_checkpointed_run_reports_its_checkpoints_in_the_result() {
    let dir = tempfile::tempdir().unwrap();
    let p = pipeline(
        native(EngineOptions {
            workers: 2,
            checkpoint_dir: Some(dir.path().to_path_buf()),
            checkpoint_interval: Some(std::time::Duration::from_millis(50)),
            ..Default::default()
        }),
        6_000,
    );
    let r = p.run().unwrap();
    let mut counts = r.captured_values::<String>("counts").unwrap();
    counts.sort();
    assert_eq!(counts.len(), 10);
    assert!(counts.iter().all(|c| c.ends_with(" 600")), "{counts:?}");
    let m = &r.metrics;
    let step = tidewater_runners_timely::metrics::ENGINE_STEP;
    assert!(m.counter(step, "checkpoints").unwrap_or(0) >= 2, "{m:?}");
    assert_eq!(m.counter(step, "records_read"), Some(6_000));
    // One figure per process, whatever its workers: its peak memory.
    let rss = m.distribution(step, "peak_rss_kb").unwrap();
    assert!(rss.count == 1 && rss.max > 1024, "{rss:?}");
    let bytes = m.distribution(step, "snapshot_bytes").unwrap();
    assert!(bytes.count > 0 && bytes.min > 0, "{bytes:?}");
    assert!(m.distribution(step, "snapshot_ms").is_some());
    // Worker 0 writes every manifest and sizes it; every checkpoint's files are there.
    let checkpoints = m.counter(step, "checkpoints").unwrap();
    let size = m.distribution(step, "checkpoint_bytes").unwrap();
    assert_eq!(size.count, checkpoints, "{m:?}");
    assert!(size.min > 0);
    let duration = m.distribution(step, "checkpoint_ms").unwrap();
    assert!(duration.count >= 1 && duration.count <= checkpoints);
    // The last checkpoint is the final state; the three latest are kept.
    let manifests = std::fs::read_dir(dir.path())
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".manifest")
        })
        .count();
    assert_eq!(manifests, 3);
}

#[test]
fn a_checkpoint_whose_state_the_pipeline_does_not_hold_is_refused_unless_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let engine = EngineOptions {
        checkpoint_dir: Some(dir.path().to_path_buf()),
        checkpoint_interval: Some(std::time::Duration::from_millis(50)),
        ..Default::default()
    };
    pipeline(native(engine.clone()), 2_000).run().unwrap();
    let e = counted(native(engine.clone()), 2_000, "Counted", None)
        .run()
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("does not fit this pipeline: 'Count/Combine' holds state in the snapshot and is not in the pipeline"),
        "unexpected error: {e}"
    );
    // Pinned to the old name's id, the renamed count takes its state over (the job
    // had ended: nothing more to count).
    let r = counted(native(engine.clone()), 3_000, "Counted", Some("Count")).run();
    assert_eq!(
        r.unwrap().captured_values::<String>("counts").unwrap(),
        Vec::<String>::new()
    );
    let mut engine = engine;
    engine.allow_non_restored_state = true;
    counted(native(engine), 3_000, "Other", None).run().unwrap();
}

#[test]
fn unknown_options_and_a_bad_process_id_are_refused() {
    let mut o = native(EngineOptions::default());
    o.runner_options
        .push(("checkpoint_every".into(), "1".into()));
    let e = pipeline(o, 10).run().unwrap_err().to_string();
    assert!(
        e.starts_with("invalid option --runner-option checkpoint_every=1: the native runner has no option 'checkpoint_every'; its options are:"),
        "{e}"
    );
    let e = pipeline(
        native(EngineOptions {
            processes: 2,
            process_id: 2,
            ..Default::default()
        }),
        10,
    )
    .run()
    .unwrap_err()
    .to_string();
    insta::assert_snapshot!(e, @"invalid option --process-id 2: expected 0 to 1 with --processes 2");
}

/// Ten fixed windows of 10 ms, each with three elements on time and one behind the
/// watermark (no allowed lateness: dropped): 31 events in all.
fn scripted_counts(options: PipelineOptions) -> Pipeline {
    tidewater_runner_native::register();
    let p = Pipeline::new(options);
    let mut events = TestStream::new();
    let at = |k: &str, t: i64| (k.to_string(), Timestamp(t));
    for w in 0..10 {
        events = events
            .add_elements(vec![
                at("a", w * 10 + 1),
                at("b", w * 10 + 2),
                at("a", w * 10 + 3),
            ])
            .advance_watermark_to(Timestamp(w * 10 + 10))
            .add_elements(vec![at("a", w * 10 + 5)]);
    }
    p.apply("Events", events.advance_watermark_to_infinity())
        .apply("Window", Window::into(WindowFn::fixed(10)))
        .apply("Count", Count::per_element())
        .map("Format", pair_to_string)
        .capture("counts");
    p
}

/// The counts of [`scripted_counts`]: per window `a 2` and `b 1`, the late `a` dropped.
fn assert_scripted_counts(r: &tidewater::PipelineResult, what: &str) {
    let mut counts = r.captured_values::<String>("counts").unwrap();
    counts.sort();
    let mut expected = vec!["a 2".to_string(); 10];
    expected.extend(vec!["b 1".to_string(); 10]);
    assert_eq!(counts, expected, "{what}");
    assert_eq!(
        r.metrics.counter_total("dropped_due_to_lateness"),
        10,
        "{what}"
    );
}

fn pair_to_string(kv: (String, u64)) -> String {
    format!("{} {}", kv.0, kv.1)
}

/// The files under `dir/parts`, as (node, worker, first epoch, last epoch).
fn part_files(dir: &std::path::Path) -> Vec<(String, u64)> {
    let mut files: Vec<(String, u64)> = std::fs::read_dir(dir.join("parts"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".snap"))
        .map(|n| {
            let last = n
                .trim_end_matches(".snap")
                .rsplit('-')
                .next()
                .unwrap()
                .parse()
                .unwrap();
            (n, last)
        })
        .collect();
    files.sort();
    files
}

/// A TestStream applies each event everywhere after the previous one (an epoch each),
/// but checkpoints follow the checkpoint interval like any other source's: with an
/// interval longer than the job, the only checkpoint is the last one, and every task
/// on every worker wrote one file, its final state.
#[test]
fn a_test_stream_checkpoints_every_interval_not_every_event() {
    for workers in [1, 2] {
        let dir = tempfile::tempdir().unwrap();
        let r = scripted_counts(native(EngineOptions {
            workers,
            checkpoint_dir: Some(dir.path().to_path_buf()),
            checkpoint_interval: Some(std::time::Duration::from_secs(600)),
            ..Default::default()
        }))
        .run()
        .unwrap();
        assert_scripted_counts(&r, &format!("at {workers} workers"));
        let step = tidewater_runners_timely::metrics::ENGINE_STEP;
        assert_eq!(
            r.metrics.counter(step, "checkpoints"),
            Some(1),
            "at {workers} workers"
        );
        let files = part_files(dir.path());
        assert!(!files.is_empty());
        assert!(
            files.iter().all(|(_, last)| *last == u64::MAX),
            "only final files at {workers} workers: {files:?}"
        );
        // Every file is its task's on one worker: the TestStream's and the count's.
        assert_eq!(files.len() as u64, 2 * workers, "{files:?}");
        // The checkpoint's size is its files'; its duration and alignment are known.
        let size: u64 = files
            .iter()
            .map(|(n, _)| {
                std::fs::metadata(dir.path().join("parts").join(n))
                    .unwrap()
                    .len()
            })
            .sum();
        let bytes = r.metrics.distribution(step, "checkpoint_bytes").unwrap();
        assert_eq!((bytes.count, bytes.sum), (1, size as i64));
        assert_eq!(
            r.metrics.distribution(step, "snapshot_bytes").unwrap().sum,
            size as i64
        );
        assert_eq!(
            r.metrics.distribution(step, "checkpoint_ms").unwrap().count,
            1
        );
        let alignment = r
            .metrics
            .distribution(step, "checkpoint_alignment_ms")
            .unwrap();
        assert_eq!(alignment.count as u64, workers, "a value per worker");
        // The TestStream's 40 elements (in 20 of its 31 events), each counted once.
        assert_eq!(r.metrics.counter("Events", "records_in"), Some(40));
    }
}

/// With an interval of zero every event starts a checkpoint span of its own: the job
/// checkpoints as it goes, with the same results.
#[test]
fn a_test_stream_with_a_zero_interval_checkpoints_as_it_goes() {
    let dir = tempfile::tempdir().unwrap();
    let r = scripted_counts(native(EngineOptions {
        workers: 2,
        checkpoint_dir: Some(dir.path().to_path_buf()),
        checkpoint_interval: Some(std::time::Duration::ZERO),
        ..Default::default()
    }))
    .run()
    .unwrap();
    let mut counts = r.captured_values::<String>("counts").unwrap();
    counts.sort();
    assert_eq!(counts.len(), 20);
    assert_eq!(counts[0], "a 2");
    assert_eq!(counts[19], "b 1");
    assert_eq!(r.metrics.counter_total("dropped_due_to_lateness"), 10);
    let step = tidewater_runners_timely::metrics::ENGINE_STEP;
    assert!(r.metrics.counter(step, "checkpoints").unwrap() > 1);
    assert!(part_files(dir.path())
        .iter()
        .any(|(_, last)| *last < u64::MAX));
}

/// Per operator (the transform heading each task, summed over workers): records in
/// and out, the input watermark (a value per worker), backpressure; and the records in
/// flight. Without lifting, the count receives every record and emits one per key.
#[test]
fn every_operator_reports_records_in_and_out_its_watermark_and_backpressure() {
    let mut options = native(EngineOptions {
        workers: 2,
        ..Default::default()
    });
    options
        .runner_options
        .push(("lift_combiners".into(), "false".into()));
    let r = pipeline(options, 6_000).run().unwrap();
    let m = &r.metrics;
    use tidewater_runners_timely::metrics::{
        ALIGNMENT_MS, INPUT_WATERMARK, QUEUED_MAX, RECORDS_IN, RECORDS_OUT, THROTTLED_MS,
    };
    // The source: what it read in, what its stage (with the fused Mod) sent on.
    assert_eq!(m.counter("Generate", RECORDS_IN), Some(6_000));
    assert_eq!(m.counter("Generate", RECORDS_OUT), Some(6_000));
    assert!(m.counter("Generate", THROTTLED_MS).is_some());
    let count = "Count/Combine";
    assert_eq!(m.counter(count, RECORDS_IN), Some(6_000));
    assert_eq!(m.counter(count, RECORDS_OUT), Some(10));
    assert!(m.counter(count, ALIGNMENT_MS).is_some());
    assert_eq!(m.distribution(count, QUEUED_MAX).unwrap().count, 2);
    for op in ["Generate", count] {
        let wm = m.distribution(op, INPUT_WATERMARK).unwrap();
        assert_eq!(wm.count, 2, "a value per worker");
        assert_eq!(
            wm.min,
            tidewater::Timestamp::MAX.millis(),
            "the end, at the end"
        );
    }
    // Fused ParDos are not operators of their own.
    assert_eq!(m.counter("Mod", RECORDS_IN), None);
    assert_eq!(m.counter("Format", RECORDS_OUT), None);
    let step = tidewater_runners_timely::metrics::ENGINE_STEP;
    let epochs = m.distribution(step, "epoch_records").unwrap();
    assert_eq!(epochs.sum, 6_000);
    let in_flight = m.distribution(step, "records_in_flight_max").unwrap();
    assert_eq!(in_flight.count, 2);
    assert!(in_flight.max <= 2 * epochs.max, "{in_flight:?} {epochs:?}");
    let summary = tidewater_runner_native::summary(m);
    let lines: Vec<&str> = summary.lines().collect();
    assert!(
        lines
            .iter()
            .any(|l| l.trim_start().starts_with("Count/Combine")
                && l.contains(" 6000 ")
                && l.contains(" 10 ")
                && l.contains("end of time")),
        "{summary}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.trim_start().starts_with("Generate") && l.contains("held back")),
        "{summary}"
    );
}

// ---------------------------------------------------------------------------------------
// Backpressure: a slow operator behind a shuffle, over an unbounded generator that reads
// as fast as it can.

static TAPPED: AtomicU64 = AtomicU64::new(0);
static CONSUMED: AtomicU64 = AtomicU64::new(0);
static MOST_IN_FLIGHT: AtomicU64 = AtomicU64::new(0);

/// Fused with the source: counts what it read.
fn tap(n: u64) -> (u64, u64) {
    TAPPED.fetch_add(1, SeqCst);
    (n % 4, n)
}

/// A deliberately slow stateful step: 200 µs per element. Before each element it notes
/// how many records the source has read that it has not consumed yet.
#[derive(Serialize, Deserialize)]
struct SlowSink;

impl StatefulDoFn for SlowSink {
    type Key = u64;
    type Value = u64;
    type Out = u64;
    fn process(
        &mut self,
        _key: &u64,
        _n: u64,
        _ctx: &mut StateContext<'_, u64>,
    ) -> Result<(), UserError> {
        let in_flight = TAPPED.load(SeqCst) - CONSUMED.load(SeqCst);
        MOST_IN_FLIGHT.fetch_max(in_flight, SeqCst);
        std::thread::sleep(std::time::Duration::from_micros(200));
        CONSUMED.fetch_add(1, SeqCst);
        Ok(())
    }
}

/// The source never runs more than `epochs_in_flight` epochs ahead of what the slow
/// step has consumed. With a checkpoint interval of zero every read is an epoch of its
/// own (at most `bundle_size` records per partition), so at every moment the records
/// read and not yet consumed are at most K × bundle_size per worker — however slow the
/// step, and whatever the timing; a source that is not throttled reads thousands of
/// times that in the same time.
#[test]
fn a_slow_operator_holds_the_source_back_to_the_epochs_in_flight() {
    const BUNDLE: u64 = 16;
    for (workers, k) in [(1u64, 2u64), (2, 1)] {
        TAPPED.store(0, SeqCst);
        CONSUMED.store(0, SeqCst);
        MOST_IN_FLIGHT.store(0, SeqCst);
        tidewater_runner_native::register();
        let mut options = native(EngineOptions {
            workers,
            checkpoint_interval: Some(std::time::Duration::ZERO),
            ..Default::default()
        });
        options.max_duration = Some(std::time::Duration::from_millis(600));
        options.runner_options = vec![
            ("bundle_size".into(), BUNDLE.to_string()),
            ("epochs_in_flight".into(), k.to_string()),
        ];
        let p = Pipeline::new(options);
        p.apply("Generate", Read::from(GenerateSequence::new(0, None)))
            .map("Tap", tap)
            .apply("SlowSink", StatefulParDo::of(SlowSink));
        let r = p.run().unwrap();
        let m = &r.metrics;
        let bound = workers * k * BUNDLE;
        let tapped = TAPPED.load(SeqCst);
        let most = MOST_IN_FLIGHT.load(SeqCst);
        assert!(tapped > bound, "the job read something: {tapped}");
        assert!(
            most <= bound,
            "{most} records were read and not consumed at once, more than {bound} ({workers} workers, K = {k})"
        );
        // The engine's own account agrees: no epoch read more than a bundle, and no
        // worker had more than K epochs' records in flight.
        let step = tidewater_runners_timely::metrics::ENGINE_STEP;
        let epoch = m.distribution(step, "epoch_records").unwrap();
        assert!(epoch.max as u64 <= BUNDLE, "{epoch:?}");
        let in_flight = m.distribution(step, "records_in_flight_max").unwrap();
        assert!(in_flight.max as u64 <= k * BUNDLE, "{in_flight:?}");
        // The source was held back, and everything it read reached the slow step
        // (a stop drains what is in flight).
        assert!(m.counter("Generate", "throttled_ms").unwrap() > 0, "{m:?}");
        assert_eq!(m.counter("Generate", "records_in"), Some(tapped as i64));
        assert_eq!(m.counter("SlowSink", "records_in"), Some(tapped as i64));
        assert_eq!(CONSUMED.load(SeqCst), tapped);
    }
}

// A slow sink: its writes take 200 µs per element and every commit 5 ms.

static SINK_TAPPED: AtomicU64 = AtomicU64::new(0);
static SINK_COMMITTED: AtomicU64 = AtomicU64::new(0);
static SINK_MOST_UNCOMMITTED: AtomicU64 = AtomicU64::new(0);

/// Fused with the source: counts what it read.
fn tap_for_sink(n: u64) -> (u64, u64) {
    SINK_TAPPED.fetch_add(1, SeqCst);
    (n % 4, n)
}

/// Passes every element on, behind the keyed exchange, to the sink fused after it.
#[derive(Serialize, Deserialize)]
struct Forward;

impl StatefulDoFn for Forward {
    type Key = u64;
    type Value = u64;
    type Out = u64;
    fn process(
        &mut self,
        _key: &u64,
        n: u64,
        ctx: &mut StateContext<'_, u64>,
    ) -> Result<(), UserError> {
        ctx.output(n);
        Ok(())
    }
}

/// Before each write it notes how many records the source has read that are not
/// committed yet; a transaction's records count as committed when it commits.
#[derive(Serialize, Deserialize, Default)]
struct SlowSink2pc {
    #[serde(skip)]
    open: std::collections::BTreeMap<tidewater::Txn, u64>,
}

impl tidewater::Sink for SlowSink2pc {
    type In = u64;
    fn write(
        &mut self,
        txn: &tidewater::Txn,
        xs: Vec<tidewater::WindowedValue<u64>>,
    ) -> Result<(), UserError> {
        for _ in &xs {
            let uncommitted = SINK_TAPPED.load(SeqCst) - SINK_COMMITTED.load(SeqCst);
            SINK_MOST_UNCOMMITTED.fetch_max(uncommitted, SeqCst);
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
        *self.open.entry(*txn).or_default() += xs.len() as u64;
        Ok(())
    }
    fn stage(&mut self, _txn: &tidewater::Txn) -> Result<(), UserError> {
        Ok(())
    }
    fn commit(&mut self, txn: &tidewater::Txn) -> Result<(), UserError> {
        std::thread::sleep(std::time::Duration::from_millis(5));
        SINK_COMMITTED.fetch_add(self.open.remove(txn).unwrap_or(0), SeqCst);
        Ok(())
    }
    fn abort(&mut self, txn: &tidewater::Txn) -> Result<(), UserError> {
        self.open.remove(txn);
        Ok(())
    }
}

/// A slow sink behind a shuffle holds the source back as a slow operator does: the
/// records read and not yet committed stay within K + 1 epochs per worker (an epoch may
/// be read once the one K before it is durable, and its commit runs in the worker's
/// next round), with checkpoints on and off; everything read is committed once.
#[test]
fn a_slow_sink_holds_the_source_back_to_the_epochs_in_flight() {
    const BUNDLE: u64 = 16;
    for checkpoints in [false, true] {
        let (workers, k) = (2u64, 1u64);
        SINK_TAPPED.store(0, SeqCst);
        SINK_COMMITTED.store(0, SeqCst);
        SINK_MOST_UNCOMMITTED.store(0, SeqCst);
        tidewater_runner_native::register();
        let dir = tempfile::tempdir().unwrap();
        let mut options = native(EngineOptions {
            workers,
            checkpoint_interval: Some(std::time::Duration::ZERO),
            checkpoint_dir: checkpoints.then(|| dir.path().to_path_buf()),
            ..Default::default()
        });
        options.max_duration = Some(std::time::Duration::from_millis(600));
        options.runner_options = vec![
            ("bundle_size".into(), BUNDLE.to_string()),
            ("epochs_in_flight".into(), k.to_string()),
        ];
        let p = Pipeline::new(options);
        p.apply("Generate", Read::from(GenerateSequence::new(0, None)))
            .map("Tap", tap_for_sink)
            .apply("Forward", StatefulParDo::of(Forward))
            .write_to("SlowSink", SlowSink2pc::default());
        let r = p.run().unwrap();
        let bound = workers * (k + 1) * BUNDLE;
        let tapped = SINK_TAPPED.load(SeqCst);
        let most = SINK_MOST_UNCOMMITTED.load(SeqCst);
        assert!(tapped > 2 * bound, "the job read something: {tapped}");
        assert!(
            most <= bound,
            "{most} records were read and not committed at once, more than {bound} (checkpoints: {checkpoints})"
        );
        assert!(
            r.metrics.counter("Generate", "throttled_ms").unwrap() > 0,
            "{:?}",
            r.metrics
        );
        assert_eq!(
            SINK_COMMITTED.load(SeqCst),
            tapped,
            "checkpoints: {checkpoints}"
        );
    }
}

/// A worker whose source starts late (its thread delayed past the checkpoint interval,
/// as under load) still holds the watermark back until it reports: no window closed by
/// the script's watermark takes a late element. (Its first report used to go out only
/// in the next checkpoint span, after the script's first windows: their late elements
/// were counted.) Runs in a child process, which the delay applies to.
#[test]
fn a_source_that_starts_late_holds_the_watermark_until_it_reports() {
    if std::env::var_os("TIDEWATER_LATE_SOURCE_CHILD").is_some() {
        let dir = tempfile::tempdir().unwrap();
        let r = scripted_counts(native(EngineOptions {
            workers: 2,
            checkpoint_dir: Some(dir.path().to_path_buf()),
            checkpoint_interval: Some(std::time::Duration::from_millis(1)),
            ..Default::default()
        }))
        .run()
        .unwrap();
        assert_scripted_counts(&r, "a checkpoint every 1 ms");
        return;
    }
    passes_in_a_child(
        "a_source_that_starts_late_holds_the_watermark_until_it_reports",
        &[
            ("TIDEWATER_LATE_SOURCE_CHILD", "1"),
            ("TIDEWATER_DELAY", "late-source:200"),
        ],
    );
}

/// Runs test `name` of this binary again in a child process with `env` set (a delay
/// hook is armed for a whole process), and checks that it passed there.
fn passes_in_a_child(name: &str, env: &[(&str, &str)]) {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", name, "--nocapture"])
        .envs(env.iter().copied())
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

/// The snapshot writer works off the tasks' threads: with every file's write delayed
/// (a slow disk), a checkpoint is complete only once its files are on disk, and the
/// output is exact. (A task that let its
/// control capability go before the writer answered would make worker 0 write the
/// manifest over files not there yet: "the file ... is missing".)
#[test]
fn a_slow_snapshot_write_completes_checkpoints_only_once_their_files_are_on_disk() {
    if std::env::var_os("TIDEWATER_SLOW_WRITE_CHILD").is_some() {
        let dir = tempfile::tempdir().unwrap();
        let p = pipeline(
            native(EngineOptions {
                workers: 2,
                checkpoint_dir: Some(dir.path().to_path_buf()),
                checkpoint_interval: Some(std::time::Duration::from_millis(20)),
                ..Default::default()
            }),
            6_000,
        );
        let r = p.run().unwrap();
        let mut counts = r.captured_values::<String>("counts").unwrap();
        counts.sort();
        let expected: Vec<String> = (0..10).map(|k| format!("{k} 600")).collect();
        assert_eq!(counts, expected);
        let m = &r.metrics;
        let step = tidewater_runners_timely::metrics::ENGINE_STEP;
        assert!(m.counter(step, "checkpoints").unwrap_or(0) >= 2, "{m:?}");
        // Every file took the writer at least the delay, and no snapshot was durable
        // before its file.
        let write = m.distribution(step, "snapshot_write_ms").unwrap();
        assert!(write.min >= 30, "{write:?}");
        let durable = m.distribution(step, "snapshot_durable_ms").unwrap();
        assert!(durable.min >= 30, "{durable:?}");
        return;
    }
    passes_in_a_child(
        "a_slow_snapshot_write_completes_checkpoints_only_once_their_files_are_on_disk",
        &[
            ("TIDEWATER_SLOW_WRITE_CHILD", "1"),
            ("TIDEWATER_DELAY", "snapshot-write:30"),
        ],
    );
}

/// Keys a generated number by its residue mod 4.
fn by_residue(n: u64) -> (u64, u64) {
    (n % 4, n)
}

/// A checkpoint slower than the interval stretches the source's epoch rather than
/// pausing the source (Flink starts its next checkpoint once the one before is
/// complete, and processing goes on): with every snapshot file's write taking 60 ms (a
/// checkpoint writes two or three, one after another), a checkpoint interval of 20 ms
/// and `epochs_in_flight` 10 (an epoch may stretch by 10 intervals), the source reads
/// on while the writes catch up. A source that waited in its next epoch instead was
/// held back for most of the run (measured: 1,384 of 1,500 ms).
#[test]
fn a_slow_checkpoint_stretches_the_epoch_instead_of_pausing_the_source() {
    if std::env::var_os("TIDEWATER_STRETCH_CHILD").is_some() {
        tidewater_runner_native::register();
        let dir = tempfile::tempdir().unwrap();
        let mut options = native(EngineOptions {
            workers: 1,
            checkpoint_dir: Some(dir.path().to_path_buf()),
            checkpoint_interval: Some(std::time::Duration::from_millis(20)),
            ..Default::default()
        });
        const RUN_MS: i64 = 1_500;
        options.max_duration = Some(std::time::Duration::from_millis(RUN_MS as u64));
        options.runner_options = vec![("epochs_in_flight".into(), "10".into())];
        let p = Pipeline::new(options);
        p.apply("Generate", Read::from(GenerateSequence::new(0, None)))
            .map("Key", by_residue)
            .apply("Forward", StatefulParDo::of(Forward));
        let r = p.run().unwrap();
        let m = &r.metrics;
        let step = tidewater_runners_timely::metrics::ENGINE_STEP;
        let write = m.distribution(step, "snapshot_write_ms").unwrap();
        assert!(write.min >= 60, "{write:?}");
        assert!(m.counter(step, "checkpoints").unwrap_or(0) >= 5, "{m:?}");
        let throttled = m.counter("Generate", "throttled_ms").unwrap_or(0);
        assert!(
            throttled < RUN_MS / 4,
            "the source was held back {throttled} ms of {RUN_MS}: {m:?}"
        );
        return;
    }
    passes_in_a_child(
        "a_slow_checkpoint_stretches_the_epoch_instead_of_pausing_the_source",
        &[
            ("TIDEWATER_STRETCH_CHILD", "1"),
            ("TIDEWATER_DELAY", "snapshot-write:60"),
        ],
    );
}

// ---------------------------------------------------------------------------------------
// Watermark alignment (`max_watermark_drift_ms`): a source of two partitions, one on each
// worker, whose partition 0 reads slowly and partition 1 as fast as it can, both over the
// same event times.

/// Records per partition, and their event times' step.
const SKEWED_RECORDS: u64 = 400;
const SKEWED_STEP_MS: i64 = 100;
/// Records per read (the engine's bundle size).
const SKEWED_BUNDLE: u64 = 10;

/// Record `k` of partition `p` is `(p, k)` at `k × 100 ms`; partition 0 sleeps 2 ms a read.
#[derive(Serialize, Deserialize)]
struct Skewed;

impl tidewater::Source for Skewed {
    type Output = (u64, u64);
    type Position = u64;
    fn is_bounded(&self) -> bool {
        true
    }
    fn partitions(&self, _desired: usize) -> usize {
        2
    }
    fn initial_position(&self, _: usize, _: usize) -> u64 {
        0
    }
    fn read(
        &mut self,
        partition: usize,
        _: usize,
        next: &mut u64,
        max: usize,
        _: Timestamp,
        out: &mut Vec<((u64, u64), Timestamp)>,
    ) -> Result<tidewater::ReadStatus, UserError> {
        if partition == 0 {
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        for _ in 0..max {
            if *next >= SKEWED_RECORDS {
                return Ok(tidewater::ReadStatus::Done);
            }
            out.push((
                (partition as u64, *next),
                Timestamp(*next as i64 * SKEWED_STEP_MS),
            ));
            *next += 1;
        }
        Ok(tidewater::ReadStatus::More)
    }
    fn watermark(&self, _: usize, _: usize, next: &u64) -> Timestamp {
        if *next >= SKEWED_RECORDS {
            Timestamp::MAX
        } else {
            Timestamp(*next as i64 * SKEWED_STEP_MS)
        }
    }
}

/// The furthest record each partition has read, and the furthest partition 1 ran ahead
/// of partition 0 in event time when it read.
static SKEW_READ: [AtomicU64; 2] = [AtomicU64::new(0), AtomicU64::new(0)];
static SKEW_MOST_AHEAD_MS: AtomicU64 = AtomicU64::new(0);

/// Fused with the source: notes how far ahead partition 1 reads.
fn skew_tap(pk: (u64, u64)) -> (u64, u64) {
    let (p, k) = pk;
    SKEW_READ[p as usize].fetch_max(k, SeqCst);
    if p == 1 {
        let behind = SKEW_READ[0].load(SeqCst);
        let ahead = k.saturating_sub(behind) * SKEWED_STEP_MS as u64;
        SKEW_MOST_AHEAD_MS.fetch_max(ahead, SeqCst);
    }
    (p, k)
}

fn partition_of(pk: (u64, u64)) -> u64 {
    pk.0
}

/// One run of the skewed source into 1 s windows counted per partition, with
/// `drift_ms` of watermark alignment (none: off) and checkpoints every 20 ms; returns the
/// counts, the source's paused time and how far partition 1 ran ahead.
fn skewed_run(drift_ms: Option<u64>) -> (Vec<String>, Option<i64>, u64) {
    for r in &SKEW_READ {
        r.store(0, SeqCst);
    }
    SKEW_MOST_AHEAD_MS.store(0, SeqCst);
    tidewater_runner_native::register();
    let dir = tempfile::tempdir().unwrap();
    let mut options = native(EngineOptions {
        workers: 2,
        checkpoint_dir: Some(dir.path().to_path_buf()),
        checkpoint_interval: Some(std::time::Duration::from_millis(20)),
        ..Default::default()
    });
    options.runner_options = vec![("bundle_size".into(), SKEWED_BUNDLE.to_string())];
    if let Some(ms) = drift_ms {
        options
            .runner_options
            .push(("max_watermark_drift_ms".into(), ms.to_string()));
    }
    let p = Pipeline::new(options);
    p.apply("Skewed", Read::from(Skewed))
        .map("Tap", skew_tap)
        .map("Partition", partition_of)
        .apply("Seconds", Window::into(WindowFn::fixed(1_000)))
        .apply("Count", Count::per_element())
        .map("Format", to_string)
        .capture("counts");
    let r = p.run().unwrap();
    let mut counts = r.captured_values::<String>("counts").unwrap();
    counts.sort();
    let paused = r
        .metrics
        .counter("Skewed", tidewater_runners_timely::metrics::DRIFT_PAUSED_MS);
    (counts, paused, SKEW_MOST_AHEAD_MS.load(SeqCst))
}

/// With watermark alignment the fast partition reads at most the drift, plus a read
/// (10 records, 1 s) and one record, ahead of the slow one's furthest record: it waits,
/// and says how long. Without, it runs to its end first (400 records, 40 s ahead). The
/// counts are the same either way: 10 per partition in each of the 40 windows.
#[test]
fn watermark_alignment_keeps_a_fast_partition_within_the_drift_of_the_slow_one() {
    let mut expected: Vec<String> = ["0 10", "1 10"]
        .iter()
        .flat_map(|c| std::iter::repeat_n(c.to_string(), 40))
        .collect();
    expected.sort();
    let drift = 1_000;
    let (counts, paused, ahead) = skewed_run(Some(drift));
    assert_eq!(counts, expected);
    let bound = drift + (SKEWED_BUNDLE + 1) * SKEWED_STEP_MS as u64;
    assert!(
        ahead <= bound,
        "partition 1 ran {ahead} ms ahead, more than {bound}"
    );
    assert!(paused.is_some_and(|ms| ms > 0), "{paused:?}");

    let (counts, paused, ahead) = skewed_run(None);
    assert_eq!(counts, expected);
    assert_eq!(paused, None, "no alignment, no pause");
    assert!(
        ahead > 10 * bound,
        "partition 1 ran only {ahead} ms ahead without alignment"
    );
}

#[test]
fn a_bad_watermark_drift_is_refused() {
    tidewater_runner_native::register();
    let mut options = native(EngineOptions::default());
    options.runner_options = vec![("max_watermark_drift_ms".into(), "1s".into())];
    let err = pipeline(options, 10).run().unwrap_err().to_string();
    assert!(
        err.contains("max_watermark_drift_ms=1s") && err.contains("milliseconds"),
        "{err}"
    );
}

/// A source whose records only reach a capture (gathered on worker 0, which sends no
/// progress to the others) has no view of its other instances to align to: with
/// alignment on it reads on, and every record arrives. (A cut that counted the gather
/// waited forever for progress that never came; the deadline makes such a wait fail
/// here with records missing instead of hanging.)
#[test]
fn watermark_alignment_without_a_shuffle_reads_everything() {
    tidewater_runner_native::register();
    let mut options = native(EngineOptions {
        workers: 2,
        ..Default::default()
    });
    options.max_duration = Some(std::time::Duration::from_secs(20));
    options.runner_options = vec![("max_watermark_drift_ms".into(), "1".into())];
    let p = Pipeline::new(options);
    p.apply(
        "Generate",
        Read::from(GenerateSequence::new(0, Some(5_000)).with_rate(50_000.0)),
    )
    .map("Mod", modulo)
    .capture("mods");
    let r = p.run().unwrap();
    let mods = r.captured_values::<u64>("mods").unwrap();
    assert_eq!(mods.len(), 5_000);
    assert_eq!(mods.iter().sum::<u64>(), 500 * 45);
}

/// An engine applies a TestStream's script in order (and a Read beside it before the
/// script's first event, core's `clock.rs`) only with aligned epochs: without, a late
/// element of the script could overtake the watermark before it and count (at 2
/// workers a run gave `a 3` for windows whose late `a` the script drops), and a Read's
/// data could fall after the script's events. So at-least-once is refused for a plan
/// with a TestStream, saying why.
#[test]
fn at_least_once_is_refused_for_a_test_stream() {
    tidewater_runner_native::register();
    let at_least_once = || {
        native(EngineOptions {
            workers: 2,
            guarantee: "at-least-once".into(),
            ..Default::default()
        })
    };
    let p = Pipeline::new(at_least_once());
    let numbers = p.apply(
        "Numbers",
        Read::from(GenerateSequence::new(0, Some(100)).with_event_time(12, 0)),
    );
    let script = TestStream::new()
        .add_elements(vec![(100u64, Timestamp(3))])
        .advance_watermark_to_infinity();
    let scripted = p.apply("Script", script);
    vec![numbers, scripted]
        .apply_flatten("Both")
        .map("Format", |n: u64| n.to_string())
        .capture("numbers");
    let refused = "invalid option --guarantee at-least-once: this pipeline replays a TestStream, whose script is applied in order (after any source beside it is read out) only with aligned epochs: run it with --guarantee exactly-once";
    assert_eq!(p.run().unwrap_err().to_string(), refused);
    let alone = scripted_counts(at_least_once()).run().unwrap_err();
    assert_eq!(alone.to_string(), refused);
}

/// The longest chain of files (a full one and the deltas after it) any kept
/// checkpoint of a counting job restores from, at checkpoints every 5 ms: a count of
/// ten keys that all change (`settled` false), or of 2,000 keys of which three change
/// after the first 2,000 records.
fn longest_chain(settled: bool) -> usize {
    tidewater_runner_native::register();
    let dir = tempfile::tempdir().unwrap();
    let p = Pipeline::new(native(EngineOptions {
        workers: 1,
        checkpoint_dir: Some(dir.path().to_path_buf()),
        checkpoint_interval: Some(std::time::Duration::from_millis(5)),
        ..Default::default()
    }));
    p.apply(
        "Generate",
        Read::from(GenerateSequence::new(0, Some(8_000)).with_rate(20_000.0)),
    )
    .map_with("Key", settled, |settled, n| match settled {
        true if n >= 2_000 => n % 3,
        true => n,
        false => n % 10,
    })
    .apply("Count", Count::per_element())
    .map("Format", to_string)
    .capture("counts");
    let r = p.run().unwrap();
    assert!(!r.captured_values::<String>("counts").unwrap().is_empty());
    let mut longest = 0;
    for e in std::fs::read_dir(dir.path()).unwrap() {
        let path = e.unwrap().path();
        if path.extension().is_some_and(|x| x == "manifest") {
            let m: serde_json::Value =
                serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
            for f in m["files"].as_array().unwrap() {
                longest = longest.max(f["base"].as_array().map_or(0, Vec::len));
            }
        }
    }
    longest
}

/// A task's snapshot is full once its deltas since the last full one outweigh it: a
/// count whose every key changes between checkpoints restores from a full file and a
/// delta or two (those in flight when the size is known), while one whose state mostly
/// stays builds long chains of small deltas (up to `full_snapshot_every`).
#[test]
fn deltas_that_outweigh_their_full_snapshot_make_the_next_one_full() {
    let churning = longest_chain(false);
    assert!(churning <= 3, "a chain of {churning} deltas");
    let settled = longest_chain(true);
    assert!(settled >= 8, "a chain of only {settled} deltas");
}
