//! A plan's connector settings are checked field by field as the plan is decoded
//! (issue 34): a plan is untrusted input, and a source's or sink's settings travel in it.
//! Each error names the field, what it must be and what was found, before anything
//! connects; no broker or server is needed.

use serde_json::Value;
use tidewater::{Pipeline, PipelineOptions, Read, WatermarkEstimator};
use tidewater_kafka::KafkaSource;
use tidewater_postgres::PostgresSink;
use tidewater_transforms::GenerateSequence;

/// `json` with the first object's `key` (depth first) set to `value`.
fn set_field(json: &str, key: &str, value: Value) -> String {
    fn set(v: &mut Value, key: &str, value: &Value) -> bool {
        match v {
            Value::Object(m) if m.contains_key(key) => {
                m.insert(key.to_string(), value.clone());
                true
            }
            Value::Object(m) => m.values_mut().any(|v| set(v, key, value)),
            Value::Array(a) => a.iter_mut().any(|v| set(v, key, value)),
            _ => false,
        }
    }
    let mut plan: Value = serde_json::from_str(json).unwrap();
    assert!(set(&mut plan, key, &value), "the plan has no field {key}");
    plan.to_string()
}

fn options() -> PipelineOptions {
    tidewater_runner_direct::register();
    PipelineOptions {
        runner: "direct".into(),
        ..Default::default()
    }
}

#[test]
fn a_plans_kafka_source_is_checked_field_by_field() {
    let p = Pipeline::new(options());
    let source = KafkaSource::new("127.0.0.1:9092", "events")
        .with_watermarks(WatermarkEstimator::bounded_out_of_orderness(1000))
        .with_max_rate(100.0);
    p.apply("Read", source.read()).capture("records");
    let json = tidewater::plan::encode(&p.to_plan().unwrap());
    for (key, bad, says) in [
        (
            "timeout_ms",
            serde_json::json!(0),
            "field `timeout_ms` must be between 1 and 86400000 (a day), found 0",
        ),
        (
            "fetch_bytes",
            serde_json::json!(-1),
            "field `fetch_bytes` must be at least 1, found -1",
        ),
        (
            "max_records_per_second",
            serde_json::json!(0.0),
            "field `max_records_per_second` must be a positive number, found Some(0.0)",
        ),
        (
            "brokers",
            serde_json::json!(["localhost"]),
            "field `brokers` must be one or more `host:port` with a port from 1 to 65535, found [\"localhost\"]",
        ),
        (
            "brokers",
            serde_json::json!([]),
            "field `brokers` must be one or more",
        ),
        (
            "topic",
            serde_json::json!("a/b"),
            "field `topic` must be 1 to 249 letters, digits, '.', '_' or '-', found \"a/b\"",
        ),
        (
            "max_delay_ms",
            serde_json::json!(-5),
            "field `max_delay_ms` must be 0 or more, found -5",
        ),
    ] {
        // Decoded as a run starts (its functions, sources and sinks are made from
        // their fields then); refused before anything connects.
        let err = tidewater::run_plan_json(&set_field(&json, key, bad), &options())
            .err()
            .unwrap_or_else(|| panic!("{key}: decoded"))
            .to_string();
        assert!(err.contains(says), "{key}: {err}");
    }
}

#[test]
fn a_plans_postgres_sink_is_checked_field_by_field() {
    let p = Pipeline::new(options());
    p.apply("Numbers", Read::from(GenerateSequence::new(0, Some(3))))
        .map("Row", |n: u64| (n as i64, n.to_string()))
        .write_to(
            "Write",
            PostgresSink::new("host=127.0.0.1 port=1", "t", &["n", "s"]).bridged(),
        );
    let json = tidewater::plan::encode(&p.to_plan().unwrap());
    for (key, bad, says) in [
        (
            "timeout_ms",
            serde_json::json!(0),
            "field `timeout_ms` must be between 1 and 86400000 (a day), found 0",
        ),
        (
            "timeout_ms",
            serde_json::json!(u64::MAX),
            "field `timeout_ms` must be between 1 and 86400000 (a day), found 18446744073709551615",
        ),
        (
            "table",
            serde_json::json!("t; DROP TABLE x"),
            "field `table` must be a plain name (letters, digits, _; optionally schema.name), found \"t; DROP TABLE x\"",
        ),
        (
            "ledger_table",
            serde_json::json!("a.b.c"),
            "field `ledger_table` must be a plain name",
        ),
        (
            "columns",
            serde_json::json!([]),
            "field `columns` must be one or more plain names (letters, digits, _), found []",
        ),
        (
            "sink_id",
            serde_json::json!("x'y"),
            "field `sink_id` must be 1 to 80 letters, digits, - or _ (by default the table's name), found \"x'y\"",
        ),
    ] {
        // Decoded as a run starts (its functions, sources and sinks are made from
        // their fields then); refused before anything connects.
        let err = tidewater::run_plan_json(&set_field(&json, key, bad), &options())
            .err()
            .unwrap_or_else(|| panic!("{key}: decoded"))
            .to_string();
        assert!(err.contains(says), "{key}: {err}");
    }
}
