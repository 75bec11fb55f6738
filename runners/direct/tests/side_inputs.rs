//! Side inputs on the direct runner: each view kind, windowed side inputs, and main
//! input waiting for its side input's window.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use tidewater::{
    BoundedWindow, Combine, CombineFn, DoFn, FlattenExt, PCollectionView, ParDo, Pipeline,
    PipelineOptions, ProcessContext, TestStream, Timestamp, Trigger, UserError, Window, WindowFn,
};

fn options(seed: u64) -> PipelineOptions {
    tidewater_runner_direct::register();
    PipelineOptions {
        seed: Some(seed),
        ..Default::default()
    }
}

#[derive(Serialize, Deserialize)]
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

/// Pairs each element with what every view says.
#[derive(Serialize, Deserialize)]
struct Annotate {
    total: PCollectionView<i64>,
    all: PCollectionView<Vec<i64>>,
    names: PCollectionView<BTreeMap<i64, String>>,
    tags: PCollectionView<BTreeMap<i64, Vec<String>>>,
}

impl DoFn for Annotate {
    type In = i64;
    type Out = (i64, i64, usize, String, Vec<String>);
    fn process(
        &mut self,
        x: i64,
        ctx: &mut ProcessContext<'_, Self::Out>,
    ) -> Result<(), UserError> {
        let total = *ctx.side_input(&self.total)?;
        let n = ctx.side_input(&self.all)?.len();
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
        ctx.output((x, total, n, name, tags));
        Ok(())
    }
}

#[test]
fn every_view_kind_in_the_global_window() {
    for seed in 1..4 {
        let p = Pipeline::new(options(seed));
        let xs = p.create("Xs", vec![1i64, 2, 3]);
        let total = xs.apply("Total", Combine::globally(Total)).as_singleton();
        let all = xs.as_iterable();
        let names = p
            .create(
                "Names",
                vec![(1i64, "one".to_string()), (2, "two".to_string())],
            )
            .as_map();
        let tags = p
            .create(
                "Tags",
                vec![
                    (1i64, "odd".to_string()),
                    (1, "first".to_string()),
                    (2, "even".to_string()),
                ],
            )
            .as_multimap();
        let view = Annotate {
            total: total.clone(),
            all: all.clone(),
            names: names.clone(),
            tags: tags.clone(),
        };
        xs.apply(
            "Annotate",
            ParDo::of(view)
                .with_side_input(&total)
                .with_side_input(&all)
                .with_side_input(&names)
                .with_side_input(&tags),
        )
        .capture("out");
        let got = p
            .run()
            .unwrap()
            .captured_values::<(i64, i64, usize, String, Vec<String>)>("out")
            .unwrap();
        assert_eq!(
            got,
            vec![
                (1, 6, 3, "one".into(), vec!["first".into(), "odd".into()]),
                (2, 6, 3, "two".into(), vec!["even".into()]),
                (3, 6, 3, String::new(), vec![]),
            ],
            "seed {seed}"
        );
    }
}

/// Adds the side input's value (the window's total) to each element.
#[derive(Serialize, Deserialize)]
struct AddWindowTotal {
    total: PCollectionView<i64>,
}

impl DoFn for AddWindowTotal {
    type In = i64;
    type Out = (i64, i64);
    fn process(
        &mut self,
        x: i64,
        ctx: &mut ProcessContext<'_, (i64, i64)>,
    ) -> Result<(), UserError> {
        let t = *ctx.side_input(&self.total)?;
        ctx.output((x, t));
        Ok(())
    }
}

fn at(x: &i64) -> Timestamp {
    Timestamp(*x)
}

#[test]
fn a_windowed_side_input_is_read_in_the_main_elements_window() {
    let p = Pipeline::new(options(1));
    let xs = p
        .create("Xs", vec![1i64, 4, 12, 25])
        .with_timestamps("Stamp", at)
        .apply("Fixed10", Window::into(WindowFn::fixed(10)));
    let totals = xs
        .apply("Total", Combine::globally(Total))
        .as_singleton_with_default(-1);
    xs.apply(
        "Add",
        ParDo::of(AddWindowTotal {
            total: totals.clone(),
        })
        .with_side_input(&totals),
    )
    .capture("out");
    let got = p
        .run()
        .unwrap()
        .captured_values::<(i64, i64)>("out")
        .unwrap();
    assert_eq!(got, vec![(1, 5), (4, 5), (12, 12), (25, 25)]);
}

#[test]
fn main_input_waits_until_its_side_window_is_complete() {
    let p = Pipeline::new(options(1));
    // Main elements arrive first; the side input's data for [0, 10) arrives later, and
    // only the watermark passing 9 completes it.
    let main = TestStream::new()
        .add_elements(vec![(2i64, Timestamp(2)), (15, Timestamp(15))])
        .advance_watermark_to_infinity();
    let side = TestStream::new()
        .advance_watermark_to(Timestamp(0))
        .add_elements(vec![(100i64, Timestamp(1))])
        .add_elements(vec![(20i64, Timestamp(5)), (7, Timestamp(17))])
        .advance_watermark_to(Timestamp(10))
        .advance_watermark_to_infinity();
    let xs = p
        .apply("Main", main)
        .apply("MainWindows", Window::into(WindowFn::fixed(10)));
    let totals = p
        .apply("Side", side)
        .apply("SideWindows", Window::into(WindowFn::fixed(10)))
        .apply("Total", Combine::globally(Total))
        .as_singleton();
    xs.apply(
        "Add",
        ParDo::of(AddWindowTotal {
            total: totals.clone(),
        })
        .with_side_input(&totals),
    )
    .capture("out");
    let got = p
        .run()
        .unwrap()
        .captured_values::<(i64, i64)>("out")
        .unwrap();
    assert_eq!(got, vec![(2, 120), (15, 7)]);
}

#[test]
fn a_singleton_with_several_elements_is_an_error() {
    let p = Pipeline::new(options(1));
    let xs = p.create("Xs", vec![1i64, 2]);
    let view = xs.as_singleton();
    xs.apply(
        "Add",
        ParDo::of(AddWindowTotal {
            total: view.clone(),
        })
        .with_side_input(&view),
    )
    .capture("out");
    let e = p.run().unwrap_err().to_string();
    assert!(
        e.contains("transform 'Add' failed in process on element"),
        "{e}"
    );
    assert!(e.contains("side input 'side:Xs.main:singleton' in window Global: the singleton side input has 2 elements in this window; a singleton needs exactly one"), "{e}");
}

#[test]
fn a_view_held_in_a_field_declares_itself() {
    let p = Pipeline::new(options(1));
    let xs = p.create("Xs", vec![1i64, 2]);
    let view = p.create("Side", vec![40i64]).as_singleton();
    // No `.with_side_input(&view)`: the DoFn's field is enough.
    xs.apply("Add", ParDo::of(AddWindowTotal { total: view }))
        .capture("out");
    let mut out = p
        .run()
        .unwrap()
        .captured_values::<(i64, i64)>("out")
        .unwrap();
    out.sort();
    assert_eq!(out, vec![(1, 40), (2, 40)]);
    let _ = BoundedWindow::Global;
}

#[test]
fn a_side_input_fired_several_times_uses_its_latest_pane() {
    use tidewater::Trigger;
    let p = Pipeline::new(options(1));
    let side = TestStream::new()
        .add_elements(vec![(1i64, Timestamp(1))])
        .add_elements(vec![(2i64, Timestamp(2))])
        .add_elements(vec![(3i64, Timestamp(3))])
        .advance_watermark_to_infinity();
    let totals = p
        .apply("Side", side)
        .apply(
            "Fixed10",
            Window::into(WindowFn::fixed(10))
                .triggering(Trigger::repeatedly(Trigger::after_count(1)))
                .accumulating_fired_panes(),
        )
        .apply("Total", Combine::globally(Total))
        .as_singleton();
    let main = TestStream::new()
        .add_elements(vec![(7i64, Timestamp(7))])
        .advance_watermark_to_infinity();
    p.apply("Main", main)
        .apply("MainWindows", Window::into(WindowFn::fixed(10)))
        .apply(
            "Add",
            ParDo::of(AddWindowTotal {
                total: totals.clone(),
            })
            .with_side_input(&totals),
        )
        .capture("out");
    let got = p
        .run()
        .unwrap()
        .captured_values::<(i64, i64)>("out")
        .unwrap();
    // Panes 1, 3, 6 (accumulating) and the on-time pane 6: the latest pane says 6.
    assert_eq!(got, vec![(7, 6)]);
}

fn negate(x: (i64, i64)) -> (i64, i64) {
    (x.0, -x.1)
}

fn key_by_parity(x: i64) -> (i64, i64) {
    (x % 2, x)
}

/// The stage graph is what runs: a lifted combine shows its partial half in the
/// producing stage, a combine with a trigger shuffles whole elements, a ParDo with
/// side inputs heads its own stage over its held main input and fuses what follows.
#[test]
fn the_stage_graph_shows_what_runs() {
    let p = Pipeline::new(options(1));
    let xs = p
        .create("Xs", vec![1i64, 2, 3])
        .apply("Fixed10", Window::into(WindowFn::fixed(10)));
    let totals = xs.apply("Total", Combine::globally(Total)).as_singleton();
    let early = xs
        .map("ByParity", key_by_parity)
        .apply(
            "Early",
            Window::into(WindowFn::fixed(10))
                .triggering(Trigger::repeatedly(Trigger::after_count(1)))
                .accumulating_fired_panes(),
        )
        .apply("EarlySums", Combine::per_key(Total));
    let added = xs
        .apply(
            "Add",
            ParDo::of(AddWindowTotal {
                total: totals.clone(),
            })
            .with_side_input(&totals),
        )
        .map("Negate", negate);
    vec![added, early].apply_flatten("Both").capture("out");
    let plan = tidewater_runners_core::translate(&p.to_plan().unwrap()).unwrap();
    insta::assert_snapshot!(tidewater_runners_core::fusion::describe(&plan));
}

/// The side-input runner keeps side data per side window and drops a window once it
/// expired for both inputs and no held main input reads it; held main input waits for
/// its side window and is released with the value it reads; its snapshot restores.
#[test]
fn side_windows_are_pruned_once_expired_and_held_input_survives_a_snapshot() {
    use tidewater::exec::{AnyBatch, Batch};
    use tidewater::{BoundedWindow, PaneInfo, WindowedValue, Windows};
    use tidewater_runners_core::side_inputs::SideInputRunner;

    let p = Pipeline::new(options(1));
    let xs = p
        .create("Xs", vec![1i64])
        .apply("Fixed10", Window::into(WindowFn::fixed(10)));
    let totals = xs.apply("Total", Combine::globally(Total)).as_singleton();
    xs.apply(
        "Add",
        ParDo::of(AddWindowTotal {
            total: totals.clone(),
        })
        .with_side_input(&totals),
    );
    let plan = tidewater_runners_core::translate(&p.to_plan().unwrap()).unwrap();
    let node = plan.nodes.iter().position(|n| n.name == "Add").unwrap();
    let window = |start: i64| BoundedWindow::Interval {
        start: Timestamp(start),
        end: Timestamp(start + 10),
    };
    let batch = |xs: &[(i64, i64)]| -> Box<dyn AnyBatch> {
        Box::new(Batch {
            items: xs
                .iter()
                .map(|&(x, t)| WindowedValue {
                    value: x,
                    timestamp: Timestamp(t),
                    windows: Windows::One(window(t / 10 * 10)),
                    pane: PaneInfo::ON_TIME_AND_ONLY_FIRING,
                })
                .collect(),
        })
    };
    let mut runner = SideInputRunner::new(&plan, node).unwrap();
    for w in 0..5 {
        runner.add_side(1, batch(&[(100 + w, w * 10 + 9)]));
    }
    runner.add_main(batch(&[(7, 25), (8, 45)]));
    assert_eq!(runner.side_windows(), 5);
    // The side input completes [0, 30): the main element of [20, 30) is released.
    let (ready, _) = runner
        .advance(Timestamp(30), &[Timestamp(30)])
        .expect("one element is ready");
    assert_eq!(ready.len(), 1);
    assert_eq!(runner.output_watermark(), Timestamp(30));
    // [0, 10), [10, 20) and [20, 30) expired for both inputs and nothing held reads
    // them; [30, 40) and [40, 50) (read by the held element) have not expired.
    assert_eq!(runner.side_windows(), 2);
    let parts = runner.snapshot(0).unwrap();
    let mut restored = SideInputRunner::new(&plan, node).unwrap();
    for (scope, bytes) in parts {
        restored.restore(scope, &bytes).unwrap();
    }
    assert_eq!(restored.side_windows(), 2);
    assert_eq!(restored.output_watermark(), Timestamp(30));
    let (ready, _) = restored
        .advance(Timestamp(60), &[Timestamp(60)])
        .expect("the held element is ready");
    assert_eq!(ready.len(), 1);
    assert_eq!(restored.side_windows(), 0);
    assert_eq!(restored.output_watermark(), Timestamp(60));
}

/// Each element in a window ending at its own value.
#[derive(Serialize, Deserialize)]
struct UntilValue;
impl tidewater::ElementWindowFn<i64> for UntilValue {
    type Window = BoundedWindow;
    fn assign(&self, x: &i64, ts: Timestamp) -> Vec<BoundedWindow> {
        vec![BoundedWindow::Interval {
            start: ts,
            end: Timestamp(*x),
        }]
    }
}

#[derive(Serialize, Deserialize)]
struct WithTotal {
    total: PCollectionView<i64>,
}

impl DoFn for WithTotal {
    type In = i64;
    type Out = i64;
    fn process(&mut self, x: i64, ctx: &mut ProcessContext<'_, i64>) -> Result<(), UserError> {
        let total = *ctx.side_input(&self.total)?;
        ctx.output(x + total);
        Ok(())
    }
}

#[test]
fn a_side_input_windowed_by_element_is_refused_naming_the_reader() {
    let p = Pipeline::new(options(1));
    let total = p
        .create("Side", vec![5i64, 7])
        .apply("ByValue", Window::into(WindowFn::by_element(UntilValue)))
        .apply("Total", Combine::globally(Total).without_defaults())
        .as_singleton();
    p.create("Main", vec![1i64])
        .apply("Read", ParDo::of(WithTotal { total }))
        .capture("out");
    let e = p.run().unwrap_err().to_string();
    assert!(
        e.contains("transform 'Read'")
            && e.contains("a side input windowed by a WindowFn that assigns windows by element"),
        "{e}"
    );
}
