//! The "source = topic" class (`tidewater_conformance::topic`) on every registered
//! runner, on 1 worker and on 2: each case's pipeline gives the same, expected output
//! over its records read from files and from a Kafka topic. Needs a broker
//! (`TIDEWATER_KAFKA_BROKERS`, which `.ci/run` sets); without one it says loudly that
//! it was skipped (and fails under CI).

use tidewater_conformance::{harness, register_runners, topic, MatrixConfig};

#[test]
fn the_same_pipeline_over_the_same_records_from_a_file_and_from_a_topic_gives_the_same_output() {
    if tidewater_kafka::test_brokers(
        "the_same_pipeline_over_the_same_records_from_a_file_and_from_a_topic_gives_the_same_output",
    )
    .is_none()
    {
        return;
    }
    register_runners();
    let runners: Vec<String> = tidewater::runner::registered_runners()
        .iter()
        .map(|r| r.name().to_string())
        .collect();
    assert_eq!(runners, ["direct", "microbatch", "native"]);
    let cases = topic::all();
    assert_eq!(cases.len(), 4);
    for workers in [1, 2] {
        let config = MatrixConfig {
            engine: tidewater::EngineOptions {
                workers,
                ..Default::default()
            },
            ..MatrixConfig::default()
        };
        let matrix = harness::with_quiet_panics(|| harness::run_matrix(&cases, &runners, &config))
            .expect("every runner is registered");
        let not_passed: Vec<String> = matrix
            .cells()
            .filter(|(_, _, o)| !o.is_pass())
            .map(|(case, runner, o)| {
                format!(
                    "[{runner}, {workers} workers] {case}: {} {}",
                    o.label(),
                    o.reason().unwrap_or_default()
                )
            })
            .collect();
        assert!(not_passed.is_empty(), "{}", not_passed.join("\n"));
        assert_eq!(matrix.cells().count(), 12);
    }
}
