//! The engine runners finalize a source's positions once the checkpoint that recorded
//! them is committed (`Source::finalize`: a Kafka source may commit its offsets, a
//! file source delete what it consumed), with that checkpoint's positions, not the
//! ones the source has read on to since; the job's last checkpoint finalizes the end.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Mutex;
use tidewater::{EngineOptions, PipelineOptions, Read, ReadStatus, Source, Timestamp, UserError};

/// Per test: every finalize call, in order, as (partition, position).
static FINALIZED: Mutex<BTreeMap<String, Vec<(usize, u64)>>> = Mutex::new(BTreeMap::new());
/// Per test: the positions each partition's reads ended at, in order.
static READ_TO: Mutex<BTreeMap<String, Vec<(usize, u64)>>> = Mutex::new(BTreeMap::new());

const PARTITIONS: usize = 4;
const LEN: u64 = 3_000;

/// Partition `p` holds `LEN` numbers; a read takes at most 100 of them and 1 ms.
#[derive(Serialize, Deserialize, Clone)]
struct Paced {
    test: String,
}

impl Source for Paced {
    type Output = u64;
    type Position = u64;
    fn is_bounded(&self) -> bool {
        true
    }
    fn partitions(&self, _desired: usize) -> usize {
        PARTITIONS
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
        std::thread::sleep(std::time::Duration::from_millis(1));
        let end = (*pos + (max as u64).min(100)).min(LEN);
        for i in *pos..end {
            out.push((p as u64 * LEN + i, Timestamp(i as i64)));
        }
        *pos = end;
        READ_TO
            .lock()
            .unwrap()
            .entry(self.test.clone())
            .or_default()
            .push((p, end));
        Ok(if end == LEN {
            ReadStatus::Done
        } else {
            ReadStatus::More
        })
    }
    fn watermark(&self, _p: usize, _n: usize, pos: &u64) -> Timestamp {
        Timestamp(*pos as i64)
    }
    fn finalize(&mut self, p: usize, _n: usize, pos: &u64) -> Result<(), UserError> {
        FINALIZED
            .lock()
            .unwrap()
            .entry(self.test.clone())
            .or_default()
            .push((p, *pos));
        Ok(())
    }
}

fn run(runner: &str) {
    tidewater_runner_native::register();
    tidewater_runner_microbatch::register();
    let dir = tempfile::tempdir().unwrap();
    let every = std::time::Duration::from_millis(20);
    let mut options = PipelineOptions {
        engine: EngineOptions {
            workers: 2,
            checkpoint_dir: Some(dir.path().to_path_buf()),
            checkpoint_interval: (runner == "native").then_some(every),
            ..Default::default()
        },
        ..PipelineOptions::for_runner(runner)
    };
    if runner == "microbatch" {
        options.runner_flags.set("batch-interval", "20ms");
        // A batch would otherwise take all a partition has.
        options.runner_flags.set("max-records-per-batch", "1000");
    }
    let test = runner.to_string();
    let p = tidewater::Pipeline::new(options);
    p.apply("Numbers", Read::from(Paced { test: test.clone() }))
        .map("Ten", |n: u64| n % 10)
        .capture("tens");
    let r = p.run().unwrap_or_else(|e| panic!("{runner}: {e}"));
    assert_eq!(
        r.captured_values::<u64>("tens").unwrap().len() as u64,
        LEN * PARTITIONS as u64
    );
    let finalized = FINALIZED.lock().unwrap().remove(&test).unwrap_or_default();
    let read_to = READ_TO.lock().unwrap().remove(&test).unwrap_or_default();
    let mut last = BTreeMap::new();
    for &(p, pos) in &finalized {
        let before = last.insert(p, pos).unwrap_or(0);
        assert!(
            pos >= before,
            "{runner}: partition {p} finalized at {pos} after {before}"
        );
        // A position a read ended at: one a checkpoint can hold.
        assert!(
            pos == 0 || read_to.contains(&(p, pos)),
            "{runner}: partition {p} finalized at {pos}, where no read ended"
        );
    }
    assert_eq!(
        last,
        (0..PARTITIONS)
            .map(|p| (p, LEN))
            .collect::<BTreeMap<_, _>>(),
        "{runner}: the last checkpoint finalizes every partition's end"
    );
    // Checkpoints came and were finalized while the source read on: some partition
    // was finalized before its end.
    assert!(
        finalized.iter().any(|&(_, pos)| pos > 0 && pos < LEN),
        "{runner}: nothing finalized mid-run: {finalized:?}"
    );
}

#[test]
fn the_native_runner_finalizes_a_sources_checkpointed_positions() {
    run("native");
}

#[test]
fn the_micro_batch_runner_finalizes_a_sources_checkpointed_positions() {
    run("microbatch");
}
