//! Event times given by a source as it reads (`Read::with_timestamps`), and watermarks
//! estimated from them: windows fire as the watermark passes them, and a record behind
//! its partition's watermark is dropped as late where its window has expired.

use serde::{Deserialize, Serialize};
use tidewater::{
    Combine, CombineFn, Pipeline, PipelineOptions, Read, ReadStatus, Source, Timestamp, UserError,
    WatermarkEstimator, Window, WindowFn, WindowedValue,
};

/// The given event times (ms), one record per read, in this order; records carry no
/// time of their own.
#[derive(Serialize, Deserialize)]
struct Script {
    times: Vec<i64>,
}

impl Source for Script {
    type Output = i64;
    type Position = usize;
    fn is_bounded(&self) -> bool {
        true
    }
    fn partitions(&self, _desired: usize) -> usize {
        1
    }
    fn initial_position(&self, _: usize, _: usize) -> usize {
        0
    }
    fn read(
        &mut self,
        _: usize,
        _: usize,
        next: &mut usize,
        _max: usize,
        _: Timestamp,
        out: &mut Vec<(i64, Timestamp)>,
    ) -> Result<ReadStatus, UserError> {
        match self.times.get(*next) {
            Some(&t) => {
                out.push((t, Timestamp::MIN));
                *next += 1;
                Ok(ReadStatus::More)
            }
            None => Ok(ReadStatus::Done),
        }
    }
    fn watermark(&self, _: usize, _: usize, _: &usize) -> Timestamp {
        Timestamp::MIN
    }
}

fn at(ms: &i64) -> Timestamp {
    Timestamp(*ms)
}

#[derive(Serialize, Deserialize)]
struct CountAll;

impl CombineFn for CountAll {
    type In = i64;
    type Acc = u64;
    type Out = u64;
    fn create_accumulator(&self) -> u64 {
        0
    }
    fn add_input(&self, a: &mut u64, _: i64) {
        *a += 1;
    }
    fn merge_accumulators(&self, a: &mut u64, b: u64) {
        *a += b;
    }
    fn extract_output(&self, a: u64) -> u64 {
        a
    }
}

/// Count per 1 s window of `times` read with `watermarks`: (window start, count,
/// output timestamp) sorted, and the records dropped as late; the same with validation
/// on, off (partial combines held until the watermark passes their window) and
/// restoring from a snapshot at every step.
fn counts(times: &[i64], watermarks: WatermarkEstimator) -> (Vec<(i64, u64, Timestamp)>, i64) {
    let runs: Vec<_> = [
        PipelineOptions::default(),
        PipelineOptions {
            no_validate: true,
            ..Default::default()
        },
        PipelineOptions {
            runner_options: vec![("checkpoint_every".into(), "1".into())],
            ..Default::default()
        },
    ]
    .into_iter()
    .map(|options| counts_with(options, times, watermarks))
    .collect();
    assert_eq!(runs[0], runs[1], "validation off");
    assert_eq!(runs[0], runs[2], "checkpoint_every=1");
    runs[0].clone()
}

fn counts_with(
    options: PipelineOptions,
    times: &[i64],
    watermarks: WatermarkEstimator,
) -> (Vec<(i64, u64, Timestamp)>, i64) {
    tidewater_runner_direct::register();
    let p = Pipeline::new(options);
    p.apply(
        "Read",
        Read::from(Script {
            times: times.to_vec(),
        })
        .with_timestamps(at, watermarks),
    )
    .apply("Fixed1s", Window::into(WindowFn::fixed(1000)))
    .apply("Count", Combine::globally(CountAll))
    .capture("counts");
    let r = p.run().unwrap();
    let mut out: Vec<_> = r
        .captured::<u64>("counts")
        .unwrap()
        .into_iter()
        .map(|wv: WindowedValue<u64>| {
            let start = wv.windows.iter().next().unwrap().start().0;
            (start, wv.value, wv.timestamp)
        })
        .collect();
    out.sort();
    let late = r.metrics.counter_total("dropped_due_to_lateness");
    (out, late)
}

#[test]
fn in_order_records_are_all_on_time_and_stamped_by_the_function() {
    let (out, late) = counts(
        &[0, 10, 999, 1000, 2500, 2600],
        WatermarkEstimator::MonotonicallyIncreasing,
    );
    assert_eq!(
        out,
        vec![
            (0, 3, Timestamp(999)),
            (1000, 1, Timestamp(1999)),
            (2000, 2, Timestamp(2999)),
        ]
    );
    assert_eq!(late, 0);
}

#[test]
fn a_monotonic_watermark_drops_what_comes_behind_an_expired_window() {
    // After 5000 the watermark is 5000: 1000's window [1000, 2000) and 4500's
    // [4000, 5000) have expired.
    let (out, late) = counts(
        &[0, 5000, 1000, 4500, 6000],
        WatermarkEstimator::MonotonicallyIncreasing,
    );
    assert_eq!(
        out,
        vec![
            (0, 1, Timestamp(999)),
            (5000, 1, Timestamp(5999)),
            (6000, 1, Timestamp(6999))
        ]
    );
    assert_eq!(late, 2);
}

#[test]
fn a_bounded_out_of_orderness_keeps_records_within_the_bound() {
    // After 5000 the watermark is 4000: [4000, 5000) is still open for 4500.
    let (out, late) = counts(
        &[0, 5000, 1000, 4500, 6000],
        WatermarkEstimator::bounded_out_of_orderness(tidewater::Duration::from_secs(1)),
    );
    assert_eq!(
        out,
        vec![
            (0, 1, Timestamp(999)),
            (4000, 1, Timestamp(4999)),
            (5000, 1, Timestamp(5999)),
            (6000, 1, Timestamp(6999))
        ]
    );
    assert_eq!(late, 1);
}

#[test]
fn a_closure_stamps_records_and_one_that_captures_is_refused() {
    tidewater_runner_direct::register();
    let p = Pipeline::new(PipelineOptions::default());
    p.apply(
        "Read",
        Read::from(Script { times: vec![1, 2] }).with_timestamps(
            |ms: &i64| Timestamp(*ms * 10),
            WatermarkEstimator::MonotonicallyIncreasing,
        ),
    )
    .capture("xs");
    let mut got: Vec<Timestamp> = p
        .run()
        .unwrap()
        .captured::<i64>("xs")
        .unwrap()
        .into_iter()
        .map(|wv| wv.timestamp)
        .collect();
    got.sort();
    assert_eq!(got, vec![Timestamp(10), Timestamp(20)]);

    let p = Pipeline::new(PipelineOptions::default());
    let scale = 10;
    p.apply(
        "Read",
        Read::from(Script { times: vec![1] }).with_timestamps(
            move |ms: &i64| Timestamp(*ms * scale),
            WatermarkEstimator::MonotonicallyIncreasing,
        ),
    )
    .capture("xs");
    let err = p.run().unwrap_err().to_string();
    assert!(
        err.contains("Read::with_timestamps() was given a closure that captures values"),
        "{err}"
    );
}
