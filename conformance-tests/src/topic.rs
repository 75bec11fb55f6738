//! The case class "source = topic": the same pipeline over the same records, read from
//! files and from a Kafka topic, gives the same output.
//!
//! A case of the class ([`SameOverTopic`]) names its records (partition, timestamp,
//! value), the pipeline that follows the source, and the expected output, once. It
//! becomes two [`Case`]s: `NAME/from_file` reads the records from one text file per
//! partition (`TextIO` with the timestamps parsed from each line, watermarks
//! monotonic per file), `NAME/from_topic` from a topic with one partition per file
//! (`KafkaSource`, available-now, timestamps and watermarks from the records). Both
//! hand the pipeline the records' values at their timestamps, and both are checked
//! against the same expected output, on every runner.
//!
//! The topic cases need a broker: [`topic_cases`] is empty, and says so loudly on
//! stderr, unless `TIDEWATER_KAFKA_BROKERS` names one (`.ci/run` starts one).

use crate::case::RunResult;
use crate::check::{succeeded, values_eq};
use crate::{scratch, Case};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use tidewater::runner::Feature::{self, Capture, CombinePerKey, ParDo, ReadBounded, WindowInto};
use tidewater::{
    ElementContext, PCollection, Pipeline, Timestamp, WatermarkEstimator, Window, WindowFn,
};
use tidewater_kafka::admin::{KafkaAdmin, ProducerRecord};
use tidewater_kafka::{KafkaRecord, KafkaSource, BROKERS_ENV};
use tidewater_transforms::{Count, TextIO};

/// One record of a case: its partition, timestamp (ms) and value.
pub type TopicRecord = (u32, i64, &'static str);

/// A case of the class, written once.
pub trait SameOverTopic {
    /// The case's name; its two cases are `NAME/from_file` and `NAME/from_topic`.
    const FROM_FILE: &'static str;
    /// See [`SameOverTopic::FROM_FILE`].
    const FROM_TOPIC: &'static str;
    /// The features the pipeline uses, source included.
    const FEATURES: &'static [Feature];
    /// How many partitions (files, topic partitions).
    const PARTITIONS: u32;
    /// The records, each partition's in timestamp order.
    fn records() -> Vec<TopicRecord>;
    /// The pipeline after the source, over the records' values at their timestamps;
    /// it captures what the check reads.
    fn pipeline(values: PCollection<String>);
    /// Compares the run's outcome with the expected one.
    fn check(r: RunResult) -> Result<(), String>;
}

fn case<C: SameOverTopic>() -> [Case; 2] {
    [
        Case {
            name: C::FROM_FILE,
            features: C::FEATURES,
            build: build_from_file::<C>,
            check: C::check,
        },
        Case {
            name: C::FROM_TOPIC,
            features: C::FEATURES,
            build: build_from_topic::<C>,
            check: C::check,
        },
    ]
}

/// Every case of the class, both variants; empty (and a loud line on stderr) without
/// a broker.
pub fn topic_cases() -> Vec<Case> {
    if std::env::var(BROKERS_ENV).is_ok_and(|b| !b.trim().is_empty()) {
        all()
    } else {
        eprintln!(
            "*** the \"source = topic\" conformance cases are SKIPPED: no Kafka broker configured (set {BROKERS_ENV}=host:port; see the README) ***"
        );
        Vec::new()
    }
}

/// Every case of the class, whether a broker is configured or not (a cluster process
/// looks its case up here).
pub fn all() -> Vec<Case> {
    [case::<WordsPerWindow>(), case::<EveryValueOnce>()].concat()
}

fn line_time(line: &String) -> Timestamp {
    Timestamp(
        line.split_once(' ')
            .and_then(|(t, _)| t.parse().ok())
            .unwrap_or_else(|| panic!("line {line:?} does not start with a timestamp")),
    )
}

fn line_value(line: String) -> String {
    line.split_once(' ')
        .map(|(_, v)| v.to_string())
        .unwrap_or_default()
}

fn record_value(r: KafkaRecord) -> String {
    r.value_text()
}

fn build_from_file<C: SameOverTopic>(p: &Pipeline) {
    let dir = scratch::dir("topic").expect("a scratch directory");
    let mut files: BTreeMap<u32, String> = (0..C::PARTITIONS).map(|k| (k, String::new())).collect();
    for (part, ts, value) in C::records() {
        let f = files.entry(part).or_default();
        f.push_str(&format!("{ts} {value}\n"));
    }
    for (part, text) in files {
        let path = dir.join(format!("part-{part}.txt"));
        let tmp = dir.join(format!("part-{part}.tmp-{}", std::process::id()));
        // Whole or not at all: every process of a local cluster writes the same files.
        if let Err(e) = std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, &path)) {
            panic!("cannot write the case's input '{}': {e}", path.display());
        }
    }
    let values = p
        .apply(
            "ReadFiles",
            TextIO::read()
                .from(&dir.join("*.txt").to_string_lossy())
                .with_timestamps(line_time, WatermarkEstimator::MonotonicallyIncreasing),
        )
        .map("Value", line_value);
    C::pipeline(values);
}

fn build_from_topic<C: SameOverTopic>(p: &Pipeline) {
    let brokers = match std::env::var(BROKERS_ENV) {
        Ok(b) if !b.trim().is_empty() => b,
        _ => {
            p.record_error(format!(
                "the case {} needs a Kafka broker: set {BROKERS_ENV}",
                C::FROM_TOPIC
            ));
            return;
        }
    };
    // One topic per run, named after it: every process of a local cluster finds it.
    let topic = format!(
        "tidewater-conformance-{}-{}",
        scratch::run_name(),
        C::FROM_TOPIC.replace('/', ".")
    );
    if let Err(e) = fill::<C>(&brokers, &topic) {
        p.record_error(format!("setting up the case's topic: {e}"));
        return;
    }
    let values = p
        .apply(
            "ReadTopic",
            KafkaSource::new(&brokers, &topic).available_now().read(),
        )
        .map("Value", record_value);
    C::pipeline(values);
}

/// Creates and fills the topic; a process that finds it created by another waits until
/// it holds every record.
fn fill<C: SameOverTopic>(brokers: &str, topic: &str) -> Result<(), String> {
    let admin = KafkaAdmin::connect(brokers, topic).map_err(|e| e.to_string())?;
    let records = C::records();
    if admin
        .create_topic(C::PARTITIONS)
        .map_err(|e| e.to_string())?
    {
        for part in 0..C::PARTITIONS {
            let mine: Vec<ProducerRecord> = records
                .iter()
                .filter(|r| r.0 == part)
                .map(|(_, ts, v)| ProducerRecord::text(v, *ts))
                .collect();
            if !mine.is_empty() {
                admin.produce(part, &mine).map_err(|e| e.to_string())?;
            }
        }
    }
    let started = Instant::now();
    loop {
        let mut held = 0i64;
        for part in 0..C::PARTITIONS {
            held += admin.high_watermark(part).map_err(|e| e.to_string())?;
        }
        if held == records.len() as i64 {
            return Ok(());
        }
        if started.elapsed() > Duration::from_secs(20) {
            return Err(format!(
                "topic '{topic}' holds {held} records after 20 s, not {}",
                records.len()
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Sentences on 3 partitions over 3 seconds, their words counted per 1-second window.
struct WordsPerWindow;

impl SameOverTopic for WordsPerWindow {
    const FROM_FILE: &'static str = "topic/words_per_window/from_file";
    const FROM_TOPIC: &'static str = "topic/words_per_window/from_topic";
    const FEATURES: &'static [Feature] = &[ReadBounded, ParDo, WindowInto, CombinePerKey, Capture];
    const PARTITIONS: u32 = 3;

    fn records() -> Vec<TopicRecord> {
        vec![
            (0, 100, "the quick fox"),
            (0, 700, "the lazy dog"),
            (0, 1_500, "quick quick"),
            (1, 200, "a fox"),
            (1, 1_200, "the end"),
            (1, 2_500, "a dog"),
            (2, 50, "fox"),
            (2, 999, "the"),
            (2, 1_000, "the fox"),
            (2, 2_999, "end"),
        ]
    }

    fn pipeline(values: PCollection<String>) {
        values
            .flat_map("Words", |line: String| {
                line.split_whitespace()
                    .map(str::to_string)
                    .collect::<Vec<_>>()
            })
            .apply("Seconds", Window::into(WindowFn::fixed(1_000)))
            .apply("CountWords", Count::per_element())
            .map_with_context("Format", |(word, n): (String, u64), c: &ElementContext| {
                format!("{} {word} {n}", c.window().start().millis())
            })
            .capture("counts");
    }

    fn check(r: RunResult) -> Result<(), String> {
        // The oracle, in plain loops over the records.
        let mut counts: BTreeMap<(i64, String), u64> = BTreeMap::new();
        for (_, ts, line) in Self::records() {
            for word in line.split_whitespace() {
                *counts
                    .entry((ts - ts % 1_000, word.to_string()))
                    .or_default() += 1;
            }
        }
        let expected = counts
            .into_iter()
            .map(|((start, word), n)| format!("{start} {word} {n}"))
            .collect();
        values_eq(&succeeded(r)?, "counts", expected)
    }
}

/// Every value of 2 partitions, exactly once (one partition empty).
struct EveryValueOnce;

impl SameOverTopic for EveryValueOnce {
    const FROM_FILE: &'static str = "topic/every_value_once/from_file";
    const FROM_TOPIC: &'static str = "topic/every_value_once/from_topic";
    const FEATURES: &'static [Feature] = &[ReadBounded, ParDo, Capture];
    const PARTITIONS: u32 = 3;

    fn records() -> Vec<TopicRecord> {
        vec![
            (0, 1, "alpha"),
            (0, 2, "beta"),
            (0, 3, "alpha"),
            (2, 1, "gamma"),
            (2, 5, ""),
            (2, 9, "delta epsilon"),
        ]
    }

    fn pipeline(values: PCollection<String>) {
        values.capture("values");
    }

    fn check(r: RunResult) -> Result<(), String> {
        let expected = Self::records()
            .into_iter()
            .map(|(_, _, v)| v.to_string())
            .collect();
        values_eq(&succeeded(r)?, "values", expected)
    }
}
