//! Sources: bounded and unbounded input with partitions, resumable positions and
//! watermark estimates.

use crate::{Element, Timestamp, UserError};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::fmt::Debug;

/// What a read of a source partition found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadStatus {
    /// More records may follow at once.
    More,
    /// Nothing is available now (a rate-limited or tailing source). The runner polls
    /// the partition again a little later; while it is idle it does not hold back the
    /// watermark, unless the source says its watermark holds while it waits
    /// ([`Source::idle_holds_watermark`]).
    Idle,
    /// The partition is exhausted.
    Done,
}

/// A source of records, split into partitions, each read from a resumable position.
///
/// The position is plain serializable data (an offset, a checkpoint mark): the
/// fault-tolerant runners store it in snapshots and resume reading from it, so reading
/// the same partition from the same position must give the same records.
///
/// ```
/// use serde::{Deserialize, Serialize};
/// use tidewater::{ReadStatus, Source, Timestamp, UserError};
///
/// /// The numbers below `n`, one per millisecond of event time.
/// #[derive(Serialize, Deserialize)]
/// struct Numbers { n: u64 }
///
/// impl Source for Numbers {
///     type Output = u64;
///     type Position = u64;
///     fn is_bounded(&self) -> bool { true }
///     fn initial_position(&self, partition: usize, _partitions: usize) -> u64 { partition as u64 }
///     fn read(&mut self, _p: usize, partitions: usize, next: &mut u64, max: usize, _now: Timestamp,
///             out: &mut Vec<(u64, Timestamp)>) -> Result<ReadStatus, UserError> {
///         for _ in 0..max {
///             if *next >= self.n { return Ok(ReadStatus::Done); }
///             out.push((*next, Timestamp(*next as i64)));
///             *next += partitions as u64;
///         }
///         Ok(ReadStatus::More)
///     }
///     fn watermark(&self, _p: usize, _partitions: usize, next: &u64) -> Timestamp { Timestamp(*next as i64) }
/// }
/// ```
pub trait Source: Send + Sync + 'static {
    /// The records.
    type Output: Element;
    /// Where a partition's reader stands.
    type Position: Serialize + DeserializeOwned + Clone + Debug + Send + Sync + 'static;
    /// Whether the source is finite.
    fn is_bounded(&self) -> bool;
    /// How many partitions to read in parallel, given a desired number.
    fn partitions(&self, desired: usize) -> usize {
        desired.max(1)
    }
    /// The fallible form of [`Source::partitions`], which runners call: a source whose
    /// partitions come from a server (a topic's metadata) fails here with a clear
    /// error instead of guessing. By default, `Ok(self.partitions(desired))`.
    fn try_partitions(&self, desired: usize) -> Result<usize, UserError> {
        Ok(self.partitions(desired))
    }
    /// The position partition `partition` of `partitions` starts from.
    fn initial_position(&self, partition: usize, partitions: usize) -> Self::Position;
    /// Reads up to `max` records of the partition from `position` into `out` (record and
    /// event timestamp), advancing `position`. `now` is the processing time.
    fn read(
        &mut self,
        partition: usize,
        partitions: usize,
        position: &mut Self::Position,
        max: usize,
        now: Timestamp,
        out: &mut Vec<(Self::Output, Timestamp)>,
    ) -> Result<ReadStatus, UserError>;
    /// The partition's watermark at `position`: no record earlier than it will follow.
    fn watermark(
        &self,
        partition: usize,
        partitions: usize,
        position: &Self::Position,
    ) -> Timestamp;
    /// How many records the partition has ready at `position` at processing time `now`
    /// (the time a `read` then gets), if the source knows: a micro-batch fixes each
    /// batch's ranges from it and reads them as the batch runs. A source whose records
    /// come due with processing time (a rate-limited generator) counts those due by
    /// `now`. A micro-batch run with `--trigger once` or `available-now` asks it once
    /// per partition at its start and reads exactly that many records (Spark's
    /// `Trigger.AvailableNow`): records that arrive later are left for the next run,
    /// so the answer must count records the partition will give from `position`, not
    /// more. `None`: unknown; such a run then reads until a batch finds less than its
    /// limit.
    fn available(
        &self,
        _partition: usize,
        _partitions: usize,
        _position: &Self::Position,
        _now: Timestamp,
    ) -> Option<u64> {
        None
    }
    /// The fallible form of [`Source::available`], which runners call: a source that
    /// asks a server (a topic's end offsets) fails here with a clear error instead of
    /// answering "unknown". By default, `Ok(self.available(..))`.
    fn try_available(
        &self,
        partition: usize,
        partitions: usize,
        position: &Self::Position,
        now: Timestamp,
    ) -> Result<Option<u64>, UserError> {
        Ok(self.available(partition, partitions, position, now))
    }
    /// [`Source::try_available`] where the runner needs no more than `cap`: an answer
    /// of at most `cap` (the runner takes the smaller of the two either way), for a
    /// source that would otherwise count all it has (a file's lines to its end) on every
    /// micro-batch. By default, `try_available` capped.
    fn try_available_up_to(
        &self,
        partition: usize,
        partitions: usize,
        position: &Self::Position,
        now: Timestamp,
        cap: u64,
    ) -> Result<Option<u64>, UserError> {
        Ok(self
            .try_available(partition, partitions, position, now)?
            .map(|n| n.min(cap)))
    }
    /// Whether a partition's watermark still holds the source's watermark back while the
    /// partition is idle (its last read returned [`ReadStatus::Idle`]).
    ///
    /// `false` (the default) is Flink's idleness: an idle partition (a Kafka partition
    /// that gets no messages, a tailed file nobody appends to) does not hold back the
    /// watermark while other partitions are active, so that one quiet partition does not
    /// stall every window; records it gives later may then be late. `true` for a source
    /// that is only waiting and knows when its next record is: a rate-limited generator
    /// whose next number is not due yet. Its watermark stays exact while it waits, and
    /// holding it means no record is ever late because of when partitions were read
    /// (partitions of one worker whose schedules differ, as after a rescale).
    fn idle_holds_watermark(&self) -> bool {
        false
    }
    /// Called once a checkpoint holding `position` is durable: the source may release
    /// what comes before it (commit offsets to a broker, delete consumed files). It will
    /// never be asked to read before `position` again.
    fn finalize(
        &mut self,
        _partition: usize,
        _partitions: usize,
        _position: &Self::Position,
    ) -> Result<(), UserError> {
        Ok(())
    }
}
