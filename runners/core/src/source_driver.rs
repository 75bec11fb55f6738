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
//! - A micro-batch is read by [`SourceDriver::read_batch`], which returns its ranges
//!   (partition, start position, record count): what a micro-batch write-ahead log
//!   stores, and what the same call reads again exactly after a failure. Where the
//!   source says what each partition has available, [`SourceDriver::plan_batch`]
//!   fixes the ranges before anything is read, so that a runner logs them first and
//!   then reads the batch chunk by chunk as it runs ([`SourceDriver::read_planned`]):
//!   the records in memory stay within a chunk however large the batch.
//! - [`SourceDriver::available_now`] tells how much is ready, and
//!   [`SourceDriver::finalize`] tells the source that a checkpoint holding its positions
//!   is durable.
//! - A run that reads up to the end taken at its start (the micro-batch triggers
//!   "once" and "available now", as Spark's `Trigger.AvailableNow`) fixes each owned
//!   partition's end once, with [`SourceDriver::fix_run_ends`]: how many records the
//!   source says the partition has available at its position then. Batches then read
//!   at most that many in all; records that arrive later are left for the next run.
//!   The count left is kept in the partition's state (so in snapshots) and in every
//!   range a batch logs, so that a run restored after a crash stops where it would
//!   have. A source that cannot say what it has available keeps the old rule: the run
//!   ends after the first batch in which no partition of it stopped at its share of
//!   the limit.

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
    /// In a run that reads up to the end taken at its start: how many records the
    /// partition has left to read in it, from `position`. `None` outside such a run,
    /// and for a source that cannot say what it has available.
    pub run_left: Option<u64>,
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
    /// In a run that reads up to the end taken at its start: the records the partition
    /// had left in the run at `start` (so that a replay of the range after a crash
    /// also restores the run's end).
    #[serde(default)]
    pub left: Option<u64>,
}

/// What one micro-batch read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BatchRead {
    /// One range per partition that was not done.
    pub ranges: Vec<ReadRange>,
    /// Some partition has more to give in this run: with an end fixed at the run's
    /// start, records left before it; without one, it stopped at its share of the
    /// limit.
    pub limited: bool,
}

/// A micro-batch whose ranges were fixed before it was read
/// ([`SourceDriver::plan_batch`]), being read chunk by chunk.
#[derive(Debug)]
pub struct PlannedBatch {
    parts: Vec<PartRead>,
    share: Option<u64>,
}

impl PlannedBatch {
    /// The ranges the batch is to read, for the write-ahead log.
    pub fn ranges(&self) -> Vec<ReadRange> {
        self.parts
            .iter()
            .map(|r| ReadRange {
                partition: r.p,
                start: r.start.clone(),
                count: r.want,
                left: r.left,
            })
            .collect()
    }

    /// Every partition's part is read.
    pub fn is_read(&self) -> bool {
        self.parts.iter().all(|r| r.finished)
    }
}

/// One partition's part of a batch.
#[derive(Debug)]
struct PartRead {
    p: u32,
    /// Where it starts.
    start: Vec<u8>,
    /// The records the partition has left in the run at `start`.
    left: Option<u64>,
    /// How many it is to read.
    want: u64,
    /// A logged range: exactly `want`.
    exact: bool,
    got: u64,
    /// Empty reads in a row.
    empty: u32,
    finished: bool,
}

/// How many batches in a row a partition may read nothing while records are left
/// before its end taken at the run's start, before the run fails: the source said it
/// had records that it does not give.
pub const STALLED_BATCHES: u32 = 1000;

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
    /// Batches in a row in which a partition with records left in the run read none.
    stalled: BTreeMap<u32, u32>,
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
        let n = source.partitions(desired)?;
        let mut owned = BTreeMap::new();
        for p in (0..n).filter(|p| p % workers.max(1) == worker) {
            owned.insert(
                p as u32,
                PartitionState {
                    position: source.initial_position(p, n)?,
                    done: false,
                    idle: false,
                    watermark: Timestamp::MIN,
                    run_left: None,
                },
            );
        }
        Ok(SourceDriver {
            source,
            partitions: n as u32,
            owned,
            stalled: BTreeMap::new(),
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
            stalled: BTreeMap::new(),
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
        let live: Vec<u32> = self
            .owned
            .iter()
            .filter(|(_, s)| !s.done)
            .map(|(p, _)| *p)
            .collect();
        let mut any = false;
        for p in live {
            any |= self.read_once(p, max, now, out)?.0 > 0;
        }
        Ok(any)
    }

    /// One read of up to `max` records of partition `p`: its state follows the read,
    /// its records go to `out`. How many it read, and the read's status.
    fn read_once(
        &mut self,
        p: u32,
        max: usize,
        now: Timestamp,
        out: &mut Vec<Box<dyn AnyBatch>>,
    ) -> Result<(u64, ReadStatus), ExecError> {
        let n = self.partitions as usize;
        let st = self.owned.get_mut(&p).expect("an owned partition");
        let read = self
            .source
            .read(p as usize, n, &mut st.position, max, now)?;
        st.idle = read.status == ReadStatus::Idle;
        st.done = read.status == ReadStatus::Done;
        st.watermark = st.watermark.max(read.watermark);
        let k = read.batch.len() as u64;
        if k > 0 {
            out.push(read.batch);
        }
        Ok((k, read.status))
    }

    /// Reads one micro-batch: from every owned partition that is not done, records
    /// until it has none available now, is done, gave its share of `limit` (the
    /// batch's limit for the whole source, split evenly over all its partitions), or
    /// reached the end fixed at the run's start ([`SourceDriver::fix_run_ends`]), at
    /// most `chunk` per read.
    /// A partition that `logged` holds a range for (a batch fixed before a failure,
    /// from the write-ahead log) reads exactly that range instead, from the position
    /// it stands at, which must be the range's start. The records go to `out`; the
    /// batch's ranges (one per live partition, `count` 0 if it gave none) are returned
    /// for the log.
    pub fn read_batch(
        &mut self,
        logged: Option<&[ReadRange]>,
        limit: Option<u64>,
        chunk: usize,
        now: Timestamp,
        out: &mut Vec<Box<dyn AnyBatch>>,
    ) -> Result<BatchRead, ExecError> {
        let mut plan = self
            .plan(logged, limit, None)?
            .expect("a batch read as it goes always has a plan");
        for r in &mut plan.parts {
            while !self.read_step(r, chunk, now, out)? {}
            r.finished = true;
        }
        self.settle_planned(plan)
    }

    /// Fixes one micro-batch's ranges before any of it is read, so that the batch can
    /// be logged first and then read chunk by chunk as it runs
    /// ([`SourceDriver::read_planned`], then [`SourceDriver::settle_planned`]): the
    /// records in memory stay within a chunk however large the batch. A partition
    /// reads what `logged` holds for it, or else what the source says it has
    /// available at processing time `now` (the time its reads then get), within its
    /// share of `limit` and the run's end, as [`SourceDriver::read_batch`] would.
    /// `None` when some live partition cannot be planned: the source cannot say what
    /// it has, or says nothing (a partition at its end learns that it is done only by
    /// reading); then the batch is read whole with [`SourceDriver::read_batch`].
    pub fn plan_batch(
        &mut self,
        logged: Option<&[ReadRange]>,
        limit: Option<u64>,
        now: Timestamp,
    ) -> Result<Option<PlannedBatch>, ExecError> {
        self.plan(logged, limit, Some(now))
    }

    /// Reads the next records of a planned batch into `out`: at most `chunk` from the
    /// first partition whose part is not read yet. A partition that has nothing now
    /// ends its part early (the source had fewer than it said: the plan's ranges are
    /// then longer than what was read, and [`SourceDriver::settle_planned`] gives the
    /// ranges read); a logged range must be read whole.
    pub fn read_planned(
        &mut self,
        plan: &mut PlannedBatch,
        chunk: usize,
        now: Timestamp,
        out: &mut Vec<Box<dyn AnyBatch>>,
    ) -> Result<(), ExecError> {
        let before = out.len();
        while let Some(r) = plan.parts.iter_mut().find(|r| !r.finished) {
            r.finished = self.read_step(r, chunk, now, out)?;
            if out.len() > before {
                break;
            }
        }
        Ok(())
    }

    /// Closes a batch whose parts are all read: the ranges it read (one per live
    /// partition, `count` 0 if it gave none), and whether any partition has more in
    /// this run.
    pub fn settle_planned(&mut self, plan: PlannedBatch) -> Result<BatchRead, ExecError> {
        if !plan.is_read() {
            return Err(ExecError::Downstream(Box::new(tidewater::Error::Internal(
                "a micro-batch was closed before all of it was read".into(),
            ))));
        }
        let mut batch = BatchRead {
            ranges: Vec::with_capacity(plan.parts.len()),
            limited: false,
        };
        for r in plan.parts {
            let (range, more) = self.settle(r, plan.share)?;
            batch.limited |= more;
            batch.ranges.push(range);
        }
        Ok(batch)
    }

    /// What each live partition reads in the next batch (see
    /// [`SourceDriver::plan_batch`]); with `ask`, the source's `available` at that
    /// processing time caps each partition not in `logged`, and `None` means some
    /// partition cannot be planned.
    fn plan(
        &mut self,
        logged: Option<&[ReadRange]>,
        limit: Option<u64>,
        ask: Option<Timestamp>,
    ) -> Result<Option<PlannedBatch>, ExecError> {
        let n = self.partitions as usize;
        let share = limit.map(|l| l.div_ceil(u64::from(self.partitions.max(1))).max(1));
        let mut parts = Vec::new();
        for (p, st) in self.owned.iter().filter(|(_, s)| !s.done) {
            let p = *p;
            let logged = logged.and_then(|l| l.iter().find(|r| r.partition == p));
            let (left, want) = match logged {
                Some(range) => {
                    if range.start != st.position {
                        return Err(checkpoint(format!(
                            "the write-ahead log's range of source partition {p} does not start where the checkpoint left the partition"
                        )));
                    }
                    // The run's end as the batch was logged with, before the failure.
                    (range.left.or(st.run_left), range.count)
                }
                None => {
                    let mut want = share
                        .unwrap_or(u64::MAX)
                        .min(st.run_left.unwrap_or(u64::MAX));
                    if let Some(now) = ask {
                        // No more than the batch takes: a file need not count
                        // its lines to the end on every batch.
                        let cap = (want < u64::MAX).then_some(want);
                        match self
                            .source
                            .available(p as usize, n, &st.position, now, cap)?
                        {
                            Some(k) if k > 0 => want = want.min(k),
                            _ => return Ok(None),
                        }
                    }
                    (st.run_left, want)
                }
            };
            parts.push(PartRead {
                p,
                start: st.position.clone(),
                left,
                want,
                exact: logged.is_some(),
                got: 0,
                empty: 0,
                finished: false,
            });
        }
        for r in &parts {
            self.owned.get_mut(&r.p).expect("owned").run_left = r.left;
        }
        Ok(Some(PlannedBatch { parts, share }))
    }

    /// One read of `r`'s partition towards its count; whether its part of the batch is
    /// read (a logged range read short is an error: the source lost records).
    fn read_step(
        &mut self,
        r: &mut PartRead,
        chunk: usize,
        now: Timestamp,
        out: &mut Vec<Box<dyn AnyBatch>>,
    ) -> Result<bool, ExecError> {
        if r.got >= r.want {
            return Ok(true);
        }
        let max = usize::try_from(r.want - r.got)
            .unwrap_or(usize::MAX)
            .min(chunk.max(1));
        let (k, status) = self.read_once(r.p, max, now, out)?;
        if k > max as u64 {
            return Err(replay_error(r.p, r.want, "more"));
        }
        r.got += k;
        // A source that has nothing now ends the part; replaying a range it cannot
        // give again is an error, never fewer records.
        let finished = r.got >= r.want
            || match (status, k) {
                (ReadStatus::Done | ReadStatus::Idle, _) => true,
                (_, 0) if !r.exact => true,
                (_, 0) => {
                    r.empty += 1;
                    r.empty > 1000
                }
                _ => {
                    r.empty = 0;
                    false
                }
            };
        if finished && r.exact && r.got < r.want {
            return Err(replay_error(r.p, r.want, "fewer"));
        }
        Ok(finished)
    }

    /// A read part's range, and whether its partition has more in this run.
    fn settle(&mut self, r: PartRead, share: Option<u64>) -> Result<(ReadRange, bool), ExecError> {
        let (p, count) = (r.p, r.got);
        let st = self.owned.get_mut(&p).expect("owned");
        if let Some(left) = &mut st.run_left {
            if count > *left {
                return Err(checkpoint(format!(
                    "source partition {p} read {count} records in a batch with {left} left before the end the run took at its start"
                )));
            }
            *left -= count;
        }
        let more = !st.done
            && match st.run_left {
                Some(left) => left > 0,
                // Without an end, more may follow if it gave its whole share.
                None => count >= share.unwrap_or(u64::MAX),
            };
        let stalled = self.stalled.entry(p).or_default();
        *stalled = if count == 0 && more && st.run_left.is_some() {
            *stalled + 1
        } else {
            0
        };
        if *stalled >= STALLED_BATCHES {
            return Err(ExecError::User {
                phase: tidewater::exec::Phase::Process,
                element: None,
                message: format!(
                    "source partition {p} had {} records left before the end this run took at its start, but gave none in {STALLED_BATCHES} batches in a row: the source's `available` says more than it reads",
                    st.run_left.unwrap_or_default()
                ),
            });
        }
        let range = ReadRange {
            partition: p,
            start: r.start,
            count,
            left: r.left,
        };
        Ok((range, more))
    }

    /// Fixes the end of a run that reads up to the end taken at its start (the
    /// micro-batch triggers "once" and "available now"): each owned partition that is
    /// not done and has no end yet (a run restored from a checkpoint taken within the
    /// run keeps the end it had) gets as many records left as the source says it has
    /// available at processing time `now`. A source that cannot say leaves it unset:
    /// batches then read until they find less than the limit.
    pub fn fix_run_ends(&mut self, now: Timestamp) -> Result<(), ExecError> {
        let n = self.partitions as usize;
        for (p, st) in &mut self.owned {
            if st.done || st.run_left.is_some() {
                continue;
            }
            st.run_left = self
                .source
                .available(*p as usize, n, &st.position, now, None)?;
        }
        Ok(())
    }

    /// Ends a run that read up to its end: the ends are forgotten, so that the next
    /// run (restored from the checkpoint taken after this) takes new ones. Also for a
    /// run that reads on without an end, restored from a checkpoint taken within such
    /// a run.
    pub fn end_run(&mut self) {
        for st in self.owned.values_mut() {
            st.run_left = None;
        }
    }

    /// Every owned partition is done or read up to the end fixed at the run's start;
    /// `false` if some partition has no such end.
    pub fn reached_run_ends(&self) -> bool {
        self.owned.values().all(|s| s.done || s.run_left == Some(0))
    }

    /// Records ready in all owned partitions at processing time `now`, if the source
    /// knows for each.
    pub fn available_now(&self, now: Timestamp) -> Result<Option<u64>, ExecError> {
        let n = self.partitions as usize;
        let mut total = 0u64;
        for (p, st) in &self.owned {
            if st.done {
                continue;
            }
            match self
                .source
                .available(*p as usize, n, &st.position, now, None)?
            {
                Some(k) => total = total.saturating_add(k),
                None => return Ok(None),
            }
        }
        Ok(Some(total))
    }

    /// The owned partitions' positions now: what a checkpoint taken now records, to
    /// [`SourceDriver::finalize_at`] once it is complete.
    pub fn positions(&self) -> Vec<(u32, Vec<u8>)> {
        self.owned
            .iter()
            .map(|(p, st)| (*p, st.position.clone()))
            .collect()
    }

    /// The checkpoint that recorded `positions` ([`SourceDriver::positions`]) is
    /// complete: the source may release what comes before them
    /// ([`tidewater::Source::finalize`]). An engine calls it once the checkpoint's
    /// epoch is committed, with the positions of that checkpoint, not the ones it has
    /// read on to since.
    pub fn finalize_at(&mut self, positions: &[(u32, Vec<u8>)]) -> Result<(), ExecError> {
        let n = self.partitions as usize;
        for (p, position) in positions {
            self.source.finalize(*p as usize, n, position)?;
        }
        Ok(())
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
    /// are not done; idle partitions do not hold it back unless all are idle, or the
    /// source says an idle partition's watermark holds
    /// ([`tidewater::Source::idle_holds_watermark`]); see
    /// [`crate::watermarks::with_idleness`]. Once every owned partition is done, the
    /// end of time.
    pub fn watermark(&self) -> Timestamp {
        self.watermark_and_idleness().0
    }

    /// Whether the driver is idle: every owned partition that is not done is idle
    /// (there is one), and the source's idle partitions do not hold the watermark. An
    /// engine reading partitions on several workers tells this downstream with the
    /// watermark, and the senders' watermarks combine as the partitions' do here.
    pub fn is_idle(&self) -> bool {
        self.watermark_and_idleness().1
    }

    fn watermark_and_idleness(&self) -> (Timestamp, bool) {
        let holds = self.source.idle_holds_watermark();
        crate::watermarks::with_idleness(
            self.owned
                .values()
                .filter(|s| !s.done)
                .map(|s| (s.watermark, s.idle && !holds)),
        )
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

    /// After a read on `clock` that found nothing (`progress` false): on the simulated
    /// clock a Read's processing time never moves ([`crate::clock`]), so nothing more
    /// will come and the source is drained (its watermark goes to the end of time)
    /// rather than waited for. Returns whether it was.
    pub fn drain_if_idle(&mut self, progress: bool, clock: crate::clock::Clock) -> bool {
        if progress || clock != crate::clock::Clock::Simulated || self.is_done() {
            return false;
        }
        self.finish();
        true
    }

    /// An encoded position as the source shows it (for a job's status).
    pub fn describe_position(&self, position: &[u8]) -> String {
        self.source.describe_position(position)
    }

    /// The owned partitions.
    pub fn partitions(&self) -> &BTreeMap<u32, PartitionState> {
        &self.owned
    }
}

fn replay_error(partition: u32, count: u64, what: &str) -> ExecError {
    ExecError::User {
        phase: tidewater::exec::Phase::Process,
        element: None,
        message: format!(
            "replaying {count} records of partition {partition} gave {what}: the source cannot replay a recorded range"
        ),
    }
}

fn checkpoint(message: String) -> ExecError {
    ExecError::Downstream(Box::new(tidewater::Error::Checkpoint { message }))
}
