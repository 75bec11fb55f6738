//! Metrics: counters and distributions reported by user code, attributed to the full
//! name of the step, summed over bundles, instances and stages.

use crate::case::RunResult;
use crate::check::{eq, succeeded, values_eq};
use crate::Case;
use serde::{Deserialize, Serialize};
use tidewater::exec::DistributionData;
use tidewater::runner::Feature::{Capture, Create, GroupByKey, ParDo};
use tidewater::{DoFn, PCollection, PTransform, Pipeline, ProcessContext, UserError};

pub(crate) fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "metrics/counters",
            features: &[Create, ParDo, GroupByKey, Capture],
            build: counters,
            check: check_counters,
        },
        Case {
            name: "metrics/distributions",
            features: &[Create, ParDo],
            build: distributions,
            check: check_distributions,
        },
    ]
}

/// Counts elements and adds them up.
#[derive(Serialize, Deserialize)]
struct Tally;

impl DoFn for Tally {
    type In = i64;
    type Out = i64;
    fn process(&mut self, x: i64, ctx: &mut ProcessContext<'_, i64>) -> Result<(), UserError> {
        ctx.inc_counter("elements", 1);
        ctx.inc_counter("sum", x);
        ctx.output(x);
        Ok(())
    }
}

/// Counts the groups it sees.
#[derive(Serialize, Deserialize)]
struct CountGroups;

impl DoFn for CountGroups {
    type In = (bool, Vec<i64>);
    type Out = (bool, usize);
    fn process(
        &mut self,
        (k, vs): (bool, Vec<i64>),
        ctx: &mut ProcessContext<'_, (bool, usize)>,
    ) -> Result<(), UserError> {
        ctx.inc_counter("elements", 1);
        ctx.inc_counter("groups", 1);
        ctx.output((k, vs.len()));
        Ok(())
    }
}

/// A composite, so that metrics are attributed to the nested step `Count/Tally`.
struct Count;

impl PTransform<PCollection<i64>> for Count {
    type Output = PCollection<i64>;
    fn expand(self, input: PCollection<i64>) -> PCollection<i64> {
        input.apply("Tally", tidewater::ParDo::of(Tally))
    }
}

fn is_even(x: &i64) -> bool {
    x % 2 == 0
}

const N: i64 = 1_000;

fn counters(p: &Pipeline) {
    p.create("Xs", (1..=N).collect())
        .apply("Count", Count)
        .with_keys("Parity", is_even)
        .group_by_key("Group")
        .apply("CountGroups", tidewater::ParDo::of(CountGroups))
        .capture("sizes");
}

fn check_counters(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    values_eq(&r, "sizes", vec![(false, 500usize), (true, 500)])?;
    let m = &r.metrics;
    eq(
        "counter Count/Tally elements",
        m.counter("Count/Tally", "elements"),
        Some(N),
    )?;
    eq(
        "counter Count/Tally sum",
        m.counter("Count/Tally", "sum"),
        Some(N * (N + 1) / 2),
    )?;
    eq(
        "counter CountGroups groups",
        m.counter("CountGroups", "groups"),
        Some(2),
    )?;
    eq(
        "counter Count/Tally groups (never reported)",
        m.counter("Count/Tally", "groups"),
        None,
    )?;
    eq(
        "counter Tally elements (not the step's full name)",
        m.counter("Tally", "elements"),
        None,
    )?;
    eq(
        "counter elements summed over steps",
        m.counter_total("elements"),
        N + 2,
    )
}

/// Reports every element to a distribution.
#[derive(Serialize, Deserialize)]
struct Spread;

impl DoFn for Spread {
    type In = i64;
    type Out = i64;
    fn process(&mut self, x: i64, ctx: &mut ProcessContext<'_, i64>) -> Result<(), UserError> {
        ctx.update_distribution("value", x);
        ctx.update_distribution("square", x * x);
        Ok(())
    }
}

fn distributions(p: &Pipeline) {
    p.create("Xs", (-300i64..=700).collect())
        .apply("Spread", tidewater::ParDo::of(Spread));
}

fn check_distributions(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    let xs: Vec<i64> = (-300..=700).collect();
    let value = DistributionData {
        sum: xs.iter().sum(),
        count: xs.len() as i64,
        min: -300,
        max: 700,
    };
    let square = DistributionData {
        sum: xs.iter().map(|x| x * x).sum(),
        count: xs.len() as i64,
        min: 0,
        max: 490_000,
    };
    eq(
        "distribution Spread/value",
        r.metrics.distribution("Spread", "value"),
        Some(value),
    )?;
    eq(
        "distribution Spread/square",
        r.metrics.distribution("Spread", "square"),
        Some(square),
    )
}
