//! Setting a topic up from a program or a test: create it, produce records into it,
//! read its offsets. Synchronous, each call bounded by the timeout.

use crate::client::{bounded, Connection};
use rskafka::client::partition::{Compression, OffsetAt};
use rskafka::record::Record;
use std::collections::BTreeMap;
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
/// use tidewater_io_kafka::admin::{KafkaAdmin, ProducerRecord};
/// let mut admin = KafkaAdmin::connect("127.0.0.1:9092", "events").unwrap();
/// admin.create_topic(2).unwrap();
/// admin.produce(0, &[ProducerRecord::text("hello", 1_000)]).unwrap();
/// ```
pub struct KafkaAdmin {
    runtime: tokio::runtime::Runtime,
    connection: Connection,
}

impl KafkaAdmin {
    /// Connects to `brokers` (comma-separated `host:port`) for `topic`, within 10 s.
    pub fn connect(brokers: &str, topic: &str) -> Result<Self, KafkaError> {
        Self::connect_within(brokers, topic, Duration::from_secs(10))
    }

    /// Connects with `timeout` for every request.
    pub fn connect_within(
        brokers: &str,
        topic: &str,
        timeout: Duration,
    ) -> Result<Self, KafkaError> {
        let brokers: Vec<String> = brokers
            .split(',')
            .map(str::trim)
            .filter(|b| !b.is_empty())
            .map(String::from)
            .collect();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| KafkaError(format!("cannot start the Kafka client's runtime: {e}")))?;
        let connection = runtime
            .block_on(Connection::connect(&brokers, topic, timeout))
            .map_err(KafkaError)?;
        Ok(KafkaAdmin {
            runtime,
            connection,
        })
    }

    /// Creates the topic with `partitions` partitions (replication 1). `false` if it
    /// existed already (then it is left as it is).
    pub fn create_topic(&mut self, partitions: u32) -> Result<bool, KafkaError> {
        let c = &self.connection;
        let topic = self.topic();
        let timeout = c.timeout();
        let result = self.runtime.block_on(async {
            let controller = c.client().controller_client().map_err(|e| e.to_string())?;
            bounded(
                timeout,
                controller.create_topic(
                    topic.clone(),
                    partitions as i32,
                    1,
                    timeout.as_millis() as i32,
                ),
            )
            .await
        });
        match result {
            Ok(()) => Ok(true),
            Err(e) if e.contains("TopicAlreadyExists") => Ok(false),
            Err(e) => Err(KafkaError(c.error(None, "creating the topic failed", e))),
        }
    }

    /// How many partitions the topic has.
    pub fn partitions(&mut self) -> Result<usize, KafkaError> {
        self.runtime
            .block_on(self.connection.partition_count())
            .map_err(KafkaError)
    }

    /// Produces `records` into `partition` in one request; their offsets.
    pub fn produce(
        &mut self,
        partition: u32,
        records: &[ProducerRecord],
    ) -> Result<Vec<i64>, KafkaError> {
        let part = partition as i32;
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
        let conn = &mut self.connection;
        let timeout = conn.timeout();
        self.runtime
            .block_on(async {
                let c = conn.partition_client(part).await?;
                bounded(timeout, c.produce(records, Compression::NoCompression))
                    .await
                    .map_err(|e| conn.error(Some(part), "producing failed", e))
            })
            .map_err(KafkaError)
    }

    /// The partition's high watermark as a fetch reports it: the offset after its last
    /// record.
    pub fn high_watermark(&mut self, partition: u32) -> Result<i64, KafkaError> {
        let conn = &mut self.connection;
        self.runtime
            .block_on(async {
                let earliest = conn.earliest(partition as i32).await?;
                Ok::<_, String>(
                    conn.fetch(partition as i32, earliest, 1)
                        .await?
                        .high_watermark,
                )
            })
            .map_err(KafkaError)
    }

    /// The partition's latest offset as ListOffsets answers it (on Kafka the same as the
    /// high watermark; see the crate's documentation for brokers where it is not).
    pub fn listed_end_offset(&mut self, partition: u32) -> Result<i64, KafkaError> {
        let conn = &mut self.connection;
        let timeout = conn.timeout();
        self.runtime
            .block_on(async {
                let c = conn.partition_client(partition as i32).await?;
                bounded(timeout, c.get_offset(OffsetAt::Latest))
                    .await
                    .map_err(|e| conn.error(Some(partition as i32), "ListOffsets failed", e))
            })
            .map_err(KafkaError)
    }

    fn topic(&self) -> String {
        self.connection.topic().to_string()
    }
}
