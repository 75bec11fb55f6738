//! Idle source partitions on several workers: the watermark of the partitions that are
//! active moves windows on every runner, as one source driver reading all of them does.

use serde::{Deserialize, Serialize};
use tidewater::{
    EngineOptions, Pipeline, PipelineOptions, Read, Timestamp, UserError, Window, WindowFn,
};
use tidewater_transforms::Count;

/// Two partitions, one per worker at W = 2. Partition 0 gives three records in
/// [0, 1 s), then one at 5 s, and its watermark follows (5 s once they are out); it
/// stays active (nothing to read) until 2.5 s after its first read. Partition 1 is idle
/// for its first 1.5 s, then gives a record at 0.4 s: late, since the active partition's
/// watermark passed [0, 1 s) long before, and an idle partition holds nobody back.
#[derive(Serialize, Deserialize)]
struct QuietPartition;

#[derive(Clone, Debug, Serialize, Deserialize)]
struct QuietPosition {
    next: usize,
    started_ms: Option<i64>,
}

const ACTIVE_TIMES: [i64; 4] = [100, 200, 300, 5_000];

impl tidewater::Source for QuietPartition {
    type Output = i64;
    type Position = QuietPosition;
    fn is_bounded(&self) -> bool {
        true
    }
    fn partitions(&self, _desired: usize) -> usize {
        2
    }
    fn initial_position(&self, _: usize, _: usize) -> QuietPosition {
        QuietPosition {
            next: 0,
            started_ms: None,
        }
    }
    fn read(
        &mut self,
        partition: usize,
        _: usize,
        pos: &mut QuietPosition,
        _max: usize,
        now: Timestamp,
        out: &mut Vec<(i64, Timestamp)>,
    ) -> Result<tidewater::ReadStatus, UserError> {
        use tidewater::ReadStatus;
        let since = now.millis() - *pos.started_ms.get_or_insert(now.millis());
        if partition == 0 {
            if let Some(&t) = ACTIVE_TIMES.get(pos.next) {
                out.push((t, Timestamp(t)));
                pos.next += 1;
                return Ok(ReadStatus::More);
            }
            return Ok(if since < 2_500 {
                ReadStatus::More
            } else {
                ReadStatus::Done
            });
        }
        if since < 1_500 {
            return Ok(ReadStatus::Idle);
        }
        if pos.next == 0 {
            out.push((400, Timestamp(400)));
            pos.next = 1;
            return Ok(ReadStatus::More);
        }
        Ok(ReadStatus::Done)
    }
    fn watermark(&self, partition: usize, _: usize, pos: &QuietPosition) -> Timestamp {
        match partition {
            0 => ACTIVE_TIMES
                .get(pos.next)
                .map_or(Timestamp(5_000), |&t| Timestamp(t)),
            _ if pos.next == 0 => Timestamp(400),
            _ => Timestamp::MAX,
        }
    }
}

fn all(_: i64) -> String {
    "all".to_string()
}

fn pair_to_string(kv: (String, u64)) -> String {
    format!("{} {}", kv.0, kv.1)
}

fn count_per_second(options: PipelineOptions) -> tidewater::PipelineResult {
    let p = Pipeline::new(options);
    p.apply("Read", Read::from(QuietPartition))
        .apply("Fixed1s", Window::into(WindowFn::fixed(1_000)))
        .map("All", all)
        .apply("Count", Count::per_element())
        .map("Format", pair_to_string)
        .capture("counts");
    p.run().unwrap()
}

/// Flink's idleness across workers: a worker whose only partition is idle holds no
/// window back while another worker's partition is active, as one source driver
/// reading both partitions would not (the direct runner): every runner drops the idle
/// partition's late record.
#[test]
fn a_worker_reading_only_an_idle_partition_holds_no_window_back() {
    tidewater_examples::register_runners();
    for runner in ["direct", "native", "microbatch"] {
        let mut options = PipelineOptions::for_runner(runner);
        if runner != "direct" {
            options.engine = EngineOptions {
                workers: 2,
                ..Default::default()
            };
        }
        let r = count_per_second(options);
        let mut counts = r.captured_values::<String>("counts").unwrap();
        counts.sort();
        assert_eq!(counts, vec!["all 1", "all 3"], "on {runner}");
        assert_eq!(
            r.metrics.counter_total("dropped_due_to_lateness"),
            1,
            "on {runner}"
        );
    }
}
