//! Stateful DoFns: state per key and window (value, combining, bag, map and set cells),
//! event- and processing-time timers, watermark holds from timers' output timestamps,
//! and the cleanup of state when a window expires.
//!
//! Expected values follow `docs/semantics.md` ("Stateful DoFns: state and timers",
//! "Watermarks and timers") and Beam: an event-time timer at `t` fires once the input
//! watermark is past `t`, a processing-time timer once processing time is past it;
//! timers fire in time order; setting a timer again replaces it; a timer's outputs get
//! its output timestamp (by default its firing time for event time, and the timestamp of
//! the element that set it for processing time, as Beam's `SimpleDoFnRunner` does);
//! pending event-time timers hold the output watermark at their output timestamps; an
//! element whose window expired is dropped and counted, and an expired window's state is
//! gone. Outputs of a stateful DoFn carry no pane (`PaneInfo::NO_FIRING`).
//!
//! Elements of one TestStream `add_elements` may reach a DoFn in any order (the direct
//! runner shuffles them by seed); where an output depends on the order of a key's
//! elements, the script adds them in separate events.

use crate::case::RunResult;
use crate::cases::panes::{
    at, counter_eq, fired, group, groups_eq, iw, same_outputs, Fired, DROPPED_LATE, ONLY,
};
use crate::check::{succeeded, user_code_error, ExpectedUserError};
use crate::Case;
use serde::{Deserialize, Serialize};
use tidewater::runner::Feature::{
    Capture, Create, GroupByKey, StatefulParDo as Stateful, TestStream as TestStreamFeature,
    WindowInto,
};
use tidewater::{
    BoundedWindow, CombineFn, Element, PCollection, PaneInfo, Pipeline, PipelineResult,
    StateContext, StatefulDoFn, StatefulParDo, TestStream, TimeDomain, Timestamp, UserError,
    Window, WindowFn,
};

const STREAM: &[tidewater::runner::Feature] = &[TestStreamFeature, Stateful, Capture];
const WINDOWED_STREAM: &[tidewater::runner::Feature] =
    &[TestStreamFeature, WindowInto, Stateful, Capture];

pub(crate) fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "state/value_running_count_per_key",
            features: &[Create, Stateful, Capture],
            build: running_count,
            check: check_running_count,
        },
        Case {
            name: "state/value_per_key_and_window",
            features: WINDOWED_STREAM,
            build: count_per_window,
            check: check_count_per_window,
        },
        Case {
            name: "state/combining_bag_map_set_flushed_at_end_of_window",
            features: WINDOWED_STREAM,
            build: summaries,
            check: check_summaries,
        },
        Case {
            name: "state/map_and_set_updates_in_order",
            features: STREAM,
            build: map_and_set,
            check: check_map_and_set,
        },
        Case {
            name: "state/expired_window_drops_late_input_and_its_state",
            features: WINDOWED_STREAM,
            build: expiry,
            check: check_expiry,
        },
        Case {
            name: "timers/reset_fires_once_and_cleared_never_fires",
            features: STREAM,
            build: reset_and_clear,
            check: check_reset_and_clear,
        },
        Case {
            name: "timers/fire_in_timestamp_order",
            features: STREAM,
            build: timer_order,
            check: check_timer_order,
        },
        Case {
            name: "timers/set_from_on_timer",
            features: STREAM,
            build: chained,
            check: check_chained,
        },
        Case {
            name: "timers/processing_time_fires_once_past_the_timer",
            features: STREAM,
            build: processing_time,
            check: check_processing_time,
        },
        Case {
            name: "timers/output_timestamp_holds_the_watermark",
            features: &[TestStreamFeature, Stateful, WindowInto, GroupByKey, Capture],
            build: watermark_hold,
            check: check_watermark_hold,
        },
        Case {
            name: "timers/set_in_expired_window_is_an_error",
            features: WINDOWED_STREAM,
            build: rearm_after_expiry,
            check: check_rearm_after_expiry,
        },
    ]
}

type Events = TestStream<(String, i64)>;

fn stream(p: &Pipeline, events: Events) -> PCollection<(String, i64)> {
    p.apply("Events", events)
}

fn fixed10(input: &PCollection<(String, i64)>, lateness: i64) -> PCollection<(String, i64)> {
    input.apply(
        "Fixed10",
        Window::into(WindowFn::fixed(10)).with_allowed_lateness(lateness),
    )
}

/// `(key, value)` stamped at `t`.
fn cmd(key: &str, value: i64, t: i64) -> ((String, i64), Timestamp) {
    ((key.to_string(), value), Timestamp(t))
}

/// An output of a stateful DoFn: no pane.
fn out<T>(value: T, window: BoundedWindow, timestamp: i64) -> Fired<T> {
    Fired {
        value,
        window,
        timestamp: Timestamp(timestamp),
        pane: PaneInfo::NO_FIRING,
    }
}

fn kv<V>(key: &str, v: V) -> (String, V) {
    (key.to_string(), v)
}

/// The output captured under `name` is exactly `expected` (values, windows, timestamps
/// and panes), in any order.
fn outputs_eq<T: Element + Ord>(
    r: &PipelineResult,
    name: &str,
    expected: Vec<Fired<T>>,
) -> Result<(), String> {
    same_outputs(&format!("capture '{name}'"), fired::<T>(r, name)?, expected)
}

// ---------------------------------------------------------------------------------------
// Value state: the running count of each key, one output per element.

/// `(key, count so far)` for every element.
#[derive(Serialize, Deserialize)]
struct RunningCount;

impl StatefulDoFn for RunningCount {
    type Key = String;
    type Value = i64;
    type Out = (String, u64);
    fn process(
        &mut self,
        key: &String,
        _v: i64,
        ctx: &mut StateContext<'_, (String, u64)>,
    ) -> Result<(), UserError> {
        let count = ctx.read_value::<u64>("count")?.unwrap_or(0) + 1;
        ctx.write_value("count", &count)?;
        ctx.output((key.clone(), count));
        Ok(())
    }
}

fn running_count(p: &Pipeline) {
    let words = ["a", "b", "a", "a", "c", "b"]
        .iter()
        .map(|w| kv(w, 1i64))
        .collect();
    p.create("Words", words)
        .apply("Count", StatefulParDo::of(RunningCount))
        .capture("counts");
}

fn check_running_count(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    // Create's elements are in the global window at the minimum timestamp; whatever the
    // order, each key counts 1, 2, ... once each.
    let g = BoundedWindow::Global;
    let min = Timestamp::MIN.millis();
    outputs_eq(
        &r,
        "counts",
        vec![
            out(kv("a", 1u64), g.clone(), min),
            out(kv("a", 2), g.clone(), min),
            out(kv("a", 3), g.clone(), min),
            out(kv("b", 1), g.clone(), min),
            out(kv("b", 2), g.clone(), min),
            out(kv("c", 1), g, min),
        ],
    )
}

// ---------------------------------------------------------------------------------------
// State is per key AND window: key a in [0, 10) and in [10, 20) counts independently.
// One element per event, so each output's timestamp is known.

fn count_per_window(p: &Pipeline) {
    let events = TestStream::new()
        .add_elements(vec![at("a", 1)])
        .add_elements(vec![at("a", 12)])
        .add_elements(vec![at("a", 4)])
        .add_elements(vec![at("b", 5)])
        .add_elements(vec![at("a", 15)])
        .add_elements(vec![at("a", 19)])
        .advance_watermark_to_infinity();
    fixed10(&stream(p, events), 0)
        .apply("Count", StatefulParDo::of(RunningCount))
        .capture("counts");
}

fn check_count_per_window(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    outputs_eq(
        &r,
        "counts",
        vec![
            out(kv("a", 1u64), iw(0, 10), 1),
            out(kv("a", 1), iw(10, 20), 12),
            out(kv("a", 2), iw(0, 10), 4),
            out(kv("b", 1), iw(0, 10), 5),
            out(kv("a", 2), iw(10, 20), 15),
            out(kv("a", 3), iw(10, 20), 19),
        ],
    )
}

// ---------------------------------------------------------------------------------------
// Combining, bag, map and set cells filled per element and read by an event-time timer
// at the end of the window: it fires when the watermark passes the window's max
// timestamp, and its outputs are stamped with that timestamp.

#[derive(Serialize, Deserialize)]
struct SumFn;

impl CombineFn for SumFn {
    type In = i64;
    type Acc = i64;
    type Out = i64;
    fn create_accumulator(&self) -> i64 {
        0
    }
    fn add_input(&self, acc: &mut i64, x: i64) {
        *acc += x
    }
    fn merge_accumulators(&self, acc: &mut i64, other: i64) {
        *acc += other
    }
    fn extract_output(&self, acc: i64) -> i64 {
        acc
    }
}

/// (key, sum, every value, occurrences per parity, distinct values).
type Summary = (String, i64, Vec<i64>, Vec<(String, u64)>, Vec<i64>);

/// Fills every kind of cell; flushes them at the end of the window.
#[derive(Serialize, Deserialize)]
struct Summarize;

impl StatefulDoFn for Summarize {
    type Key = String;
    type Value = i64;
    type Out = Summary;
    fn process(
        &mut self,
        _key: &String,
        v: i64,
        ctx: &mut StateContext<'_, Summary>,
    ) -> Result<(), UserError> {
        ctx.combine_add("sum", &SumFn, v)?;
        ctx.bag_add("values", &v)?;
        let parity = if v % 2 == 0 { "even" } else { "odd" }.to_string();
        let n = ctx.map_get::<String, u64>("parity", &parity)?.unwrap_or(0);
        ctx.map_put("parity", &parity, &(n + 1))?;
        ctx.set_add("distinct", &v)?;
        let end = ctx.window().max_timestamp();
        ctx.set_event_timer("flush", end)
    }
    fn on_timer(
        &mut self,
        key: &String,
        _name: &str,
        ctx: &mut StateContext<'_, Summary>,
    ) -> Result<(), UserError> {
        let sum = ctx.combine_read("sum", &SumFn)?;
        let mut values: Vec<i64> = ctx.bag_read("values")?;
        values.sort_unstable();
        let mut parity: Vec<(String, u64)> = ctx.map_entries("parity")?;
        parity.sort();
        let mut distinct: Vec<i64> = ctx.set_read("distinct")?;
        distinct.sort_unstable();
        ctx.output((key.clone(), sum, values, parity, distinct));
        for cell in ["sum", "values", "parity", "distinct"] {
            ctx.clear(cell);
        }
        Ok(())
    }
}

fn summaries(p: &Pipeline) {
    let events = TestStream::new()
        .add_elements(vec![
            at("a", 1),
            at("a", 3),
            at("a", 3),
            at("b", 5),
            at("a", 4),
            at("a", 12),
        ])
        // Fires [0, 10)'s timers (at 9) only.
        .advance_watermark_to(Timestamp(10))
        .add_elements(vec![at("a", 15)])
        .advance_watermark_to_infinity();
    fixed10(&stream(p, events), 0)
        .apply("Summarize", StatefulParDo::of(Summarize))
        .capture("summaries");
}

fn summary(
    key: &str,
    sum: i64,
    values: &[i64],
    parity: &[(&str, u64)],
    distinct: &[i64],
) -> Summary {
    (
        key.to_string(),
        sum,
        values.to_vec(),
        parity.iter().map(|(p, n)| (p.to_string(), *n)).collect(),
        distinct.to_vec(),
    )
}

fn check_summaries(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    outputs_eq(
        &r,
        "summaries",
        vec![
            out(
                summary(
                    "a",
                    11,
                    &[1, 3, 3, 4],
                    &[("even", 1), ("odd", 3)],
                    &[1, 3, 4],
                ),
                iw(0, 10),
                9,
            ),
            out(summary("b", 5, &[5], &[("odd", 1)], &[5]), iw(0, 10), 9),
            out(
                summary("a", 27, &[12, 15], &[("even", 1), ("odd", 1)], &[12, 15]),
                iw(10, 20),
                19,
            ),
        ],
    )
}

// ---------------------------------------------------------------------------------------
// Map and set cells updated by ordered commands: a positive x adds x to the set and
// counts it in the map, -x removes x's map entry, 0 clears the set. After each command
// the DoFn outputs (command, whether the set add was new, map entries, set members,
// whether the set holds 2).

type Snapshot = (i64, bool, Vec<(i64, u64)>, Vec<i64>, bool);

#[derive(Serialize, Deserialize)]
struct MapAndSet;

impl StatefulDoFn for MapAndSet {
    type Key = String;
    type Value = i64;
    type Out = Snapshot;
    fn process(
        &mut self,
        _key: &String,
        c: i64,
        ctx: &mut StateContext<'_, Snapshot>,
    ) -> Result<(), UserError> {
        let mut new = false;
        if c > 0 {
            new = ctx.set_add("seen", &c)?;
            let n = ctx.map_get::<i64, u64>("count", &c)?.unwrap_or(0);
            ctx.map_put("count", &c, &(n + 1))?;
        } else if c < 0 {
            ctx.map_remove("count", &-c)?;
        } else {
            ctx.clear("seen");
        }
        let mut entries: Vec<(i64, u64)> = ctx.map_entries("count")?;
        entries.sort_unstable();
        let mut members: Vec<i64> = ctx.set_read("seen")?;
        members.sort_unstable();
        let has_two = ctx.set_contains("seen", &2i64)?;
        ctx.output((c, new, entries, members, has_two));
        Ok(())
    }
}

fn map_and_set(p: &Pipeline) {
    let mut events = TestStream::new();
    for (t, c) in [2, 5, 2, -2, 0, 7].into_iter().enumerate() {
        events = events.add_elements(vec![cmd("a", c, t as i64 + 1)]);
    }
    stream(p, events.advance_watermark_to_infinity())
        .apply("Cells", StatefulParDo::of(MapAndSet))
        .capture("snapshots");
}

fn check_map_and_set(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    let g = BoundedWindow::Global;
    outputs_eq::<Snapshot>(
        &r,
        "snapshots",
        vec![
            out((2, true, vec![(2, 1)], vec![2], true), g.clone(), 1),
            out(
                (5, true, vec![(2, 1), (5, 1)], vec![2, 5], true),
                g.clone(),
                2,
            ),
            out(
                (2, false, vec![(2, 2), (5, 1)], vec![2, 5], true),
                g.clone(),
                3,
            ),
            out((-2, false, vec![(5, 1)], vec![2, 5], true), g.clone(), 4),
            out((0, false, vec![(5, 1)], vec![], false), g.clone(), 5),
            out((7, true, vec![(5, 1), (7, 1)], vec![7], false), g, 6),
        ],
    )
}

// ---------------------------------------------------------------------------------------
// Expiry: fixed windows of 10 with allowed lateness 5, so [0, 10) expires when the
// watermark passes 14. At watermark 14 late input is still processed with the window's
// state; at 15 the window's state is dropped, and input for it (for any key) is dropped
// and counted on the stateful step. A later window starts with empty state.

fn expiry(p: &Pipeline) {
    let events = TestStream::new()
        .add_elements(vec![at("a", 1)])
        .add_elements(vec![at("a", 2)])
        .advance_watermark_to(Timestamp(14))
        // Late but not expired: counted with the window's state.
        .add_elements(vec![at("a", 3)])
        .advance_watermark_to(Timestamp(15))
        // Expired: dropped.
        .add_elements(vec![at("a", 4), at("b", 6)])
        .add_elements(vec![at("a", 15)])
        .advance_watermark_to_infinity();
    fixed10(&stream(p, events), 5)
        .apply("Count", StatefulParDo::of(RunningCount))
        .capture("counts");
}

fn check_expiry(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    outputs_eq(
        &r,
        "counts",
        vec![
            out(kv("a", 1u64), iw(0, 10), 1),
            out(kv("a", 2), iw(0, 10), 2),
            out(kv("a", 3), iw(0, 10), 3),
            out(kv("a", 1), iw(10, 20), 15),
        ],
    )?;
    counter_eq(&r, "Count", DROPPED_LATE, 2)
}

// ---------------------------------------------------------------------------------------
// Resetting and clearing timers. A value c >= 0 sets (or resets) event-time timer "t" to
// c and counts the element; c < 0 clears "t". The timer outputs (key, elements counted).
// - "reset": set to 6, reset to 8, then (the watermark at 7) reset to 15: fires once, at
//   15, having seen three elements (the settings at 6 and 8 never fire);
// - "cleared": set to 5 then cleared: never fires, though the watermark passes 5;
// - "kept": set to 5, fires at watermark 7; set again to 20 after firing, fires again.

#[derive(Serialize, Deserialize)]
struct TimerControl;

impl StatefulDoFn for TimerControl {
    type Key = String;
    type Value = i64;
    type Out = (String, u64);
    fn process(
        &mut self,
        _key: &String,
        c: i64,
        ctx: &mut StateContext<'_, (String, u64)>,
    ) -> Result<(), UserError> {
        if c < 0 {
            ctx.clear_timer("t", TimeDomain::EventTime);
            return Ok(());
        }
        let n = ctx.read_value::<u64>("n")?.unwrap_or(0) + 1;
        ctx.write_value("n", &n)?;
        ctx.set_event_timer("t", Timestamp(c))
    }
    fn on_timer(
        &mut self,
        key: &String,
        _name: &str,
        ctx: &mut StateContext<'_, (String, u64)>,
    ) -> Result<(), UserError> {
        let n = ctx.read_value::<u64>("n")?.unwrap_or(0);
        ctx.output((key.clone(), n));
        Ok(())
    }
}

fn reset_and_clear(p: &Pipeline) {
    let events = TestStream::new()
        .add_elements(vec![
            cmd("reset", 6, 1),
            cmd("cleared", 5, 1),
            cmd("kept", 5, 1),
        ])
        .add_elements(vec![cmd("reset", 8, 2), cmd("cleared", -1, 2)])
        .advance_watermark_to(Timestamp(7))
        .add_elements(vec![cmd("reset", 15, 8), cmd("kept", 20, 8)])
        .advance_watermark_to_infinity();
    stream(p, events)
        .apply("Timers", StatefulParDo::of(TimerControl))
        .capture("fired");
}

fn check_reset_and_clear(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    let g = BoundedWindow::Global;
    outputs_eq(
        &r,
        "fired",
        vec![
            out(kv("kept", 1u64), g.clone(), 5),
            out(kv("kept", 2), g.clone(), 20),
            out(kv("reset", 3), g, 15),
        ],
    )
}

// ---------------------------------------------------------------------------------------
// Timers fire in timestamp order, within a key (several timers of one key) and across
// keys, when one watermark advance makes them all due. Each element sets timer "at{c}"
// at c. A timer outputs (key, its name, its rank among the key's firings, kept in bag
// state, and whether it came after every timer its DoFn instance fired before). The
// last observes the order across keys through the DoFn's own field, within each
// instance: a runner with several workers has one instance per worker.

#[derive(Serialize, Deserialize)]
struct Ordered {
    /// The latest timer time this instance fired (instances are per worker, so
    /// order across keys is checked within each instance).
    #[serde(skip)]
    latest: i64,
}

impl StatefulDoFn for Ordered {
    type Key = String;
    type Value = i64;
    type Out = (String, String, u64, bool);
    fn process(
        &mut self,
        _key: &String,
        c: i64,
        ctx: &mut StateContext<'_, Self::Out>,
    ) -> Result<(), UserError> {
        ctx.set_event_timer(&format!("at{c}"), Timestamp(c))
    }
    fn on_timer(
        &mut self,
        key: &String,
        name: &str,
        ctx: &mut StateContext<'_, Self::Out>,
    ) -> Result<(), UserError> {
        ctx.bag_add("fired", &name.to_string())?;
        let rank = ctx.bag_read::<String>("fired")?.len() as u64;
        let at: i64 = name.trim_start_matches("at").parse().unwrap_or(i64::MIN);
        let in_order = at >= self.latest;
        self.latest = at;
        ctx.output((key.clone(), name.to_string(), rank, in_order));
        Ok(())
    }
}

fn timer_order(p: &Pipeline) {
    let events = TestStream::new()
        .add_elements(vec![
            cmd("a", 30, 0),
            cmd("a", 10, 0),
            cmd("b", 20, 0),
            cmd("b", 5, 0),
            cmd("c", 25, 0),
        ])
        .advance_watermark_to_infinity();
    stream(p, events)
        .apply("Timers", StatefulParDo::of(Ordered { latest: i64::MIN }))
        .capture("fired");
}

fn check_timer_order(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    let g = BoundedWindow::Global;
    // Each fired in timestamp order within its key (rank) and within its instance,
    // across keys (every timer came after the instance's previous one).
    let f = |k: &str, t: i64, rank: u64| {
        out((k.to_string(), format!("at{t}"), rank, true), g.clone(), t)
    };
    outputs_eq(
        &r,
        "fired",
        vec![
            f("b", 5, 1),
            f("a", 10, 1),
            f("b", 20, 2),
            f("c", 25, 1),
            f("a", 30, 2),
        ],
    )
}

// ---------------------------------------------------------------------------------------
// A timer set from on_timer: the first element sets "first" at 5; when it fires
// (watermark 10) it sets "second" at 12, which fires only once the watermark passes 12.
// Outputs: (key, timer, elements counted when it fired).

#[derive(Serialize, Deserialize)]
struct Chain;

impl StatefulDoFn for Chain {
    type Key = String;
    type Value = i64;
    type Out = (String, String, u64);
    fn process(
        &mut self,
        _key: &String,
        _v: i64,
        ctx: &mut StateContext<'_, Self::Out>,
    ) -> Result<(), UserError> {
        let n = ctx.read_value::<u64>("n")?.unwrap_or(0) + 1;
        ctx.write_value("n", &n)?;
        if n == 1 {
            ctx.set_event_timer("first", Timestamp(5))?;
        }
        Ok(())
    }
    fn on_timer(
        &mut self,
        key: &String,
        name: &str,
        ctx: &mut StateContext<'_, Self::Out>,
    ) -> Result<(), UserError> {
        let n = ctx.read_value::<u64>("n")?.unwrap_or(0);
        ctx.output((key.clone(), name.to_string(), n));
        if name == "first" {
            ctx.set_event_timer("second", Timestamp(12))?;
        }
        Ok(())
    }
}

fn chained(p: &Pipeline) {
    let events = TestStream::new()
        .add_elements(vec![at("a", 1)])
        .advance_watermark_to(Timestamp(10))
        .add_elements(vec![at("a", 11)])
        .advance_watermark_to(Timestamp(13))
        .add_elements(vec![at("a", 20)])
        .advance_watermark_to_infinity();
    stream(p, events)
        .apply("Chain", StatefulParDo::of(Chain))
        .capture("fired");
}

fn check_chained(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    let g = BoundedWindow::Global;
    outputs_eq(
        &r,
        "fired",
        vec![
            out(("a".to_string(), "first".to_string(), 1u64), g.clone(), 5),
            out(("a".to_string(), "second".to_string(), 2), g, 12),
        ],
    )
}

// ---------------------------------------------------------------------------------------
// Processing-time timers on the TestStream's simulated clock (from 0). The first element
// of a count sets timer "flush" 10 ms ahead; it fires once processing time is past it
// (strictly), outputting (key, elements counted), stamped with the timestamp of the
// element that set it. At processing time exactly 10 the timer at 10 has not fired, so
// the element added then is counted in the first flush.

#[derive(Serialize, Deserialize)]
struct CountUntilTimer;

impl StatefulDoFn for CountUntilTimer {
    type Key = String;
    type Value = i64;
    type Out = (String, u64);
    fn process(
        &mut self,
        _key: &String,
        _v: i64,
        ctx: &mut StateContext<'_, (String, u64)>,
    ) -> Result<(), UserError> {
        let n = ctx.read_value::<u64>("n")?.unwrap_or(0);
        if n == 0 {
            ctx.set_processing_timer("flush", 10)?;
        }
        ctx.write_value("n", &(n + 1))
    }
    fn on_timer(
        &mut self,
        key: &String,
        _name: &str,
        ctx: &mut StateContext<'_, (String, u64)>,
    ) -> Result<(), UserError> {
        let n = ctx.read_value::<u64>("n")?.unwrap_or(0);
        ctx.output((key.clone(), n));
        ctx.clear("n");
        Ok(())
    }
}

fn processing_time(p: &Pipeline) {
    let events = TestStream::new()
        // Processing time 0: timer at 10.
        .add_elements(vec![at("a", 1)])
        .advance_processing_time(10)
        // 10: not past the timer.
        .add_elements(vec![at("a", 2)])
        .advance_processing_time(1)
        // 11: the first flush fired; a new count, timer at 21.
        .add_elements(vec![at("a", 3)])
        .advance_processing_time(10)
        .add_elements(vec![at("a", 4)])
        // 22: the second flush.
        .advance_processing_time(1)
        .advance_watermark_to_infinity();
    stream(p, events)
        .apply("Count", StatefulParDo::of(CountUntilTimer))
        .capture("flushes");
}

fn check_processing_time(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    let g = BoundedWindow::Global;
    outputs_eq(
        &r,
        "flushes",
        vec![out(kv("a", 2u64), g.clone(), 1), out(kv("a", 2), g, 3)],
    )
}

// ---------------------------------------------------------------------------------------
// Watermark holds. In the global window, each element (a@2, a@4, b@3) sets a timer at
// 100 whose output timestamp is the element's own; the timer emits the element. A
// downstream Window.into(fixed 10) + GroupByKey groups them in [0, 10). The watermark
// goes to 50 before the timers fire (at 150): without the hold, the grouping would see
// watermark 50, expire [0, 10), and drop the timers' outputs as late. With it, the
// stateful step's output watermark stays at 2 until the timers fire, so [0, 10) gets one
// on-time pane and nothing is dropped.

#[derive(Serialize, Deserialize)]
struct EmitLater;

impl StatefulDoFn for EmitLater {
    type Key = String;
    type Value = i64;
    type Out = (String, i64);
    fn process(
        &mut self,
        _key: &String,
        v: i64,
        ctx: &mut StateContext<'_, (String, i64)>,
    ) -> Result<(), UserError> {
        let output = ctx.timestamp();
        ctx.set_event_timer_with_output(&v.to_string(), Timestamp(100), output)
    }
    fn on_timer(
        &mut self,
        key: &String,
        name: &str,
        ctx: &mut StateContext<'_, (String, i64)>,
    ) -> Result<(), UserError> {
        let v: i64 = name.parse()?;
        ctx.output((key.clone(), v));
        Ok(())
    }
}

fn watermark_hold(p: &Pipeline) {
    let events = TestStream::new()
        .add_elements(vec![at("a", 2), at("a", 4), at("b", 3)])
        .advance_watermark_to(Timestamp(50))
        .advance_watermark_to(Timestamp(150))
        .advance_watermark_to_infinity();
    let emitted = stream(p, events).apply("EmitLater", StatefulParDo::of(EmitLater));
    emitted.capture("emitted");
    emitted
        .apply("Fixed10", Window::into(WindowFn::fixed(10)))
        .group_by_key("Group")
        .capture("groups");
}

fn check_watermark_hold(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    let g = BoundedWindow::Global;
    outputs_eq(
        &r,
        "emitted",
        vec![
            out(kv("a", 2i64), g.clone(), 2),
            out(kv("a", 4), g.clone(), 4),
            out(kv("b", 3), g, 3),
        ],
    )?;
    groups_eq(
        &r,
        "groups",
        vec![
            group("a", &[2, 4], iw(0, 10), 9, ONLY),
            group("b", &[3], iw(0, 10), 9, ONLY),
        ],
    )?;
    counter_eq(&r, "Group", DROPPED_LATE, 0)
}

// ---------------------------------------------------------------------------------------
// A timer set in a window that has expired fails the pipeline, naming the transform, the
// timer and the key: the end-of-window timer of [0, 10) fires at watermark 50, after the
// window expired (at 9, no allowed lateness), and tries to set another timer there.

#[derive(Serialize, Deserialize)]
struct RearmAfterExpiry;

impl StatefulDoFn for RearmAfterExpiry {
    type Key = String;
    type Value = i64;
    type Out = i64;
    fn process(
        &mut self,
        _key: &String,
        _v: i64,
        ctx: &mut StateContext<'_, i64>,
    ) -> Result<(), UserError> {
        let end = ctx.window().max_timestamp();
        ctx.set_event_timer("end", end)
    }
    fn on_timer(
        &mut self,
        _key: &String,
        _name: &str,
        ctx: &mut StateContext<'_, i64>,
    ) -> Result<(), UserError> {
        // One past the window's expiry (allowed lateness 0): refused.
        let after = tidewater::Timestamp(ctx.window().max_timestamp().millis() + 1);
        ctx.set_event_timer("again", after)
    }
}

fn rearm_after_expiry(p: &Pipeline) {
    let events = TestStream::new()
        .add_elements(vec![at("a", 1)])
        .advance_watermark_to(Timestamp(50))
        .advance_watermark_to_infinity();
    fixed10(&stream(p, events), 0)
        .apply("Rearm", StatefulParDo::of(RearmAfterExpiry))
        .capture("out");
}

fn check_rearm_after_expiry(r: RunResult) -> Result<(), String> {
    user_code_error(
        r,
        ExpectedUserError {
            transform: "Rearm",
            phase: "process",
            element: Some("timer 'end' of key \"a\""),
            message: &["cannot set event-time timer 'again' at 10ms: it is after window Interval { start: 0ms, end: 10ms } expires at 9ms"],
        },
    )
}
