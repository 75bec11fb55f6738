//! tidewater_transforms::{Sum, Min, Max, Mean}: globally, per key, and the defaults of
//! an empty input (Beam's: 0, the type's largest, the type's smallest, NaN).

use crate::case::RunResult;
use crate::check::{captured, eq, succeeded, values_eq};
use crate::Case;
use tidewater::runner::Feature::{Capture, CombineGlobally, CombinePerKey, Create};
use tidewater::Pipeline;
use tidewater_transforms::{Max, Mean, Min, Sum};

pub(crate) fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "numeric/globally",
            features: &[Create, CombineGlobally, Capture],
            build: globally,
            check: check_globally,
        },
        Case {
            name: "numeric/per_key",
            features: &[Create, CombinePerKey, Capture],
            build: per_key,
            check: check_per_key,
        },
        Case {
            name: "numeric/empty_defaults",
            features: &[Create, CombineGlobally, Capture],
            build: empty,
            check: check_empty,
        },
    ]
}

fn globally(p: &Pipeline) {
    let xs = p.create("Xs", (-500i64..=1_500).collect());
    xs.apply("Sum", Sum::<i64>::globally()).capture("sum");
    xs.apply("Min", Min::<i64>::globally()).capture("min");
    xs.apply("Max", Max::<i64>::globally()).capture("max");
    xs.apply("Mean", Mean::<i64>::globally()).capture("mean");
    p.create("Halves", (0..64).map(|i| f64::from(i) * 0.5).collect())
        .apply("SumFloats", Sum::<f64>::globally())
        .capture("float_sum");
}

fn mean_of(r: &tidewater::PipelineResult, name: &str) -> Result<Vec<f64>, String> {
    Ok(captured::<f64>(r, name)?
        .into_iter()
        .map(|wv| wv.value)
        .collect())
}

fn check_globally(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    values_eq(&r, "sum", vec![(-500i64..=1_500).sum::<i64>()])?;
    values_eq(&r, "min", vec![-500i64])?;
    values_eq(&r, "max", vec![1_500i64])?;
    eq("capture 'mean'", mean_of(&r, "mean")?, vec![500.0])?;
    eq(
        "capture 'float_sum'",
        mean_of(&r, "float_sum")?,
        vec![1008.0],
    )
}

fn per_key(p: &Pipeline) {
    let kvs: Vec<(char, u32)> = (0u32..900)
        .map(|i| (['a', 'b', 'c'][(i % 3) as usize], i))
        .collect();
    let kvs = p.create("Kvs", kvs);
    kvs.apply("Sum", Sum::<u32>::per_key()).capture("sum");
    kvs.apply("Min", Min::<u32>::per_key()).capture("min");
    kvs.apply("Max", Max::<u32>::per_key()).capture("max");
    kvs.apply("Mean", Mean::<u32>::per_key()).capture("mean");
}

fn check_per_key(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    // Key a holds 0, 3, ..., 897; b holds 1, ..., 898; c holds 2, ..., 899.
    let sum = |k: u32| (0u32..900).filter(|i| i % 3 == k).sum::<u32>();
    values_eq(&r, "sum", vec![('a', sum(0)), ('b', sum(1)), ('c', sum(2))])?;
    values_eq(&r, "min", vec![('a', 0u32), ('b', 1), ('c', 2)])?;
    values_eq(&r, "max", vec![('a', 897u32), ('b', 898), ('c', 899)])?;
    let mut means: Vec<(char, f64)> = captured::<(char, f64)>(&r, "mean")?
        .into_iter()
        .map(|wv| wv.value)
        .collect();
    means.sort_by_key(|(k, _)| *k);
    eq(
        "capture 'mean'",
        means,
        vec![('a', 448.5), ('b', 449.5), ('c', 450.5)],
    )
}

fn empty(p: &Pipeline) {
    let nothing = p.create("Nothing", Vec::<i32>::new());
    nothing.apply("Sum", Sum::<i32>::globally()).capture("sum");
    nothing.apply("Min", Min::<i32>::globally()).capture("min");
    nothing.apply("Max", Max::<i32>::globally()).capture("max");
    nothing
        .apply("Mean", Mean::<i32>::globally())
        .capture("mean");
}

fn check_empty(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    values_eq(&r, "sum", vec![0i32])?;
    values_eq(&r, "min", vec![i32::MAX])?;
    values_eq(&r, "max", vec![i32::MIN])?;
    let mean = mean_of(&r, "mean")?;
    if mean.len() != 1 || !mean[0].is_nan() {
        return Err(format!("capture 'mean': expected [NaN], got {mean:?}"));
    }
    Ok(())
}
