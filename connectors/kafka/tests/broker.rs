//! The Kafka source against a real Kafka-protocol broker (`.ci/run` starts one and sets
//! `TIDEWATER_KAFKA_BROKERS`; the README says how to run these by hand). Without a
//! broker each test that needs one says loudly that it was skipped (and fails under CI).

use std::time::{Duration, Instant};
use tidewater::exec::SourceInvoker;
use tidewater::io::{AsyncSource, AsyncSourceReader, BridgePosition, SourceBridge};
use tidewater::{Pipeline, PipelineOptions, ReadStatus, Source, Timestamp};
use tidewater_kafka::admin::{KafkaAdmin, ProducerRecord};
use tidewater_kafka::{test_brokers, KafkaPosition, KafkaRecord, KafkaSource};
use tidewater_runners_core::source_driver::SourceDriver;

fn options() -> PipelineOptions {
    tidewater_runner_direct::register();
    PipelineOptions {
        seed: Some(3),
        ..Default::default()
    }
}

/// A topic name no other test (or earlier run against the same broker) uses.
fn fresh_topic(test: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{test}-{}-{nanos}", std::process::id())
}

/// Creates `topic` with `partitions` partitions.
fn admin(brokers: &str, topic: &str, partitions: u32) -> KafkaAdmin {
    let a = KafkaAdmin::connect(brokers, topic).unwrap();
    assert!(a.create_topic(partitions).unwrap(), "topic {topic} existed");
    a
}

fn texts(prefix: &str, n: usize, first_ts: i64) -> Vec<ProducerRecord> {
    (0..n)
        .map(|i| ProducerRecord::text(&format!("{prefix}{i}"), first_ts + i as i64))
        .collect()
}

fn describe(r: KafkaRecord) -> String {
    format!(
        "p{} @{} {} t={}",
        r.partition,
        r.offset,
        r.value_text(),
        r.timestamp_ms
    )
}

/// Partition 0 holds one batch of 5 records, partition 1 three batches of one record,
/// partition 2 nothing.
fn fill(a: &KafkaAdmin) {
    assert_eq!(
        a.produce(0, &texts("a", 5, 1_000)).unwrap(),
        vec![0, 1, 2, 3, 4]
    );
    for r in texts("b", 3, 2_000) {
        a.produce(1, &[r]).unwrap();
    }
}

fn expected_fill() -> Vec<String> {
    let mut want: Vec<String> = (0..5)
        .map(|i| format!("p0 @{i} a{i} t={}", 1_000 + i))
        .chain((0..3).map(|i| format!("p1 @{i} b{i} t={}", 2_000 + i)))
        .collect();
    want.sort();
    want
}

#[test]
fn available_now_reads_every_partition_to_its_end_and_stops() {
    let Some(brokers) = test_brokers("available_now_reads_every_partition_to_its_end_and_stops")
    else {
        return;
    };
    let topic = fresh_topic("available-now");
    let a = admin(&brokers, &topic, 3);
    fill(&a);
    // What end offsets mean on this broker: the fetch's high watermark is the offset
    // after the last record; ListOffsets may say less (tansu: last batch's base + 1).
    assert_eq!(a.high_watermark(0).unwrap(), 5);
    assert_eq!(a.high_watermark(1).unwrap(), 3);
    assert_eq!(a.high_watermark(2).unwrap(), 0);
    eprintln!(
        "ListOffsets latest on this broker: partition 0 (one batch of 5): {}, partition 1 (3 batches of 1): {}",
        a.listed_end_offset(0).unwrap(),
        a.listed_end_offset(1).unwrap()
    );

    let p = Pipeline::new(options());
    p.apply(
        "ReadTopic",
        KafkaSource::new(&brokers, &topic).available_now().read(),
    )
    .map("Describe", describe)
    .capture("records");
    let r = p.run().unwrap();
    let mut got = r.captured_values::<String>("records").unwrap();
    got.sort();
    assert_eq!(got, expected_fill());
    // Every record's event time is its Kafka timestamp.
    let mut times: Vec<i64> = r
        .captured::<String>("records")
        .unwrap()
        .iter()
        .map(|wv| wv.timestamp.millis())
        .collect();
    times.sort();
    assert_eq!(times, vec![1000, 1001, 1002, 1003, 1004, 2000, 2001, 2002]);
}

type Bridged = SourceBridge<KafkaSource>;

/// Reads partition `p` of `source` from `pos` until it reports `until` (or 200 reads).
fn read_until(
    source: &mut Bridged,
    p: usize,
    n: usize,
    pos: &mut BridgePosition<KafkaPosition>,
    max: usize,
    until: ReadStatus,
) -> Vec<String> {
    let mut out = Vec::new();
    for _ in 0..200 {
        let status = source.read(p, n, pos, max, Timestamp(0), &mut out).unwrap();
        if status == until {
            break;
        }
    }
    out.into_iter().map(|(r, _)| describe(r)).collect()
}

#[test]
fn available_now_stops_at_the_end_offsets_taken_at_start() {
    let Some(brokers) = test_brokers("available_now_stops_at_the_end_offsets_taken_at_start")
    else {
        return;
    };
    let topic = fresh_topic("end-at-start");
    let a = admin(&brokers, &topic, 1);
    a.produce(0, &texts("x", 5, 10)).unwrap();
    let mut source = SourceBridge::new(KafkaSource::new(&brokers, &topic).available_now());
    assert_eq!(source.try_partitions(4).unwrap(), 1);
    let mut pos = source.initial_position(0, 1);
    let mut out = Vec::new();
    assert_eq!(
        source
            .read(0, 1, &mut pos, 2, Timestamp(0), &mut out)
            .unwrap(),
        ReadStatus::More
    );
    assert_eq!(out.len(), 2);
    // Taken when the partition's reader opened, kept in the position.
    assert_eq!(pos.at.end, Some(5));
    assert_eq!(
        source.available(0, 1, &pos, tidewater::Timestamp(0)),
        Some(3)
    );
    // Produced after the start: not read.
    a.produce(0, &texts("late", 3, 20)).unwrap();
    let rest = read_until(&mut source, 0, 1, &mut pos, 2, ReadStatus::Done);
    assert_eq!(
        rest,
        vec!["p0 @2 x2 t=12", "p0 @3 x3 t=13", "p0 @4 x4 t=14"]
    );
    assert_eq!(pos.at.next, Some(5));
    assert_eq!(source.watermark(0, 1, &pos), Timestamp::MAX);
}

#[test]
fn a_position_from_a_checkpoint_resumes_at_exactly_its_offset() {
    let Some(brokers) = test_brokers("a_position_from_a_checkpoint_resumes_at_exactly_its_offset")
    else {
        return;
    };
    let topic = fresh_topic("resume");
    let a = admin(&brokers, &topic, 1);
    a.produce(0, &texts("r", 6, 100)).unwrap();
    let mut first = SourceBridge::new(KafkaSource::new(&brokers, &topic).available_now());
    let mut pos = first.initial_position(0, 1);
    let mut out = Vec::new();
    first
        .read(0, 1, &mut pos, 4, Timestamp(0), &mut out)
        .unwrap();
    assert_eq!(out.len(), 4);
    // The position travels through the checkpoint as bytes; a new source instance (a
    // restarted worker) reads on from it.
    let mut bytes = Vec::new();
    tidewater::coder::encode_into(&pos, &mut bytes).unwrap();
    drop(first);
    let mut restored: BridgePosition<KafkaPosition> = tidewater::coder::decode(&bytes).unwrap();
    let mut second = SourceBridge::new(KafkaSource::new(&brokers, &topic).available_now());
    let rest = read_until(&mut second, 0, 1, &mut restored, 100, ReadStatus::Done);
    assert_eq!(rest, vec!["p0 @4 r4 t=104", "p0 @5 r5 t=105"]);
}

#[test]
fn an_idle_partition_does_not_hold_back_the_watermark_of_the_others() {
    let Some(brokers) =
        test_brokers("an_idle_partition_does_not_hold_back_the_watermark_of_the_others")
    else {
        return;
    };
    let topic = fresh_topic("idle");
    let a = admin(&brokers, &topic, 2);
    a.produce(0, &texts("w", 3, 5_000)).unwrap();
    // Partition 1 stays empty: idle once 1 s passed without a record; partition 0 has
    // just given its records, so it still holds the watermark at its latest timestamp.
    let source = KafkaSource::new(&brokers, &topic).with_idle_after_ms(1_000);
    let mut driver =
        SourceDriver::start(Box::new(SourceInvoker(SourceBridge::new(source))), 1, 0, 1).unwrap();
    let mut out = Vec::new();
    driver.read(100, Timestamp(0), &mut out).unwrap();
    let parts = driver.partitions();
    assert!(!parts[&0].idle, "{parts:?}");
    assert!(parts[&1].idle, "{parts:?}");
    assert_eq!(parts[&0].watermark, Timestamp(5_002));
    assert_eq!(driver.watermark(), Timestamp(5_002));
    // Once partition 0 is caught up for 1 s it is idle too: the minimum of the idle
    // ones holds (partition 1 has read nothing).
    let started = Instant::now();
    while !driver.partitions()[&0].idle {
        assert!(started.elapsed() < Duration::from_secs(10), "never idle");
        driver.read(100, Timestamp(0), &mut out).unwrap();
    }
    assert_eq!(driver.watermark(), Timestamp::MIN);
    // New records: partition 0 is active again, and its watermark moves on.
    a.produce(0, &texts("v", 2, 7_000)).unwrap();
    let started = Instant::now();
    while driver.watermark() != Timestamp(7_001) {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{:?}",
            driver.partitions()
        );
        driver.read(100, Timestamp(0), &mut out).unwrap();
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(out.iter().map(|b| b.len()).sum::<usize>(), 5);
}

#[test]
fn a_caught_up_partition_turns_idle_after_the_idleness_timeout() {
    let Some(brokers) = test_brokers("a_caught_up_partition_turns_idle_after_the_idleness_timeout")
    else {
        return;
    };
    let topic = fresh_topic("idle-timeout");
    let _a = admin(&brokers, &topic, 1);
    let rt = tidewater::io::runtime();
    for (idle_after, at_least, below) in [(0u64, 0u64, 500u64), (400, 400, 3_000)] {
        let source = KafkaSource::new(&brokers, &topic).with_idle_after_ms(idle_after);
        let mut reader = rt
            .block_on(source.open(0, 1, source.initial_position(0, 1)))
            .unwrap();
        let started = Instant::now();
        let mut out = Vec::new();
        assert_eq!(
            rt.block_on(reader.read(10, &mut out)).unwrap(),
            ReadStatus::Idle
        );
        let took = started.elapsed();
        assert!(
            took >= Duration::from_millis(at_least) && took < Duration::from_millis(below),
            "idle after {idle_after} ms: {took:?}"
        );
        assert!(out.is_empty());
    }
}

/// An unbounded read on the direct runner sees the records produced while it runs, and
/// stops at `--max-duration`.
#[test]
fn an_unbounded_read_gets_the_records_produced_while_it_runs() {
    let Some(brokers) = test_brokers("an_unbounded_read_gets_the_records_produced_while_it_runs")
    else {
        return;
    };
    let topic = fresh_topic("unbounded");
    let a = admin(&brokers, &topic, 2);
    a.produce(0, &texts("early", 2, 10)).unwrap();
    let producer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        a.produce(1, &texts("later", 3, 20)).unwrap();
    });
    let p = Pipeline::new(PipelineOptions {
        max_duration: Some(Duration::from_millis(1_500)),
        ..options()
    });
    p.apply("ReadTopic", KafkaSource::new(&brokers, &topic).read())
        .map("Describe", describe)
        .capture("records");
    let r = p.run().unwrap();
    producer.join().unwrap();
    let mut got = r.captured_values::<String>("records").unwrap();
    got.sort();
    assert_eq!(
        got,
        vec![
            "p0 @0 early0 t=10",
            "p0 @1 early1 t=11",
            "p1 @0 later0 t=20",
            "p1 @1 later1 t=21",
            "p1 @2 later2 t=22"
        ]
    );
}

/// The micro-batch runner's `--trigger available-now` over the unbounded source: each run
/// reads what the topic holds and stops, its offsets kept in the checkpoint directory,
/// so the next run reads exactly the records produced since.
#[test]
fn microbatch_available_now_runs_resume_from_the_offsets_in_the_checkpoint() {
    let Some(brokers) =
        test_brokers("microbatch_available_now_runs_resume_from_the_offsets_in_the_checkpoint")
    else {
        return;
    };
    tidewater_runner_microbatch::register();
    let topic = fresh_topic("microbatch");
    let a = admin(&brokers, &topic, 2);
    let dir = tempfile::tempdir().unwrap();
    let run = || {
        let p = Pipeline::new(
            PipelineOptions {
                engine: tidewater::EngineOptions {
                    checkpoint_dir: Some(dir.path().join("ckpt")),
                    ..Default::default()
                },
                ..PipelineOptions::for_runner("microbatch")
            }
            .with_runner_flag("trigger", "available-now")
            .with_runner_flag("max-records-per-batch", "4")
            .with_runner_flag("batch-interval", "1ms"),
        );
        p.apply("ReadTopic", KafkaSource::new(&brokers, &topic).read())
            .map("Describe", describe)
            .capture("records");
        let mut got = p
            .run()
            .unwrap()
            .captured_values::<String>("records")
            .unwrap();
        got.sort();
        got
    };
    a.produce(0, &texts("a", 5, 100)).unwrap();
    a.produce(1, &texts("b", 2, 200)).unwrap();
    let mut want: Vec<String> = (0..5)
        .map(|i| format!("p0 @{i} a{i} t={}", 100 + i))
        .chain((0..2).map(|i| format!("p1 @{i} b{i} t={}", 200 + i)))
        .collect();
    want.sort();
    assert_eq!(run(), want);
    a.produce(1, &texts("c", 3, 300)).unwrap();
    assert_eq!(
        run(),
        vec!["p1 @2 c0 t=300", "p1 @3 c1 t=301", "p1 @4 c2 t=302"]
    );
    assert_eq!(run(), Vec::<String>::new());
}

/// `--trigger available-now` on the micro-batch runner reads exactly the records the
/// topic held when the run started (Spark's `Trigger.AvailableNow`), in batches of at
/// most `--max-records-per-batch`: records produced while it runs (here by the
/// pipeline itself, in its third batch, when every worker has long taken its end
/// offsets) are left for the next run, which reads exactly them, at another worker
/// count. Each run takes ceil(records per partition / share) batches per worker, no
/// empty one at the end.
#[test]
fn microbatch_available_now_reads_exactly_up_to_the_end_offsets_taken_at_start() {
    let Some(brokers) =
        test_brokers("microbatch_available_now_reads_exactly_up_to_the_end_offsets_taken_at_start")
    else {
        return;
    };
    tidewater_runner_microbatch::register();
    let topic = fresh_topic("available-now-ends");
    let a = admin(&brokers, &topic, 2);
    // 10 records per partition, in record batches of 3 (tansu's ListOffsets would say
    // 10 - 1 = 9: the base offset of the last batch plus one).
    for part in 0..2u32 {
        let records = texts(&format!("p{part}-"), 10, 1_000 * i64::from(part + 1));
        for chunk in records.chunks(3) {
            a.produce(part, chunk).unwrap();
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let run = |workers: u64| {
        let p = Pipeline::new(
            PipelineOptions {
                engine: tidewater::EngineOptions {
                    workers,
                    checkpoint_dir: Some(dir.path().join("ckpt")),
                    ..Default::default()
                },
                ..PipelineOptions::for_runner("microbatch")
            }
            .with_runner_flag("trigger", "available-now")
            // 2 per partition and batch.
            .with_runner_flag("max-records-per-batch", "4")
            .with_runner_flag("batch-interval", "1ms"),
        );
        p.apply("ReadTopic", KafkaSource::new(&brokers, &topic).read())
            .map_with(
                "ProduceDuringTheRun",
                (brokers.clone(), topic.clone()),
                // Only the first run reads offset 4.
                |(brokers, topic): &(String, String), r: KafkaRecord| {
                    if r.partition == 0 && r.offset == 4 {
                        let a = KafkaAdmin::connect(brokers, topic).unwrap();
                        for part in 0..2 {
                            a.produce(part, &texts(&format!("late{part}-"), 3, 9_000))
                                .unwrap();
                        }
                    }
                    r
                },
            )
            .map("Describe", describe)
            .capture("records");
        let r = p.run().unwrap();
        let mut got = r.captured_values::<String>("records").unwrap();
        got.sort();
        let batches = r
            .metrics
            .distribution(
                tidewater_runners_timely::metrics::ENGINE_STEP,
                "batch_records",
            )
            .unwrap();
        (got, (batches.count, batches.max, batches.sum))
    };
    let first: Vec<String> = {
        let mut v: Vec<String> = (0..2)
            .flat_map(|part| {
                (0..10)
                    .map(move |i| format!("p{part} @{i} p{part}-{i} t={}", 1_000 * (part + 1) + i))
            })
            .collect();
        v.sort();
        v
    };
    // Two workers, one partition each: 5 batches of 2 records each.
    assert_eq!(run(2), (first, (10, 2, 20)));
    assert_eq!(a.high_watermark(0).unwrap(), 13, "produced during the run");
    let mut rest: Vec<String> = (0..2)
        .flat_map(|part| {
            (0..3).map(move |i| format!("p{part} @{} late{part}-{i} t={}", 10 + i, 9_000 + i))
        })
        .collect();
    rest.sort();
    // One worker, both partitions: 2 batches (2 + 2, then 1 + 1).
    assert_eq!(run(1), (rest, (2, 4, 6)));
    assert_eq!(run(1), (Vec::new(), (1, 0, 0)), "nothing new");
}

#[test]
fn an_unknown_topic_fails_the_job_naming_it() {
    let Some(brokers) = test_brokers("an_unknown_topic_fails_the_job_naming_it") else {
        return;
    };
    let topic = fresh_topic("missing");
    let p = Pipeline::new(options());
    p.apply(
        "ReadTopic",
        KafkaSource::new(&brokers, &topic).available_now().read(),
    )
    .map("Describe", describe)
    .capture("records");
    let err = p.run().unwrap_err().to_string();
    assert!(
        err.contains(&format!(
            "Kafka topic '{topic}' does not exist on the brokers"
        )),
        "{err}"
    );
}

/// Needs no broker: nothing listens on port 1. A broker out of reach when a job first
/// starts is the job's error on every runner (a wrong address, a broker not running),
/// not an `Unavailable` to restart on.
#[test]
fn a_broker_that_is_down_fails_the_job_within_the_timeout_naming_it() {
    tidewater_runner_direct::register();
    tidewater_runner_native::register();
    tidewater_runner_microbatch::register();
    for runner in ["direct", "native", "microbatch"] {
        let p = Pipeline::new(PipelineOptions {
            engine: tidewater::EngineOptions {
                workers: 2,
                ..Default::default()
            },
            ..PipelineOptions::for_runner(runner)
        });
        p.apply(
            "ReadTopic",
            KafkaSource::new("127.0.0.1:1", "events")
                .available_now()
                .with_timeout_ms(1_000)
                .read(),
        )
        .map("Describe", describe)
        .capture("records");
        let started = Instant::now();
        let err = p.run().unwrap_err().to_string();
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{runner}: {:?}",
            started.elapsed()
        );
        assert!(
            err.contains("cannot reach the Kafka brokers [\"127.0.0.1:1\"]")
                && err.contains("ReadTopic")
                && !err.contains("an external system is unavailable"),
            "{runner}: {err}"
        );
    }
}
