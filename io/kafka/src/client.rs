//! The broker side, async: a connection to a Kafka-protocol cluster over rskafka, every
//! request bounded by a timeout and every failure a message naming the brokers, the
//! topic and the partition.

use rskafka::client::partition::{OffsetAt, PartitionClient, UnknownTopicHandling};
use rskafka::client::{Client, ClientBuilder};
use rskafka::record::RecordAndOffset;
use rskafka::BackoffConfig;
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// A connection to the brokers for one topic: the cluster client and one client per
/// partition it has used.
pub(crate) struct Connection {
    brokers: Vec<String>,
    topic: String,
    timeout: Duration,
    client: Client,
    partitions: BTreeMap<i32, Arc<PartitionClient>>,
}

/// What one fetch gave: the records from the requested offset on, and the partition's
/// high watermark (the offset after its last committed record) as the fetch response
/// reported it.
pub(crate) struct Fetched {
    pub records: Vec<RecordAndOffset>,
    pub high_watermark: i64,
}

impl Connection {
    /// Connects to `brokers` (and learns the cluster's metadata) within `timeout`.
    pub async fn connect(
        brokers: &[String],
        topic: &str,
        timeout: Duration,
    ) -> Result<Connection, String> {
        let builder = ClientBuilder::new(brokers.to_vec())
            .client_id("tidewater")
            .backoff_config(backoff(timeout));
        let client = bounded(timeout, builder.build())
            .await
            .map_err(|e| format!("cannot reach the Kafka brokers {brokers:?}: {e}"))?;
        Ok(Connection {
            brokers: brokers.to_vec(),
            topic: topic.to_string(),
            timeout,
            client,
            partitions: BTreeMap::new(),
        })
    }

    /// How many partitions the topic has; an error if it does not exist.
    pub async fn partition_count(&self) -> Result<usize, String> {
        let topics = bounded(self.timeout, self.client.list_topics())
            .await
            .map_err(|e| self.error(None, "listing the topics failed", e))?;
        let topic = topics
            .into_iter()
            .find(|t| t.name == self.topic)
            .ok_or_else(|| {
                format!(
                    "Kafka topic '{}' does not exist on the brokers {:?}",
                    self.topic, self.brokers
                )
            })?;
        if topic.partitions.is_empty() {
            return Err(format!(
                "Kafka topic '{}' on the brokers {:?} has no partitions",
                self.topic, self.brokers
            ));
        }
        Ok(topic.partitions.len())
    }

    async fn partition(&mut self, partition: i32) -> Result<Arc<PartitionClient>, String> {
        if let Some(c) = self.partitions.get(&partition) {
            return Ok(c.clone());
        }
        let c = bounded(
            self.timeout,
            self.client.partition_client(
                self.topic.clone(),
                partition,
                UnknownTopicHandling::Error,
            ),
        )
        .await
        .map_err(|e| self.error(Some(partition), "finding the partition's leader failed", e))?;
        let c = Arc::new(c);
        self.partitions.insert(partition, c.clone());
        Ok(c)
    }

    /// The partition's earliest offset still kept.
    pub async fn earliest(&mut self, partition: i32) -> Result<i64, String> {
        let c = self.partition(partition).await?;
        bounded(self.timeout, c.get_offset(OffsetAt::Earliest))
            .await
            .map_err(|e| self.error(Some(partition), "asking for the earliest offset failed", e))
    }

    /// Records of `partition` from `offset` on (at most about `max_bytes`), waiting at
    /// most [`FETCH_WAIT_MS`] for new ones.
    pub async fn fetch(
        &mut self,
        partition: i32,
        offset: i64,
        max_bytes: i32,
    ) -> Result<Fetched, String> {
        let c = self.partition(partition).await?;
        let (records, high_watermark) = bounded(
            self.timeout,
            c.fetch_records(offset, 1..max_bytes.max(2), FETCH_WAIT_MS),
        )
        .await
        .map_err(|e| {
            self.error(
                Some(partition),
                &format!("fetching from offset {offset} failed"),
                e,
            )
        })?;
        Ok(Fetched {
            records,
            high_watermark,
        })
    }

    /// The cluster client, for the admin helpers.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The partition's client, for the admin helpers.
    pub async fn partition_client(
        &mut self,
        partition: i32,
    ) -> Result<Arc<PartitionClient>, String> {
        self.partition(partition).await
    }

    /// The topic.
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// The timeout of every request.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// A message naming where `what` failed.
    pub fn error(&self, partition: Option<i32>, what: &str, e: impl std::fmt::Display) -> String {
        let at = match partition {
            Some(p) => format!("partition {p} of Kafka topic '{}'", self.topic),
            None => format!("Kafka topic '{}'", self.topic),
        };
        format!("{at} on the brokers {:?}: {what}: {e}", self.brokers)
    }
}

/// How long a fetch may wait on the broker for a first record. A partition with records
/// is answered at once; this bounds what a read of a caught-up partition costs. Not 0:
/// tansu 0.6.0 answers a fetch that may not wait with no topic at all.
const FETCH_WAIT_MS: i32 = 1;

/// rskafka retries a failed request with backoff, by default forever: a broker that is
/// down must be an error within the timeout instead.
fn backoff(timeout: Duration) -> BackoffConfig {
    BackoffConfig {
        init_backoff: Duration::from_millis(20),
        max_backoff: Duration::from_millis(500),
        base: 2.0,
        deadline: Some(timeout),
    }
}

/// `f` within `timeout`, its error or the timeout's as text.
pub(crate) async fn bounded<T, E: std::fmt::Display>(
    timeout: Duration,
    f: impl Future<Output = Result<T, E>>,
) -> Result<T, String> {
    match tokio::time::timeout(timeout, f).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("no answer within {} ms", timeout.as_millis())),
    }
}
