//! A window held back, to see "why hasn't my window fired?" answered (the status page's
//! panel, `/api/job`'s `why`, `tidewater explain`): numbers from a generator with event
//! times, and a second source, `Quiet`, that reads nothing and whose watermark stays at
//! the beginning of its time (an idle partition that still holds the watermark, as a
//! Kafka partition without an idleness timeout does) are counted together per 1 s event-
//! time window. No window fires while `Quiet` holds the watermark: the answer names it.
//! Stopped (Ctrl-C, `--max-duration`), the job drains and every window fires.
//!
//! [`build_timers`] holds the same counts in a stateful DoFn's event-time timers, one
//! per second of event time, instead of in windows: the answer then names the
//! earliest timer.

use serde::{Deserialize, Serialize};
use tidewater::{
    FlattenExt, PCollection, Pipeline, Read, ReadStatus, Source, StateContext, StatefulDoFn,
    StatefulParDo, Timestamp, UserError, Window, WindowFn,
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

/// Counts the numbers of each second of event time, flushed by an event-time timer
/// (`flush-<second>`) at the second's last millisecond.
#[derive(Serialize, Deserialize)]
pub struct FlushPerSecond;

impl StatefulDoFn for FlushPerSecond {
    type Key = String;
    type Value = u64;
    type Out = String;
    fn process(
        &mut self,
        _key: &String,
        _n: u64,
        ctx: &mut StateContext<'_, String>,
    ) -> Result<(), UserError> {
        let second = ctx.timestamp().millis().div_euclid(1_000);
        let count: u64 = ctx.map_get("counts", &second)?.unwrap_or(0);
        ctx.map_put("counts", &second, &(count + 1))?;
        ctx.set_event_timer(
            &format!("flush-{second}"),
            Timestamp::from_millis(second * 1_000 + 999),
        )
    }
    fn on_timer(
        &mut self,
        key: &String,
        name: &str,
        ctx: &mut StateContext<'_, String>,
    ) -> Result<(), UserError> {
        let second: i64 = name
            .strip_prefix("flush-")
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| UserError::from(format!("no such timer: {name}")))?;
        if let Some(count) = ctx.map_get::<i64, u64>("counts", &second)? {
            ctx.map_remove("counts", &second)?;
            ctx.output(format!("{key} {count}"));
        }
        Ok(())
    }
}

/// The pipeline: `records` numbers at `rate` per second, 10 ms of event time apart,
/// and the quiet source, counted per 1 s window.
pub fn build(p: &Pipeline, records: u64, rate: f64) -> PCollection<String> {
    both(p, records, rate)
        .apply("PerSecond", Window::into(WindowFn::fixed(1_000)))
        .map("All", all)
        .apply("CountPerSecond", Count::per_element())
        .map("Format", format)
}

/// The same counts, held in [`FlushPerSecond`]'s timers.
pub fn build_timers(p: &Pipeline, records: u64, rate: f64) -> PCollection<String> {
    both(p, records, rate)
        .map("All", |n: u64| (all(n), n))
        .apply("FlushPerSecond", StatefulParDo::of(FlushPerSecond))
}

/// The numbers and the quiet source, flattened.
fn both(p: &Pipeline, records: u64, rate: f64) -> PCollection<u64> {
    let numbers = p.apply(
        "Numbers",
        Read::from(
            tidewater_transforms::GenerateSequence::new(0, Some(records))
                .with_event_time(0, 10)
                .with_rate(rate),
        ),
    );
    let quiet = p.apply("Quiet", Read::from(QuietSource));
    vec![numbers, quiet].apply_flatten("Both")
}

// Linked: `run_plan` runs a saved plan naming it without constructing the pipeline.
tidewater::register!(StatefulDoFn FlushPerSecond);
