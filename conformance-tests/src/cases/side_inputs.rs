//! Side inputs: every view kind (singleton, with a default for an empty window,
//! iterable, map, multimap), windowed side inputs read in the side window that holds the
//! end of the main element's window, and a main element that waits for its side window.
//!
//! Expected values follow `docs/semantics.md` ("Side inputs") and Beam's default
//! `WindowMappingFn`: a main element in window `W` reads the side window containing
//! `W.max_timestamp()`; a global side input serves every main window; a main element is
//! processed only once every side window it reads is complete (the side input's watermark
//! passed its end), and while it waits it holds the ParDo's output watermark. A ParDo's
//! outputs keep the main element's timestamp and window and carry no pane.

use crate::case::RunResult;
use crate::cases::panes::{
    counter_eq, fired, group, groups_eq, iw, same_outputs, Fired, DROPPED_LATE, ONLY,
};
use crate::check::succeeded;
use crate::Case;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use tidewater::runner::Feature::{
    Capture, CombineGlobally, Create, GroupByKey, ParDo as ParDoFeature,
    TestStream as TestStreamFeature, WindowInto,
};
use tidewater::{
    BoundedWindow, Combine, CombineFn, DoFn, Element, PCollectionView, PaneInfo, ParDo, Pipeline,
    PipelineResult, ProcessContext, TestStream, Timestamp, UserError, Window, WindowFn,
};

pub(crate) fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "side_inputs/every_view_kind_in_the_global_window",
            features: &[Create, CombineGlobally, ParDoFeature, Capture],
            build: every_view,
            check: check_every_view,
        },
        Case {
            name: "side_inputs/singleton_default_for_an_empty_window",
            features: &[Create, ParDoFeature, WindowInto, Capture],
            build: singleton_default,
            check: check_singleton_default,
        },
        Case {
            name: "side_inputs/windowed_views_read_at_the_main_window_end",
            features: &[Create, ParDoFeature, WindowInto, Capture],
            build: windowed_views,
            check: check_windowed_views,
        },
        Case {
            name: "side_inputs/main_input_waits_for_its_side_window",
            features: &[
                TestStreamFeature,
                WindowInto,
                ParDoFeature,
                CombineGlobally,
                GroupByKey,
                Capture,
            ],
            build: main_waits,
            check: check_main_waits,
        },
    ]
}

/// A ParDo's output: the main element's timestamp and window, no pane.
fn out<T>(value: T, window: BoundedWindow, timestamp: i64) -> Fired<T> {
    Fired {
        value,
        window,
        timestamp: Timestamp(timestamp),
        pane: PaneInfo::NO_FIRING,
    }
}

fn outputs_eq<T: Element + Ord>(
    r: &PipelineResult,
    name: &str,
    expected: Vec<Fired<T>>,
) -> Result<(), String> {
    same_outputs(&format!("capture '{name}'"), fired::<T>(r, name)?, expected)
}

fn stamp(x: &i64) -> Timestamp {
    Timestamp(*x)
}

fn fixed(size: i64) -> Window {
    Window::into(WindowFn::fixed(size))
}

#[derive(Serialize, Deserialize)]
struct Sum;

impl CombineFn for Sum {
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
// Every view kind over global-window side inputs: the sum of the main input as a
// singleton, the main input itself as an iterable, names as a map, tags as a multimap.

type Annotated = (i64, i64, Vec<i64>, String, Vec<String>);

#[derive(Serialize, Deserialize)]
struct Annotate {
    total: PCollectionView<i64>,
    all: PCollectionView<Vec<i64>>,
    names: PCollectionView<BTreeMap<i64, String>>,
    tags: PCollectionView<BTreeMap<i64, Vec<String>>>,
}

impl DoFn for Annotate {
    type In = i64;
    type Out = Annotated;
    fn process(
        &mut self,
        x: i64,
        ctx: &mut ProcessContext<'_, Annotated>,
    ) -> Result<(), UserError> {
        let total = *ctx.side_input(&self.total)?;
        let mut all = ctx.side_input(&self.all)?.clone();
        all.sort_unstable();
        let name = ctx
            .side_input(&self.names)?
            .get(&x)
            .cloned()
            .unwrap_or_default();
        let mut tags = ctx
            .side_input(&self.tags)?
            .get(&x)
            .cloned()
            .unwrap_or_default();
        tags.sort();
        ctx.output((x, total, all, name, tags));
        Ok(())
    }
}

fn pairs(v: &[(i64, &str)]) -> Vec<(i64, String)> {
    v.iter().map(|(k, s)| (*k, s.to_string())).collect()
}

fn every_view(p: &Pipeline) {
    let xs = p.create("Xs", vec![1i64, 2, 3]);
    let total = xs.apply("Total", Combine::globally(Sum)).as_singleton();
    let all = xs.as_iterable();
    let names = p.create("Names", pairs(&[(1, "one"), (2, "two")])).as_map();
    let tags = p
        .create(
            "Tags",
            pairs(&[(1, "odd"), (1, "first"), (2, "even"), (1, "odd")]),
        )
        .as_multimap();
    let f = Annotate {
        total: total.clone(),
        all: all.clone(),
        names: names.clone(),
        tags: tags.clone(),
    };
    xs.apply(
        "Annotate",
        ParDo::of(f)
            .with_side_input(&total)
            .with_side_input(&all)
            .with_side_input(&names)
            .with_side_input(&tags),
    )
    .capture("annotated");
}

fn check_every_view(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    let g = BoundedWindow::Global;
    let min = Timestamp::MIN.millis();
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    outputs_eq::<Annotated>(
        &r,
        "annotated",
        vec![
            out(
                (
                    1,
                    6,
                    vec![1, 2, 3],
                    "one".into(),
                    s(&["first", "odd", "odd"]),
                ),
                g.clone(),
                min,
            ),
            out(
                (2, 6, vec![1, 2, 3], "two".into(), s(&["even"])),
                g.clone(),
                min,
            ),
            out((3, 6, vec![1, 2, 3], String::new(), vec![]), g, min),
        ],
    )
}

// ---------------------------------------------------------------------------------------
// A singleton with a default: main and side in fixed windows of 10; the side input has
// an element in [0, 10) and [20, 30) but none in [10, 20), where the default is read.

#[derive(Serialize, Deserialize)]
struct WithSingleton {
    side: PCollectionView<i64>,
}

impl DoFn for WithSingleton {
    type In = i64;
    type Out = (i64, i64);
    fn process(
        &mut self,
        x: i64,
        ctx: &mut ProcessContext<'_, (i64, i64)>,
    ) -> Result<(), UserError> {
        let s = *ctx.side_input(&self.side)?;
        ctx.output((x, s));
        Ok(())
    }
}

fn singleton_default(p: &Pipeline) {
    let side = p
        .create("Side", vec![5i64, 25])
        .with_timestamps("StampSide", stamp)
        .apply("SideFixed10", fixed(10))
        .as_singleton_with_default(-1);
    p.create("Main", vec![1i64, 12, 25])
        .with_timestamps("StampMain", stamp)
        .apply("MainFixed10", fixed(10))
        .apply(
            "Read",
            ParDo::of(WithSingleton { side: side.clone() }).with_side_input(&side),
        )
        .capture("read");
}

fn check_singleton_default(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    outputs_eq(
        &r,
        "read",
        vec![
            out((1i64, 5i64), iw(0, 10), 1),
            out((12, -1), iw(10, 20), 12),
            out((25, 25), iw(20, 30), 25),
        ],
    )
}

// ---------------------------------------------------------------------------------------
// Windowed views. Side numbers 1, 14, 16, 29, 31 (stamped with themselves) in fixed
// windows of 15: [0, 15) = {1, 14}, [15, 30) = {16, 29}, [30, 45) = {31}; as an iterable,
// and as a map parity -> number (one number per parity in each window). The same numbers
// in the global window as a multimap parity -> numbers. Main elements in fixed windows of
// 10 read the side window holding their window's max timestamp:
// 3 in [0, 10) (max 9) reads [0, 15); 12 in [10, 20) (max 19) and 25 in [20, 30) (max 29)
// read [15, 30); 33 in [30, 40) (max 39) reads [30, 45). The global multimap serves all.

type Read = (i64, Vec<i64>, Vec<(i64, i64)>, Vec<(i64, Vec<i64>)>);

#[derive(Serialize, Deserialize)]
struct ReadViews {
    numbers: PCollectionView<Vec<i64>>,
    by_parity: PCollectionView<BTreeMap<i64, i64>>,
    all_by_parity: PCollectionView<BTreeMap<i64, Vec<i64>>>,
}

impl DoFn for ReadViews {
    type In = i64;
    type Out = Read;
    fn process(&mut self, x: i64, ctx: &mut ProcessContext<'_, Read>) -> Result<(), UserError> {
        let mut numbers = ctx.side_input(&self.numbers)?.clone();
        numbers.sort_unstable();
        let by_parity = ctx
            .side_input(&self.by_parity)?
            .clone()
            .into_iter()
            .collect();
        let all_by_parity = ctx
            .side_input(&self.all_by_parity)?
            .iter()
            .map(|(k, vs)| {
                let mut vs = vs.clone();
                vs.sort_unstable();
                (*k, vs)
            })
            .collect();
        ctx.output((x, numbers, by_parity, all_by_parity));
        Ok(())
    }
}

fn keyed_by_parity(x: i64) -> (i64, i64) {
    (x.rem_euclid(2), x)
}

fn windowed_views(p: &Pipeline) {
    let side = p
        .create("Side", vec![1i64, 14, 16, 29, 31])
        .with_timestamps("StampSide", stamp);
    let windowed = side.apply("SideFixed15", fixed(15));
    let numbers = windowed.as_iterable();
    let by_parity = windowed.map("ByParity", keyed_by_parity).as_map();
    let all_by_parity = side.map("AllByParity", keyed_by_parity).as_multimap();
    // The views declare themselves as fields of the DoFn: no `with_side_input` here
    // (the other cases declare theirs explicitly).
    let f = ReadViews {
        numbers,
        by_parity,
        all_by_parity,
    };
    p.create("Main", vec![3i64, 12, 25, 33])
        .with_timestamps("StampMain", stamp)
        .apply("MainFixed10", fixed(10))
        .apply("Read", ParDo::of(f))
        .capture("read");
}

fn check_windowed_views(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    let global = vec![(0, vec![14, 16]), (1, vec![1, 29, 31])];
    let first = (vec![1, 14], vec![(0, 14), (1, 1)]);
    let second = (vec![16, 29], vec![(0, 16), (1, 29)]);
    let third = (vec![31], vec![(1, 31)]);
    let read = |x: i64, (numbers, map): &(Vec<i64>, Vec<(i64, i64)>)| -> Read {
        (x, numbers.clone(), map.clone(), global.clone())
    };
    outputs_eq(
        &r,
        "read",
        vec![
            out(read(3, &first), iw(0, 10), 3),
            out(read(12, &second), iw(10, 20), 12),
            out(read(25, &second), iw(20, 30), 25),
            out(read(33, &third), iw(30, 40), 33),
        ],
    )
}

// ---------------------------------------------------------------------------------------
// A main element that arrives before its side data. One TestStream carries both, tagged
// "main" and "side", in fixed windows of 10; the side input is the sum per window as a
// singleton. The main element at 2 arrives first, then the side data for [0, 10)
// (100 + 20): the element must wait until the watermark passes 9 and then read 120, not
// an empty or partial window. The main element at 15 reads [10, 20) = 7 once the watermark
// passes 19 (at the end). While it waits the element holds the ParDo's output watermark,
// so a GroupByKey downstream still gets its output on time (one on-time pane, nothing
// dropped).

#[derive(Serialize, Deserialize)]
struct AddTotal {
    total: PCollectionView<i64>,
}

impl DoFn for AddTotal {
    type In = i64;
    type Out = (String, i64);
    fn process(
        &mut self,
        x: i64,
        ctx: &mut ProcessContext<'_, (String, i64)>,
    ) -> Result<(), UserError> {
        let t = *ctx.side_input(&self.total)?;
        ctx.output((format!("{x}"), t));
        Ok(())
    }
}

fn is_main(e: &(String, i64)) -> bool {
    e.0 == "main"
}

fn is_side(e: &(String, i64)) -> bool {
    e.0 == "side"
}

fn value(e: (String, i64)) -> i64 {
    e.1
}

fn tagged(tag: &str, x: i64, t: i64) -> ((String, i64), Timestamp) {
    ((tag.to_string(), x), Timestamp(t))
}

fn main_waits(p: &Pipeline) {
    let events = TestStream::new()
        .add_elements(vec![tagged("main", 2, 2)])
        .add_elements(vec![tagged("side", 100, 1), tagged("side", 20, 5)])
        .add_elements(vec![tagged("main", 15, 15), tagged("side", 7, 17)])
        .advance_watermark_to(Timestamp(10))
        .advance_watermark_to_infinity();
    let input = p.apply("Events", events).apply("Fixed10", fixed(10));
    let total = input
        .filter("Side", is_side)
        .map("SideValues", value)
        .apply("Total", Combine::globally(Sum))
        .as_singleton();
    let added = input
        .filter("Main", is_main)
        .map("MainValues", value)
        .apply(
            "AddTotal",
            ParDo::of(AddTotal {
                total: total.clone(),
            })
            .with_side_input(&total),
        );
    added.capture("added");
    added.group_by_key("Group").capture("groups");
}

fn check_main_waits(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    outputs_eq(
        &r,
        "added",
        vec![
            out(("2".to_string(), 120i64), iw(0, 10), 2),
            out(("15".to_string(), 7), iw(10, 20), 15),
        ],
    )?;
    groups_eq(
        &r,
        "groups",
        vec![
            group("2", &[120], iw(0, 10), 9, ONLY),
            group("15", &[7], iw(10, 20), 19, ONLY),
        ],
    )?;
    counter_eq(&r, "Group", DROPPED_LATE, 0)
}
