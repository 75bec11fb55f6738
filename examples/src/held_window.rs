//! A window held back, to see "why hasn't my window fired?" answered (the status page's
//! panel, `/api/job`'s `why`, `tidewater explain`): numbers from a generator with event
//! times, and a second source, `Quiet`, that reads nothing and whose watermark stays at
//! the beginning of its time (an idle partition that still holds the watermark, as a
//! Kafka partition without an idleness timeout does) are counted together per 1 s event-
//! time window. No window fires while `Quiet` holds the watermark: the answer names it.
//! Stopped (Ctrl-C, `--max-duration`), the job drains and every window fires.

use serde::{Deserialize, Serialize};
use tidewater::{
    FlattenExt, PCollection, Pipeline, Read, ReadStatus, Source, Timestamp, UserError, Window,
    WindowFn,
};
use tidewater_transforms::Count;

/// A source of one partition that never has anything to read, and whose watermark
/// holds while it is idle.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct QuietSource;

impl Source for QuietSource {
    type Output = u64;
    type Position = u64;
    fn is_bounded(&self) -> bool {
        false
    }
    fn partitions(&self, _desired: usize) -> usize {
        1
    }
    fn initial_position(&self, _: usize, _: usize) -> u64 {
        0
    }
    fn idle_holds_watermark(&self) -> bool {
        true
    }
    fn read(
        &mut self,
        _partition: usize,
        _partitions: usize,
        _pos: &mut u64,
        _max: usize,
        _now: Timestamp,
        _out: &mut Vec<(u64, Timestamp)>,
    ) -> Result<ReadStatus, UserError> {
        Ok(ReadStatus::Idle)
    }
    fn watermark(&self, _: usize, _: usize, _: &u64) -> Timestamp {
        Timestamp(0)
    }
}

fn format(kv: (String, u64)) -> String {
    format!("{} {}", kv.0, kv.1)
}

fn all(_: u64) -> String {
    "numbers".to_string()
}

/// The pipeline: `records` numbers at `rate` per second, 10 ms of event time apart,
/// and the quiet source, counted per 1 s window.
pub fn build(p: &Pipeline, records: u64, rate: f64) -> PCollection<String> {
    let numbers = p.apply(
        "Numbers",
        Read::from(
            tidewater_transforms::GenerateSequence::new(0, Some(records))
                .with_event_time(0, 10)
                .with_rate(rate),
        ),
    );
    let quiet = p.apply("Quiet", Read::from(QuietSource));
    vec![numbers, quiet]
        .apply_flatten("Both")
        .apply("PerSecond", Window::into(WindowFn::fixed(1_000)))
        .map("All", all)
        .apply("CountPerSecond", Count::per_element())
        .map("Format", format)
}
