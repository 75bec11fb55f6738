//! The native runner's own behaviour: options, checkpoints and their metrics, restoring
//! the wrong pipeline. The semantics are the conformance suite's (every case at 1, 2
//! and 3 workers and in 2 processes), exactly-once after crashes is
//! `examples/tests/crash.rs`.

use tidewater::{EngineOptions, Pipeline, PipelineOptions, Read};
use tidewater_transforms::{Count, GenerateSequence};

fn to_string(kv: (u64, u64)) -> String {
    format!("{} {}", kv.0, kv.1)
}

fn modulo(n: u64) -> u64 {
    n % 10
}

fn pipeline(options: PipelineOptions, records: u64) -> Pipeline {
    tidewater_runner_native::register();
    let p = Pipeline::new(options);
    p.apply(
        "Generate",
        Read::from(GenerateSequence::new(0, Some(records)).with_rate(20_000.0)),
    )
    .map("Mod", modulo)
    .apply("Count", Count::per_element())
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
    let step = tidewater_runners_timely::task::ENGINE_STEP;
    assert!(m.counter(step, "checkpoints").unwrap_or(0) >= 2, "{m:?}");
    assert_eq!(m.counter(step, "records_read"), Some(6_000));
    let bytes = m.distribution(step, "snapshot_bytes").unwrap();
    assert!(bytes.count > 0 && bytes.min > 0, "{bytes:?}");
    assert!(m.distribution(step, "snapshot_ms").is_some());
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
fn a_checkpoint_of_another_pipeline_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let engine = EngineOptions {
        checkpoint_dir: Some(dir.path().to_path_buf()),
        checkpoint_interval: Some(std::time::Duration::from_millis(50)),
        ..Default::default()
    };
    pipeline(native(engine.clone()), 2_000).run().unwrap();
    let e = pipeline(native(engine), 3_000)
        .run()
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("belongs to another pipeline"),
        "unexpected error: {e}"
    );
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
