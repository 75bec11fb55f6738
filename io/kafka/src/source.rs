//! [`KafkaSource`]: a topic's partitions are the source's partitions, a partition's
//! position is its next offset, and its watermark follows the record timestamps read.

use crate::client::Connection;
use rskafka::record::RecordAndOffset;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};
use std::sync::OnceLock;
use std::time::Duration;
use tidewater::{ReadStatus, Source, Timestamp, UserError, WatermarkEstimator};

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
    /// After the last record it holds at the first read: only records produced later.
    Latest,
}

/// Where a partition's reader stands: what a checkpoint stores for it, so that a
/// restored job reads on from exactly there.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KafkaPosition {
    /// The offset of the next record to read; `None` before the first read (then the
    /// start offset is looked up).
    pub next: Option<i64>,
    /// The offset the reading started at.
    pub first: i64,
    /// With [`KafkaSource::available_now`]: the end offset taken at the partition's
    /// first read; the partition is done once `next` reaches it.
    pub end: Option<i64>,
    /// The high watermark the last fetch reported (what is available).
    pub high_watermark: Option<i64>,
    /// The latest record timestamp read: the watermark follows it.
    pub latest: Timestamp,
    /// Processing time (ms) of the first read, for the rate limit.
    pub started_ms: i64,
    /// Processing time (ms) of the last read that found records (or of the first
    /// read): the partition is idle once nothing came for [`KafkaSource::idle_after_ms`].
    pub last_record_ms: i64,
}

/// Reads a Kafka topic (any broker that speaks the Kafka protocol) through the pure-Rust
/// client rskafka.
///
/// - Each partition of the topic is a partition of the source (so a topic of 4
///   partitions is read by up to 4 workers); the number is looked up when the job
///   first starts and kept in checkpoints.
/// - A partition's position is its next offset ([`KafkaPosition`]); the fault-tolerant
///   runners store it in their checkpoints and resume there, so every record is read
///   into the pipeline's state exactly once. No consumer group is used.
/// - A record's event time is its Kafka timestamp; a partition's watermark follows the
///   latest timestamp read through a [`WatermarkEstimator`] (monotonic by default). A
///   partition that has had nothing new for [`KafkaSource::idle_after_ms`] is idle: it
///   does not hold back the watermark of the others.
/// - [`KafkaSource::available_now`] makes it bounded: each partition is read up to the
///   end offset taken at its first read (kept in its position, so a restored job stops
///   at the same place), then is done.
/// - A broker that does not answer within the timeout, or a topic that does not exist,
///   fails the job with a message naming the brokers, the topic and the partition.
///
/// ```
/// use tidewater_io_kafka::KafkaSource;
/// let source = KafkaSource::new("127.0.0.1:9092", "events").available_now();
/// assert!(tidewater::Source::is_bounded(&source));
/// ```
#[derive(Serialize, Deserialize)]
pub struct KafkaSource {
    /// Bootstrap brokers, `host:port`.
    pub brokers: Vec<String>,
    /// The topic.
    pub topic: String,
    /// Read up to the end offsets taken at start, then stop (bounded).
    pub available_now: bool,
    /// Where a partition starts without a checkpoint.
    pub start: StartOffset,
    /// How a partition's watermark follows its record timestamps.
    pub watermarks: WatermarkEstimator,
    /// A partition that is caught up and got no record for this long is idle.
    pub idle_after_ms: i64,
    /// At most this many records per second over all partitions (each partition its
    /// share), as Spark's `maxRatePerPartition`; `None`: as fast as the broker gives.
    pub max_records_per_second: Option<f64>,
    /// How long any one request to the brokers may take.
    pub timeout_ms: u64,
    /// About how many bytes one fetch asks for.
    pub fetch_bytes: i32,
    #[serde(skip)]
    io: Io,
    /// Why the partitions could not be looked up: the first read fails with it.
    #[serde(skip)]
    setup_error: OnceLock<String>,
}

/// The broker side of a source instance: made on its first read, never serialized.
#[derive(Default)]
struct Io {
    runtime: Option<tokio::runtime::Runtime>,
    reader: Reader,
}

/// The async half: a connection, and per partition what the last fetch gave beyond
/// what was taken.
#[derive(Default)]
struct Reader {
    connection: Option<Connection>,
    /// Per partition: the offset the buffered records continue from, and the records.
    buffers: BTreeMap<i32, (i64, VecDeque<RecordAndOffset>)>,
    /// Fetches in a row that gave nothing below the high watermark, per partition.
    empty: BTreeMap<i32, u32>,
}

/// The fields of the source a read needs (borrowed beside the mutable `Io`).
struct Params<'a> {
    /// How many partitions the source has.
    partitions: usize,
    brokers: &'a [String],
    topic: &'a str,
    available_now: bool,
    start: StartOffset,
    idle_after_ms: i64,
    max_records_per_second: Option<f64>,
    timeout: Duration,
    fetch_bytes: i32,
}

impl KafkaSource {
    /// Reads `topic` from the brokers `brokers` (comma-separated `host:port`), unbounded,
    /// from the earliest offsets, with monotonic watermarks, idle after 1 s without
    /// records, requests timing out after 10 s.
    pub fn new(brokers: &str, topic: &str) -> Self {
        KafkaSource {
            brokers: brokers
                .split(',')
                .map(str::trim)
                .filter(|b| !b.is_empty())
                .map(String::from)
                .collect(),
            topic: topic.to_string(),
            available_now: false,
            start: StartOffset::Earliest,
            watermarks: WatermarkEstimator::MonotonicallyIncreasing,
            idle_after_ms: 1000,
            max_records_per_second: None,
            timeout_ms: 10_000,
            fetch_bytes: 1 << 20,
            io: Io::default(),
            setup_error: OnceLock::new(),
        }
    }

    /// Bounded: each partition is read up to the end offset taken at its first read.
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
    pub fn with_idle_after_ms(mut self, ms: i64) -> Self {
        self.idle_after_ms = ms.max(0);
        self
    }

    /// At most `rate` records per second over all partitions.
    pub fn with_max_rate(mut self, rate: f64) -> Self {
        self.max_records_per_second = Some(rate);
        self
    }

    /// Every request to the brokers must be answered within `ms`.
    pub fn with_timeout_ms(mut self, ms: u64) -> Self {
        self.timeout_ms = ms.max(1);
        self
    }

    fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms)
    }

    fn where_(&self) -> String {
        format!(
            "Kafka topic '{}' on the brokers {:?}",
            self.topic, self.brokers
        )
    }
}

fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the Kafka client's runtime: {e}"))
}

impl Reader {
    async fn connection(&mut self, p: &Params<'_>) -> Result<&mut Connection, String> {
        if self.connection.is_none() {
            self.connection = Some(Connection::connect(p.brokers, p.topic, p.timeout).await?);
        }
        Ok(self.connection.as_mut().expect("connected"))
    }

    /// One read of up to `max` records of `partition` from `pos` (the async half of
    /// [`Source::read`]).
    async fn read(
        &mut self,
        p: &Params<'_>,
        partition: usize,
        pos: &mut KafkaPosition,
        max: usize,
        now: Timestamp,
        out: &mut Vec<(KafkaRecord, Timestamp)>,
    ) -> Result<ReadStatus, String> {
        let part = i32::try_from(partition).map_err(|_| format!("partition {partition}?"))?;
        let now_ms = now.millis();
        let next = match pos.next {
            Some(n) => n,
            None => {
                let conn = self.connection(p).await?;
                let earliest = conn.earliest(part).await?;
                let first = match p.start {
                    StartOffset::Earliest => earliest,
                    // The fetch response's high watermark, not ListOffsets: see `end`.
                    StartOffset::Latest => conn.fetch(part, earliest, 1).await?.high_watermark,
                };
                pos.next = Some(first);
                pos.first = first;
                pos.started_ms = now_ms;
                pos.last_record_ms = now_ms;
                first
            }
        };
        if pos.end.is_some_and(|end| next >= end) {
            return Ok(ReadStatus::Done);
        }
        let mut allowed = max;
        if let Some(rate) = p.max_records_per_second.filter(|r| *r > 0.0) {
            // Record k of this partition is due k / (rate / partitions) seconds in.
            let per_ms = rate / p.partitions.max(1) as f64 / 1000.0;
            let due = ((now_ms - pos.started_ms).max(0) as f64 * per_ms).floor() as i64 + 1;
            let read = next - pos.first;
            if read >= due {
                return Ok(ReadStatus::More);
            }
            allowed = allowed.min(usize::try_from(due - read).unwrap_or(usize::MAX));
        }
        let buffered = self
            .buffers
            .get(&part)
            .is_some_and(|(from, b)| *from == next && !b.is_empty());
        if !buffered {
            let fetched = self
                .connection(p)
                .await?
                .fetch(part, next, p.fetch_bytes)
                .await?;
            pos.high_watermark = Some(fetched.high_watermark);
            if p.available_now && pos.end.is_none() {
                pos.end = Some(fetched.high_watermark);
            }
            let records = fetched.records.into_iter().filter(|r| r.offset >= next);
            self.buffers.insert(part, (next, records.collect()));
        }
        let end = pos.end.unwrap_or(i64::MAX);
        let (from, buf) = self.buffers.entry(part).or_default();
        let mut took = 0usize;
        while took < allowed {
            let Some(r) = buf.front() else { break };
            if r.offset >= end {
                buf.clear();
                break;
            }
            let r = buf.pop_front().expect("a front record");
            let ts = Timestamp(r.record.timestamp.timestamp_millis())
                .clamp(Timestamp::MIN, Timestamp::MAX);
            pos.latest = pos.latest.max(ts);
            pos.next = Some(r.offset + 1);
            out.push((
                KafkaRecord {
                    partition: partition as u32,
                    offset: r.offset,
                    key: r.record.key,
                    value: r.record.value,
                    timestamp_ms: ts.millis(),
                },
                ts,
            ));
            took += 1;
        }
        *from = pos.next.expect("started");
        let next = pos.next.expect("started");
        if next >= end {
            return Ok(ReadStatus::Done);
        }
        if took > 0 {
            pos.last_record_ms = now_ms;
            self.empty.remove(&part);
            return Ok(ReadStatus::More);
        }
        if pos.high_watermark.is_some_and(|hw| next < hw) {
            // The broker holds records from `next` on but sent none: offsets taken by
            // transaction markers or removed by compaction, which rskafka does not
            // show. Reading on would wait forever.
            let n = self.empty.entry(part).or_default();
            *n += 1;
            if *n >= 5 {
                return Err(format!(
                    "partition {partition}: the broker reports records up to offset {} but none from offset {next} (transaction markers and compacted gaps are not supported)",
                    pos.high_watermark.unwrap_or_default()
                ));
            }
            return Ok(ReadStatus::More);
        }
        if !p.available_now && now_ms - pos.last_record_ms >= p.idle_after_ms {
            return Ok(ReadStatus::Idle);
        }
        Ok(ReadStatus::More)
    }
}

impl Source for KafkaSource {
    type Output = KafkaRecord;
    type Position = KafkaPosition;

    fn is_bounded(&self) -> bool {
        self.available_now
    }

    /// The topic's partitions, looked up on the brokers. This call cannot fail, so a
    /// broker that is down or a topic that does not exist is remembered and the first
    /// read fails with it.
    fn partitions(&self, _desired: usize) -> usize {
        let count = runtime().and_then(|rt| {
            rt.block_on(async {
                Connection::connect(&self.brokers, &self.topic, self.timeout())
                    .await?
                    .partition_count()
                    .await
            })
        });
        match count {
            Ok(n) => n,
            Err(e) => {
                let _ = self.setup_error.set(e);
                1
            }
        }
    }

    fn initial_position(&self, _partition: usize, _partitions: usize) -> KafkaPosition {
        KafkaPosition {
            next: None,
            first: 0,
            end: None,
            high_watermark: None,
            latest: Timestamp::MIN,
            started_ms: 0,
            last_record_ms: 0,
        }
    }

    fn read(
        &mut self,
        partition: usize,
        partitions: usize,
        position: &mut KafkaPosition,
        max: usize,
        now: Timestamp,
        out: &mut Vec<(KafkaRecord, Timestamp)>,
    ) -> Result<ReadStatus, UserError> {
        if let Some(e) = self.setup_error.get() {
            return Err(e.clone().into());
        }
        let where_ = self.where_();
        let params = Params {
            partitions,
            brokers: &self.brokers,
            topic: &self.topic,
            available_now: self.available_now,
            start: self.start,
            idle_after_ms: self.idle_after_ms,
            max_records_per_second: self.max_records_per_second,
            timeout: Duration::from_millis(self.timeout_ms),
            fetch_bytes: self.fetch_bytes,
        };
        let io = &mut self.io;
        if io.runtime.is_none() {
            io.runtime = Some(runtime()?);
        }
        let rt = io.runtime.as_ref().expect("a runtime");
        // The synchronous bridge: the async read runs to completion on this source's own
        // runtime (bounded by the request timeout).
        rt.block_on(io.reader.read(&params, partition, position, max, now, out))
            .map_err(|e| {
                if e.contains("Kafka topic") {
                    e.into()
                } else {
                    format!("{where_}: {e}").into()
                }
            })
    }

    fn watermark(&self, _partition: usize, _partitions: usize, pos: &KafkaPosition) -> Timestamp {
        if pos
            .end
            .is_some_and(|end| pos.next.is_some_and(|next| next >= end))
        {
            return Timestamp::MAX;
        }
        self.watermarks.estimate(pos.latest)
    }

    fn available(&self, _partition: usize, _partitions: usize, pos: &KafkaPosition) -> Option<u64> {
        let next = pos.next?;
        let upto = pos.end.or(pos.high_watermark)?;
        Some(u64::try_from(upto - next).unwrap_or(0))
    }
}
