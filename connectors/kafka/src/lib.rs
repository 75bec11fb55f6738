//! A Kafka-protocol source for Tidewater, on the pure-Rust client rskafka (no
//! librdkafka, no C toolchain).
//!
//! [`KafkaSource`] maps a topic's partitions to the source's partitions and keeps each
//! partition's next offset as its position, which the fault-tolerant runners store in
//! their checkpoints: a job restored from a checkpoint reads on from exactly the
//! offsets it had, so its output is the same as an uninterrupted run's. Event times are
//! the records' timestamps; each partition's watermark follows them, and a partition
//! without new records becomes idle so that it does not hold the others back.
//! [`KafkaSource::available_now`] reads up to the end offsets taken at start and stops;
//! the micro-batch runner's `--trigger available-now` reads the unbounded source up to
//! the end offsets taken at each run's start.
//!
//! A broker lost mid-run (a connection refused, reset or broken, a request that timed
//! out) is a [`tidewater::io::Unavailable`]: the job restarts from its last checkpoint
//! and reads on from the offsets it holds. A broker out of reach when a job first
//! starts is the job's error, naming it.
//!
//! End offsets are taken from the high watermark that a fetch response reports, not
//! from ListOffsets: the broker the tests run against (tansu 0.6.0) answers ListOffsets
//! "latest" with the base offset of the partition's last record batch plus one, which is
//! short of the end whenever that batch holds more than one record (5 records produced
//! in one batch: ListOffsets says 1, the fetch's high watermark says 5). On Apache Kafka
//! both say the same.
//!
//! [`admin::KafkaAdmin`] creates topics and produces records, for setting up a job or a
//! test.
//!
//! The source is an [`tidewater::io::AsyncSource`]: each partition's reader runs on the
//! connector runtime and hands chunks of records to the pipeline through the bridge's
//! bounded channel ([`tidewater::io::SourceBridge`]); [`KafkaSource::read`] gives the
//! `Read`.

pub mod admin;
mod client;
mod source;

pub use source::{KafkaPosition, KafkaReader, KafkaRecord, KafkaSource, StartOffset};

/// The environment variable that names the brokers the tests run against
/// (comma-separated `host:port`).
pub const BROKERS_ENV: &str = "TIDEWATER_KAFKA_BROKERS";

/// The brokers the tests run against, from [`BROKERS_ENV`]. Without it a test that
/// needs a broker says so loudly on stderr and returns (`None`); under CI (`CI` set) it
/// fails instead, so CI never passes without running them.
pub fn test_brokers(test: &str) -> Option<String> {
    use std::io::Write;
    match std::env::var(BROKERS_ENV) {
        Ok(b) if !b.trim().is_empty() => Some(b),
        _ => {
            if std::env::var_os("CI").is_some() {
                panic!("{test}: {BROKERS_ENV} is not set under CI: the Kafka tests must run against a broker (.ci/run starts one)");
            }
            // Straight to the process's stderr: the test harness captures `eprintln!`
            // of a passing test, and this must not go unseen.
            let _ = writeln!(
                std::io::stderr(),
                "\n*** SKIPPED {test}: no Kafka broker configured. Set {BROKERS_ENV}=host:port (see the README: \"Kafka tests\") to run it. ***\n"
            );
            None
        }
    }
}
