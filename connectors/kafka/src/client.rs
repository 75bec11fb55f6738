//! The broker side, async: a connection to a Kafka-protocol cluster over rskafka, every
//! request bounded by a timeout and every failure a message naming the brokers, the
//! topic and the partition, which also says whether the brokers were out of reach
//! ([`Failure::lost`]).

use rskafka::client::error::{Error as KafkaClientError, ProtocolError, RequestError};
use rskafka::client::partition::{Compression, OffsetAt, PartitionClient, UnknownTopicHandling};
use rskafka::client::{Client, ClientBuilder};
use rskafka::record::{Record, RecordAndOffset};
use rskafka::BackoffConfig;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// How long a fetch may wait on the broker for a first record. A partition with records
/// is answered at once; this bounds what a read of a caught-up partition costs. Not 0:
/// tansu 0.6.0 answers a fetch that may not wait with no topic at all.
const FETCH_WAIT_MS: i32 = 1;

/// A failed request: what failed, where, and whether the brokers were out of reach.
#[derive(Debug)]
pub(crate) struct Failure {
    /// What failed, naming the brokers, the topic and the partition.
    pub message: String,
    /// The brokers could not be reached or stopped answering: a connection refused,
    /// reset or broken, a request that timed out, a partition without a leader for
    /// now, a topic the broker does not know for now (Kafka's clients retry these
    /// too). Mid-run the source reports such a failure as
    /// [`tidewater::io::Unavailable`], so that the job restarts from its last
    /// checkpoint; at start it is the job's error.
    pub lost: bool,
}

impl Failure {
    fn fatal(message: String) -> Self {
        Failure {
            message,
            lost: false,
        }
    }

    fn context(self, f: impl FnOnce(&str) -> String) -> Self {
        Failure {
            message: f(&self.message),
            lost: self.lost,
        }
    }
}

/// A failure mid-run, as the source's error: [`tidewater::io::Unavailable`] if the
/// brokers were lost.
impl From<Failure> for tidewater::UserError {
    fn from(f: Failure) -> Self {
        if f.lost {
            tidewater::io::Unavailable(f.message).into()
        } else {
            f.message.into()
        }
    }
}

/// Whether rskafka's error means the brokers were out of reach rather than that the
/// request can never succeed.
fn lost(e: &KafkaClientError) -> bool {
    match e {
        KafkaClientError::Connection(_) | KafkaClientError::Timeout => true,
        KafkaClientError::Request(RequestError::NoVersionMatch { .. }) => false,
        KafkaClientError::Request(_) => true,
        // rskafka retries only connection errors and leaders that are moving; the
        // deadline ran out on one of them.
        KafkaClientError::RetryFailed(_) => true,
        KafkaClientError::ServerError { protocol_error, .. } => matches!(
            protocol_error,
            ProtocolError::LeaderNotAvailable
                | ProtocolError::NotLeaderOrFollower
                | ProtocolError::RequestTimedOut
                | ProtocolError::NetworkException
                | ProtocolError::UnknownTopicOrPartition
                | ProtocolError::OffsetNotAvailable
                | ProtocolError::BrokerNotAvailable
                | ProtocolError::ReplicaNotAvailable
                | ProtocolError::NotCoordinator
                | ProtocolError::CoordinatorNotAvailable
        ),
        _ => false,
    }
}

/// A connection to the brokers for one topic.
pub(crate) struct Connection {
    brokers: Vec<String>,
    topic: String,
    timeout: Duration,
    client: Client,
}

/// A connection to the leader of one partition.
pub(crate) struct PartitionConnection {
    connection: Arc<Connection>,
    partition: i32,
    client: PartitionClient,
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
    ) -> Result<Connection, Failure> {
        if brokers.is_empty() {
            return Err(Failure::fatal(format!(
                "no Kafka brokers given for topic '{topic}'"
            )));
        }
        let builder = ClientBuilder::new(brokers.to_vec())
            .client_id("tidewater")
            .backoff_config(backoff(timeout));
        let client = bounded(timeout, builder.build()).await.map_err(|f| {
            f.context(|e| format!("cannot reach the Kafka brokers {brokers:?}: {e}"))
        })?;
        Ok(Connection {
            brokers: brokers.to_vec(),
            topic: topic.to_string(),
            timeout,
            client,
        })
    }

    /// How many partitions the topic has; an error if it does not exist.
    pub async fn partition_count(&self) -> Result<usize, Failure> {
        let topics = bounded(self.timeout, self.client.list_topics())
            .await
            .map_err(|f| self.error(None, "listing the topics failed", f))?;
        let topic = topics
            .into_iter()
            .find(|t| t.name == self.topic)
            .ok_or_else(|| {
                Failure::fatal(format!(
                    "Kafka topic '{}' does not exist on the brokers {:?}",
                    self.topic, self.brokers
                ))
            })?;
        if topic.partitions.is_empty() {
            return Err(Failure::fatal(format!(
                "Kafka topic '{}' on the brokers {:?} has no partitions",
                self.topic, self.brokers
            )));
        }
        Ok(topic.partitions.len())
    }

    /// A connection to the leader of `partition`.
    pub async fn partition(
        self: &Arc<Self>,
        partition: i32,
    ) -> Result<PartitionConnection, Failure> {
        let client = bounded(
            self.timeout,
            self.client.partition_client(
                self.topic.clone(),
                partition,
                UnknownTopicHandling::Error,
            ),
        )
        .await
        .map_err(|f| self.error(Some(partition), "finding the partition's leader failed", f))?;
        Ok(PartitionConnection {
            connection: Arc::clone(self),
            partition,
            client,
        })
    }

    /// Creates the topic with `partitions` partitions (replication 1); `false` if it
    /// existed already.
    pub async fn create_topic(&self, partitions: u32) -> Result<bool, Failure> {
        let controller = self.client.controller_client().map_err(|e| {
            self.error(
                None,
                "finding the controller failed",
                Failure {
                    lost: lost(&e),
                    message: e.to_string(),
                },
            )
        })?;
        let ms = i32::try_from(self.timeout.as_millis()).unwrap_or(i32::MAX);
        match bounded(
            self.timeout,
            controller.create_topic(self.topic.clone(), partitions as i32, 1, ms),
        )
        .await
        {
            Ok(()) => Ok(true),
            Err(f) if f.message.contains("TopicAlreadyExists") => Ok(false),
            Err(f) => Err(self.error(None, "creating the topic failed", f)),
        }
    }

    /// `f` with a message naming where `what` failed.
    pub fn error(&self, partition: Option<i32>, what: &str, f: Failure) -> Failure {
        let at = match partition {
            Some(p) => format!("partition {p} of Kafka topic '{}'", self.topic),
            None => format!("Kafka topic '{}'", self.topic),
        };
        f.context(|e| format!("{at} on the brokers {:?}: {what}: {e}", self.brokers))
    }
}

impl PartitionConnection {
    /// The partition.
    pub fn partition(&self) -> i32 {
        self.partition
    }

    /// `what` happened at this partition: a message naming it.
    pub fn describe(&self, what: &str) -> String {
        let c = &self.connection;
        format!(
            "partition {} of Kafka topic '{}' on the brokers {:?}: {what}",
            self.partition, c.topic, c.brokers
        )
    }

    fn error(&self, what: &str, f: Failure) -> Failure {
        self.connection.error(Some(self.partition), what, f)
    }

    fn timeout(&self) -> Duration {
        self.connection.timeout
    }

    /// The partition's earliest offset still kept.
    pub async fn earliest(&self) -> Result<i64, Failure> {
        bounded(self.timeout(), self.client.get_offset(OffsetAt::Earliest))
            .await
            .map_err(|f| self.error("asking for the earliest offset failed", f))
    }

    /// The latest offset as ListOffsets answers it (see the crate documentation for
    /// why the source does not use it).
    pub async fn listed_latest(&self) -> Result<i64, Failure> {
        bounded(self.timeout(), self.client.get_offset(OffsetAt::Latest))
            .await
            .map_err(|f| self.error("asking for the latest offset (ListOffsets) failed", f))
    }

    /// Records from `offset` on (at most about `max_bytes`), waiting at most
    /// [`FETCH_WAIT_MS`] for new ones.
    pub async fn fetch(&self, offset: i64, max_bytes: i32) -> Result<Fetched, Failure> {
        let (records, high_watermark) = bounded(
            self.timeout(),
            self.client
                .fetch_records(offset, 1..max_bytes.max(2), FETCH_WAIT_MS),
        )
        .await
        .map_err(|f| self.error(&format!("fetching from offset {offset} failed"), f))?;
        Ok(Fetched {
            records,
            high_watermark,
        })
    }

    /// The high watermark: the offset after the partition's last record, as a fetch
    /// from its earliest offset reports it.
    pub async fn high_watermark(&self) -> Result<i64, Failure> {
        let earliest = self.earliest().await?;
        Ok(self.fetch(earliest, 1).await?.high_watermark)
    }

    /// Produces `records` in one request; their offsets.
    pub async fn produce(&self, records: Vec<Record>) -> Result<Vec<i64>, Failure> {
        bounded(
            self.timeout(),
            self.client.produce(records, Compression::NoCompression),
        )
        .await
        .map_err(|f| self.error("producing failed", f))
    }
}

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

/// `f` within `timeout`; its error, or the timeout's (the brokers were lost).
pub(crate) async fn bounded<T>(
    timeout: Duration,
    f: impl Future<Output = Result<T, KafkaClientError>>,
) -> Result<T, Failure> {
    match tokio::time::timeout(timeout, f).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(Failure {
            lost: lost(&e),
            message: e.to_string(),
        }),
        Err(_) => Err(Failure {
            message: format!("no answer within {} ms", timeout.as_millis()),
            lost: true,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rskafka::client::error::RequestContext;

    fn server(protocol_error: ProtocolError) -> KafkaClientError {
        KafkaClientError::ServerError {
            protocol_error,
            error_message: None,
            request: RequestContext::Topic("t".into()),
            response: None,
            is_virtual: false,
        }
    }

    #[test]
    fn unreachable_brokers_are_lost_and_requests_that_can_never_work_are_not() {
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        assert!(lost(&KafkaClientError::Request(RequestError::IO(refused))));
        assert!(lost(&KafkaClientError::Timeout));
        assert!(lost(&server(ProtocolError::NotLeaderOrFollower)));
        assert!(lost(&server(ProtocolError::UnknownTopicOrPartition)));
        assert!(!lost(&server(ProtocolError::OffsetOutOfRange)));
        assert!(!lost(&server(ProtocolError::TopicAuthorizationFailed)));
        assert!(!lost(&KafkaClientError::InvalidResponse("x".into())));
        let f: tidewater::UserError = Failure {
            message: "gone".into(),
            lost: true,
        }
        .into();
        assert!(f.is::<tidewater::io::Unavailable>());
        let f: tidewater::UserError = Failure::fatal("wrong".into()).into();
        assert!(!f.is::<tidewater::io::Unavailable>());
        assert_eq!(f.to_string(), "wrong");
    }
}
