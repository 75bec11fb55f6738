//! [`KafkaSource`]: a topic's partitions are the source's partitions, a partition's
//! position is its next offset, and its watermark follows the record timestamps read.

use crate::client::{Connection, Failure, PartitionConnection};
use async_trait::async_trait;
use rskafka::record::RecordAndOffset;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tidewater::io::{AsyncSource, AsyncSourceReader, BridgeOptions, SourceBridge};
use tidewater::{Read, ReadStatus, Timestamp, UserError, WatermarkEstimator};

/// A record read from a Kafka topic.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KafkaRecord {
    /// The topic partition it was read from.
    pub partition: u32,
    /// Its offset in the partition.
    pub offset: i64,
    /// Its key, if it has one.
    pub key: Option<Vec<u8>>,
    /// Its value (`None`: a tombstone).
    pub value: Option<Vec<u8>>,
    /// Its timestamp (create or log-append time, as the topic keeps it), in ms since
    /// the epoch; it is also the element's event time.
    pub timestamp_ms: i64,
}

impl KafkaRecord {
    /// The value as text (lossy for bytes that are not UTF-8; empty for a tombstone).
    pub fn value_text(&self) -> String {
        String::from_utf8_lossy(self.value.as_deref().unwrap_or_default()).into_owned()
    }
}

/// Where the reading of a partition starts when a job starts without a checkpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum StartOffset {
    /// The earliest record the partition still keeps.
    Earliest,
    /// After the last record it holds when its reader first opens: only records
    /// produced later.
    Latest,
}

/// Where a partition's reader stands: what a checkpoint stores for it, so that a
/// restored job reads on from exactly there.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KafkaPosition {
    /// The offset of the next record to read; `None` before the partition's reader
    /// first opened (it then looks the start offset up).
    pub next: Option<i64>,
    /// With [`KafkaSource::available_now`]: the end offset taken when the partition's
    /// reader first opened; the partition is done once `next` reaches it.
    pub end: Option<i64>,
    /// The latest record timestamp read: the watermark follows it.
    pub latest: Timestamp,
}

/// Reads a Kafka topic (any broker that speaks the Kafka protocol) through the pure-Rust
/// client rskafka, as an [`AsyncSource`] read through the connector bridge
/// ([`KafkaSource::read`] gives the `Read`).
///
/// - Each partition of the topic is a partition of the source (a topic of 4 partitions
///   is read by up to 4 workers); the number is looked up when the job first starts and
///   kept in checkpoints.
/// - A partition's position is its next offset ([`KafkaPosition`]); the fault-tolerant
///   runners store it in their checkpoints and resume there, so every record is read
///   into the pipeline's state exactly once. No consumer group is used.
/// - A record's event time is its Kafka timestamp; a partition's watermark follows the
///   latest timestamp read through a [`WatermarkEstimator`] (monotonic by default).
/// - A caught-up partition becomes idle (it no longer holds back the watermark of the
///   others) once it had no new record for [`KafkaSource::idle_after_ms`] (0 by
///   default: at once). Until then its reader polls the broker, and a worker that asks
///   it for records waits, at most that long.
/// - [`KafkaSource::available_now`] makes it bounded: each partition is read up to the
///   end offset taken when its reader first opens (kept in its position, so a restored
///   job stops at the same place), then is done.
/// - Under the micro-batch runner's `--trigger available-now` (or `once`), each run
///   reads up to the high watermarks taken at its start ([`AsyncSource::available`]).
/// - A broker out of reach when the job first starts, or a topic that does not exist,
///   fails the job with a message naming the brokers and the topic. Brokers lost
///   mid-run (a connection refused or reset, a request that timed out) are
///   [`tidewater::io::Unavailable`]: the job restarts from its last checkpoint and
///   reads on from its offsets.
///
/// ```
/// use tidewater_kafka::KafkaSource;
/// let source = KafkaSource::new("127.0.0.1:9092", "events").available_now();
/// assert!(tidewater::io::AsyncSource::is_bounded(&source));
/// let p = tidewater::Pipeline::new(Default::default());
/// let records = p.apply("ReadEvents", source.read());
/// ```
#[derive(Serialize, Deserialize)]
pub struct KafkaSource {
    /// Bootstrap brokers, `host:port`.
    #[serde(deserialize_with = "checked::brokers")]
    pub brokers: Vec<String>,
    /// The topic.
    #[serde(deserialize_with = "checked::topic")]
    pub topic: String,
    /// Read up to the end offsets taken at start, then stop (bounded).
    pub available_now: bool,
    /// Where a partition starts without a checkpoint.
    pub start: StartOffset,
    /// How a partition's watermark follows its record timestamps.
    pub watermarks: WatermarkEstimator,
    /// A partition that is caught up and got no record for this long is idle.
    pub idle_after_ms: u64,
    /// At most this many records per second over all partitions (each partition its
    /// share), as Spark's `maxRatePerPartition`; `None`: as fast as the broker gives.
    #[serde(deserialize_with = "checked::max_records_per_second")]
    pub max_records_per_second: Option<f64>,
    /// How long any one request to the brokers may take.
    #[serde(deserialize_with = "checked::timeout_ms")]
    pub timeout_ms: u64,
    /// About how many bytes one fetch asks for.
    #[serde(deserialize_with = "checked::fetch_bytes")]
    pub fetch_bytes: i32,
    /// The connection shared by this instance's partition readers, made on first use.
    #[serde(skip)]
    connection: tokio::sync::OnceCell<Arc<Connection>>,
}

/// Comma-separated `host:port`s as a list.
pub(crate) fn broker_list(brokers: &str) -> Vec<String> {
    brokers
        .split(',')
        .map(str::trim)
        .filter(|b| !b.is_empty())
        .map(String::from)
        .collect()
}

impl KafkaSource {
    /// Reads `topic` from the brokers `brokers` (comma-separated `host:port`), unbounded,
    /// from the earliest offsets, with monotonic watermarks, a partition idle as soon as
    /// it is caught up, requests timing out after 10 s.
    pub fn new(brokers: &str, topic: &str) -> Self {
        KafkaSource {
            brokers: broker_list(brokers),
            topic: topic.to_string(),
            available_now: false,
            start: StartOffset::Earliest,
            watermarks: WatermarkEstimator::MonotonicallyIncreasing,
            idle_after_ms: 0,
            max_records_per_second: None,
            timeout_ms: 10_000,
            fetch_bytes: 1 << 20,
            connection: tokio::sync::OnceCell::new(),
        }
    }

    /// Bounded: each partition is read up to the end offset taken at its start.
    pub fn available_now(mut self) -> Self {
        self.available_now = true;
        self
    }

    /// Where partitions start without a checkpoint.
    pub fn starting_at(mut self, start: StartOffset) -> Self {
        self.start = start;
        self
    }

    /// How partition watermarks follow record timestamps.
    pub fn with_watermarks(mut self, watermarks: WatermarkEstimator) -> Self {
        self.watermarks = watermarks;
        self
    }

    /// A caught-up partition is idle after `ms` without records (0: at once).
    pub fn with_idle_after_ms(mut self, ms: u64) -> Self {
        self.idle_after_ms = ms;
        self
    }

    /// At most `rate` records per second over all partitions.
    pub fn with_max_rate(mut self, rate: f64) -> Self {
        self.max_records_per_second = Some(rate);
        self
    }

    /// Every request to the brokers must be answered within `ms`.
    pub fn with_timeout_ms(mut self, ms: u64) -> Self {
        self.timeout_ms = ms.clamp(1, tidewater::plan::field::MAX_TIMEOUT_MS);
        self
    }

    /// The `Read` of this source, through the connector bridge: the same as
    /// `Read::from_async(source)`.
    pub fn read(self) -> Read<SourceBridge<KafkaSource>> {
        Read::from_async(self)
    }

    fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms)
    }

    async fn connection(&self) -> Result<Arc<Connection>, Failure> {
        self.connection
            .get_or_try_init(|| async {
                Connection::connect(&self.brokers, &self.topic, self.timeout())
                    .await
                    .map(Arc::new)
            })
            .await
            .cloned()
    }
}

#[async_trait]
impl AsyncSource for KafkaSource {
    type Output = KafkaRecord;
    type Position = KafkaPosition;
    type Reader = KafkaReader;

    fn is_bounded(&self) -> bool {
        self.available_now
    }

    /// The topic's partitions, as the brokers' metadata says. Asked when a job first
    /// starts: a broker out of reach then is the job's error (a wrong address, a
    /// broker that is not running), not one to recover from.
    async fn partitions(&self, _desired: usize) -> Result<usize, UserError> {
        let at_start = |f: Failure| -> UserError { f.message.into() };
        let connection = self.connection().await.map_err(at_start)?;
        Ok(connection.partition_count().await.map_err(at_start)?)
    }

    fn initial_position(&self, _partition: usize, _partitions: usize) -> KafkaPosition {
        KafkaPosition {
            next: None,
            end: None,
            latest: Timestamp::MIN,
        }
    }

    async fn open(
        &self,
        partition: usize,
        partitions: usize,
        mut position: KafkaPosition,
    ) -> Result<KafkaReader, UserError> {
        let part = i32::try_from(partition).map_err(|_| format!("no partition {partition}"))?;
        let conn = self.connection().await?.partition(part).await?;
        if position.next.is_none() {
            position.next = Some(match self.start {
                StartOffset::Earliest => conn.earliest().await?,
                StartOffset::Latest => conn.high_watermark().await?,
            });
        }
        if self.available_now && position.end.is_none() {
            // The fetch response's high watermark, not ListOffsets (see the crate docs).
            position.end = Some(conn.high_watermark().await?);
        }
        let per_second = self
            .max_records_per_second
            .filter(|r| *r > 0.0)
            .map(|r| r / partitions.max(1) as f64);
        Ok(KafkaReader {
            conn,
            pos: position,
            buffer: VecDeque::new(),
            high_watermark: None,
            watermarks: self.watermarks,
            available_now: self.available_now,
            idle_after: Duration::from_millis(self.idle_after_ms),
            per_second,
            opened: Instant::now(),
            read: 0,
            last_record: Instant::now(),
            fetch_bytes: self.fetch_bytes,
        })
    }

    async fn available(
        &self,
        partition: usize,
        _partitions: usize,
        position: &KafkaPosition,
    ) -> Result<Option<u64>, UserError> {
        if position.next.is_none() && self.start == StartOffset::Latest {
            // The reader starts at the end as it is when it opens, which is not known
            // yet: unknown.
            return Ok(None);
        }
        if let (Some(next), Some(end)) = (position.next, position.end) {
            return Ok(Some(u64::try_from(end - next).unwrap_or(0)));
        }
        let part = i32::try_from(partition).map_err(|_| format!("no partition {partition}"))?;
        let conn = self.connection().await?.partition(part).await?;
        let next = match position.next {
            Some(next) => next,
            None => conn.earliest().await?,
        };
        // The fetch response's high watermark, not ListOffsets (see the crate docs).
        let upto = match position.end {
            Some(end) => end,
            None => conn.high_watermark().await?,
        };
        Ok(Some(u64::try_from(upto - next).unwrap_or(0)))
    }

    fn bridge_options(&self) -> BridgeOptions {
        BridgeOptions {
            // A read may take a few requests, and a caught-up partition polls for
            // `idle_after` before it says it is idle.
            timeout: self.timeout() * 3 + Duration::from_millis(self.idle_after_ms),
            ..BridgeOptions::default()
        }
    }
}

/// The reader of one partition, on the connector runtime.
pub struct KafkaReader {
    conn: PartitionConnection,
    /// Resolved: `next` is set.
    pos: KafkaPosition,
    /// Records fetched beyond what was taken, from `pos.next` on.
    buffer: VecDeque<RecordAndOffset>,
    /// The high watermark the last fetch reported.
    high_watermark: Option<i64>,
    watermarks: WatermarkEstimator,
    available_now: bool,
    idle_after: Duration,
    /// This partition's share of the rate limit.
    per_second: Option<f64>,
    opened: Instant,
    /// Records read since the reader opened, for the rate limit.
    read: u64,
    last_record: Instant,
    fetch_bytes: i32,
}

impl KafkaReader {
    fn next(&self) -> i64 {
        self.pos.next.unwrap_or_default()
    }

    fn done(&self) -> bool {
        self.pos.end.is_some_and(|end| self.next() >= end)
    }
}

/// How long a reader pauses between polls of a caught-up partition.
const POLL: Duration = Duration::from_millis(5);

#[async_trait]
impl AsyncSourceReader for KafkaReader {
    type Output = KafkaRecord;
    type Position = KafkaPosition;

    async fn read(
        &mut self,
        max: usize,
        out: &mut Vec<(KafkaRecord, Timestamp)>,
    ) -> Result<ReadStatus, UserError> {
        let mut empty_below_high_watermark = 0u32;
        loop {
            if self.done() {
                return Ok(ReadStatus::Done);
            }
            let mut allowed = max.max(1) as u64;
            if let Some(per_second) = self.per_second {
                // Record k of this partition is due k / per_second seconds in.
                let due = (self.opened.elapsed().as_secs_f64() * per_second).floor() as u64 + 1;
                if self.read >= due {
                    let wait =
                        (self.read + 1) as f64 / per_second - self.opened.elapsed().as_secs_f64();
                    tokio::time::sleep(Duration::from_secs_f64(wait.clamp(0.0, 1.0))).await;
                    continue;
                }
                allowed = allowed.min(due - self.read);
            }
            if self.buffer.is_empty() {
                let next = self.next();
                let fetched = self.conn.fetch(next, self.fetch_bytes).await?;
                self.high_watermark = Some(fetched.high_watermark);
                self.buffer
                    .extend(fetched.records.into_iter().filter(|r| r.offset >= next));
            }
            let end = self.pos.end.unwrap_or(i64::MAX);
            let mut took = 0u64;
            while took < allowed {
                let Some(r) = self.buffer.pop_front() else {
                    break;
                };
                if r.offset >= end {
                    self.buffer.clear();
                    break;
                }
                let ts = Timestamp(r.record.timestamp.timestamp_millis())
                    .clamp(Timestamp::MIN, Timestamp::MAX);
                self.pos.latest = self.pos.latest.max(ts);
                self.pos.next = Some(r.offset + 1);
                out.push((
                    KafkaRecord {
                        partition: self.conn_partition(),
                        offset: r.offset,
                        key: r.record.key,
                        value: r.record.value,
                        timestamp_ms: ts.millis(),
                    },
                    ts,
                ));
                took += 1;
            }
            self.read += took;
            if self.done() {
                return Ok(ReadStatus::Done);
            }
            if took > 0 {
                self.last_record = Instant::now();
                return Ok(ReadStatus::More);
            }
            let next = self.next();
            if self.high_watermark.is_some_and(|hw| next < hw) {
                // The broker holds records from `next` on but sent none: offsets taken
                // by transaction markers or removed by compaction, which rskafka does
                // not show. Reading on would wait forever.
                empty_below_high_watermark += 1;
                if empty_below_high_watermark >= 5 {
                    return Err(self
                        .conn_error(&format!(
                            "the broker reports records up to offset {} but sends none from offset {next} (transaction markers and compacted gaps are not supported)",
                            self.high_watermark.unwrap_or_default()
                        ))
                        .into());
                }
            } else if !self.available_now && self.last_record.elapsed() >= self.idle_after {
                return Ok(ReadStatus::Idle);
            }
            tokio::time::sleep(POLL).await;
        }
    }

    fn position(&self) -> KafkaPosition {
        self.pos.clone()
    }

    fn watermark(&self) -> Timestamp {
        if self.done() {
            return Timestamp::MAX;
        }
        self.watermarks.estimate(self.pos.latest)
    }
}

impl KafkaReader {
    fn conn_partition(&self) -> u32 {
        self.conn.partition() as u32
    }

    fn conn_error(&self, what: &str) -> String {
        self.conn.describe(what)
    }
}

/// A plan's settings of a Kafka source that could hang or break a job, checked as the
/// plan is decoded ([`tidewater::plan::field`]).
mod checked {
    use serde::Deserializer;
    use tidewater::plan::field::{check, is_rate, is_timeout_ms, TIMEOUT_MS};

    pub fn brokers<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
        check(
            d,
            "brokers",
            "one or more `host:port` with a port from 1 to 65535",
            |b: &Vec<String>| {
                !b.is_empty()
                    && b.iter().all(|b| {
                        b.rsplit_once(':').is_some_and(|(host, port)| {
                            !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p > 0)
                        })
                    })
            },
        )
    }

    pub fn topic<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
        // Kafka's own rule for topic names.
        check(
            d,
            "topic",
            "1 to 249 letters, digits, '.', '_' or '-'",
            |t: &String| {
                (1..=249).contains(&t.len())
                    && t.chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
            },
        )
    }

    pub fn max_records_per_second<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<f64>, D::Error> {
        check(
            d,
            "max_records_per_second",
            "a positive number",
            |r: &Option<f64>| r.as_ref().is_none_or(is_rate),
        )
    }

    pub fn timeout_ms<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        check(d, "timeout_ms", TIMEOUT_MS, is_timeout_ms)
    }

    pub fn fetch_bytes<'de, D: Deserializer<'de>>(d: D) -> Result<i32, D::Error> {
        check(d, "fetch_bytes", "at least 1", |b: &i32| *b >= 1)
    }
}
