//! The source driver: partitions assigned to workers, a snapshot restored over another
//! number of workers, recorded ranges replayed exactly, what is available now, and
//! finalize once a checkpoint is durable.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Mutex;
use tidewater::exec::{downcast_batch, AnyBatch, ErasedSource, SourceInvoker};
use tidewater::{Error, ReadStatus, Source, Timestamp, UserError};
use tidewater_runners_core::snapshot::Scope;
use tidewater_runners_core::source_driver::SourceDriver;

/// Finalized positions, by test and partition.
static FINALIZED: Mutex<BTreeMap<(String, usize), u64>> = Mutex::new(BTreeMap::new());

/// Partition `p` holds the records `p * 1000 + i` for `i < len`; its position is `i`.
#[derive(Serialize, Deserialize, Clone)]
struct Counter {
    test: String,
    len: u64,
}

impl Source for Counter {
    type Output = u64;
    type Position = u64;
    fn is_bounded(&self) -> bool {
        true
    }
    fn partitions(&self, _desired: usize) -> usize {
        5
    }
    fn initial_position(&self, _p: usize, _n: usize) -> u64 {
        0
    }
    fn read(
        &mut self,
        p: usize,
        _n: usize,
        pos: &mut u64,
        max: usize,
        _now: Timestamp,
        out: &mut Vec<(u64, Timestamp)>,
    ) -> Result<ReadStatus, UserError> {
        let end = (*pos + max as u64).min(self.len);
        for i in *pos..end {
            out.push((p as u64 * 1000 + i, Timestamp(i as i64)));
        }
        *pos = end;
        Ok(if end == self.len {
            ReadStatus::Done
        } else {
            ReadStatus::More
        })
    }
    fn watermark(&self, _p: usize, _n: usize, pos: &u64) -> Timestamp {
        Timestamp(*pos as i64)
    }
    fn available(&self, _p: usize, _n: usize, pos: &u64, _now: Timestamp) -> Option<u64> {
        Some(self.len - pos)
    }
    fn finalize(&mut self, p: usize, _n: usize, pos: &u64) -> Result<(), UserError> {
        FINALIZED
            .lock()
            .unwrap()
            .insert((self.test.clone(), p), *pos);
        Ok(())
    }
}

fn source(test: &str) -> Box<dyn ErasedSource> {
    Box::new(SourceInvoker(Counter {
        test: test.into(),
        len: 10,
    }))
}

fn values(batches: Vec<Box<dyn AnyBatch>>) -> Vec<u64> {
    let mut v: Vec<u64> = batches
        .into_iter()
        .flat_map(|b| downcast_batch::<u64>(b).into_iter().map(|wv| wv.value))
        .collect();
    v.sort();
    v
}

fn all_records() -> Vec<u64> {
    (0..5u64)
        .flat_map(|p| (0..10).map(move |i| p * 1000 + i))
        .collect()
}

fn parts(drivers: &[SourceDriver]) -> Vec<(u32, Vec<u8>)> {
    drivers
        .iter()
        .flat_map(|d| d.snapshot())
        .map(|(scope, bytes)| match scope {
            Scope::Partition(p) => (p, bytes),
            other => panic!("a source part of scope {other:?}"),
        })
        .collect()
}

fn restore(test: &str, parts: &[(u32, Vec<u8>)], workers: usize) -> Vec<SourceDriver> {
    let refs: Vec<(u32, &[u8])> = parts.iter().map(|(p, b)| (*p, b.as_slice())).collect();
    (0..workers)
        .map(|w| SourceDriver::restore(source(test), &refs, w, workers).unwrap())
        .collect()
}

#[test]
fn workers_read_every_partition_once_and_rescale_from_a_snapshot() {
    // Three workers read a little, snapshot, and two workers finish.
    let mut drivers: Vec<SourceDriver> = (0..3)
        .map(|w| SourceDriver::start(source("rescale"), 4, w, 3).unwrap())
        .collect();
    let owned: Vec<Vec<u32>> = drivers
        .iter()
        .map(|d| d.partitions().keys().copied().collect())
        .collect();
    assert_eq!(owned, vec![vec![0, 3], vec![1, 4], vec![2]]);
    let mut out = Vec::new();
    for d in &mut drivers {
        d.read(3, Timestamp(0), &mut out).unwrap();
    }
    let snapshot = parts(&drivers);
    let mut drivers = restore("rescale", &snapshot, 2);
    while drivers.iter().any(|d| !d.is_done()) {
        for d in &mut drivers {
            d.read(4, Timestamp(0), &mut out).unwrap();
        }
    }
    assert_eq!(values(out), all_records());
    assert!(drivers.iter().all(|d| d.watermark() == Timestamp::MAX));
}

#[test]
fn a_batch_is_read_to_its_limit_and_its_logged_ranges_read_again_exactly() {
    // Two workers read a batch of at most 15 records (5 partitions, 3 each).
    let mut drivers: Vec<SourceDriver> = (0..2)
        .map(|w| SourceDriver::start(source("batch"), 1, w, 2).unwrap())
        .collect();
    let snapshot = parts(&drivers);
    let mut first = Vec::new();
    let mut logged = Vec::new();
    for d in &mut drivers {
        let b = d
            .read_batch(None, Some(15), 2, Timestamp(0), &mut first)
            .unwrap();
        assert!(b.limited, "every partition has more than its share");
        logged.extend(b.ranges);
    }
    logged.sort_by_key(|r| r.partition);
    let counts: Vec<(u32, u64)> = logged.iter().map(|r| (r.partition, r.count)).collect();
    assert_eq!(counts, vec![(0, 3), (1, 3), (2, 3), (3, 3), (4, 3)]);
    // Restored from before the batch at one worker, the logged ranges read the same
    // records again, whatever the limit is now.
    let mut again = Vec::new();
    let mut d = restore("batch", &snapshot, 1).remove(0);
    let b = d
        .read_batch(Some(&logged), Some(1), 3, Timestamp(0), &mut again)
        .unwrap();
    assert_eq!(b.ranges, logged);
    assert_eq!(values(again), values(first));
    // Without a limit the next batch reads everything.
    let mut rest = Vec::new();
    let b = d
        .read_batch(None, None, 4, Timestamp(0), &mut rest)
        .unwrap();
    assert!(!b.limited);
    assert!(d.is_done());
    assert_eq!(values(rest).len(), 50 - 15);
    // A range the source cannot give again is an error, never fewer records; a range
    // that does not start where the partition stands is refused.
    let mut d = restore("batch", &snapshot, 1).remove(0);
    let mut too_long = logged.clone();
    too_long[0].count = 100;
    let e = d
        .read_batch(Some(&too_long), None, 4, Timestamp(0), &mut Vec::new())
        .expect_err("a lost range");
    assert!(
        format!("{e:?}").contains("cannot replay a recorded range"),
        "{e:?}"
    );
    let mut d = restore("batch", &snapshot, 1).remove(0);
    d.read_batch(None, Some(5), 4, Timestamp(0), &mut Vec::new())
        .unwrap();
    let e = d
        .read_batch(Some(&logged), None, 4, Timestamp(0), &mut Vec::new())
        .expect_err("a range from elsewhere");
    assert!(format!("{e:?}").contains("does not start where"), "{e:?}");
}

#[test]
fn available_now_and_finalize() {
    let mut d = SourceDriver::start(source("finalize"), 1, 0, 1).unwrap();
    assert_eq!(d.available_now(Timestamp(0)).unwrap(), Some(50));
    d.read(3, Timestamp(0), &mut Vec::new()).unwrap();
    assert_eq!(d.available_now(Timestamp(0)).unwrap(), Some(35));
    d.finalize().unwrap();
    let finalized = FINALIZED.lock().unwrap();
    for p in 0..5 {
        assert_eq!(finalized.get(&("finalize".to_string(), p)), Some(&3));
    }
}

#[test]
fn a_snapshot_missing_a_partition_is_refused() {
    let d = SourceDriver::start(source("missing"), 1, 0, 1).unwrap();
    let mut snapshot = parts(&[d]);
    snapshot.remove(2);
    let refs: Vec<(u32, &[u8])> = snapshot.iter().map(|(p, b)| (*p, b.as_slice())).collect();
    let e = SourceDriver::restore(source("missing"), &refs, 0, 1)
        .err()
        .unwrap();
    match e {
        tidewater::exec::ExecError::Downstream(e) => match *e {
            Error::Checkpoint { message } => assert_eq!(message, "source partition 2 is missing"),
            other => panic!("{other}"),
        },
        other => panic!("{other:?}"),
    }
}

/// How many records each partition of a [`Growing`] source holds now, by test.
static GROWN: Mutex<BTreeMap<String, u64>> = Mutex::new(BTreeMap::new());

/// An unbounded source of 2 partitions: partition `p` holds `p * 1000 + i` for `i`
/// below the test's count in [`GROWN`], which grows while the test runs; `available`
/// overstates by `lie` records.
#[derive(Serialize, Deserialize, Clone)]
struct Growing {
    test: String,
    lie: u64,
}

impl Growing {
    fn len(&self) -> u64 {
        GROWN.lock().unwrap()[&self.test]
    }
}

impl Source for Growing {
    type Output = u64;
    type Position = u64;
    fn is_bounded(&self) -> bool {
        false
    }
    fn partitions(&self, _desired: usize) -> usize {
        2
    }
    fn initial_position(&self, _p: usize, _n: usize) -> u64 {
        0
    }
    fn read(
        &mut self,
        p: usize,
        _n: usize,
        pos: &mut u64,
        max: usize,
        _now: Timestamp,
        out: &mut Vec<(u64, Timestamp)>,
    ) -> Result<ReadStatus, UserError> {
        let end = (*pos + max as u64).min(self.len());
        for i in *pos..end {
            out.push((p as u64 * 1000 + i, Timestamp(i as i64)));
        }
        *pos = end;
        Ok(if end == self.len() {
            ReadStatus::Idle
        } else {
            ReadStatus::More
        })
    }
    fn watermark(&self, _p: usize, _n: usize, pos: &u64) -> Timestamp {
        Timestamp(*pos as i64)
    }
    fn available(&self, _p: usize, _n: usize, pos: &u64, _now: Timestamp) -> Option<u64> {
        Some(self.len() + self.lie - pos)
    }
}

fn growing(test: &str, len: u64, lie: u64) -> Box<dyn ErasedSource> {
    GROWN.lock().unwrap().insert(test.to_string(), len);
    Box::new(SourceInvoker(Growing {
        test: test.into(),
        lie,
    }))
}

/// Reads batches of at most `limit` until the ends fixed at the run's start are
/// reached; the records of each batch.
fn run_to_ends(d: &mut SourceDriver, limit: u64, log: &mut Vec<Vec<u64>>) {
    while !d.reached_run_ends() {
        let mut out = Vec::new();
        let b = d
            .read_batch(None, Some(limit), 2, Timestamp(0), &mut out)
            .unwrap();
        log.push(values(out));
        assert_eq!(b.limited, !d.reached_run_ends(), "{:?}", d.partitions());
    }
}

#[test]
fn a_run_reads_exactly_to_the_ends_fixed_at_its_start_and_keeps_them_in_snapshots() {
    let test = "run-ends";
    let mut d = SourceDriver::start(growing(test, 6, 0), 1, 0, 1).unwrap();
    d.fix_run_ends(Timestamp(0)).unwrap();
    let left = |d: &SourceDriver| -> Vec<Option<u64>> {
        d.partitions().values().map(|s| s.run_left).collect()
    };
    assert_eq!(left(&d), vec![Some(6), Some(6)]);
    // Records arrive after the start: this run does not read them, even with room
    // left in its batches.
    GROWN.lock().unwrap().insert(test.into(), 20);
    let mut out = Vec::new();
    let b = d
        .read_batch(None, Some(4), 2, Timestamp(0), &mut out)
        .unwrap();
    assert!(b.limited);
    let ranges: Vec<(u32, u64, Option<u64>)> = b
        .ranges
        .iter()
        .map(|r| (r.partition, r.count, r.left))
        .collect();
    assert_eq!(ranges, vec![(0, 2, Some(6)), (1, 2, Some(6))]);
    assert_eq!(values(out), vec![0, 1, 1000, 1001]);
    // A snapshot within the run keeps the ends: restored, it stops where it would have
    // (a second fix keeps them).
    let snapshot = parts(std::slice::from_ref(&d));
    let refs: Vec<(u32, &[u8])> = snapshot.iter().map(|(p, b)| (*p, b.as_slice())).collect();
    let mut d = SourceDriver::restore(growing(test, 20, 0), &refs, 0, 1).unwrap();
    d.fix_run_ends(Timestamp(0)).unwrap();
    assert_eq!(left(&d), vec![Some(4), Some(4)]);
    let mut batches = Vec::new();
    run_to_ends(&mut d, 4, &mut batches);
    assert_eq!(
        batches,
        vec![vec![2, 3, 1002, 1003], vec![4, 5, 1004, 1005]],
        "two more batches, none after the end"
    );
    // The next run takes new ends: the 14 records per partition that arrived.
    d.end_run();
    d.fix_run_ends(Timestamp(0)).unwrap();
    assert_eq!(left(&d), vec![Some(14), Some(14)]);
    let mut batches = Vec::new();
    run_to_ends(&mut d, 10, &mut batches);
    assert_eq!(batches.len(), 3, "ceil(14 / 5) batches: {batches:?}");
    assert_eq!(batches.concat().len(), 28);
}

#[test]
fn a_replayed_range_restores_the_end_it_was_logged_with() {
    let test = "run-ends-replay";
    let mut d = SourceDriver::start(growing(test, 5, 0), 1, 0, 1).unwrap();
    let before = parts(std::slice::from_ref(&d));
    d.fix_run_ends(Timestamp(0)).unwrap();
    let b = d
        .read_batch(None, Some(4), 2, Timestamp(0), &mut Vec::new())
        .unwrap();
    // A crash before the batch's checkpoint: restarted from before the run with more
    // records, the logged batch replays and the run ends where it began: 5 each.
    let refs: Vec<(u32, &[u8])> = before.iter().map(|(p, b)| (*p, b.as_slice())).collect();
    let mut d = SourceDriver::restore(growing(test, 9, 0), &refs, 0, 1).unwrap();
    d.fix_run_ends(Timestamp(0)).unwrap();
    let mut out = Vec::new();
    let again = d
        .read_batch(Some(&b.ranges), Some(4), 2, Timestamp(0), &mut out)
        .unwrap();
    assert_eq!(again.ranges, b.ranges);
    assert!(again.limited);
    let mut batches = vec![values(out)];
    run_to_ends(&mut d, 4, &mut batches);
    assert_eq!(
        batches.concat().len(),
        10,
        "5 records per partition, as at the run's first start: {batches:?}"
    );
}

#[test]
fn a_source_whose_available_overstates_what_it_reads_fails_the_run_instead_of_hanging() {
    let mut d = SourceDriver::start(growing("run-ends-lie", 3, 2), 1, 0, 1).unwrap();
    d.fix_run_ends(Timestamp(0)).unwrap();
    let mut batches = 0;
    let e = loop {
        match d.read_batch(None, Some(100), 10, Timestamp(0), &mut Vec::new()) {
            Ok(b) => {
                assert!(b.limited);
                batches += 1;
            }
            Err(e) => break e,
        }
    };
    assert_eq!(
        batches,
        tidewater_runners_core::source_driver::STALLED_BATCHES
    );
    assert!(
        format!("{e:?}").contains("source partition 0 had 2 records left before the end this run took at its start, but gave none in 1000 batches in a row"),
        "{e:?}"
    );
}

/// Reads a planned batch to its end at most `chunk` records per call: the records of
/// each call, and the batch's ranges.
fn read_planned(
    d: &mut SourceDriver,
    mut plan: tidewater_runners_core::source_driver::PlannedBatch,
    chunk: usize,
) -> (
    Vec<Vec<u64>>,
    tidewater_runners_core::source_driver::BatchRead,
) {
    let mut reads = Vec::new();
    while !plan.is_read() {
        let mut out = Vec::new();
        d.read_planned(&mut plan, chunk, Timestamp(0), &mut out)
            .unwrap();
        reads.push(values(out));
    }
    (reads, d.settle_planned(plan).unwrap())
}

#[test]
fn a_planned_batch_fixes_its_ranges_first_and_reads_them_chunk_by_chunk() {
    let mut d = SourceDriver::start(source("planned"), 1, 0, 1).unwrap();
    let snapshot = parts(std::slice::from_ref(&d));
    // 5 partitions of 10 with a limit of 15: 3 each, fixed before anything is read.
    let plan = d
        .plan_batch(None, Some(15), Timestamp(0))
        .unwrap()
        .expect("a plan");
    let planned: Vec<(u32, u64)> = plan
        .ranges()
        .iter()
        .map(|r| (r.partition, r.count))
        .collect();
    assert_eq!(planned, vec![(0, 3), (1, 3), (2, 3), (3, 3), (4, 3)]);
    let logged = plan.ranges();
    let (reads, batch) = read_planned(&mut d, plan, 2);
    // At most a chunk per call, one partition at a time.
    let sizes: Vec<usize> = reads.iter().map(Vec::len).collect();
    assert_eq!(sizes, vec![2, 1, 2, 1, 2, 1, 2, 1, 2, 1]);
    assert_eq!(batch.ranges, logged);
    assert!(batch.limited);
    // The same records as the batch read whole from the same place.
    let mut whole = Vec::new();
    let mut other = restore("planned", &snapshot, 1).remove(0);
    let b = other
        .read_batch(None, Some(15), 2, Timestamp(0), &mut whole)
        .unwrap();
    assert_eq!(b, batch);
    assert_eq!(values(whole), reads.concat());
    // The logged ranges, restored from before the batch, plan the same batch again
    // whatever the limit is now; without a limit the rest is one batch of 7 each.
    let mut again = restore("planned", &snapshot, 1).remove(0);
    let plan = again
        .plan_batch(Some(&logged), None, Timestamp(0))
        .unwrap()
        .unwrap();
    assert_eq!(plan.ranges(), logged);
    let (reads_again, b) = read_planned(&mut again, plan, 3);
    assert_eq!(b.ranges, logged);
    assert_eq!(reads_again.concat(), reads.concat());
    let plan = again.plan_batch(None, None, Timestamp(0)).unwrap().unwrap();
    assert!(plan.ranges().iter().all(|r| r.count == 7));
    let (rest, b) = read_planned(&mut again, plan, 4);
    assert!(!b.limited);
    assert!(again.is_done());
    assert_eq!(rest.concat().len(), 35);
}

#[test]
fn a_batch_is_planned_only_where_every_partition_says_what_it_has() {
    // Partitions at their end have nothing available: only a read tells that they are
    // done, so the batch is read whole.
    let test = "plan-unknown";
    let mut d = SourceDriver::start(growing(test, 4, 0), 1, 0, 1).unwrap();
    let plan = d
        .plan_batch(None, None, Timestamp(0))
        .unwrap()
        .expect("4 records each");
    let (_, b) = read_planned(&mut d, plan, 3);
    assert_eq!(b.ranges.iter().map(|r| r.count).sum::<u64>(), 8);
    assert!(d.plan_batch(None, None, Timestamp(0)).unwrap().is_none());
    // A source that says more than it has ends the partition's part early: the batch
    // gives the ranges read, shorter than the plan.
    let test = "plan-lie";
    let mut d = SourceDriver::start(growing(test, 4, 3), 1, 0, 1).unwrap();
    let plan = d.plan_batch(None, None, Timestamp(0)).unwrap().unwrap();
    let planned: Vec<u64> = plan.ranges().iter().map(|r| r.count).collect();
    assert_eq!(planned, vec![7, 7]);
    let (reads, b) = read_planned(&mut d, plan, 3);
    let read: Vec<u64> = b.ranges.iter().map(|r| r.count).collect();
    assert_eq!(read, vec![4, 4]);
    assert_eq!(reads.concat(), vec![0, 1, 2, 3, 1000, 1001, 1002, 1003]);
    // Replayed, a logged range must be read whole: fewer is an error.
    let mut d = SourceDriver::start(growing("plan-replay", 2, 0), 1, 0, 1).unwrap();
    let mut logged = b.ranges.clone();
    logged[1].count = 2;
    let mut plan = d
        .plan_batch(Some(&logged), None, Timestamp(0))
        .unwrap()
        .unwrap();
    let mut e = None;
    while !plan.is_read() {
        if let Err(err) = d.read_planned(&mut plan, 3, Timestamp(0), &mut Vec::new()) {
            e = Some(err);
            break;
        }
    }
    let e = e.expect("a lost range");
    assert!(
        format!("{e:?}").contains("replaying 4 records of partition 0 gave fewer"),
        "{e:?}"
    );
}

/// Two partitions whose schedules start `lag_ms` apart, as a rate-limited generator's
/// do once one worker reads partitions that different workers started (after a
/// rescale): partition `p`'s record `i` has event time `2 i + p`, and its records are
/// due from processing time `p * lag_ms` on; reading one earlier answers Idle.
#[derive(Serialize, Deserialize, Clone)]
struct Scheduled {
    lag_ms: u64,
    len: u64,
    holds: bool,
}

impl Source for Scheduled {
    type Output = u64;
    type Position = u64;
    fn is_bounded(&self) -> bool {
        true
    }
    fn partitions(&self, _desired: usize) -> usize {
        2
    }
    fn initial_position(&self, _p: usize, _n: usize) -> u64 {
        0
    }
    fn idle_holds_watermark(&self) -> bool {
        self.holds
    }
    fn read(
        &mut self,
        p: usize,
        _n: usize,
        pos: &mut u64,
        max: usize,
        now: Timestamp,
        out: &mut Vec<(u64, Timestamp)>,
    ) -> Result<ReadStatus, UserError> {
        for _ in 0..max {
            if *pos == self.len {
                return Ok(ReadStatus::Done);
            }
            if (now.millis() as u64) < p as u64 * self.lag_ms {
                return Ok(ReadStatus::Idle);
            }
            out.push((*pos, Timestamp((2 * *pos + p as u64) as i64)));
            *pos += 1;
        }
        Ok(ReadStatus::More)
    }
    fn watermark(&self, p: usize, _n: usize, pos: &u64) -> Timestamp {
        if *pos == self.len {
            return Timestamp::MAX;
        }
        Timestamp((2 * *pos + p as u64) as i64)
    }
}

/// Reads both partitions on one worker a millisecond at a time (3 records a read: the
/// partition that started first has a backlog while the other waits) and counts the
/// records read behind the watermark the driver had before the read.
fn records_behind_the_watermark(holds: bool) -> usize {
    let source = Scheduled {
        lag_ms: 50,
        len: 200,
        holds,
    };
    let mut d = SourceDriver::start(Box::new(SourceInvoker(source)), 2, 0, 1).unwrap();
    let mut behind = 0;
    for now in 0..1_000 {
        let watermark = d.watermark();
        let mut out = Vec::new();
        d.read(3, Timestamp(now), &mut out).unwrap();
        behind += out
            .into_iter()
            .flat_map(downcast_batch::<u64>)
            .filter(|wv| wv.timestamp < watermark)
            .count();
    }
    assert!(d.is_done());
    behind
}

/// A partition waiting for its schedule holds the watermark when its source says so
/// (a rate-limited generator): no record comes behind it. Under Flink's idleness (the
/// default) the partition that is ahead moves the watermark while the other waits, and
/// the waiting one's records then come behind it: late.
#[test]
fn an_idle_partition_holds_the_watermark_when_its_source_says_it_waits() {
    assert_eq!(records_behind_the_watermark(true), 0);
    assert!(records_behind_the_watermark(false) > 0);
}
