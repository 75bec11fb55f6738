//! Watermark alignment on the micro-batch runner (`max_watermark_drift_ms`): a source
//! instance whose watermark runs more than the drift ahead of its source's slowest reads
//! one record a partition per batch until the others catch up. Here a source of two
//! partitions, one on each worker, over the same event times: partition 0 has one record
//! available per batch, partition 1 twenty.

use serde::{Deserialize, Serialize};
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::SeqCst;
use tidewater::{EngineOptions, Pipeline, PipelineOptions, Read, Timestamp, UserError, Window};
use tidewater::{ReadStatus, WindowFn};
use tidewater_transforms::Count;

/// Records per partition, and their event times' step.
const RECORDS: u64 = 200;
const STEP_MS: i64 = 100;
/// What partition 1 has available per batch (partition 0: one record).
const FAST_SHARE: u64 = 20;

/// The furthest record each partition has read, and the furthest partition 1 read
/// ahead of partition 0 in event time.
static READ: [AtomicU64; 2] = [AtomicU64::new(0), AtomicU64::new(0)];
static MOST_AHEAD_MS: AtomicU64 = AtomicU64::new(0);

/// Record `k` of partition `p` is `(p, k)` at `k × 100 ms`.
#[derive(Serialize, Deserialize)]
struct Trickle;

impl tidewater::Source for Trickle {
    type Output = (u64, u64);
    type Position = u64;
    fn is_bounded(&self) -> bool {
        true
    }
    fn partitions(&self, _desired: usize) -> usize {
        2
    }
    fn initial_position(&self, _: usize, _: usize) -> u64 {
        0
    }
    fn read(
        &mut self,
        partition: usize,
        _: usize,
        next: &mut u64,
        max: usize,
        _: Timestamp,
        out: &mut Vec<((u64, u64), Timestamp)>,
    ) -> Result<ReadStatus, UserError> {
        let end = (*next + max as u64).min(RECORDS);
        out.extend((*next..end).map(|k| ((partition as u64, k), Timestamp(k as i64 * STEP_MS))));
        *next = end;
        if end > 0 {
            READ[partition].fetch_max(end - 1, SeqCst);
            if partition == 1 {
                let behind = READ[0].load(SeqCst);
                let ahead = (end - 1).saturating_sub(behind) * STEP_MS as u64;
                MOST_AHEAD_MS.fetch_max(ahead, SeqCst);
            }
        }
        Ok(if end == RECORDS {
            ReadStatus::Done
        } else {
            ReadStatus::More
        })
    }
    fn watermark(&self, _: usize, _: usize, next: &u64) -> Timestamp {
        if *next >= RECORDS {
            Timestamp::MAX
        } else {
            Timestamp(*next as i64 * STEP_MS)
        }
    }
    fn available(&self, partition: usize, _: usize, next: &u64, _: Timestamp) -> Option<u64> {
        let share = if partition == 0 { 1 } else { FAST_SHARE };
        Some(share.min(RECORDS - next))
    }
}

tidewater::register!(Source Trickle);

fn partition_of(pk: (u64, u64)) -> u64 {
    pk.0
}

fn to_string(kv: (u64, u64)) -> String {
    format!("{} {}", kv.0, kv.1)
}

/// One run into 1 s windows counted per partition at 2 workers, batches every 2 ms,
/// with `drift_ms` of alignment (none: off); the counts and how far partition 1 read
/// ahead of partition 0.
fn run(drift_ms: Option<u64>) -> (Vec<String>, u64) {
    for r in &READ {
        r.store(0, SeqCst);
    }
    MOST_AHEAD_MS.store(0, SeqCst);
    tidewater_runner_microbatch::register();
    let mut options = PipelineOptions {
        engine: EngineOptions {
            workers: 2,
            ..Default::default()
        },
        ..PipelineOptions::for_runner("microbatch")
    };
    options.runner_flags.set("batch-interval", "2ms");
    options.runner_options = vec![(
        "max_watermark_drift_ms".into(),
        drift_ms.unwrap_or(0).to_string(),
    )];
    let p = Pipeline::new(options);
    p.apply("Trickle", Read::from(Trickle))
        .map("Partition", partition_of)
        .apply("Seconds", Window::into(WindowFn::fixed(1_000)))
        .apply("Count", Count::per_element())
        .map("Format", to_string)
        .capture("counts");
    let r = p.run().unwrap();
    let mut counts = r.captured_values::<String>("counts").unwrap();
    counts.sort();
    (counts, MOST_AHEAD_MS.load(SeqCst))
}

/// With alignment the fast partition reads at most the drift plus one batch's share
/// (20 records, 2 s) and a record ahead of the slow one; without, it reads twenty
/// records a batch to the slow one's one and ends far ahead. The counts are the same
/// either way: 10 per partition in each of the 20 windows.
#[test]
fn watermark_alignment_keeps_a_fast_partition_within_the_drift_of_the_slow_one() {
    let mut expected: Vec<String> = ["0 10", "1 10"]
        .iter()
        .flat_map(|c| std::iter::repeat_n(c.to_string(), 20))
        .collect();
    expected.sort();
    let drift = 1_000;
    let (counts, ahead) = run(Some(drift));
    eprintln!("with a drift of {drift} ms partition 1 read at most {ahead} ms ahead");
    assert_eq!(counts, expected);
    let bound = drift + (FAST_SHARE + 1) * STEP_MS as u64;
    assert!(
        ahead <= bound,
        "partition 1 read {ahead} ms ahead, more than {bound}"
    );

    let (counts, ahead) = run(None);
    eprintln!("without alignment partition 1 read up to {ahead} ms ahead");
    assert_eq!(counts, expected);
    assert!(
        ahead > 3 * bound,
        "partition 1 read only {ahead} ms ahead without alignment"
    );
}
