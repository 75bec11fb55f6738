//! ParDo: function items, DoFn structs with fields, fusion, fan-out, the bundle
//! lifecycle, output timestamps and tagged outputs.

use crate::case::RunResult;
use crate::check::{captured, eq, metadata_eq, succeeded, values_eq};
use crate::Case;
use serde::{Deserialize, Serialize};
use tidewater::runner::Feature::{
    Capture, CombineGlobally, Create, GroupByKey, MultipleOutputs, ParDo,
};
use tidewater::{
    BoundedWindow, DoFn, FinishBundleContext, GlobalWindow, PaneInfo, Pipeline, ProcessContext,
    Timestamp, TupleTag, UserError,
};

pub(crate) fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "pardo/map",
            features: &[Create, ParDo, Capture],
            build: map,
            check: check_map,
        },
        Case {
            name: "pardo/flat_map",
            features: &[Create, ParDo, Capture],
            build: flat_map,
            check: check_flat_map,
        },
        Case {
            name: "pardo/filter",
            features: &[Create, ParDo, Capture],
            build: filter,
            check: check_filter,
        },
        Case {
            name: "pardo/with_keys",
            features: &[Create, ParDo, Capture],
            build: with_keys,
            check: check_with_keys,
        },
        Case {
            name: "pardo/dofn_fields",
            features: &[Create, ParDo, Capture],
            build: dofn_fields,
            check: check_dofn_fields,
        },
        Case {
            name: "pardo/fused_chain",
            features: &[Create, ParDo, Capture],
            build: fused_chain,
            check: check_fused_chain,
        },
        Case {
            name: "pardo/fan_out",
            features: &[Create, ParDo, Capture],
            build: fan_out,
            check: check_fan_out,
        },
        Case {
            name: "pardo/lifecycle",
            features: &[Create, ParDo, Capture],
            build: lifecycle,
            check: check_lifecycle,
        },
        Case {
            name: "pardo/output_with_timestamp",
            features: &[Create, ParDo, Capture],
            build: timestamps,
            check: check_timestamps,
        },
        Case {
            name: "pardo/output_within_allowed_skew",
            features: &[Create, ParDo, Capture],
            build: within_skew,
            check: check_within_skew,
        },
        Case {
            name: "pardo/finish_bundle_output_downstream",
            features: &[Create, ParDo, CombineGlobally, Capture],
            build: batching,
            check: check_batching,
        },
        Case {
            name: "pardo/multiple_outputs",
            features: &[Create, ParDo, MultipleOutputs, Capture],
            build: tagged,
            check: check_tagged,
        },
        Case {
            name: "pardo/tagged_output_to_group_by_key",
            features: &[Create, ParDo, MultipleOutputs, GroupByKey, Capture],
            build: tagged_to_shuffle,
            check: check_tagged_to_shuffle,
        },
    ]
}

fn square(x: i64) -> i64 {
    x * x
}

fn map(p: &Pipeline) {
    p.create("Xs", vec![-3i64, 0, 2, 2, 5])
        .map("Square", square)
        .capture("squares");
}

fn check_map(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    values_eq(&r, "squares", vec![0i64, 4, 4, 9, 25])?;
    metadata_eq::<i64>(
        &r,
        "squares",
        Timestamp::MIN,
        BoundedWindow::Global,
        PaneInfo::NO_FIRING,
    )
}

fn split(line: String) -> Vec<String> {
    line.split_whitespace().map(str::to_string).collect()
}

fn flat_map(p: &Pipeline) {
    let lines = vec![
        "the quick  fox".to_string(),
        String::new(),
        "the end".to_string(),
    ];
    p.create("Lines", lines)
        .flat_map("Split", split)
        .capture("words");
}

fn check_flat_map(r: RunResult) -> Result<(), String> {
    let words = ["end", "fox", "quick", "the", "the"]
        .map(String::from)
        .to_vec();
    values_eq(&succeeded(r)?, "words", words)
}

fn is_even(x: &u64) -> bool {
    x.is_multiple_of(2)
}

fn filter(p: &Pipeline) {
    p.create("Xs", (0u64..20).collect())
        .filter("Even", is_even)
        .capture("evens");
}

fn check_filter(r: RunResult) -> Result<(), String> {
    values_eq(&succeeded(r)?, "evens", (0u64..20).step_by(2).collect())
}

// with_keys passes `&T`, and T is String here.
#[allow(clippy::ptr_arg)]
fn length(s: &String) -> usize {
    s.len()
}

fn with_keys(p: &Pipeline) {
    p.create("Words", ["a", "bb", "cc", ""].map(String::from).to_vec())
        .with_keys("ByLength", length)
        .capture("keyed");
}

fn check_with_keys(r: RunResult) -> Result<(), String> {
    let expected = vec![
        (0usize, String::new()),
        (1, "a".into()),
        (2, "bb".into()),
        (2, "cc".into()),
    ];
    values_eq(&succeeded(r)?, "keyed", expected)
}

/// Its fields travel in the plan and must arrive intact.
#[derive(Serialize, Deserialize)]
struct Scale {
    factor: i64,
    prefix: String,
}

impl DoFn for Scale {
    type In = i64;
    type Out = String;
    fn process(&mut self, x: i64, ctx: &mut ProcessContext<'_, String>) -> Result<(), UserError> {
        ctx.output(format!("{}{}", self.prefix, x * self.factor));
        Ok(())
    }
}

fn dofn_fields(p: &Pipeline) {
    p.create("Xs", vec![1i64, 2, 3])
        .apply(
            "Scale",
            tidewater::ParDo::of(Scale {
                factor: -10,
                prefix: "n=".into(),
            }),
        )
        .capture("scaled");
}

fn check_dofn_fields(r: RunResult) -> Result<(), String> {
    values_eq(
        &succeeded(r)?,
        "scaled",
        ["n=-10", "n=-20", "n=-30"].map(String::from).to_vec(),
    )
}

fn add_one(x: i64) -> i64 {
    x + 1
}

fn is_positive(x: &i64) -> bool {
    *x > 0
}

fn twice(x: i64) -> Vec<i64> {
    vec![x, x]
}

fn to_text(x: i64) -> String {
    x.to_string()
}

fn fused_chain(p: &Pipeline) {
    p.create("Xs", vec![-2i64, -1, 0, 1, 2])
        .map("AddOne", add_one)
        .filter("Positive", is_positive)
        .flat_map("Twice", twice)
        .map("ToText", to_text)
        .capture("chain");
}

fn check_fused_chain(r: RunResult) -> Result<(), String> {
    values_eq(
        &succeeded(r)?,
        "chain",
        ["1", "1", "2", "2", "3", "3"].map(String::from).to_vec(),
    )
}

fn negate(x: i64) -> i64 {
    -x
}

/// One PCollection consumed by two ParDos and captured itself: each consumer sees
/// every element.
fn fan_out(p: &Pipeline) {
    let xs = p.create("Xs", (1i64..=300).collect());
    xs.map("Square", square).capture("squares");
    xs.map("Negate", negate).capture("negated");
    xs.capture("xs");
}

fn check_fan_out(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    values_eq(&r, "squares", (1i64..=300).map(|x| x * x).collect())?;
    values_eq(&r, "negated", (1i64..=300).map(|x| -x).collect())?;
    values_eq(&r, "xs", (1i64..=300).collect())
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Lifecycle {
    #[default]
    New,
    SetUp,
    InBundle,
    BetweenBundles,
}

/// Checks that the lifecycle methods come in order (setup, then start_bundle /
/// process* / finish_bundle per bundle), counts them in metrics and outputs the size of
/// each bundle from finish_bundle.
#[derive(Serialize, Deserialize, Default)]
struct LifecycleProbe {
    #[serde(skip)]
    state: Lifecycle,
    #[serde(skip)]
    starts: i64,
    #[serde(skip)]
    in_bundle: i64,
}

impl LifecycleProbe {
    fn expect(&self, allowed: &[Lifecycle], method: &str) -> Result<(), UserError> {
        if allowed.contains(&self.state) {
            Ok(())
        } else {
            Err(format!(
                "{method} called in state {:?}; allowed in {allowed:?}",
                self.state
            )
            .into())
        }
    }
}

impl DoFn for LifecycleProbe {
    type In = i64;
    type Out = (String, i64);
    fn setup(&mut self) -> Result<(), UserError> {
        self.expect(&[Lifecycle::New], "setup")?;
        self.state = Lifecycle::SetUp;
        Ok(())
    }
    fn start_bundle(&mut self) -> Result<(), UserError> {
        self.expect(
            &[Lifecycle::SetUp, Lifecycle::BetweenBundles],
            "start_bundle",
        )?;
        self.state = Lifecycle::InBundle;
        self.starts += 1;
        self.in_bundle = 0;
        Ok(())
    }
    fn process(
        &mut self,
        x: i64,
        ctx: &mut ProcessContext<'_, (String, i64)>,
    ) -> Result<(), UserError> {
        self.expect(&[Lifecycle::InBundle], "process")?;
        self.in_bundle += 1;
        ctx.inc_counter("process", 1);
        ctx.output(("element".into(), x));
        Ok(())
    }
    fn finish_bundle(
        &mut self,
        ctx: &mut FinishBundleContext<'_, (String, i64)>,
    ) -> Result<(), UserError> {
        self.expect(&[Lifecycle::InBundle], "finish_bundle")?;
        self.state = Lifecycle::BetweenBundles;
        ctx.inc_counter("start_bundle", std::mem::take(&mut self.starts));
        ctx.inc_counter("finish_bundle", 1);
        ctx.output(
            ("bundle".into(), self.in_bundle),
            GlobalWindow::MAX_TIMESTAMP,
            BoundedWindow::Global,
        );
        Ok(())
    }
    fn teardown(&mut self) -> Result<(), UserError> {
        self.expect(
            &[Lifecycle::New, Lifecycle::SetUp, Lifecycle::BetweenBundles],
            "teardown",
        )
    }
}

const LIFECYCLE_ELEMENTS: i64 = 500;

fn lifecycle(p: &Pipeline) {
    p.create("Xs", (0..LIFECYCLE_ELEMENTS).collect())
        .apply("Probe", tidewater::ParDo::of(LifecycleProbe::default()))
        .capture("probe");
}

fn check_lifecycle(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    let out = captured::<(String, i64)>(&r, "probe")?;
    let (elements, bundles): (Vec<_>, Vec<_>) =
        out.into_iter().partition(|wv| wv.value.0 == "element");
    let mut xs: Vec<i64> = elements.iter().map(|wv| wv.value.1).collect();
    xs.sort_unstable();
    eq(
        "elements output by process",
        xs,
        (0..LIFECYCLE_ELEMENTS).collect(),
    )?;
    for wv in &elements {
        eq(
            "timestamp of a process output",
            wv.timestamp,
            Timestamp::MIN,
        )?;
        eq("pane of a process output", wv.pane, PaneInfo::NO_FIRING)?;
    }
    for wv in &bundles {
        eq(
            "kind of a finish_bundle output",
            wv.value.0.as_str(),
            "bundle",
        )?;
        eq(
            "timestamp of a finish_bundle output",
            wv.timestamp,
            GlobalWindow::MAX_TIMESTAMP,
        )?;
        eq(
            "window of a finish_bundle output",
            &wv.windows,
            &tidewater::Windows::global(),
        )?;
        eq(
            "pane of a finish_bundle output",
            wv.pane,
            PaneInfo::NO_FIRING,
        )?;
    }
    let bundle_total: i64 = bundles.iter().map(|wv| wv.value.1).sum();
    eq(
        "sum of the bundle sizes output by finish_bundle",
        bundle_total,
        LIFECYCLE_ELEMENTS,
    )?;
    let counter = |name: &str| r.metrics.counter("Probe", name);
    eq(
        "counter Probe/process",
        counter("process"),
        Some(LIFECYCLE_ELEMENTS),
    )?;
    let finishes = counter("finish_bundle").ok_or("counter Probe/finish_bundle is missing")?;
    eq(
        "counter Probe/start_bundle (one per finish_bundle)",
        counter("start_bundle"),
        Some(finishes),
    )?;
    eq(
        "finish_bundle outputs (one per finish_bundle)",
        bundles.len() as i64,
        finishes,
    )?;
    if finishes < 1 {
        return Err(format!("finish_bundle was called {finishes} times"));
    }
    Ok(())
}

/// Moves each element to the timestamp it names, in ms.
#[derive(Serialize, Deserialize)]
struct AtTimestamp;

impl DoFn for AtTimestamp {
    type In = i64;
    type Out = i64;
    fn process(&mut self, x: i64, ctx: &mut ProcessContext<'_, i64>) -> Result<(), UserError> {
        ctx.output_with_timestamp(x, Timestamp::from_millis(x));
        Ok(())
    }
}

/// Reports the timestamp, window and pane each element arrives with.
#[derive(Serialize, Deserialize)]
struct DescribeContext;

impl DoFn for DescribeContext {
    type In = i64;
    type Out = (i64, Timestamp, BoundedWindow, PaneInfo);
    fn process(
        &mut self,
        x: i64,
        ctx: &mut ProcessContext<'_, Self::Out>,
    ) -> Result<(), UserError> {
        let out = (x, ctx.timestamp(), ctx.window(), ctx.pane());
        ctx.output(out);
        Ok(())
    }
}

fn timestamps(p: &Pipeline) {
    p.create("Xs", vec![0i64, 5, 1_000_000])
        .apply("AtTimestamp", tidewater::ParDo::of(AtTimestamp))
        .apply("Describe", tidewater::ParDo::of(DescribeContext))
        .capture("described");
}

fn check_timestamps(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    let mut got: Vec<_> = captured::<(i64, Timestamp, BoundedWindow, PaneInfo)>(&r, "described")?
        .into_iter()
        .map(|wv| wv.value)
        .collect();
    got.sort_by_key(|v| v.0);
    let expected: Vec<_> = [0i64, 5, 1_000_000]
        .iter()
        .map(|&x| {
            (
                x,
                Timestamp::from_millis(x),
                BoundedWindow::Global,
                PaneInfo::NO_FIRING,
            )
        })
        .collect();
    eq(
        "(element, timestamp, window, pane) seen downstream",
        got,
        expected,
    )?;
    for wv in captured::<(i64, Timestamp, BoundedWindow, PaneInfo)>(&r, "described")? {
        eq(
            "timestamp of the captured element",
            wv.timestamp,
            Timestamp::from_millis(wv.value.0),
        )?;
    }
    Ok(())
}

/// Numbers: evens to the main output, odds to `odd`; anything else to `other`.
#[derive(Serialize, Deserialize)]
struct Classify {
    odd: TupleTag<i64>,
    other: TupleTag<String>,
}

impl DoFn for Classify {
    type In = String;
    type Out = i64;
    fn process(&mut self, s: String, ctx: &mut ProcessContext<'_, i64>) -> Result<(), UserError> {
        match s.parse::<i64>() {
            Ok(n) if n % 2 == 0 => ctx.output(n),
            Ok(n) => ctx.output_to(&self.odd, n),
            Err(_) => ctx.output_to(&self.other, s),
        }
        Ok(())
    }
}

fn tagged(p: &Pipeline) {
    let odd = TupleTag::<i64>::new("odd");
    let other = TupleTag::<String>::new("other");
    let input = ["1", "2", "x", "3", "4", "", "-7", "y"]
        .map(String::from)
        .to_vec();
    let out = p.create("Inputs", input).apply(
        "Classify",
        tidewater::ParDo::of(Classify {
            odd: odd.clone(),
            other: other.clone(),
        })
        .with_outputs()
        .and(&odd)
        .and(&other),
    );
    out.main::<i64>().capture("evens");
    out.get(&odd).capture("odds");
    out.get(&odd)
        .map("NegateOdds", negate)
        .capture("negated_odds");
    out.get(&other).capture("others");
}

fn check_tagged(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    values_eq(&r, "evens", vec![2i64, 4])?;
    values_eq(&r, "odds", vec![-7i64, 1, 3])?;
    values_eq(&r, "negated_odds", vec![-3i64, -1, 7])?;
    values_eq(&r, "others", ["", "x", "y"].map(String::from).to_vec())?;
    metadata_eq::<i64>(
        &r,
        "odds",
        Timestamp::MIN,
        BoundedWindow::Global,
        PaneInfo::NO_FIRING,
    )?;
    metadata_eq::<String>(
        &r,
        "others",
        Timestamp::MIN,
        BoundedWindow::Global,
        PaneInfo::NO_FIRING,
    )
}

/// Outputs each element `by` ms before its input's timestamp; allows `skew` ms.
#[derive(Serialize, Deserialize)]
pub(crate) struct Earlier {
    pub(crate) by: i64,
    pub(crate) skew: i64,
}

impl DoFn for Earlier {
    type In = i64;
    type Out = i64;
    fn process(&mut self, x: i64, ctx: &mut ProcessContext<'_, i64>) -> Result<(), UserError> {
        let t = Timestamp::from_millis(ctx.timestamp().millis() - self.by);
        ctx.output_with_timestamp(x, t);
        Ok(())
    }
    fn allowed_timestamp_skew(&self) -> i64 {
        self.skew
    }
}

/// Moves each of `xs` to the timestamp it names, then 10 ms earlier, allowing `skew`.
pub(crate) fn earlier(p: &Pipeline, xs: Vec<i64>, skew: i64) -> tidewater::PCollection<i64> {
    p.create("Xs", xs)
        .apply("AtTimestamp", tidewater::ParDo::of(AtTimestamp))
        .apply("Earlier", tidewater::ParDo::of(Earlier { by: 10, skew }))
}

fn within_skew(p: &Pipeline) {
    earlier(p, vec![100, 2_000], 10).capture("earlier");
}

fn check_within_skew(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    let mut got: Vec<(i64, Timestamp)> = captured::<i64>(&r, "earlier")?
        .into_iter()
        .map(|wv| (wv.value, wv.timestamp))
        .collect();
    got.sort();
    eq(
        "(element, timestamp)",
        got,
        vec![
            (100, Timestamp::from_millis(90)),
            (2_000, Timestamp::from_millis(1_990)),
        ],
    )
}

/// Buffers its bundle and outputs it from finish_bundle, as batching DoFns do.
#[derive(Serialize, Deserialize, Default)]
struct BufferBundle {
    #[serde(skip)]
    buffer: Vec<i64>,
}

impl DoFn for BufferBundle {
    type In = i64;
    type Out = i64;
    fn process(&mut self, x: i64, _ctx: &mut ProcessContext<'_, i64>) -> Result<(), UserError> {
        self.buffer.push(x);
        Ok(())
    }
    fn finish_bundle(&mut self, ctx: &mut FinishBundleContext<'_, i64>) -> Result<(), UserError> {
        for x in self.buffer.drain(..) {
            ctx.output(x, Timestamp::MIN, BoundedWindow::Global);
        }
        Ok(())
    }
}

#[derive(Serialize, Deserialize)]
struct SumFn;

impl tidewater::CombineFn for SumFn {
    type In = i64;
    type Acc = i64;
    type Out = i64;
    fn create_accumulator(&self) -> i64 {
        0
    }
    fn add_input(&self, acc: &mut i64, x: i64) {
        *acc += x;
    }
    fn merge_accumulators(&self, acc: &mut i64, other: i64) {
        *acc += other;
    }
    fn extract_output(&self, acc: i64) -> i64 {
        acc
    }
}

/// What finish_bundle outputs must reach the rest of the stage (a fused ParDo, a
/// lifted combine) like any other output.
fn batching(p: &Pipeline) {
    let squares = p
        .create("Xs", (1i64..=1_000).collect())
        .apply("Buffer", tidewater::ParDo::of(BufferBundle::default()))
        .map("Square", square);
    squares.capture("squares");
    squares
        .apply("Sum", tidewater::Combine::globally(SumFn))
        .capture("sum");
}

fn check_batching(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    values_eq(&r, "squares", (1i64..=1_000).map(|x| x * x).collect())?;
    values_eq(&r, "sum", vec![(1i64..=1_000).map(|x| x * x).sum::<i64>()])
}

fn parity_key(x: &i64) -> bool {
    x % 2 == 0
}

/// A tagged output consumed by a GroupByKey: it crosses a shuffle, not just a fused
/// ParDo.
fn tagged_to_shuffle(p: &Pipeline) {
    let odd = TupleTag::<i64>::new("odd");
    let other = TupleTag::<String>::new("other");
    let input: Vec<String> = (0..300)
        .map(|i| i.to_string())
        .chain(["x".to_string()])
        .collect();
    let out = p.create("Inputs", input).apply(
        "Classify",
        tidewater::ParDo::of(Classify {
            odd: odd.clone(),
            other: other.clone(),
        })
        .with_outputs()
        .and(&odd)
        .and(&other),
    );
    out.get(&odd)
        .with_keys("ByResidue", residue_mod_4)
        .group_by_key("Group")
        .capture("odd_groups");
    out.main::<i64>()
        .with_keys("ByParity", parity_key)
        .group_by_key("GroupEvens")
        .capture("even_groups");
}

fn residue_mod_4(x: &i64) -> i64 {
    x % 4
}

fn check_tagged_to_shuffle(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    let mut odd: Vec<(i64, Vec<i64>)> = captured::<(i64, Vec<i64>)>(&r, "odd_groups")?
        .into_iter()
        .map(|wv| wv.value)
        .collect();
    odd.iter_mut().for_each(|(_, vs)| vs.sort_unstable());
    odd.sort();
    let expected: Vec<(i64, Vec<i64>)> = [1, 3]
        .iter()
        .map(|&k| (k, (0..300).filter(|x| x % 4 == k).collect()))
        .collect();
    eq("groups of the tagged output", odd, expected)?;
    let mut even: Vec<(bool, Vec<i64>)> = captured::<(bool, Vec<i64>)>(&r, "even_groups")?
        .into_iter()
        .map(|wv| wv.value)
        .collect();
    even.iter_mut().for_each(|(_, vs)| vs.sort_unstable());
    eq(
        "groups of the main output",
        even,
        vec![(true, (0..300).step_by(2).collect())],
    )
}
