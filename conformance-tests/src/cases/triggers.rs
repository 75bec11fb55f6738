//! Triggers, driven by TestStream: every trigger of the model, early, on-time and late
//! panes in discarding and accumulating mode, closing behavior at window expiry.
//!
//! Every input is `(key, t)` at event time `t`; every output is checked with its window,
//! timestamp and pane. Expected values follow Beam (`ReduceFnRunner`, `PaneInfoTracker`
//! and the trigger state machines of runners-core): a timer fires once its time has
//! passed (event time: `t < watermark`; processing time: `t < now`), TestStream's
//! processing time starts at 0, a window expires when the watermark passes its max
//! timestamp plus the allowed lateness, and then fires a final pane if it holds new data
//! (or always, with `ClosingBehavior::EmitAlways`). Each TestStream batch is sized so
//! that the expected panes do not depend on how a runner bundles it (a count trigger is
//! completed by the last element of a batch, never in the middle of one).

use crate::case::RunResult;
use crate::cases::panes::{
    at, counter_eq, early, group, groups_eq, iw, keyed, keyed_eq, late, on_time, DROPPED_CLOSED,
    DROPPED_LATE, ONLY,
};
use crate::check::succeeded;
use crate::Case;
use serde::{Deserialize, Serialize};
use tidewater::runner::Feature::{
    Capture, CombinePerKey, GroupByKey, TestStream as TestStreamFeature, WindowInto,
};
use tidewater::{
    BoundedWindow, ClosingBehavior, Combine, CombineFn, GlobalWindow, PCollection, Pipeline,
    TestStream, Timestamp, Trigger, Window, WindowFn,
};

const STREAMING: &[tidewater::runner::Feature] =
    &[TestStreamFeature, WindowInto, GroupByKey, Capture];

pub(crate) fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "triggers/default_with_lateness_accumulating",
            features: STREAMING,
            build: default_accumulating,
            check: check_default_accumulating,
        },
        Case {
            name: "triggers/after_watermark_once",
            features: STREAMING,
            build: after_watermark_once,
            check: check_after_watermark_once,
        },
        Case {
            name: "triggers/early_on_time_late_discarding",
            features: STREAMING,
            build: early_on_time_late_discarding,
            check: check_early_on_time_late_discarding,
        },
        Case {
            name: "triggers/early_on_time_late_accumulating",
            features: STREAMING,
            build: early_on_time_late_accumulating,
            check: check_early_on_time_late_accumulating,
        },
        Case {
            name: "triggers/late_firings_after_processing_time",
            features: STREAMING,
            build: late_processing_time,
            check: check_late_processing_time,
        },
        Case {
            name: "triggers/global_window_early_processing_time",
            features: &[
                TestStreamFeature,
                WindowInto,
                GroupByKey,
                CombinePerKey,
                Capture,
            ],
            build: global_early_processing_time,
            check: check_global_early_processing_time,
        },
        Case {
            name: "triggers/after_processing_time_aligned",
            features: STREAMING,
            build: processing_time_aligned,
            check: check_processing_time_aligned,
        },
        Case {
            name: "triggers/after_count",
            features: STREAMING,
            build: after_count,
            check: check_after_count,
        },
        Case {
            name: "triggers/after_count_merges_across_sessions",
            features: STREAMING,
            build: after_count_sessions,
            check: check_after_count_sessions,
        },
        Case {
            name: "triggers/repeatedly_after_count",
            features: STREAMING,
            build: repeatedly_after_count,
            check: check_repeatedly_after_count,
        },
        Case {
            name: "triggers/after_each",
            features: STREAMING,
            build: after_each,
            check: check_after_each,
        },
        Case {
            name: "triggers/after_first",
            features: STREAMING,
            build: after_first,
            check: check_after_first,
        },
        Case {
            name: "triggers/after_all",
            features: STREAMING,
            build: after_all,
            check: check_after_all,
        },
        Case {
            name: "triggers/or_finally",
            features: STREAMING,
            build: or_finally,
            check: check_or_finally,
        },
        Case {
            name: "triggers/never",
            features: STREAMING,
            build: never,
            check: check_never,
        },
        Case {
            name: "triggers/closing_behavior_at_expiry",
            features: STREAMING,
            build: closing_behavior,
            check: check_closing_behavior,
        },
    ]
}

type Events = TestStream<(String, i64)>;

/// The stream `events`, windowed by `window`, grouped by key under step "Group" and
/// captured as `name`.
fn grouped(p: &Pipeline, events: Events, window: Window, name: &str) {
    p.apply("Events", events)
        .apply("Window", window)
        .group_by_key("Group")
        .capture(name);
}

/// Another windowing and grouping (`group` names the step) of the same stream.
fn grouped_again(input: &PCollection<(String, i64)>, suffix: &str, window: Window, name: &str) {
    input
        .apply(&format!("Window{suffix}"), window)
        .group_by_key(&format!("Group{suffix}"))
        .capture(name);
}

// ---------------------------------------------------------------------------------------
// Default trigger with allowed lateness, accumulating: an on-time pane, then one late
// pane per late batch, each holding everything so far.

fn default_accumulating(p: &Pipeline) {
    let events = TestStream::new()
        .add_elements(vec![at("a", 1), at("a", 2), at("b", 15)])
        // [0, 10) fires on time; its garbage collection is at 9 + 10 = 19.
        .advance_watermark_to(Timestamp(10))
        .add_elements(vec![at("a", 3)])
        .add_elements(vec![at("a", 4)])
        // [0, 10) expires with nothing new: no final pane. [10, 20) fires on time.
        .advance_watermark_to(Timestamp(20))
        // Past the allowed lateness of [0, 10): dropped.
        .add_elements(vec![at("a", 5)])
        .advance_watermark_to_infinity();
    grouped(
        p,
        events,
        Window::into(WindowFn::fixed(10))
            .with_allowed_lateness(10)
            .accumulating_fired_panes(),
        "groups",
    );
}

fn check_default_accumulating(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    groups_eq(
        &r,
        "groups",
        vec![
            group("a", &[1, 2], iw(0, 10), 9, on_time(0, false)),
            group("a", &[1, 2, 3], iw(0, 10), 9, late(1, 1, false)),
            group("a", &[1, 2, 3, 4], iw(0, 10), 9, late(2, 2, false)),
            group("b", &[15], iw(10, 20), 19, on_time(0, false)),
        ],
    )?;
    counter_eq(&r, "Group", DROPPED_LATE, 1)
}

// ---------------------------------------------------------------------------------------
// AfterWatermark alone fires once: the window closes, and later data within the allowed
// lateness is dropped as arriving in a closed window.

fn after_watermark_once(p: &Pipeline) {
    let events = TestStream::new()
        .add_elements(vec![at("a", 1)])
        .advance_watermark_to(Timestamp(10))
        .add_elements(vec![at("a", 2)])
        .advance_watermark_to_infinity();
    grouped(
        p,
        events,
        Window::into(WindowFn::fixed(10))
            .triggering(Trigger::after_watermark())
            .with_allowed_lateness(10),
        "groups",
    );
}

fn check_after_watermark_once(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    groups_eq(&r, "groups", vec![group("a", &[1], iw(0, 10), 9, ONLY)])?;
    counter_eq(&r, "Group", DROPPED_CLOSED, 1)?;
    counter_eq(&r, "Group", DROPPED_LATE, 0)
}

// ---------------------------------------------------------------------------------------
// AfterWatermark with early firings 10 ms of processing time after the first element of
// a pane and late firings on every late element, allowed lateness 100.

fn early_on_time_late_events() -> Events {
    TestStream::new()
        // Processing time 0: the early trigger waits until processing time passes 10.
        .add_elements(vec![at("a", 1)])
        // Processing time 10 has not passed 10.
        .advance_processing_time(10)
        .add_elements(vec![at("a", 2)])
        // 11: early pane {1, 2}.
        .advance_processing_time(1)
        // Waits until 21.
        .add_elements(vec![at("a", 3)])
        // On-time pane.
        .advance_watermark_to(Timestamp(10))
        // Late panes, one per element.
        .add_elements(vec![at("a", 4)])
        .add_elements(vec![at("a", 5)])
        // The early trigger is done: processing time no longer fires anything.
        .advance_processing_time(20)
        // Expiry (9 + 100 < 200) with nothing new: no pane.
        .advance_watermark_to(Timestamp(200))
        // Dropped.
        .add_elements(vec![at("a", 6)])
        .advance_watermark_to_infinity()
}

fn early_on_time_late_window() -> Window {
    Window::into(WindowFn::fixed(10))
        .triggering(
            Trigger::after_watermark()
                .with_early_firings(Trigger::after_processing_time().plus_delay_of(10))
                .with_late_firings(Trigger::after_count(1)),
        )
        .with_allowed_lateness(100)
}

fn early_on_time_late_discarding(p: &Pipeline) {
    grouped(
        p,
        early_on_time_late_events(),
        early_on_time_late_window().discarding_fired_panes(),
        "groups",
    );
}

fn check_early_on_time_late_discarding(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    groups_eq(
        &r,
        "groups",
        vec![
            group("a", &[1, 2], iw(0, 10), 9, early(0, false)),
            group("a", &[3], iw(0, 10), 9, on_time(1, false)),
            group("a", &[4], iw(0, 10), 9, late(2, 1, false)),
            group("a", &[5], iw(0, 10), 9, late(3, 2, false)),
        ],
    )?;
    counter_eq(&r, "Group", DROPPED_LATE, 1)
}

fn early_on_time_late_accumulating(p: &Pipeline) {
    grouped(
        p,
        early_on_time_late_events(),
        early_on_time_late_window().accumulating_fired_panes(),
        "groups",
    );
}

fn check_early_on_time_late_accumulating(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    groups_eq(
        &r,
        "groups",
        vec![
            group("a", &[1, 2], iw(0, 10), 9, early(0, false)),
            group("a", &[1, 2, 3], iw(0, 10), 9, on_time(1, false)),
            group("a", &[1, 2, 3, 4], iw(0, 10), 9, late(2, 1, false)),
            group("a", &[1, 2, 3, 4, 5], iw(0, 10), 9, late(3, 2, false)),
        ],
    )?;
    counter_eq(&r, "Group", DROPPED_LATE, 1)
}

// ---------------------------------------------------------------------------------------
// Late firings on processing time (10 ms after the first late element of a pane),
// accumulating, with ClosingBehavior::EmitAlways: the final pane at expiry repeats
// everything (as in Beam's TestStreamTest.testLateDataAccumulating).

fn late_processing_time(p: &Pipeline) {
    let events = TestStream::new()
        .add_elements(vec![at("a", 1)])
        .advance_watermark_to(Timestamp(10))
        // Late, at processing time 0: the late trigger waits until 10 has passed.
        .add_elements(vec![at("a", 2)])
        .add_elements(vec![at("a", 3)])
        .advance_processing_time(10)
        // 11: a late pane.
        .advance_processing_time(1)
        // Expiry: nothing new, but EmitAlways.
        .advance_watermark_to_infinity();
    grouped(
        p,
        events,
        Window::into(WindowFn::fixed(10))
            .triggering(
                Trigger::after_watermark()
                    .with_late_firings(Trigger::after_processing_time().plus_delay_of(10)),
            )
            .with_allowed_lateness(100)
            .accumulating_fired_panes()
            .with_closing_behavior(ClosingBehavior::EmitAlways),
        "groups",
    );
}

fn check_late_processing_time(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    groups_eq(
        &r,
        "groups",
        vec![
            group("a", &[1], iw(0, 10), 9, on_time(0, false)),
            group("a", &[1, 2, 3], iw(0, 10), 9, late(1, 1, false)),
            group("a", &[1, 2, 3], iw(0, 10), 9, late(2, 2, true)),
        ],
    )
}

// ---------------------------------------------------------------------------------------
// The global window of a stream with early firings 5 ms of processing time after the
// first element of a pane, accumulating (as in Beam's
// TestStreamTest.testProcessingTimeTrigger): early sums 3 and 6, then the on-time pane
// at the end of the global window, with nothing new, repeats 6 (OnTimeBehavior
// FireAlways).

fn global_early_processing_time(p: &Pipeline) {
    let events = TestStream::new()
        // Processing time 0: waits until 5 has passed.
        .add_elements(vec![at("a", 1), at("a", 2)])
        .advance_processing_time(12)
        // At 12: waits until 17.
        .add_elements(vec![at("a", 3)])
        .advance_processing_time(6)
        .advance_watermark_to_infinity();
    let window = Window::into(WindowFn::Global)
        .triggering(
            Trigger::after_watermark()
                .with_early_firings(Trigger::after_processing_time().plus_delay_of(5)),
        )
        .accumulating_fired_panes();
    let windowed = p.apply("Events", events).apply("Window", window);
    windowed.group_by_key("Group").capture("groups");
    windowed
        .apply("Sum", Combine::per_key(SumFn))
        .capture("sums");
}

fn check_global_early_processing_time(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    let end = GlobalWindow::MAX_TIMESTAMP.millis();
    let global = BoundedWindow::Global;
    groups_eq(
        &r,
        "groups",
        vec![
            group("a", &[1, 2], global.clone(), end, early(0, false)),
            group("a", &[1, 2, 3], global.clone(), end, early(1, false)),
            group("a", &[1, 2, 3], global.clone(), end, on_time(2, true)),
        ],
    )?;
    keyed_eq(
        &r,
        "sums",
        vec![
            keyed("a", 3i64, global.clone(), end, early(0, false)),
            keyed("a", 6, global.clone(), end, early(1, false)),
            keyed("a", 6, global, end, on_time(2, true)),
        ],
    )
}

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

// ---------------------------------------------------------------------------------------
// AfterProcessingTime aligned to multiples of 100 ms of processing time, repeatedly, in
// the global window of an unbounded stream; and the same with a delay of 80 first.

fn processing_time_aligned(p: &Pipeline) {
    let events = TestStream::new()
        .advance_processing_time(30)
        // At 30: aligned to 100; delayed to 110, aligned to 200.
        .add_elements(vec![at("a", 1)])
        .advance_processing_time(60)
        .add_elements(vec![at("a", 2)])
        // 100 has not passed 100.
        .advance_processing_time(10)
        // 101: the aligned trigger fires {1, 2}.
        .advance_processing_time(1)
        // Aligned: waits until 200.
        .add_elements(vec![at("a", 3)])
        .advance_processing_time(99)
        // 201: the aligned trigger fires {3}, the delayed one {1, 2, 3}.
        .advance_processing_time(1)
        // At 201: aligned to 300, delayed to 281 and aligned to 300.
        .add_elements(vec![at("a", 4)])
        // The end of the global window: the final pane.
        .advance_watermark_to_infinity();
    let input = p.apply("Events", events);
    grouped_again(
        &input,
        "Aligned",
        Window::into(WindowFn::Global).triggering(Trigger::repeatedly(
            Trigger::after_processing_time().aligned_to(100, 0),
        )),
        "aligned",
    );
    grouped_again(
        &input,
        "DelayedAligned",
        Window::into(WindowFn::Global).triggering(Trigger::repeatedly(
            Trigger::after_processing_time()
                .plus_delay_of(80)
                .aligned_to(100, 0),
        )),
        "delayed_aligned",
    );
}

fn check_processing_time_aligned(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    let end = GlobalWindow::MAX_TIMESTAMP.millis();
    let global = BoundedWindow::Global;
    groups_eq(
        &r,
        "aligned",
        vec![
            group("a", &[1, 2], global.clone(), end, early(0, false)),
            group("a", &[3], global.clone(), end, early(1, false)),
            group("a", &[4], global.clone(), end, on_time(2, true)),
        ],
    )?;
    groups_eq(
        &r,
        "delayed_aligned",
        vec![
            group("a", &[1, 2, 3], global.clone(), end, early(0, false)),
            group("a", &[4], global, end, on_time(1, true)),
        ],
    )
}

// ---------------------------------------------------------------------------------------
// AfterCount(2) fires once and closes the window; a window that never reaches the count
// fires its final pane when it expires.

fn after_count(p: &Pipeline) {
    let events = TestStream::new()
        .add_elements(vec![at("a", 1), at("b", 4)])
        .add_elements(vec![at("a", 2)])
        // Closed window: dropped.
        .add_elements(vec![at("a", 3)])
        .advance_watermark_to_infinity();
    grouped(
        p,
        events,
        Window::into(WindowFn::fixed(10)).triggering(Trigger::after_count(2)),
        "groups",
    );
}

fn check_after_count(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    groups_eq(
        &r,
        "groups",
        vec![
            group("a", &[1, 2], iw(0, 10), 9, early(0, true)),
            group("b", &[4], iw(0, 10), 9, ONLY),
        ],
    )?;
    counter_eq(&r, "Group", DROPPED_CLOSED, 1)
}

// ---------------------------------------------------------------------------------------
// AfterCount(3) in sessions: when sessions merge, so do their trigger states; the counts
// of the merged sessions add up.

fn after_count_sessions(p: &Pipeline) {
    let events = TestStream::new()
        // a: [1, 11), one element; b: [1, 11).
        .add_elements(vec![at("a", 1), at("b", 1)])
        // a: [15, 25), one element.
        .add_elements(vec![at("a", 15)])
        // [9, 19) bridges them: [1, 25) with three elements fires.
        .add_elements(vec![at("a", 9)])
        .advance_watermark_to_infinity();
    grouped(
        p,
        events,
        Window::into(WindowFn::sessions(10)).triggering(Trigger::after_count(3)),
        "groups",
    );
}

fn check_after_count_sessions(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    groups_eq(
        &r,
        "groups",
        vec![
            group("a", &[1, 9, 15], iw(1, 25), 24, early(0, true)),
            group("b", &[1], iw(1, 11), 10, ONLY),
        ],
    )
}

// ---------------------------------------------------------------------------------------
// Repeatedly(AfterCount(2)): a pane per two elements, the rest at expiry.

fn repeatedly_after_count(p: &Pipeline) {
    let events = TestStream::new()
        .add_elements(vec![at("a", 1), at("a", 2)])
        .add_elements(vec![at("a", 3)])
        .add_elements(vec![at("a", 4)])
        .add_elements(vec![at("a", 5)])
        .advance_watermark_to_infinity();
    grouped(
        p,
        events,
        Window::into(WindowFn::fixed(10)).triggering(Trigger::repeatedly(Trigger::after_count(2))),
        "groups",
    );
}

fn check_repeatedly_after_count(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    groups_eq(
        &r,
        "groups",
        vec![
            group("a", &[1, 2], iw(0, 10), 9, early(0, false)),
            group("a", &[3, 4], iw(0, 10), 9, early(1, false)),
            group("a", &[5], iw(0, 10), 9, on_time(2, true)),
        ],
    )
}

// ---------------------------------------------------------------------------------------
// AfterEach(AfterCount(2), AfterWatermark): the first sub-trigger once, then the second
// once, then the window is closed.

fn after_each(p: &Pipeline) {
    let events = TestStream::new()
        .add_elements(vec![at("a", 1), at("a", 2)])
        .add_elements(vec![at("a", 3)])
        .advance_watermark_to(Timestamp(10))
        // Within the allowed lateness, but the trigger has finished.
        .add_elements(vec![at("a", 4)])
        .advance_watermark_to_infinity();
    grouped(
        p,
        events,
        Window::into(WindowFn::fixed(10))
            .triggering(Trigger::after_each(vec![
                Trigger::after_count(2),
                Trigger::after_watermark().into(),
            ]))
            .with_allowed_lateness(10),
        "groups",
    );
}

fn check_after_each(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    groups_eq(
        &r,
        "groups",
        vec![
            group("a", &[1, 2], iw(0, 10), 9, early(0, false)),
            group("a", &[3], iw(0, 10), 9, on_time(1, true)),
        ],
    )?;
    counter_eq(&r, "Group", DROPPED_CLOSED, 1)
}

// ---------------------------------------------------------------------------------------
// Repeatedly(AfterFirst(AfterCount(3), AfterProcessingTime + 10)): whichever comes
// first, each time.

fn after_first(p: &Pipeline) {
    let events = TestStream::new()
        // The count fires.
        .add_elements(vec![at("a", 1), at("a", 2), at("a", 3)])
        // At processing time 0: waits until 10.
        .add_elements(vec![at("a", 4)])
        // 11: the delay fires.
        .advance_processing_time(11)
        .add_elements(vec![at("a", 5)])
        .advance_watermark_to_infinity();
    grouped(
        p,
        events,
        Window::into(WindowFn::fixed(100)).triggering(Trigger::repeatedly(Trigger::after_first(
            vec![
                Trigger::after_count(3),
                Trigger::after_processing_time().plus_delay_of(10).into(),
            ],
        ))),
        "groups",
    );
}

fn check_after_first(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    groups_eq(
        &r,
        "groups",
        vec![
            group("a", &[1, 2, 3], iw(0, 100), 99, early(0, false)),
            group("a", &[4], iw(0, 100), 99, early(1, false)),
            group("a", &[5], iw(0, 100), 99, on_time(2, true)),
        ],
    )
}

// ---------------------------------------------------------------------------------------
// AfterAll(AfterCount(2), AfterProcessingTime + 10): once both hold, in either order.

fn after_all(p: &Pipeline) {
    let events = TestStream::new()
        // At processing time 0: count 1, delay until 10.
        .add_elements(vec![at("a", 1), at("b", 50)])
        // The delay has passed, the count is not reached: nothing.
        .advance_processing_time(11)
        // Count 2: fires and finishes.
        .add_elements(vec![at("a", 2)])
        // Closed window: dropped.
        .add_elements(vec![at("a", 3)])
        .advance_watermark_to_infinity();
    grouped(
        p,
        events,
        Window::into(WindowFn::fixed(100)).triggering(Trigger::after_all(vec![
            Trigger::after_count(2),
            Trigger::after_processing_time().plus_delay_of(10).into(),
        ])),
        "groups",
    );
}

fn check_after_all(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    groups_eq(
        &r,
        "groups",
        vec![
            group("a", &[1, 2], iw(0, 100), 99, early(0, true)),
            // Never reached the count: its final pane at expiry.
            group("b", &[50], iw(0, 100), 99, ONLY),
        ],
    )?;
    counter_eq(&r, "Group", DROPPED_CLOSED, 1)
}

// ---------------------------------------------------------------------------------------
// Repeatedly(AfterCount(2)).orFinally(AfterCount(5)): panes of two until the fifth
// element, which fires the last pane; the until-trigger counts across panes.

fn or_finally(p: &Pipeline) {
    let events = TestStream::new()
        .add_elements(vec![at("a", 1), at("a", 2)])
        .add_elements(vec![at("a", 3), at("a", 4)])
        .add_elements(vec![at("a", 5)])
        // Closed window: dropped.
        .add_elements(vec![at("a", 6)])
        .advance_watermark_to_infinity();
    grouped(
        p,
        events,
        Window::into(WindowFn::fixed(10)).triggering(
            Trigger::repeatedly(Trigger::after_count(2)).or_finally(Trigger::after_count(5)),
        ),
        "groups",
    );
}

fn check_or_finally(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    groups_eq(
        &r,
        "groups",
        vec![
            group("a", &[1, 2], iw(0, 10), 9, early(0, false)),
            group("a", &[3, 4], iw(0, 10), 9, early(1, false)),
            group("a", &[5], iw(0, 10), 9, early(2, true)),
        ],
    )?;
    counter_eq(&r, "Group", DROPPED_CLOSED, 1)
}

// ---------------------------------------------------------------------------------------
// Never: nothing until the window expires, then one final pane with everything,
// including late data within the allowed lateness; the same with either closing
// behavior, since such a window always holds data when it expires.

fn never_events() -> Events {
    TestStream::new()
        .add_elements(vec![at("a", 1), at("a", 2)])
        .advance_watermark_to(Timestamp(8))
        // Past the end of the window: Never does not fire.
        .advance_watermark_to(Timestamp(12))
        // Late, within the allowed lateness (9 + 5 >= 12).
        .add_elements(vec![at("a", 3)])
        // Expired (14 < 20): the final pane.
        .advance_watermark_to(Timestamp(20))
        .advance_watermark_to_infinity()
}

fn never(p: &Pipeline) {
    let input = p.apply("Events", never_events());
    let window = |closing| {
        Window::into(WindowFn::fixed(10))
            .triggering(Trigger::Never)
            .with_allowed_lateness(5)
            .with_closing_behavior(closing)
    };
    grouped_again(
        &input,
        "EmitAlways",
        window(ClosingBehavior::EmitAlways),
        "emit_always",
    );
    grouped_again(
        &input,
        "EmitIfNonempty",
        window(ClosingBehavior::EmitIfNonempty),
        "emit_if_nonempty",
    );
}

fn check_never(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    for name in ["emit_always", "emit_if_nonempty"] {
        groups_eq(&r, name, vec![group("a", &[1, 2, 3], iw(0, 10), 9, ONLY)])?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Closing behavior: with late firings, a window whose last pane emitted everything
// expires empty; EmitAlways still emits a final (empty, late) pane, EmitIfNonempty not.

fn closing_behavior(p: &Pipeline) {
    let events = TestStream::new()
        .add_elements(vec![at("a", 1)])
        .advance_watermark_to(Timestamp(10))
        .add_elements(vec![at("a", 2)])
        // Expired: 9 + 10 < 30.
        .advance_watermark_to(Timestamp(30))
        .advance_watermark_to_infinity();
    let input = p.apply("Events", events);
    let window = |closing| {
        Window::into(WindowFn::fixed(10))
            .triggering(Trigger::after_watermark().with_late_firings(Trigger::after_count(1)))
            .with_allowed_lateness(10)
            .with_closing_behavior(closing)
    };
    grouped_again(
        &input,
        "EmitAlways",
        window(ClosingBehavior::EmitAlways),
        "emit_always",
    );
    grouped_again(
        &input,
        "EmitIfNonempty",
        window(ClosingBehavior::EmitIfNonempty),
        "emit_if_nonempty",
    );
}

fn check_closing_behavior(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    let panes = vec![
        group("a", &[1], iw(0, 10), 9, on_time(0, false)),
        group("a", &[2], iw(0, 10), 9, late(1, 1, false)),
    ];
    let mut always = panes.clone();
    always.push(group("a", &[], iw(0, 10), 9, late(2, 2, true)));
    groups_eq(&r, "emit_always", always)?;
    groups_eq(&r, "emit_if_nonempty", panes)
}
