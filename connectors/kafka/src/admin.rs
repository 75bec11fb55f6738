//! Setting a topic up from a program or a test: create it, produce records into it,
//! read its offsets. Synchronous (on the connector runtime), each request bounded by
//! the timeout.

use crate::client::Connection;
use rskafka::record::Record;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// An error of the admin helpers, naming the brokers, the topic and what failed.
#[derive(Debug)]
pub struct KafkaError(pub String);

impl std::fmt::Display for KafkaError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for KafkaError {}

/// A record to produce: key, value and timestamp (ms since the epoch).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProducerRecord {
    /// The key.
    pub key: Option<Vec<u8>>,
    /// The value.
    pub value: Vec<u8>,
    /// The timestamp, in ms.
    pub timestamp_ms: i64,
}

impl ProducerRecord {
    /// A record with a text value and no key.
    pub fn text(value: &str, timestamp_ms: i64) -> Self {
        ProducerRecord {
            key: None,
            value: value.as_bytes().to_vec(),
            timestamp_ms,
        }
    }
}

/// A connection to the brokers for one topic, for setting it up.
///
/// ```no_run
/// use tidewater_kafka::admin::{KafkaAdmin, ProducerRecord};
/// let admin = KafkaAdmin::connect("127.0.0.1:9092", "events").unwrap();
/// admin.create_topic(2).unwrap();
/// admin.produce(0, &[ProducerRecord::text("hello", 1_000)]).unwrap();
/// ```
pub struct KafkaAdmin {
    connection: Arc<Connection>,
}

fn block_on<T>(
    f: impl std::future::Future<Output = Result<T, crate::client::Failure>>,
) -> Result<T, KafkaError> {
    tidewater::io::runtime()
        .block_on(f)
        .map_err(|f| KafkaError(f.message))
}

impl KafkaAdmin {
    /// Connects to `brokers` (comma-separated `host:port`) for `topic`, with a 10 s
    /// timeout for every request.
    pub fn connect(brokers: &str, topic: &str) -> Result<Self, KafkaError> {
        Self::connect_within(brokers, topic, Duration::from_secs(10))
    }

    /// Connects with `timeout` for every request.
    pub fn connect_within(
        brokers: &str,
        topic: &str,
        timeout: Duration,
    ) -> Result<Self, KafkaError> {
        let brokers = crate::source::broker_list(brokers);
        let connection = block_on(Connection::connect(&brokers, topic, timeout))?;
        Ok(KafkaAdmin {
            connection: Arc::new(connection),
        })
    }

    /// Creates the topic with `partitions` partitions (replication 1). `false` if it
    /// existed already (then it is left as it is).
    pub fn create_topic(&self, partitions: u32) -> Result<bool, KafkaError> {
        block_on(self.connection.create_topic(partitions))
    }

    /// How many partitions the topic has.
    pub fn partitions(&self) -> Result<usize, KafkaError> {
        block_on(self.connection.partition_count())
    }

    /// Produces `records` into `partition` in one request (one record batch); their
    /// offsets.
    pub fn produce(
        &self,
        partition: u32,
        records: &[ProducerRecord],
    ) -> Result<Vec<i64>, KafkaError> {
        let records: Vec<Record> = records
            .iter()
            .map(|r| {
                Ok(Record {
                    key: r.key.clone(),
                    value: Some(r.value.clone()),
                    headers: BTreeMap::new(),
                    timestamp: chrono::DateTime::from_timestamp_millis(r.timestamp_ms).ok_or_else(
                        || KafkaError(format!("timestamp {} ms is out of range", r.timestamp_ms)),
                    )?,
                })
            })
            .collect::<Result<_, KafkaError>>()?;
        let c = &self.connection;
        block_on(async { c.partition(partition as i32).await?.produce(records).await })
    }

    /// The partition's high watermark as a fetch reports it: the offset after its last
    /// record.
    pub fn high_watermark(&self, partition: u32) -> Result<i64, KafkaError> {
        let c = &self.connection;
        block_on(async { c.partition(partition as i32).await?.high_watermark().await })
    }

    /// The partition's latest offset as ListOffsets answers it (on Apache Kafka the same
    /// as the high watermark; see the crate documentation for a broker where it is not).
    pub fn listed_end_offset(&self, partition: u32) -> Result<i64, KafkaError> {
        let c = &self.connection;
        block_on(async { c.partition(partition as i32).await?.listed_latest().await })
    }
}
