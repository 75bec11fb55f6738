//! The source driver: reads the partitions of a source a worker owns, tracks each one's
//! position, watermark, idleness and completion, and computes the watermark of what it
//! reads. Every runner reads sources through it, so the idle-partition rule lives here
//! once.
//!
//! - Partitions are fixed when the source first starts and kept in snapshots (one
//!   [`Scope::Partition`] part each, which also records how many there are), so a
//!   restored source reads exactly the partitions it read before, from where it stood.
//! - Partition `p` is owned by worker `p % workers`; on restore with another number of
//!   workers each takes the parts of the partitions it now owns.
//! - Every read can be recorded as a range (partition, start position, record count)
//!   that [`SourceDriver::replay`] reads again exactly: what a micro-batch write-ahead
//!   log stores.
//! - [`SourceDriver::available_now`] tells how much is ready (for "once" and
//!   "available now" batch modes), and [`SourceDriver::finalize`] tells the source that
//!   a checkpoint holding its positions is durable.

use crate::snapshot::{decode_part, encode_part, Scope};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use tidewater::exec::{AnyBatch, ErasedSource, ExecError};
use tidewater::{ReadStatus, Timestamp};

/// Where one partition stands.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionState {
    /// The source's encoded position.
    pub position: Vec<u8>,
    /// The partition has no more records, ever.
    pub done: bool,
    /// The last read found nothing for now.
    pub idle: bool,
    /// The partition's watermark.
    pub watermark: Timestamp,
}

/// A range of records one read took from a partition: replaying it reads the same
/// records again.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadRange {
    /// The partition.
    pub partition: u32,
    /// The encoded position the read started from.
    pub start: Vec<u8>,
    /// How many records it read.
    pub count: u64,
}

/// A partition in a snapshot: its state and how many partitions the source has.
#[derive(Serialize, Deserialize)]
struct PartitionPart {
    partitions: u32,
    state: PartitionState,
}

/// A source and the partitions one worker owns.
pub struct SourceDriver {
    source: Box<dyn ErasedSource>,
    /// How many partitions the source has in all.
    partitions: u32,
    owned: BTreeMap<u32, PartitionState>,
    /// Whether reads are recorded as ranges (for a write-ahead log).
    recording: bool,
    /// The ranges read since the last [`SourceDriver::take_ranges`].
    ranges: Vec<ReadRange>,
}

impl SourceDriver {
    /// Starts `source` split into (about) `desired` partitions, at their initial
    /// positions, reading the ones `worker` of `workers` owns.
    pub fn start(
        source: Box<dyn ErasedSource>,
        desired: usize,
        worker: usize,
        workers: usize,
    ) -> Result<Self, ExecError> {
        let n = source.partitions(desired);
        let mut owned = BTreeMap::new();
        for p in (0..n).filter(|p| p % workers.max(1) == worker) {
            owned.insert(
                p as u32,
                PartitionState {
                    position: source.initial_position(p, n)?,
                    done: false,
                    idle: false,
                    watermark: Timestamp::MIN,
                },
            );
        }
        Ok(SourceDriver {
            source,
            partitions: n as u32,
            owned,
            recording: false,
            ranges: Vec::new(),
        })
    }

    /// Resumes `source` from the partition parts of a snapshot (pass them all: worker
    /// `worker` of `workers` takes the partitions it owns).
    pub fn restore(
        source: Box<dyn ErasedSource>,
        parts: &[(u32, &[u8])],
        worker: usize,
        workers: usize,
    ) -> Result<Self, ExecError> {
        let mut partitions = None;
        let mut owned = BTreeMap::new();
        for (p, bytes) in parts {
            let part: PartitionPart = decode_part(bytes, "a source partition")?;
            if *partitions.get_or_insert(part.partitions) != part.partitions
                || *p >= part.partitions
            {
                return Err(checkpoint(format!(
                    "source partition {p} does not fit a source of {} partitions",
                    part.partitions
                )));
            }
            if *p as usize % workers.max(1) == worker {
                owned.insert(*p, part.state);
            }
        }
        let partitions = partitions
            .ok_or_else(|| checkpoint("the source has no partitions in the snapshot".into()))?;
        for p in (0..partitions).filter(|p| *p as usize % workers.max(1) == worker) {
            if !owned.contains_key(&p) {
                return Err(checkpoint(format!("source partition {p} is missing")));
            }
        }
        Ok(SourceDriver {
            source,
            partitions,
            owned,
            recording: false,
            ranges: Vec::new(),
        })
    }

    /// One part per owned partition.
    pub fn snapshot(&self) -> Vec<(Scope, Vec<u8>)> {
        self.owned
            .iter()
            .map(|(p, s)| {
                let part = PartitionPart {
                    partitions: self.partitions,
                    state: s.clone(),
                };
                (Scope::Partition(*p), encode_part(&part))
            })
            .collect()
    }

    /// Reads up to `max` records from every owned partition that is not done; the
    /// records go to `out`, each read's range is recorded. Whether any were read.
    pub fn read(
        &mut self,
        max: usize,
        now: Timestamp,
        out: &mut Vec<Box<dyn AnyBatch>>,
    ) -> Result<bool, ExecError> {
        let n = self.partitions as usize;
        let mut any = false;
        for (p, st) in self.owned.iter_mut() {
            if st.done {
                continue;
            }
            let start = st.position.clone();
            let read = self
                .source
                .read(*p as usize, n, &mut st.position, max, now)?;
            st.idle = read.status == ReadStatus::Idle;
            st.done = read.status == ReadStatus::Done;
            st.watermark = st.watermark.max(read.watermark);
            if !read.batch.is_empty() {
                any = true;
            }
            if !read.batch.is_empty() && self.recording {
                self.ranges.push(ReadRange {
                    partition: *p,
                    start,
                    count: read.batch.len() as u64,
                });
            }
            if !read.batch.is_empty() {
                out.push(read.batch);
            }
        }
        Ok(any)
    }

    /// Records every read as a range from now on, for [`SourceDriver::take_ranges`].
    pub fn record_ranges(&mut self) {
        self.recording = true;
    }

    /// The ranges read since the last call (with [`SourceDriver::record_ranges`]).
    pub fn take_ranges(&mut self) -> Vec<ReadRange> {
        std::mem::take(&mut self.ranges)
    }

    /// Reads exactly the records of `range` again; a source that cannot give them all
    /// (it lost them) is an error, never fewer records.
    pub fn replay(
        &mut self,
        range: &ReadRange,
        now: Timestamp,
    ) -> Result<Vec<Box<dyn AnyBatch>>, ExecError> {
        let n = self.partitions as usize;
        let mut position = range.start.clone();
        let mut left = range.count;
        let mut out = Vec::new();
        while left > 0 {
            let max = usize::try_from(left).unwrap_or(usize::MAX);
            let read = self
                .source
                .read(range.partition as usize, n, &mut position, max, now)?;
            let got = read.batch.len() as u64;
            if got > left {
                return Err(replay_error(range, "more"));
            }
            left -= got;
            if got > 0 {
                out.push(read.batch);
            } else if read.status != ReadStatus::More {
                return Err(replay_error(range, "fewer"));
            }
        }
        Ok(out)
    }

    /// Records ready in all owned partitions right now, if the source knows for each.
    pub fn available_now(&self) -> Result<Option<u64>, ExecError> {
        let n = self.partitions as usize;
        let mut total = 0u64;
        for (p, st) in &self.owned {
            if st.done {
                continue;
            }
            match self.source.available(*p as usize, n, &st.position)? {
                Some(k) => total = total.saturating_add(k),
                None => return Ok(None),
            }
        }
        Ok(Some(total))
    }

    /// A checkpoint holding the current positions is durable: the source may release
    /// what comes before them.
    pub fn finalize(&mut self) -> Result<(), ExecError> {
        let n = self.partitions as usize;
        for (p, st) in &self.owned {
            self.source.finalize(*p as usize, n, &st.position)?;
        }
        Ok(())
    }

    /// The watermark of what this driver reads: the minimum over owned partitions that
    /// are not done; idle partitions do not hold it back unless all are idle. Once
    /// every owned partition is done, the end of time.
    pub fn watermark(&self) -> Timestamp {
        let live = |idle: bool| {
            self.owned
                .values()
                .filter(|s| !s.done && s.idle == idle)
                .map(|s| s.watermark)
                .min()
        };
        live(false).or_else(|| live(true)).unwrap_or(Timestamp::MAX)
    }

    /// Every owned partition is done.
    pub fn is_done(&self) -> bool {
        self.owned.values().all(|s| s.done)
    }

    /// Stops reading: every owned partition counts as done (draining at
    /// `--max-duration`, or an idle source on a simulated clock).
    pub fn finish(&mut self) {
        for s in self.owned.values_mut() {
            s.done = true;
        }
    }

    /// The owned partitions.
    pub fn partitions(&self) -> &BTreeMap<u32, PartitionState> {
        &self.owned
    }
}

fn replay_error(range: &ReadRange, what: &str) -> ExecError {
    ExecError::User {
        phase: tidewater::exec::Phase::Process,
        element: None,
        message: format!(
            "replaying {} records of partition {} gave {what}: the source cannot replay a recorded range",
            range.count, range.partition
        ),
    }
}

fn checkpoint(message: String) -> ExecError {
    ExecError::Downstream(Box::new(tidewater::Error::Checkpoint { message }))
}
