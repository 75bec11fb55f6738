//! Event-time windowing on the direct runner: exact outputs with windows, timestamps
//! and panes. Expected values follow Beam's documented semantics.

use tidewater::{
    BoundedWindow, Combine, CombineFn, PaneInfo, Pipeline, PipelineOptions, TestStream, Timestamp,
    TimestampCombiner, Timing, Trigger, Window, WindowFn, WindowedValue,
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

fn pane(
    timing: Timing,
    is_first: bool,
    is_last: bool,
    index: u64,
    non_speculative_index: i64,
) -> PaneInfo {
    PaneInfo {
        timing,
        is_first,
        is_last,
        index,
        non_speculative_index,
    }
}

const ONLY: PaneInfo = PaneInfo::ON_TIME_AND_ONLY_FIRING;

#[derive(serde::Serialize, serde::Deserialize)]
struct Total;
impl CombineFn for Total {
    type In = i64;
    type Acc = i64;
    type Out = i64;
    fn create_accumulator(&self) -> i64 {
        0
    }
    fn add_input(&self, a: &mut i64, x: i64) {
        *a += x;
    }
    fn merge_accumulators(&self, a: &mut i64, b: i64) {
        *a += b;
    }
    fn extract_output(&self, a: i64) -> i64 {
        a
    }
}

/// `(key, ts)` pairs stamped with their event time.
fn event_time(kv: &(String, i64)) -> Timestamp {
    Timestamp(kv.1)
}

/// Sorted (value, window, timestamp, pane) for exact comparison.
fn outputs<T: tidewater::Element + Ord>(
    r: &tidewater::PipelineResult,
    name: &str,
) -> Vec<(T, BoundedWindow, Timestamp, PaneInfoKey)> {
    let mut v: Vec<_> = r
        .captured::<T>(name)
        .unwrap()
        .into_iter()
        .map(|wv: WindowedValue<T>| {
            let w = wv.windows.iter().next().unwrap().clone();
            (wv.value, w, wv.timestamp, PaneInfoKey(wv.pane))
        })
        .collect();
    v.sort();
    v
}

/// PaneInfo ordered by index, for sorting outputs.
#[derive(Debug, PartialEq, Eq)]
struct PaneInfoKey(PaneInfo);
impl PartialOrd for PaneInfoKey {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for PaneInfoKey {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.0.index.cmp(&o.0.index)
    }
}

fn values_of(kvs: &[(&str, i64)]) -> Vec<(String, i64)> {
    kvs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

#[test]
fn fixed_windows_count_per_window_in_batch() {
    for seed in 1..4 {
        let p = Pipeline::new(options(seed));
        p.create(
            "Events",
            values_of(&[("a", 1), ("a", 5), ("a", 12), ("b", 25), ("a", 29)]),
        )
        .with_timestamps("Stamp", event_time)
        .apply("Fixed10", Window::into(WindowFn::fixed(10)))
        .apply("Sum", Combine::per_key(Total))
        .capture("sums");
        let r = p.run().unwrap();
        assert_eq!(
            outputs::<(String, i64)>(&r, "sums"),
            vec![
                (("a".into(), 6), iw(0, 10), Timestamp(9), PaneInfoKey(ONLY)),
                (
                    ("a".into(), 12),
                    iw(10, 20),
                    Timestamp(19),
                    PaneInfoKey(ONLY)
                ),
                (
                    ("a".into(), 29),
                    iw(20, 30),
                    Timestamp(29),
                    PaneInfoKey(ONLY)
                ),
                (
                    ("b".into(), 25),
                    iw(20, 30),
                    Timestamp(29),
                    PaneInfoKey(ONLY)
                ),
            ],
            "seed {seed}"
        );
    }
}

#[test]
fn sliding_windows_put_an_element_in_every_window_that_contains_it() {
    let p = Pipeline::new(options(1));
    p.create("Events", values_of(&[("a", 7), ("a", 12)]))
        .with_timestamps("Stamp", event_time)
        .apply("Sliding", Window::into(WindowFn::sliding(10, 5)))
        .group_by_key("Group")
        .map("SortValues", sort_values)
        .capture("groups");
    let r = p.run().unwrap();
    assert_eq!(
        outputs::<(String, Vec<i64>)>(&r, "groups"),
        vec![
            (
                ("a".into(), vec![7]),
                iw(0, 10),
                Timestamp(9),
                PaneInfoKey(ONLY)
            ),
            (
                ("a".into(), vec![7, 12]),
                iw(5, 15),
                Timestamp(14),
                PaneInfoKey(ONLY)
            ),
            (
                ("a".into(), vec![12]),
                iw(10, 20),
                Timestamp(19),
                PaneInfoKey(ONLY)
            ),
        ]
    );
}

fn sort_values(kv: (String, Vec<i64>)) -> (String, Vec<i64>) {
    let (k, mut v) = kv;
    v.sort();
    (k, v)
}

#[test]
fn sessions_merge_across_out_of_order_data() {
    for seed in 1..4 {
        let p = Pipeline::new(options(seed));
        let events = TestStream::new()
            .add_elements(vec![
                (("a".to_string(), 1i64), Timestamp(1)),
                (("a".to_string(), 30), Timestamp(30)),
            ])
            .add_elements(vec![
                (("a".to_string(), 12), Timestamp(12)),
                (("a".to_string(), 5), Timestamp(5)),
                (("a".to_string(), 25), Timestamp(25)),
            ])
            .advance_watermark_to_infinity();
        p.apply("Events", events)
            .apply("Sessions", Window::into(WindowFn::sessions(10)))
            .apply("Sum", Combine::per_key(Total))
            .capture("sums");
        let r = p.run().unwrap();
        assert_eq!(
            outputs::<(String, i64)>(&r, "sums"),
            vec![
                (
                    ("a".into(), 18),
                    iw(1, 22),
                    Timestamp(21),
                    PaneInfoKey(ONLY)
                ),
                (
                    ("a".into(), 55),
                    iw(25, 40),
                    Timestamp(39),
                    PaneInfoKey(ONLY)
                ),
            ],
            "seed {seed}"
        );
    }
}

#[test]
fn timestamp_combiners_choose_the_output_time() {
    for (tc, expected) in [
        (TimestampCombiner::EndOfWindow, 9),
        (TimestampCombiner::EarliestInPane, 3),
        (TimestampCombiner::LatestInPane, 7),
    ] {
        let p = Pipeline::new(options(1));
        p.create("Events", values_of(&[("a", 7), ("a", 3)]))
            .with_timestamps("Stamp", event_time)
            .apply(
                "Fixed10",
                Window::into(WindowFn::fixed(10)).with_timestamp_combiner(tc),
            )
            .apply("Sum", Combine::per_key(Total))
            .capture("sums");
        let r = p.run().unwrap();
        assert_eq!(
            outputs::<(String, i64)>(&r, "sums"),
            vec![(
                ("a".into(), 10),
                iw(0, 10),
                Timestamp(expected),
                PaneInfoKey(ONLY)
            )],
            "{tc:?}"
        );
    }
}

#[test]
fn early_on_time_and_late_panes_accumulating() {
    let a = |ts: i64| (("a".to_string(), ts), Timestamp(ts));
    let p = Pipeline::new(options(1));
    let events = TestStream::new()
        .add_elements(vec![a(1)])
        .advance_processing_time(20)
        .add_elements(vec![a(2)])
        .advance_watermark_to(Timestamp(10))
        .add_elements(vec![a(3)])
        .advance_watermark_to(Timestamp(200))
        .add_elements(vec![a(4)])
        .advance_watermark_to_infinity();
    let trigger = Trigger::after_watermark()
        .with_early_firings(Trigger::after_processing_time().plus_delay_of(10))
        .with_late_firings(Trigger::after_count(1));
    p.apply("Events", events)
        .apply(
            "Fixed10",
            Window::into(WindowFn::fixed(10))
                .triggering(trigger)
                .with_allowed_lateness(100)
                .accumulating_fired_panes(),
        )
        .apply("Sum", Combine::per_key(Total))
        .capture("sums");
    let r = p.run().unwrap();
    assert_eq!(
        outputs::<(String, i64)>(&r, "sums"),
        vec![
            (
                ("a".into(), 1),
                iw(0, 10),
                Timestamp(9),
                PaneInfoKey(pane(Timing::Early, true, false, 0, -1))
            ),
            (
                ("a".into(), 3),
                iw(0, 10),
                Timestamp(9),
                PaneInfoKey(pane(Timing::OnTime, false, false, 1, 0))
            ),
            (
                ("a".into(), 6),
                iw(0, 10),
                Timestamp(9),
                PaneInfoKey(pane(Timing::Late, false, false, 2, 1))
            ),
        ]
    );
    assert_eq!(r.metrics.counter("Sum", "dropped_due_to_lateness"), Some(1));
}
