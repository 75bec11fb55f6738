//! Window assignment: fixed (with and without offset), sliding, sessions (merging across
//! out-of-order batches, late data merging within the allowed lateness), a custom
//! WindowFn, combining per window, and the configurations construction refuses.
//!
//! Expected values follow Beam: an element at `t` is in `[s, s + size)` with
//! `s = t - (t - offset) mod size` (fixed) and in every `[offset + k·period, +size)`
//! that contains it (sliding); sessions are `[t, t + gap)` merged per key while they
//! overlap. With the default trigger a bounded input gives one on-time pane per key and
//! window, stamped with the window's max timestamp (`end - 1`).

use crate::case::RunResult;
use crate::cases::panes::{
    at, construction_outcome, counter_eq, event_time, group, groups_eq, iw, keyed, keyed_eq, kvs,
    late, on_time, DROPPED_LATE, ONLY,
};
use crate::check::{eq, succeeded, values};
use crate::Case;
use serde::{Deserialize, Serialize};
use tidewater::runner::Feature::{
    Capture, CombinePerKey, Create, GroupByKey, ParDo, TestStream as TestStreamFeature, WindowInto,
};
use tidewater::{
    BoundedWindow, Combine, CombineFn, CustomWindowFn, ElementWindowFn, Pipeline, TestStream,
    Timestamp, Trigger, Window, WindowFn, WindowType,
};

pub(crate) fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "windowing/fixed",
            features: &[Create, ParDo, WindowInto, GroupByKey, Capture],
            build: fixed,
            check: check_fixed,
        },
        Case {
            name: "windowing/fixed_with_offset",
            features: &[Create, ParDo, WindowInto, GroupByKey, Capture],
            build: fixed_offset,
            check: check_fixed_offset,
        },
        Case {
            name: "windowing/sliding",
            features: &[Create, ParDo, WindowInto, GroupByKey, Capture],
            build: sliding,
            check: check_sliding,
        },
        Case {
            name: "windowing/sessions_out_of_order_and_late",
            features: &[TestStreamFeature, WindowInto, GroupByKey, Capture],
            build: sessions,
            check: check_sessions,
        },
        Case {
            name: "windowing/custom_window_fn",
            features: &[Create, ParDo, WindowInto, GroupByKey, Capture],
            build: custom,
            check: check_custom,
        },
        Case {
            name: "windowing/element_window_fn_with_its_own_window_type",
            features: &[TestStreamFeature, WindowInto, GroupByKey, Capture],
            build: spans,
            check: check_spans,
        },
        Case {
            name: "windowing/combine_per_window",
            features: &[Create, ParDo, WindowInto, CombinePerKey, Capture],
            build: combine_per_window,
            check: check_combine_per_window,
        },
        Case {
            name: "windowing/rewindow_grouped_output",
            features: &[Create, ParDo, WindowInto, CombinePerKey, Capture],
            build: rewindow,
            check: check_rewindow,
        },
        Case {
            name: "windowing/refuses_zero_size",
            features: &[Create, Capture],
            build: refuse_zero_size,
            check: check_refuse_zero_size,
        },
        Case {
            name: "windowing/refuses_negative_size",
            features: &[Create, Capture],
            build: refuse_negative_size,
            check: check_refuse_negative_size,
        },
        Case {
            name: "windowing/refuses_negative_gap",
            features: &[Create, Capture],
            build: refuse_negative_gap,
            check: check_refuse_negative_gap,
        },
        Case {
            name: "windowing/refuses_negative_allowed_lateness",
            features: &[Create, Capture],
            build: refuse_negative_lateness,
            check: check_refuse_negative_lateness,
        },
        Case {
            name: "windowing/refuses_unbounded_global_default_trigger",
            features: &[Create, Capture],
            build: refuse_unbounded_global,
            check: check_refuse_unbounded_global,
        },
    ]
}

fn fixed(p: &Pipeline) {
    let input = kvs(&[
        ("a", 1),
        ("a", 9),
        ("a", 10),
        ("a", 12),
        ("b", -3),
        ("b", 25),
        ("a", 29),
    ]);
    p.create("Events", input)
        .with_timestamps("Stamp", event_time)
        .apply("Fixed10", Window::into(WindowFn::fixed(10)))
        .group_by_key("Group")
        .capture("groups");
}

fn check_fixed(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    groups_eq(
        &r,
        "groups",
        vec![
            group("a", &[1, 9], iw(0, 10), 9, ONLY),
            group("a", &[10, 12], iw(10, 20), 19, ONLY),
            group("a", &[29], iw(20, 30), 29, ONLY),
            // -3 - ((-3 - 0) mod 10) = -10: windows tile the negative timeline too.
            group("b", &[-3], iw(-10, 0), -1, ONLY),
            group("b", &[25], iw(20, 30), 29, ONLY),
        ],
    )
}

fn fixed_offset(p: &Pipeline) {
    let input = kvs(&[("a", 2), ("a", 3), ("a", 12), ("a", 13), ("b", 22)]);
    p.create("Events", input)
        .with_timestamps("Stamp", event_time)
        .apply(
            "Fixed10Offset3",
            Window::into(WindowFn::fixed(10).with_offset(3)),
        )
        .group_by_key("Group")
        .capture("groups");
}

fn check_fixed_offset(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    // Windows [3 + 10k, 13 + 10k).
    groups_eq(
        &r,
        "groups",
        vec![
            group("a", &[2], iw(-7, 3), 2, ONLY),
            group("a", &[3, 12], iw(3, 13), 12, ONLY),
            group("a", &[13], iw(13, 23), 22, ONLY),
            group("b", &[22], iw(13, 23), 22, ONLY),
        ],
    )
}

fn sliding(p: &Pipeline) {
    let stamped = p
        .create("Events", kvs(&[("a", 0), ("a", 7), ("a", 12)]))
        .with_timestamps("Stamp", event_time);
    stamped
        .apply("Sliding10Every5", Window::into(WindowFn::sliding(10, 5)))
        .group_by_key("Group")
        .capture("groups");
    stamped
        .apply(
            "Sliding10Every5Offset2",
            Window::into(WindowFn::sliding(10, 5).with_offset(2)),
        )
        .group_by_key("GroupOffset")
        .capture("offset_groups");
}

fn check_sliding(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    // Starts at multiples of 5: 0 is in [-5, 5) and [0, 10), 7 in [0, 10) and [5, 15),
    // 12 in [5, 15) and [10, 20).
    groups_eq(
        &r,
        "groups",
        vec![
            group("a", &[0], iw(-5, 5), 4, ONLY),
            group("a", &[0, 7], iw(0, 10), 9, ONLY),
            group("a", &[7, 12], iw(5, 15), 14, ONLY),
            group("a", &[12], iw(10, 20), 19, ONLY),
        ],
    )?;
    // Starts at 2 + 5k: 0 is in [-8, 2) and [-3, 7); 7 is in [2, 12) and [7, 17) (not
    // in [-3, 7), which ends at 7); 12 is in [7, 17) and [12, 22).
    groups_eq(
        &r,
        "offset_groups",
        vec![
            group("a", &[0], iw(-8, 2), 1, ONLY),
            group("a", &[0], iw(-3, 7), 6, ONLY),
            group("a", &[7], iw(2, 12), 11, ONLY),
            group("a", &[7, 12], iw(7, 17), 16, ONLY),
            group("a", &[12], iw(12, 22), 21, ONLY),
        ],
    )
}

/// Sessions with a gap of 10 and an allowed lateness of 20, default trigger,
/// discarding: proto-windows `[t, t + 10)` merge per key as they arrive.
fn sessions(p: &Pipeline) {
    let events = TestStream::new()
        .add_elements(vec![at("a", 1), at("a", 30), at("b", 3)])
        // 12 alone would start a session [12, 22); 5 bridges it with [1, 11).
        .add_elements(vec![at("a", 12), at("a", 5)])
        // a: [1, 22) and [30, 40) end after 25; b: [3, 13) fires on time.
        .advance_watermark_to(Timestamp(25))
        // Late (9 < 25) but its window [9, 19) is within the allowed lateness
        // (18 + 20 >= 25): it merges into the session [1, 22), which already fired on
        // time, and fires a late pane at once.
        .add_elements(vec![at("a", 9)])
        // Its own window [-6, 4) expired at 3 + 20 = 23 < 25: dropped, although it
        // overlaps the live session [1, 22) (lateness is decided on the element's own
        // window, before merging).
        .add_elements(vec![at("a", -6)])
        // 35 extends [30, 40) to [30, 45), 44 extends it to [30, 54).
        .add_elements(vec![at("a", 35), at("a", 44)])
        // [30, 54) fires on time; [1, 22) and [3, 13) expire (41 and 32 < 60).
        .advance_watermark_to(Timestamp(60))
        // [8, 18) expired at 37: dropped.
        .add_elements(vec![at("a", 8)])
        .advance_watermark_to(Timestamp(80))
        .advance_watermark_to_infinity();
    p.apply("Events", events)
        .apply(
            "Sessions",
            Window::into(WindowFn::sessions(10)).with_allowed_lateness(20),
        )
        .group_by_key("Group")
        .capture("sessions");
}

fn check_sessions(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    groups_eq(
        &r,
        "sessions",
        vec![
            // The default trigger never finishes and the allowed lateness is positive:
            // no pane is known to be the last when it fires.
            group("a", &[1, 5, 12], iw(1, 22), 21, on_time(0, false)),
            group("a", &[9], iw(1, 22), 21, late(1, 1, false)),
            group("a", &[30, 35, 44], iw(30, 54), 53, on_time(0, false)),
            group("b", &[3], iw(3, 13), 12, on_time(0, false)),
        ],
    )?;
    counter_eq(&r, "Group", DROPPED_LATE, 2)
}

/// Every element in its hundred and in the first thousand.
#[derive(Serialize, Deserialize)]
struct HundredsAndThousand;

impl CustomWindowFn for HundredsAndThousand {
    type Window = BoundedWindow;
    fn assign(&self, ts: Timestamp) -> Vec<BoundedWindow> {
        let start = ts.millis().div_euclid(100) * 100;
        vec![iw(start, start + 100), iw(0, 1000)]
    }
}

fn custom(p: &Pipeline) {
    p.create(
        "Events",
        kvs(&[("a", 5), ("a", 150), ("a", 160), ("b", 999)]),
    )
    .with_timestamps("Stamp", event_time)
    .apply(
        "Custom",
        Window::into(WindowFn::custom(HundredsAndThousand)),
    )
    .group_by_key("Group")
    .capture("groups");
}

fn check_custom(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    groups_eq(
        &r,
        "groups",
        vec![
            group("a", &[5], iw(0, 100), 99, ONLY),
            group("a", &[150, 160], iw(100, 200), 199, ONLY),
            group("a", &[5, 150, 160], iw(0, 1000), 999, ONLY),
            group("b", &[999], iw(900, 1000), 999, ONLY),
            group("b", &[999], iw(0, 1000), 999, ONLY),
        ],
    )
}

/// A user window type: a span of a key, opened by an element, or an item's provisional
/// span (Beam's Nexmark Q9 windows, in small).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Span {
    start: i64,
    end: i64,
    opener: bool,
}

impl WindowType for Span {
    fn start(&self) -> Timestamp {
        Timestamp(self.start)
    }
    fn end(&self) -> Timestamp {
        Timestamp(self.end)
    }
}

pub(crate) fn span(start: i64, end: i64, opener: bool) -> BoundedWindow {
    BoundedWindow::custom(&Span { start, end, opener })
}

/// Windows by element: `(key, n)` with `n > 0` opens the span `[t, t + n)`; `n < 0` is
/// an item with the provisional span `[t, t + 5)`; `n == 0` is in no window (dropped).
/// An item's span merges into its key's opened span when it starts before that ends.
#[derive(Serialize, Deserialize)]
pub(crate) struct Spans;

impl ElementWindowFn<(String, i64)> for Spans {
    type Window = Span;
    fn assign(&self, e: &(String, i64), ts: Timestamp) -> Vec<Span> {
        let t = ts.millis();
        match e.1 {
            0 => Vec::new(),
            n if n > 0 => vec![Span {
                start: t,
                end: t + n,
                opener: true,
            }],
            _ => vec![Span {
                start: t,
                end: t + 5,
                opener: false,
            }],
        }
    }
    fn is_merging(&self) -> bool {
        true
    }
    fn merge(&self, windows: &[Span]) -> Vec<(Vec<Span>, Span)> {
        let mut merges = Vec::new();
        for opened in windows.iter().filter(|w| w.opener) {
            let mut from: Vec<Span> = windows
                .iter()
                .filter(|w| !w.opener && w.start < opened.end)
                .cloned()
                .collect();
            if !from.is_empty() {
                from.push(opened.clone());
                merges.push((from, opened.clone()));
            }
        }
        merges
    }
}

fn spans(p: &Pipeline) {
    let e = |k: &str, n: i64, t: i64| ((k.to_string(), n), Timestamp(t));
    let events = TestStream::new()
        // Items before their opener: provisional spans [5, 10) and [25, 30) of a.
        .add_elements(vec![
            e("a", -1, 5),
            e("a", -2, 25),
            e("b", -4, 3),
            e("a", 0, 12),
        ])
        // b's [3, 8) ends with nothing to merge into: it fires alone.
        .advance_watermark_to(Timestamp(9))
        // a opens [10, 30): both of a's items merge into it ([5, 10) starts before 30).
        .add_elements(vec![e("a", 20, 10)])
        // [40, 45) starts after a's span ends: it stays on its own.
        .add_elements(vec![e("a", -3, 40)])
        // Late: its span [2, 7) ended before the watermark (9): dropped.
        .add_elements(vec![e("a", -5, 2)])
        .advance_watermark_to_infinity();
    p.apply("Events", events)
        .apply("Spans", Window::into(WindowFn::by_element(Spans)))
        .group_by_key("Group")
        .capture("spans");
}

fn check_spans(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    groups_eq(
        &r,
        "spans",
        vec![
            group("b", &[-4], span(3, 8, false), 7, ONLY),
            group("a", &[-2, -1, 20], span(10, 30, true), 29, ONLY),
            group("a", &[-3], span(40, 45, false), 44, ONLY),
        ],
    )?;
    counter_eq(&r, "Group", DROPPED_LATE, 1)
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

/// Combine.perKey per fixed window (a runner may combine before the shuffle here).
fn combine_per_window(p: &Pipeline) {
    p.create(
        "Events",
        kvs(&[("a", 1), ("a", 2), ("a", 11), ("b", 3), ("a", 19)]),
    )
    .with_timestamps("Stamp", event_time)
    .apply("Fixed10", Window::into(WindowFn::fixed(10)))
    .apply("Sum", Combine::per_key(SumFn))
    .capture("sums");
}

fn check_combine_per_window(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    keyed_eq(
        &r,
        "sums",
        vec![
            keyed("a", 3i64, iw(0, 10), 9, ONLY),
            keyed("a", 30, iw(10, 20), 19, ONLY),
            keyed("b", 3, iw(0, 10), 9, ONLY),
        ],
    )
}

/// A grouping's outputs carry their window's max timestamp, so windowing them again
/// puts each into the window containing that timestamp: sums per 10 ms (at 9, 19 and 29)
/// summed again per 20 ms.
fn rewindow(p: &Pipeline) {
    let sums10 = p
        .create("Events", kvs(&[("a", 1), ("a", 2), ("a", 11), ("a", 25)]))
        .with_timestamps("Stamp", event_time)
        .apply("Fixed10", Window::into(WindowFn::fixed(10)))
        .apply("Sum10", Combine::per_key(SumFn));
    sums10.capture("sums10");
    sums10
        .apply("Fixed20", Window::into(WindowFn::fixed(20)))
        .apply("Sum20", Combine::per_key(SumFn))
        .capture("sums20");
}

fn check_rewindow(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    keyed_eq(
        &r,
        "sums10",
        vec![
            keyed("a", 3i64, iw(0, 10), 9, ONLY),
            keyed("a", 11, iw(10, 20), 19, ONLY),
            keyed("a", 25, iw(20, 30), 29, ONLY),
        ],
    )?;
    keyed_eq(
        &r,
        "sums20",
        vec![
            keyed("a", 14i64, iw(0, 20), 19, ONLY),
            keyed("a", 25, iw(20, 40), 39, ONLY),
        ],
    )
}

/// Reports, as the single element of capture `refusal`, what constructing the faulty
/// pipeline `faulty` said.
fn report_refusal(p: &Pipeline, faulty: fn(&Pipeline)) {
    p.create("Refusal", vec![construction_outcome(faulty)])
        .capture("refusal");
}

/// The faulty pipeline was refused in `transform` with a message containing `needles`.
fn check_refusal(r: RunResult, transform: &str, needles: &[&str]) -> Result<(), String> {
    let r = succeeded(r)?;
    let got = values::<String>(&r, "refusal")?;
    let [outcome] = got.as_slice() else {
        return Err(format!("expected one construction outcome, got {got:?}"));
    };
    let Some((t, message)) = outcome.split_once('|') else {
        return Err(format!(
            "the pipeline was {outcome}: expected a construction error in '{transform}'"
        ));
    };
    eq("refusing transform", t, transform)?;
    for n in needles {
        if !message.contains(n) {
            return Err(format!(
                "the refusal's message should contain {n:?}: {message:?}"
            ));
        }
    }
    Ok(())
}

fn stamped(q: &Pipeline) -> tidewater::PCollection<(String, i64)> {
    q.create("Events", kvs(&[("a", 1)]))
        .with_timestamps("Stamp", event_time)
}

fn zero_size(q: &Pipeline) {
    stamped(q).apply("Fixed0", Window::into(WindowFn::fixed(0)));
}

fn refuse_zero_size(p: &Pipeline) {
    report_refusal(p, zero_size);
}

fn check_refuse_zero_size(r: RunResult) -> Result<(), String> {
    check_refusal(r, "Fixed0", &["size", "0 ms"])
}

fn negative_size(q: &Pipeline) {
    stamped(q).apply("SlidingMinus10", Window::into(WindowFn::sliding(-10, 5)));
}

fn refuse_negative_size(p: &Pipeline) {
    report_refusal(p, negative_size);
}

fn check_refuse_negative_size(r: RunResult) -> Result<(), String> {
    check_refusal(r, "SlidingMinus10", &["size", "-10 ms"])
}

fn negative_gap(q: &Pipeline) {
    stamped(q).apply("SessionsMinus5", Window::into(WindowFn::sessions(-5)));
}

fn refuse_negative_gap(p: &Pipeline) {
    report_refusal(p, negative_gap);
}

fn check_refuse_negative_gap(r: RunResult) -> Result<(), String> {
    check_refusal(r, "SessionsMinus5", &["gap", "-5 ms"])
}

fn negative_lateness(q: &Pipeline) {
    stamped(q).apply(
        "LatenessMinus1",
        Window::into(WindowFn::fixed(10)).with_allowed_lateness(-1),
    );
}

fn refuse_negative_lateness(p: &Pipeline) {
    report_refusal(p, negative_lateness);
}

fn check_refuse_negative_lateness(r: RunResult) -> Result<(), String> {
    check_refusal(r, "LatenessMinus1", &["lateness", "-1 ms"])
}

fn unbounded_global(q: &Pipeline) {
    q.apply(
        "Events",
        TestStream::new()
            .add_elements(vec![at("a", 1)])
            .advance_watermark_to_infinity(),
    )
    .group_by_key("Group");
}

/// The same grouping with a trigger that fires before the end of the global window.
fn unbounded_global_with_early_trigger(q: &Pipeline) {
    q.apply(
        "Events",
        TestStream::new()
            .add_elements(vec![at("a", 1)])
            .advance_watermark_to_infinity(),
    )
    .apply(
        "EveryElement",
        Window::configure().triggering(Trigger::repeatedly(Trigger::after_count(1))),
    )
    .group_by_key("Group");
}

fn refuse_unbounded_global(p: &Pipeline) {
    let outcomes = vec![
        construction_outcome(unbounded_global),
        construction_outcome(unbounded_global_with_early_trigger),
    ];
    p.create("Refusal", outcomes).capture("refusal");
}

fn check_refuse_unbounded_global(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    let got = values::<String>(&r, "refusal")?;
    let (refused, accepted): (Vec<&String>, Vec<&String>) =
        got.iter().partition(|o| o.as_str() != "accepted");
    eq(
        "pipelines accepted (the one with a trigger that fires early)",
        accepted.len(),
        1,
    )?;
    let [outcome] = refused.as_slice() else {
        return Err(format!("expected one refusal, got {got:?}"));
    };
    let (t, message) = outcome.split_once('|').unwrap_or(("", outcome));
    eq("refusing transform", t, "Group")?;
    for n in ["unbounded", "global window"] {
        if !message.contains(n) {
            return Err(format!(
                "the refusal's message should contain {n:?}: {message:?}"
            ));
        }
    }
    Ok(())
}
