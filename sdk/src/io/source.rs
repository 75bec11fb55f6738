//! Async sources and their bridge to the source driver.

use super::{BridgeOptions, Failure, block_on_timeout, runtime};
use crate::{Element, ReadStatus, Source, Timestamp, UserError};
use async_trait::async_trait;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// A source that does IO: its partitions are read by async readers on the connector
/// runtime, and [`SourceBridge`] makes it a [`Source`] that every runner reads
/// through core's source driver.
///
/// # How it maps onto the source driver
///
/// The driver (`runners/core/src/source_driver.rs`) owns the rules; a connector only
/// answers its questions:
///
/// - **Partitions** are counted once, when the job first starts
///   ([`AsyncSource::partitions`], which may ask a server: a topic's partition count),
///   and the count is kept in every snapshot: a restored job reads exactly the same
///   partitions, whatever its worker count. Partition `p` of `n` is read by worker
///   `p % workers`. A Kafka topic's partitions map one to one onto these.
/// - **Positions** ([`AsyncSource::Position`]) are plain serializable data (a Kafka
///   offset, a byte offset): the driver stores each partition's position in the
///   snapshot and hands it back on restore. [`AsyncSource::open`] must start a reader
///   exactly there, and reading from a position must give the same records again (a
///   micro-batch replays a logged range by count). The bridge's own position,
///   [`BridgePosition`], is the position of the start of the chunk being handed over
///   plus how many of its records were taken, so a chunk may be split at any record.
///   Use a position that comes before its record's successor (Kafka: the *next*
///   offset to read).
/// - **Watermarks**: after each read the reader reports its watermark
///   ([`AsyncSourceReader::watermark`]): no record earlier than it will follow in this
///   partition. The driver keeps each partition's watermark in the snapshot and
///   combines them (the minimum over partitions that are not idle).
/// - **Idleness**: a read that finds nothing now returns [`ReadStatus::Idle`]; the
///   partition then does not hold the watermark back (the driver's idle-partition
///   rule, Flink's idleness; an async source cannot opt out of it), until a later read
///   returns records. Idle is sticky on the pipeline side:
///   while the last chunk said Idle and nothing new came, the bridge answers Idle at
///   once; while it said [`ReadStatus::More`], the bridge waits for the next chunk (at
///   most [`BridgeOptions::timeout`]), so a `More` must mean records follow soon.
/// - **End of input**: [`ReadStatus::Done`] ends the partition for good (a bounded
///   source, or a Kafka partition read up to its end offset under `available-now`).
///   An unbounded source never says Done; the runner stops it (`--max-duration`).
/// - **What is available now** ([`AsyncSource::available`]): how many records are
///   ready at a position, asked once per partition at the start of a micro-batch run
///   with the `once` or `available-now` trigger, which then reads exactly that many
///   (Kafka: the high watermark minus the position; a tailed file: its complete lines
///   after the position). Asked before the partition's reader first opened, it must
///   resolve a symbolic position as `open` would. `None`: unknown.
/// - **Finalize** ([`AsyncSource::finalize`]): a checkpoint holding the position is
///   durable; the source may release what came before (commit a consumer group's
///   offsets). It is never asked to read before that position again.
///
/// Errors from `open` or `read` fail the pipeline with the partition and position
/// named; the fault-tolerant runners then restart from the last checkpoint, and the
/// reader is opened again at the position stored there.
///
/// ```
/// use async_trait::async_trait;
/// use serde::{Deserialize, Serialize};
/// use tidewater::io::{AsyncSource, AsyncSourceReader, SourceBridge};
/// use tidewater::{ReadStatus, Timestamp, UserError};
///
/// /// The numbers below `n`, one per millisecond of event time, as if from a server.
/// #[derive(Serialize, Deserialize)]
/// struct Numbers { n: u64 }
///
/// struct NumbersReader { next: u64, n: u64, step: u64 }
///
/// #[async_trait]
/// impl AsyncSource for Numbers {
///     type Output = u64;
///     type Position = u64;
///     type Reader = NumbersReader;
///     fn is_bounded(&self) -> bool { true }
///     fn initial_position(&self, partition: usize, _partitions: usize) -> u64 { partition as u64 }
///     async fn open(&self, _p: usize, partitions: usize, at: u64) -> Result<NumbersReader, UserError> {
///         Ok(NumbersReader { next: at, n: self.n, step: partitions as u64 })
///     }
/// }
///
/// #[async_trait]
/// impl AsyncSourceReader for NumbersReader {
///     type Output = u64;
///     type Position = u64;
///     async fn read(&mut self, max: usize, out: &mut Vec<(u64, Timestamp)>) -> Result<ReadStatus, UserError> {
///         while out.len() < max {
///             if self.next >= self.n { return Ok(ReadStatus::Done); }
///             out.push((self.next, Timestamp(self.next as i64)));
///             self.next += self.step;
///         }
///         Ok(ReadStatus::More)
///     }
///     fn position(&self) -> u64 { self.next }
///     fn watermark(&self) -> Timestamp { Timestamp(self.next as i64) }
/// }
///
/// tidewater_runner_direct::register();
/// let p = tidewater::Pipeline::new(Default::default());
/// p.apply("Read", tidewater::Read::from(SourceBridge::new(Numbers { n: 100 })))
///     .capture("numbers");
/// let numbers = p.run().unwrap().captured_values::<u64>("numbers").unwrap();
/// assert_eq!(numbers.len(), 100);
/// ```
#[async_trait]
pub trait AsyncSource: Send + Sync + 'static {
    /// The records.
    type Output: Element;
    /// Where a partition's reader stands (see the trait's documentation).
    type Position: Serialize + DeserializeOwned + Clone + Debug + PartialEq + Send + Sync + 'static;
    /// A reader of one partition.
    type Reader: AsyncSourceReader<Output = Self::Output, Position = Self::Position>;

    /// Whether the source is finite.
    fn is_bounded(&self) -> bool;

    /// How many partitions to read in parallel, given a desired number; asked once,
    /// when the job first starts. By default, `desired` (at least 1).
    async fn partitions(&self, desired: usize) -> Result<usize, UserError> {
        Ok(desired.max(1))
    }

    /// The position partition `partition` of `partitions` starts from when the job
    /// first starts (it may be symbolic, such as "the earliest offset", resolved by
    /// `open`, as long as `open` resolves it the same way each time).
    fn initial_position(&self, partition: usize, partitions: usize) -> Self::Position;

    /// Opens a reader of the partition at `position`: the next record it reads is the
    /// one at `position`.
    async fn open(
        &self,
        partition: usize,
        partitions: usize,
        position: Self::Position,
    ) -> Result<Self::Reader, UserError>;

    /// How many records the partition has ready at `position` right now, if the source
    /// knows. By default, unknown.
    async fn available(
        &self,
        _partition: usize,
        _partitions: usize,
        _position: &Self::Position,
    ) -> Result<Option<u64>, UserError> {
        Ok(None)
    }

    /// A checkpoint holding `position` is durable. By default, nothing.
    async fn finalize(
        &self,
        _partition: usize,
        _partitions: usize,
        _position: &Self::Position,
    ) -> Result<(), UserError> {
        Ok(())
    }

    /// How the bridge moves this source's records. By default,
    /// [`BridgeOptions::default`].
    fn bridge_options(&self) -> BridgeOptions {
        BridgeOptions::default()
    }
}

/// A reader of one partition of an [`AsyncSource`], running on the connector runtime.
#[async_trait]
pub trait AsyncSourceReader: Send + 'static {
    /// The records.
    type Output: Element;
    /// Where the reader stands.
    type Position: Clone + Send + 'static;

    /// Reads up to `max` records into `out` (record and event timestamp). Returns
    /// [`ReadStatus::More`] if more records follow at once, [`ReadStatus::Idle`] if
    /// nothing more is available now (it may wait a little for records first, a long
    /// poll, but must return within the source's [`BridgeOptions::timeout`]), or
    /// [`ReadStatus::Done`] when the partition is exhausted. After an Idle read with no
    /// records, the bridge waits a short, growing pause (1 to 64 ms) before reading
    /// again.
    async fn read(
        &mut self,
        max: usize,
        out: &mut Vec<(Self::Output, Timestamp)>,
    ) -> Result<ReadStatus, UserError>;

    /// The position after the records read so far.
    fn position(&self) -> Self::Position;

    /// The watermark after the records read so far: no later record of this partition
    /// is earlier.
    fn watermark(&self) -> Timestamp;
}

/// Where a partition of a [`SourceBridge`] stands: the position `at` which a chunk of
/// records began, and how many records from there were taken (`skip`). A reader
/// resumed there opens at `at` and drops the first `skip` records.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BridgePosition<P> {
    /// The source's position.
    pub at: P,
    /// Records after `at` already taken.
    pub skip: u64,
}

/// One chunk a reader hands over.
struct Chunk<S: AsyncSource> {
    /// The position the chunk's first record is read from, with how many records from
    /// there the reader dropped (a resumed reader's skip).
    start: BridgePosition<S::Position>,
    records: std::vec::IntoIter<(S::Output, Timestamp)>,
    end: S::Position,
    watermark: Timestamp,
    status: ReadStatus,
}

type Message<S> = Result<Chunk<S>, Failure>;

/// One partition's reader, seen from the pipeline.
struct Partition<S: AsyncSource> {
    rx: mpsc::Receiver<Message<S>>,
    task: JoinHandle<()>,
    /// The position the driver holds after the last read; a read from anywhere else
    /// opens a new reader.
    expected: BridgePosition<S::Position>,
    /// The chunk being handed over, and how many of its records were taken.
    current: Option<(Chunk<S>, u64)>,
    /// What the last chunk handed over completely said.
    status: Option<ReadStatus>,
    watermark: Timestamp,
}

impl<S: AsyncSource> Drop for Partition<S> {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// An [`AsyncSource`] as a [`Source`]: read it with `Read::from(SourceBridge::new(s))`.
/// Its plan fields are those of the async source. See [`AsyncSource`] for how reads,
/// positions and watermarks map.
pub struct SourceBridge<S: AsyncSource> {
    source: Arc<S>,
    options: BridgeOptions,
    partitions: HashMap<usize, Partition<S>>,
}

impl<S: AsyncSource> SourceBridge<S> {
    /// Bridges `source`.
    pub fn new(source: S) -> Self {
        let options = source.bridge_options();
        SourceBridge {
            source: Arc::new(source),
            options,
            partitions: HashMap::new(),
        }
    }

    /// The async source.
    pub fn source(&self) -> &S {
        &self.source
    }

    fn open(
        &self,
        partition: usize,
        partitions: usize,
        from: &BridgePosition<S::Position>,
    ) -> Partition<S> {
        let (tx, rx) = mpsc::channel(self.options.capacity.max(1));
        let source = Arc::clone(&self.source);
        let chunk = self.options.chunk.max(1);
        let from_at = from.at.clone();
        let mut skip = from.skip;
        let from_skip = from.skip;
        let task = runtime().spawn(async move {
            let mut reader = match source.open(partition, partitions, from_at.clone()).await {
                Ok(r) => r,
                Err(e) => {
                    let f = Failure::of(&e, |e| {
                        format!("opening partition {partition} at {from_at:?} failed: {e}")
                    });
                    let _ = tx.send(Err(f)).await;
                    return;
                }
            };
            let mut pause = 0u32;
            loop {
                let start = reader.position();
                let mut records = Vec::with_capacity(chunk);
                let status = match reader.read(chunk, &mut records).await {
                    Ok(s) => s,
                    Err(e) => {
                        let f = Failure::of(&e, |e| format!("reading partition {partition} failed: {e}"));
                        let _ = tx.send(Err(f)).await;
                        return;
                    }
                };
                let dropped = skip.min(records.len() as u64);
                skip -= dropped;
                if skip > 0 && status == ReadStatus::Done {
                    let f = Failure {
                        message: format!(
                            "partition {partition} ended {skip} records before the position {from_at:?} + {from_skip} it resumes from: the source does not replay what it gave"
                        ),
                        unavailable: false,
                    };
                    let _ = tx.send(Err(f)).await;
                    return;
                }
                let empty = records.len() as u64 == dropped;
                if skip == 0 && (!empty || status != ReadStatus::More) {
                    let mut records = records.into_iter();
                    records.by_ref().take(dropped as usize).for_each(drop);
                    let msg = Chunk::<S> {
                        start: BridgePosition { at: start, skip: dropped },
                        records,
                        end: reader.position(),
                        watermark: reader.watermark(),
                        status,
                    };
                    if tx.send(Ok(msg)).await.is_err() {
                        return;
                    }
                }
                match status {
                    ReadStatus::Done => return,
                    ReadStatus::Idle if empty => {
                        pause = (pause + 1).min(6);
                        tokio::time::sleep(std::time::Duration::from_millis(1 << pause)).await;
                    }
                    _ => pause = 0,
                }
            }
        });
        Partition {
            rx,
            task,
            expected: from.clone(),
            current: None,
            status: None,
            watermark: Timestamp::MIN,
        }
    }
}

impl<S: AsyncSource> Serialize for SourceBridge<S>
where
    S: Serialize,
{
    fn serialize<Z: Serializer>(&self, serializer: Z) -> Result<Z::Ok, Z::Error> {
        self.source.serialize(serializer)
    }
}

impl<'de, S: AsyncSource> Deserialize<'de> for SourceBridge<S>
where
    S: Deserialize<'de>,
{
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        S::deserialize(deserializer).map(SourceBridge::new)
    }
}

impl<S: AsyncSource> Source for SourceBridge<S> {
    type Output = S::Output;
    type Position = BridgePosition<S::Position>;

    fn is_bounded(&self) -> bool {
        self.source.is_bounded()
    }

    /// Runners ask [`Source::try_partitions`]; this form panics with the error.
    fn partitions(&self, desired: usize) -> usize {
        self.try_partitions(desired)
            .unwrap_or_else(|e| panic!("finding the source's partitions failed: {e}"))
    }

    fn try_partitions(&self, desired: usize) -> Result<usize, UserError> {
        let source = &self.source;
        block_on_timeout(
            self.options.timeout,
            || "the source asked for its partitions".to_string(),
            source.partitions(desired),
        )
    }

    fn initial_position(&self, partition: usize, partitions: usize) -> Self::Position {
        BridgePosition {
            at: self.source.initial_position(partition, partitions),
            skip: 0,
        }
    }

    fn read(
        &mut self,
        partition: usize,
        partitions: usize,
        position: &mut Self::Position,
        max: usize,
        _now: Timestamp,
        out: &mut Vec<(S::Output, Timestamp)>,
    ) -> Result<ReadStatus, UserError> {
        if self
            .partitions
            .get(&partition)
            .is_none_or(|p| p.expected != *position)
        {
            let reader = self.open(partition, partitions, position);
            self.partitions.insert(partition, reader);
        }
        let timeout = self.options.timeout;
        let p = self.partitions.get_mut(&partition).expect("opened above");
        let first = out.len();
        let mut waited = false;
        loop {
            if let Some((chunk, taken)) = &mut p.current {
                let want = max.saturating_sub(out.len() - first);
                let before = out.len();
                out.extend(chunk.records.by_ref().take(want));
                *taken += (out.len() - before) as u64;
                if chunk.records.len() == 0 {
                    let (chunk, _) = p.current.take().expect("a current chunk");
                    p.expected = BridgePosition {
                        at: chunk.end,
                        skip: 0,
                    };
                    p.status = Some(chunk.status);
                    p.watermark = p.watermark.max(chunk.watermark);
                } else {
                    p.expected = BridgePosition {
                        at: chunk.start.at.clone(),
                        skip: chunk.start.skip + *taken,
                    };
                }
            }
            if out.len() - first >= max {
                break;
            }
            let next = match p.rx.try_recv() {
                Ok(m) => Some(m),
                Err(mpsc::error::TryRecvError::Disconnected) => {
                    if p.status == Some(ReadStatus::Done) {
                        break;
                    }
                    return Err(format!(
                        "the reader of partition {partition} stopped without a word (it panicked or was cancelled)"
                    )
                    .into());
                }
                Err(mpsc::error::TryRecvError::Empty) => {
                    let waiting = out.len() == first
                        && !waited
                        && !matches!(p.status, Some(ReadStatus::Idle | ReadStatus::Done));
                    if !waiting {
                        break;
                    }
                    waited = true;
                    let rx = &mut p.rx;
                    let m = block_on_timeout(
                        timeout,
                        || format!("the reader of partition {partition}"),
                        async { Ok(rx.recv().await) },
                    )?;
                    match m {
                        Some(m) => Some(m),
                        None if p.status == Some(ReadStatus::Done) => break,
                        None => {
                            return Err(format!(
                                "the reader of partition {partition} stopped without a word (it panicked or was cancelled)"
                            )
                            .into())
                        }
                    }
                }
            };
            match next {
                Some(Ok(chunk)) => p.current = Some((chunk, 0)),
                Some(Err(e)) => return Err(e.into_error()),
                None => break,
            }
        }
        *position = p.expected.clone();
        Ok(match (&p.current, p.status) {
            (Some(_), _) => ReadStatus::More,
            (None, Some(s)) => s,
            (None, None) => ReadStatus::More,
        })
    }

    fn watermark(
        &self,
        partition: usize,
        _partitions: usize,
        _position: &Self::Position,
    ) -> Timestamp {
        self.partitions
            .get(&partition)
            .map_or(Timestamp::MIN, |p| p.watermark)
    }

    /// Runners ask [`Source::try_available`]; this form answers "unknown" on an error.
    fn available(
        &self,
        partition: usize,
        partitions: usize,
        position: &Self::Position,
        now: Timestamp,
    ) -> Option<u64> {
        self.try_available(partition, partitions, position, now)
            .ok()
            .flatten()
    }

    fn try_available(
        &self,
        partition: usize,
        partitions: usize,
        position: &Self::Position,
        _now: Timestamp,
    ) -> Result<Option<u64>, UserError> {
        let source = &self.source;
        let n = block_on_timeout(
            self.options.timeout,
            || format!("the source asked what partition {partition} has available"),
            source.available(partition, partitions, &position.at),
        )?;
        Ok(n.map(|n| n.saturating_sub(position.skip)))
    }

    fn finalize(
        &mut self,
        partition: usize,
        partitions: usize,
        position: &Self::Position,
    ) -> Result<(), UserError> {
        let source = &self.source;
        block_on_timeout(
            self.options.timeout,
            || format!("finalizing partition {partition}"),
            source.finalize(partition, partitions, &position.at),
        )
    }
}
