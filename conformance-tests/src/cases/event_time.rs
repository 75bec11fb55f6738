//! Event time beyond the triggers themselves: late data dropped past the allowed
//! lateness (exactly at its boundary), timestamp combiners, the on-time behavior, and the
//! timing of panes at the edges (watermark exactly at the window's max timestamp, a late
//! window's first pane).
//!
//! Expected values follow Beam: `PaneInfoTracker` calls a pane EARLY while the input
//! watermark has not passed the window's max timestamp (`watermark <= max`), LATE once an
//! ON_TIME or LATE pane fired or the output watermark passed the window's max timestamp,
//! ON_TIME otherwise; `ReduceFnRunner` emits an empty pane only if it is the ON_TIME one
//! with `OnTimeBehavior::FireAlways` or the final one with `ClosingBehavior::EmitAlways`,
//! and at expiry it always evaluates the final pane, whatever the trigger says.

use crate::case::RunResult;
use crate::cases::panes::{
    at, counter_eq, early, group, groups_eq, iw, keyed, keyed_eq, late, on_time, DROPPED_LATE, ONLY,
};
use crate::check::succeeded;
use crate::Case;
use serde::{Deserialize, Serialize};
use tidewater::runner::Feature::{
    Capture, CombinePerKey, GroupByKey, TestStream as TestStreamFeature, WindowInto,
};
use tidewater::{
    Combine, CombineFn, OnTimeBehavior, PCollection, Pipeline, TestStream, Timestamp,
    TimestampCombiner, Trigger, Window, WindowFn,
};

const STREAMING: &[tidewater::runner::Feature] =
    &[TestStreamFeature, WindowInto, GroupByKey, Capture];

pub(crate) fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "late_data/dropped_past_allowed_lateness",
            features: STREAMING,
            build: dropped_past_lateness,
            check: check_dropped_past_lateness,
        },
        Case {
            name: "late_data/sliding_windows_drop_only_expired_windows",
            features: STREAMING,
            build: sliding_lateness,
            check: check_sliding_lateness,
        },
        Case {
            name: "late_data/first_pane_of_a_late_window_is_late",
            features: STREAMING,
            build: late_first_pane,
            check: check_late_first_pane,
        },
        Case {
            name: "timestamp_combiner/early_and_on_time_panes",
            features: STREAMING,
            build: timestamp_combiners,
            check: check_timestamp_combiners,
        },
        Case {
            name: "timestamp_combiner/late_input_does_not_move_output_time",
            features: STREAMING,
            build: late_timestamp_combiners,
            check: check_late_timestamp_combiners,
        },
        Case {
            name: "on_time_behavior/empty_on_time_pane_after_early_panes",
            features: &[
                TestStreamFeature,
                WindowInto,
                GroupByKey,
                CombinePerKey,
                Capture,
            ],
            build: on_time_behavior,
            check: check_on_time_behavior,
        },
        Case {
            name: "on_time_behavior/empty_on_time_pane_at_expiry_of_count_trigger",
            features: STREAMING,
            build: on_time_at_expiry,
            check: check_on_time_at_expiry,
        },
        Case {
            name: "pane_timing/watermark_at_max_timestamp_is_early",
            features: STREAMING,
            build: watermark_at_max_timestamp,
            check: check_watermark_at_max_timestamp,
        },
    ]
}

type Events = TestStream<(String, i64)>;

fn stream(p: &Pipeline, events: Events) -> PCollection<(String, i64)> {
    p.apply("Events", events)
}

fn group_by_key(input: &PCollection<(String, i64)>, suffix: &str, window: Window, name: &str) {
    input
        .apply(&format!("Window{suffix}"), window)
        .group_by_key(&format!("Group{suffix}"))
        .capture(name);
}

// ---------------------------------------------------------------------------------------
// Fixed windows of 10, allowed lateness 5, default trigger: [0, 10) expires when the
// watermark passes 9 + 5 = 14. At watermark 14 late data is still accepted; at 15 it is
// dropped and counted, whatever its key.

fn dropped_past_lateness(p: &Pipeline) {
    let events = TestStream::new()
        .add_elements(vec![at("a", 1)])
        // On time; not expired (14 has not passed 14).
        .advance_watermark_to(Timestamp(14))
        // Accepted: a late pane.
        .add_elements(vec![at("a", 2)])
        // Expired.
        .advance_watermark_to(Timestamp(15))
        // Dropped, including b's, whose window never held anything.
        .add_elements(vec![at("a", 3), at("a", 4), at("b", 9)])
        // A later window is fine.
        .add_elements(vec![at("a", 15)])
        .advance_watermark_to_infinity();
    group_by_key(
        &stream(p, events),
        "",
        Window::into(WindowFn::fixed(10)).with_allowed_lateness(5),
        "groups",
    );
}

fn check_dropped_past_lateness(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    groups_eq(
        &r,
        "groups",
        vec![
            group("a", &[1], iw(0, 10), 9, on_time(0, false)),
            group("a", &[2], iw(0, 10), 9, late(1, 1, false)),
            // The watermark jumps past both its end and its expiry: on time and last.
            group("a", &[15], iw(10, 20), 19, ONLY),
        ],
    )?;
    counter_eq(&r, "Group", DROPPED_LATE, 3)
}

// ---------------------------------------------------------------------------------------
// Sliding windows of 10 every 5, no allowed lateness: lateness is decided per window. At
// watermark 12, an element at 8 is too late for [0, 10) (expired at 9) but not for
// [5, 15); only the expired (element, window) is dropped and counted.

fn sliding_lateness(p: &Pipeline) {
    let events = TestStream::new()
        .advance_watermark_to(Timestamp(12))
        .add_elements(vec![at("a", 8)])
        .add_elements(vec![at("a", 13)])
        .advance_watermark_to_infinity();
    group_by_key(
        &stream(p, events),
        "",
        Window::into(WindowFn::sliding(10, 5)),
        "groups",
    );
}

fn check_sliding_lateness(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    groups_eq(
        &r,
        "groups",
        vec![
            group("a", &[8, 13], iw(5, 15), 14, ONLY),
            group("a", &[13], iw(10, 20), 19, ONLY),
        ],
    )?;
    counter_eq(&r, "Group", DROPPED_LATE, 1)
}

// ---------------------------------------------------------------------------------------
// Late data for a window that never held anything before: its first pane fires after
// the output watermark passed the window's end, so it is LATE (Beam's PaneInfo: "LATE:
// the pane was fired after the output watermark had progressed past the end of the
// window"; PaneInfoTracker's isLateForOutput), though it is the window's first pane.

fn late_first_pane(p: &Pipeline) {
    let events = TestStream::new()
        .add_elements(vec![at("b", 15)])
        // Nothing holds the output watermark below 12, past the end of [0, 10).
        .advance_watermark_to(Timestamp(12))
        // Late for [0, 10), within the allowed lateness: the default trigger fires at once.
        .add_elements(vec![at("a", 3)])
        .advance_watermark_to(Timestamp(25))
        .advance_watermark_to_infinity();
    group_by_key(
        &stream(p, events),
        "",
        Window::into(WindowFn::fixed(10)).with_allowed_lateness(100),
        "groups",
    );
}

fn check_late_first_pane(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    groups_eq(
        &r,
        "groups",
        vec![
            group("a", &[3], iw(0, 10), 9, late(0, 0, false)),
            group("b", &[15], iw(10, 20), 19, on_time(0, false)),
        ],
    )
}

// ---------------------------------------------------------------------------------------
// Timestamp combiners over an early pane and the on-time pane (discarding): the end of
// the window, the earliest, or the latest input timestamp of each pane.

fn timestamp_combiners(p: &Pipeline) {
    let events = TestStream::new()
        // Early pane {3, 5, 6}.
        .add_elements(vec![at("a", 5), at("a", 3), at("a", 6)])
        .add_elements(vec![at("a", 8), at("a", 1)])
        // On-time pane {1, 8}.
        .advance_watermark_to(Timestamp(10))
        .advance_watermark_to_infinity();
    let input = stream(p, events);
    for (suffix, tc, name) in [
        ("End", TimestampCombiner::EndOfWindow, "end_of_window"),
        ("Earliest", TimestampCombiner::EarliestInPane, "earliest"),
        ("Latest", TimestampCombiner::LatestInPane, "latest"),
    ] {
        group_by_key(
            &input,
            suffix,
            Window::into(WindowFn::fixed(10))
                .triggering(Trigger::after_watermark().with_early_firings(Trigger::after_count(3)))
                .with_timestamp_combiner(tc),
            name,
        );
    }
}

fn check_timestamp_combiners(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    for (name, early_ts, on_time_ts) in [
        ("end_of_window", 9, 9),
        ("earliest", 3, 1),
        ("latest", 6, 8),
    ] {
        groups_eq(
            &r,
            name,
            vec![
                group("a", &[3, 5, 6], iw(0, 10), early_ts, early(0, false)),
                group("a", &[1, 8], iw(0, 10), on_time_ts, on_time(1, true)),
            ],
        )?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Late input has no effect on the output timestamp (Beam's TimestampCombiner EARLIEST
// and LATEST combine the timestamps "of non-late inputs"; OutputTimeFns: "if data
// arrives late, it has no effect on the output timestamp"): a late pane holding only late
// input is stamped at the end of the window, as Beam's ReduceFnRunner does when a pane
// has no element hold. Otherwise a late pane would be stamped behind the output watermark
// and a downstream grouping with the same allowed lateness could drop it.

fn late_timestamp_combiners(p: &Pipeline) {
    let events = TestStream::new()
        .add_elements(vec![at("a", 5)])
        // On-time pane {5}, stamped 5.
        .advance_watermark_to(Timestamp(10))
        // Late (2 < 10), within the allowed lateness: a late pane {2}.
        .add_elements(vec![at("a", 2)])
        .advance_watermark_to_infinity();
    let input = stream(p, events);
    for (suffix, tc, name) in [
        ("Earliest", TimestampCombiner::EarliestInPane, "earliest"),
        ("Latest", TimestampCombiner::LatestInPane, "latest"),
    ] {
        group_by_key(
            &input,
            suffix,
            Window::into(WindowFn::fixed(10))
                .with_allowed_lateness(100)
                .with_timestamp_combiner(tc),
            name,
        );
    }
}

fn check_late_timestamp_combiners(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    for name in ["earliest", "latest"] {
        groups_eq(
            &r,
            name,
            vec![
                group("a", &[5], iw(0, 10), 5, on_time(0, false)),
                group("a", &[2], iw(0, 10), 9, late(1, 1, false)),
            ],
        )?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// OnTimeBehavior: early panes on every element (discarding) empty the window before the
// watermark passes its end. FireAlways still emits the on-time pane, empty (for
// GroupByKey an empty Vec, for a Combine the output of an empty accumulator);
// FireIfNonempty emits nothing.

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

fn every_element_early(behavior: OnTimeBehavior) -> Window {
    Window::into(WindowFn::fixed(10))
        .triggering(Trigger::after_watermark().with_early_firings(Trigger::after_count(1)))
        .with_on_time_behavior(behavior)
}

fn on_time_behavior(p: &Pipeline) {
    let events = TestStream::new()
        .add_elements(vec![at("a", 1)])
        .add_elements(vec![at("a", 2)])
        .advance_watermark_to(Timestamp(10))
        .advance_watermark_to_infinity();
    let input = stream(p, events);
    group_by_key(
        &input,
        "FireAlways",
        every_element_early(OnTimeBehavior::FireAlways),
        "fire_always",
    );
    group_by_key(
        &input,
        "FireIfNonempty",
        every_element_early(OnTimeBehavior::FireIfNonempty),
        "fire_if_nonempty",
    );
    input
        .apply("WindowSum", every_element_early(OnTimeBehavior::FireAlways))
        .apply("Sum", Combine::per_key(SumFn))
        .capture("sums");
}

fn check_on_time_behavior(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    let early_panes = vec![
        group("a", &[1], iw(0, 10), 9, early(0, false)),
        group("a", &[2], iw(0, 10), 9, early(1, false)),
    ];
    let mut always = early_panes.clone();
    always.push(group("a", &[], iw(0, 10), 9, on_time(2, true)));
    groups_eq(&r, "fire_always", always)?;
    groups_eq(&r, "fire_if_nonempty", early_panes)?;
    keyed_eq(
        &r,
        "sums",
        vec![
            keyed("a", 1i64, iw(0, 10), 9, early(0, false)),
            keyed("a", 2, iw(0, 10), 9, early(1, false)),
            keyed("a", 0, iw(0, 10), 9, on_time(2, true)),
        ],
    )
}

// ---------------------------------------------------------------------------------------
// The on-time pane does not need a watermark trigger: with Repeatedly(AfterCount(2)) and
// no allowed lateness, the window expires when the watermark passes its end, and the
// pane evaluated then is the ON_TIME one (only early panes before it). Beam's
// ReduceFnRunner evaluates that final pane at expiry whatever the trigger says and, with
// OnTimeBehavior::FireAlways (the default), emits it even though it is empty.

fn on_time_at_expiry(p: &Pipeline) {
    let events = TestStream::new()
        .add_elements(vec![at("a", 1), at("a", 2)])
        .advance_watermark_to_infinity();
    let input = stream(p, events);
    let window = |behavior| {
        Window::into(WindowFn::fixed(10))
            .triggering(Trigger::repeatedly(Trigger::after_count(2)))
            .with_on_time_behavior(behavior)
    };
    group_by_key(
        &input,
        "FireAlways",
        window(OnTimeBehavior::FireAlways),
        "fire_always",
    );
    group_by_key(
        &input,
        "FireIfNonempty",
        window(OnTimeBehavior::FireIfNonempty),
        "fire_if_nonempty",
    );
}

fn check_on_time_at_expiry(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    let early_pane = group("a", &[1, 2], iw(0, 10), 9, early(0, false));
    groups_eq(
        &r,
        "fire_always",
        vec![
            early_pane.clone(),
            group("a", &[], iw(0, 10), 9, on_time(1, true)),
        ],
    )?;
    groups_eq(&r, "fire_if_nonempty", vec![early_pane])
}

// ---------------------------------------------------------------------------------------
// A pane fired while the input watermark is exactly the window's max timestamp is EARLY:
// the watermark has reached the end of the window but not passed it (Beam's
// PaneInfoTracker: `isEarlyForInput = !inputWM.isAfter(windowMaxTimestamp)`; the
// end-of-window timer at 9 fires only when the watermark passes 9).

fn watermark_at_max_timestamp(p: &Pipeline) {
    let events = TestStream::new()
        .advance_watermark_to(Timestamp(9))
        .add_elements(vec![at("a", 5)])
        .add_elements(vec![at("a", 6)])
        .advance_watermark_to(Timestamp(10))
        .advance_watermark_to_infinity();
    group_by_key(
        &stream(p, events),
        "",
        Window::into(WindowFn::fixed(10))
            .triggering(Trigger::after_watermark().with_early_firings(Trigger::after_count(1))),
        "groups",
    );
}

fn check_watermark_at_max_timestamp(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    groups_eq(
        &r,
        "groups",
        vec![
            group("a", &[5], iw(0, 10), 9, early(0, false)),
            group("a", &[6], iw(0, 10), 9, early(1, false)),
            // Empty (discarding), emitted with OnTimeBehavior::FireAlways.
            group("a", &[], iw(0, 10), 9, on_time(2, true)),
        ],
    )
}
