//! Stateful DoFns on the direct runner: state per key and window, event- and
//! processing-time timers, late data and cleanup at window expiry.

use serde::{Deserialize, Serialize};
use tidewater::{
    BoundedWindow, Error, Pipeline, PipelineOptions, StateContext, StatefulDoFn, StatefulParDo,
    TestStream, TimeDomain, Timestamp, UserError, Window, WindowFn,
};

fn options(seed: u64) -> PipelineOptions {
    tidewater_runner_direct::register();
    PipelineOptions {
        seed: Some(seed),
        ..Default::default()
    }
}

fn iw(start: i64, end: i64) -> BoundedWindow {
    BoundedWindow::Interval {
        start: Timestamp(start),
        end: Timestamp(end),
    }
}

/// (word, count so far) per occurrence.
#[derive(Serialize, Deserialize)]
struct RunningCount;

impl StatefulDoFn for RunningCount {
    type Key = String;
    type Value = u64;
    type Out = (String, u64);
    fn process(
        &mut self,
        word: &String,
        n: u64,
        ctx: &mut StateContext<'_, (String, u64)>,
    ) -> Result<(), UserError> {
        let count = ctx.read_value::<u64>("count")?.unwrap_or(0) + n;
        ctx.write_value("count", &count)?;
        ctx.output((word.clone(), count));
        Ok(())
    }
}

fn kv(w: &str) -> (String, u64) {
    (w.to_string(), 1)
}

#[test]
fn value_state_keeps_a_running_count_per_key() {
    for seed in 1..4 {
        let p = Pipeline::new(options(seed));
        p.create(
            "Words",
            ["a", "b", "a", "a", "c", "b"]
                .iter()
                .map(|w| kv(w))
                .collect(),
        )
        .apply("Running", StatefulParDo::of(RunningCount))
        .capture("running");
        let got = p
            .run()
            .unwrap()
            .captured_values::<(String, u64)>("running")
            .unwrap();
        let mut got: Vec<(String, u64)> = got;
        got.sort();
        assert_eq!(
            got,
            vec![
                kv("a"),
                ("a".into(), 2),
                ("a".into(), 3),
                kv("b"),
                ("b".into(), 2),
                kv("c")
            ],
            "seed {seed}"
        );
    }
}

/// Buffers values in a bag and emits (key, sum, count, distinct) when the window ends.
#[derive(Serialize, Deserialize)]
struct SumAtEndOfWindow;

impl StatefulDoFn for SumAtEndOfWindow {
    type Key = String;
    type Value = i64;
    type Out = (String, i64, usize, Vec<i64>);
    fn process(
        &mut self,
        _k: &String,
        v: i64,
        ctx: &mut StateContext<'_, Self::Out>,
    ) -> Result<(), UserError> {
        ctx.bag_add("values", &v)?;
        ctx.set_add("distinct", &v)?;
        let end = ctx.window().max_timestamp();
        ctx.set_event_timer("flush", end)
    }
    fn on_timer(
        &mut self,
        k: &String,
        name: &str,
        ctx: &mut StateContext<'_, Self::Out>,
    ) -> Result<(), UserError> {
        assert_eq!(name, "flush");
        let values: Vec<i64> = ctx.bag_read("values")?;
        let distinct: Vec<i64> = ctx.set_read("distinct")?;
        ctx.output((k.clone(), values.iter().sum(), values.len(), distinct));
        ctx.clear("values");
        Ok(())
    }
}

fn stamped(k: &str, v: i64) -> ((String, i64), Timestamp) {
    ((k.to_string(), v), Timestamp(v))
}

#[test]
fn event_time_timers_fire_at_the_end_of_each_window_with_its_timestamp() {
    let p = Pipeline::new(options(1));
    let events = TestStream::new()
        .add_elements(vec![
            stamped("a", 1),
            stamped("a", 3),
            stamped("b", 4),
            stamped("a", 12),
        ])
        .advance_watermark_to(Timestamp(10))
        .add_elements(vec![stamped("a", 15), stamped("a", 3)])
        .advance_watermark_to_infinity();
    p.apply("Events", events)
        .apply("Fixed10", Window::into(WindowFn::fixed(10)))
        .apply("Sum", StatefulParDo::of(SumAtEndOfWindow))
        .capture("sums");
    let r = p.run().unwrap();
    let mut got: Vec<_> = r
        .captured::<(String, i64, usize, Vec<i64>)>("sums")
        .unwrap()
        .into_iter()
        .map(|wv| {
            (
                wv.value,
                wv.windows.iter().next().unwrap().clone(),
                wv.timestamp,
            )
        })
        .collect();
    got.sort();
    assert_eq!(
        got,
        vec![
            (("a".into(), 4, 2, vec![1, 3]), iw(0, 10), Timestamp(9)),
            (("a".into(), 27, 2, vec![12, 15]), iw(10, 20), Timestamp(19)),
            (("b".into(), 4, 1, vec![4]), iw(0, 10), Timestamp(9)),
        ]
    );
    // The element at 3 arrived after [0, 10) expired (allowed lateness 0): dropped.
    assert_eq!(r.metrics.counter("Sum", "dropped_due_to_lateness"), Some(1));
}

/// Emits how many elements arrived before its processing-time timer fired.
#[derive(Serialize, Deserialize)]
struct CountUntilTimer;

impl StatefulDoFn for CountUntilTimer {
    type Key = String;
    type Value = i64;
    type Out = (String, u64);
    fn process(
        &mut self,
        _k: &String,
        _v: i64,
        ctx: &mut StateContext<'_, Self::Out>,
    ) -> Result<(), UserError> {
        let n = ctx.read_value::<u64>("n")?.unwrap_or(0);
        if n == 0 {
            ctx.set_processing_timer("flush", 10)?;
        }
        ctx.write_value("n", &(n + 1))
    }
    fn on_timer(
        &mut self,
        k: &String,
        _name: &str,
        ctx: &mut StateContext<'_, Self::Out>,
    ) -> Result<(), UserError> {
        let n = ctx.read_value::<u64>("n")?.unwrap_or(0);
        ctx.output((k.clone(), n));
        ctx.clear("n");
        ctx.clear_timer("unused", TimeDomain::EventTime);
        Ok(())
    }
}

#[test]
fn processing_time_timers_fire_when_processing_time_passes_them() {
    let p = Pipeline::new(options(1));
    let events = TestStream::new()
        .add_elements(vec![stamped("a", 1), stamped("a", 2)])
        .advance_processing_time(5)
        .add_elements(vec![stamped("a", 3)])
        .advance_processing_time(6)
        .add_elements(vec![stamped("a", 4)])
        .advance_processing_time(20)
        .advance_watermark_to_infinity();
    p.apply("Events", events)
        .apply("Count", StatefulParDo::of(CountUntilTimer))
        .capture("counts");
    let mut got = p
        .run()
        .unwrap()
        .captured_values::<(String, u64)>("counts")
        .unwrap();
    got.sort();
    // The first timer is due at 10 and fires once processing time passes it (at 11):
    // three elements by then; the fourth starts a new count, flushed at 31.
    assert_eq!(got, vec![("a".into(), 1), ("a".into(), 3)]);
}

/// Tries to set a timer after its window expired.
#[derive(Serialize, Deserialize)]
struct RearmAfterExpiry;

impl StatefulDoFn for RearmAfterExpiry {
    type Key = String;
    type Value = i64;
    type Out = i64;
    fn process(
        &mut self,
        _k: &String,
        _v: i64,
        ctx: &mut StateContext<'_, i64>,
    ) -> Result<(), UserError> {
        let end = ctx.window().max_timestamp();
        ctx.set_event_timer("end", end)
    }
    fn on_timer(
        &mut self,
        _k: &String,
        _name: &str,
        ctx: &mut StateContext<'_, i64>,
    ) -> Result<(), UserError> {
        // One past the window's expiry (allowed lateness 0): refused.
        let after = tidewater::Timestamp(ctx.window().max_timestamp().millis() + 1);
        ctx.set_event_timer("again", after)
    }
}

#[test]
fn a_timer_set_in_an_expired_window_is_an_error() {
    let p = Pipeline::new(options(1));
    let events = TestStream::new()
        .add_elements(vec![stamped("a", 1)])
        .advance_watermark_to(Timestamp(50))
        .advance_watermark_to_infinity();
    p.apply("Events", events)
        .apply("Fixed10", Window::into(WindowFn::fixed(10)))
        .apply("Rearm", StatefulParDo::of(RearmAfterExpiry))
        .capture("out");
    let e = p.run().unwrap_err();
    assert!(
        matches!(&e, Error::UserCode { transform, .. } if transform == "Rearm"),
        "{e}"
    );
    assert!(
        e.to_string().contains("cannot set event-time timer 'again' at 10ms: it is after window Interval { start: 0ms, end: 10ms } expires at 9ms"),
        "{e}"
    );
}

/// Sets a second timer from the first one's callback.
#[derive(Serialize, Deserialize)]
struct Chain;

impl StatefulDoFn for Chain {
    type Key = String;
    type Value = i64;
    type Out = String;
    fn process(
        &mut self,
        _k: &String,
        v: i64,
        ctx: &mut StateContext<'_, String>,
    ) -> Result<(), UserError> {
        ctx.set_event_timer("first", Timestamp(v + 10))
    }
    fn on_timer(
        &mut self,
        _k: &String,
        name: &str,
        ctx: &mut StateContext<'_, String>,
    ) -> Result<(), UserError> {
        ctx.output(format!("{name}@{:?}", ctx.timestamp()));
        if name == "first" {
            let next = Timestamp(ctx.timestamp().millis() + 10);
            ctx.set_event_timer("second", next)?;
        }
        Ok(())
    }
}

#[test]
fn a_timer_set_from_a_timer_fires_even_when_the_watermark_jumps_to_the_end() {
    // A bounded input: the watermark goes from MIN to MAX in one step.
    let p = Pipeline::new(options(1));
    p.create("Xs", vec![("a".to_string(), 5i64)])
        .apply("Chain", StatefulParDo::of(Chain))
        .capture("fired");
    let got = p.run().unwrap().captured_values::<String>("fired").unwrap();
    assert_eq!(
        got,
        vec!["first@15ms".to_string(), "second@25ms".to_string()]
    );
}
