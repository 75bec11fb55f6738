//! Combine.perKey and Combine.globally: exact results whatever the bundles and
//! combiner lifting, one on-time output per key (or window) at the end of the window,
//! and the default output of an empty global combine.

use crate::case::RunResult;
use crate::check::{captured, eq, metadata_eq, succeeded, values_eq};
use crate::Case;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use tidewater::runner::Feature::{Capture, CombineGlobally, CombinePerKey, Create, ParDo};
use tidewater::{
    BoundedWindow, Combine, CombineFn, Element, GlobalWindow, PaneInfo, Pipeline, Windows,
};

pub(crate) fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "combine_per_key/sum",
            features: &[Create, CombinePerKey, Capture],
            build: per_key_sum,
            check: check_per_key_sum,
        },
        Case {
            name: "combine_per_key/mean_many_keys",
            features: &[Create, ParDo, CombinePerKey, Capture],
            build: per_key_mean,
            check: check_per_key_mean,
        },
        Case {
            name: "combine_per_key/set_accumulator",
            features: &[Create, CombinePerKey, Capture],
            build: per_key_set,
            check: check_per_key_set,
        },
        Case {
            name: "combine_globally/sum",
            features: &[Create, CombineGlobally, Capture],
            build: globally_sum,
            check: check_globally_sum,
        },
        Case {
            name: "combine_globally/empty_input_default",
            features: &[Create, CombineGlobally, Capture],
            build: globally_empty,
            check: check_globally_empty,
        },
        Case {
            name: "combine_globally/filtered_to_empty_default",
            features: &[Create, ParDo, CombineGlobally, Capture],
            build: globally_filtered_empty,
            check: check_globally_filtered_empty,
        },
    ]
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

fn kv(k: &str, v: i64) -> (String, i64) {
    (k.to_string(), v)
}

fn per_key_sum(p: &Pipeline) {
    let input = vec![
        kv("a", 1),
        kv("b", 10),
        kv("a", 2),
        kv("c", -5),
        kv("b", 20),
        kv("a", 3),
    ];
    p.create("Kvs", input)
        .apply("Sum", Combine::per_key(SumFn))
        .capture("sums");
}

fn check_per_key_sum(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    values_eq(&r, "sums", vec![kv("a", 6), kv("b", 30), kv("c", -5)])?;
    metadata_eq::<(String, i64)>(
        &r,
        "sums",
        GlobalWindow::MAX_TIMESTAMP,
        BoundedWindow::Global,
        PaneInfo::ON_TIME_AND_ONLY_FIRING,
    )
}

/// Mean with a (sum, count) accumulator, so that merging partial accumulators matters.
#[derive(Serialize, Deserialize)]
struct MeanFn;

impl CombineFn for MeanFn {
    type In = u32;
    type Acc = (u64, u64);
    type Out = f64;
    fn create_accumulator(&self) -> (u64, u64) {
        (0, 0)
    }
    fn add_input(&self, acc: &mut (u64, u64), x: u32) {
        acc.0 += u64::from(x);
        acc.1 += 1;
    }
    fn merge_accumulators(&self, acc: &mut (u64, u64), other: (u64, u64)) {
        acc.0 += other.0;
        acc.1 += other.1;
    }
    fn extract_output(&self, acc: (u64, u64)) -> f64 {
        acc.0 as f64 / acc.1 as f64
    }
}

const MANY: u32 = 4_000;
const KEYS: u32 = 8;

fn by_modulus(x: &u32) -> u32 {
    x % KEYS
}

fn per_key_mean(p: &Pipeline) {
    p.create("Xs", (0..MANY).collect())
        .with_keys("Key", by_modulus)
        .apply("Mean", Combine::per_key(MeanFn))
        .capture("means");
}

fn check_per_key_mean(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    let mut got: Vec<(u32, f64)> = captured::<(u32, f64)>(&r, "means")?
        .into_iter()
        .map(|wv| wv.value)
        .collect();
    got.sort_by_key(|(k, _)| *k);
    // Key k holds k, k + 8, ..., k + 3992: 500 values with mean k + 1996.
    let expected: Vec<(u32, f64)> = (0..KEYS)
        .map(|k| (k, f64::from(k) + f64::from(MANY - KEYS) / 2.0))
        .collect();
    eq("means", got, expected)
}

/// The distinct values of each key, sorted: a set accumulator.
#[derive(Serialize, Deserialize)]
struct DistinctSorted;

impl CombineFn for DistinctSorted {
    type In = String;
    type Acc = BTreeSet<String>;
    type Out = Vec<String>;
    fn create_accumulator(&self) -> BTreeSet<String> {
        BTreeSet::new()
    }
    fn add_input(&self, acc: &mut BTreeSet<String>, x: String) {
        acc.insert(x);
    }
    fn merge_accumulators(&self, acc: &mut BTreeSet<String>, other: BTreeSet<String>) {
        acc.extend(other);
    }
    fn extract_output(&self, acc: BTreeSet<String>) -> Vec<String> {
        acc.into_iter().collect()
    }
}

fn per_key_set(p: &Pipeline) {
    let input: Vec<(u8, String)> = (0..600)
        .map(|i| ((i % 3) as u8, format!("v{}", i % 7)))
        .collect();
    p.create("Kvs", input)
        .apply("Distinct", Combine::per_key(DistinctSorted))
        .capture("distinct");
}

fn check_per_key_set(r: RunResult) -> Result<(), String> {
    let all: Vec<String> = (0..7).map(|i| format!("v{i}")).collect();
    values_eq(
        &succeeded(r)?,
        "distinct",
        vec![(0u8, all.clone()), (1, all.clone()), (2, all)],
    )
}

fn globally_sum(p: &Pipeline) {
    p.create("Xs", (1i64..=1_000).collect())
        .apply("Sum", Combine::globally(SumFn))
        .capture("sum");
}

fn check_globally_sum(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    values_eq(&r, "sum", vec![500_500i64])?;
    metadata_eq::<i64>(
        &r,
        "sum",
        GlobalWindow::MAX_TIMESTAMP,
        BoundedWindow::Global,
        PaneInfo::ON_TIME_AND_ONLY_FIRING,
    )
}

/// Count and sum with a label among its fields, so that an empty input's output shows
/// that `extract_output(create_accumulator())` ran on the decoded fields.
#[derive(Serialize, Deserialize)]
struct Describe {
    label: String,
}

impl CombineFn for Describe {
    type In = i64;
    type Acc = (u64, i64);
    type Out = String;
    fn create_accumulator(&self) -> (u64, i64) {
        (0, 0)
    }
    fn add_input(&self, acc: &mut (u64, i64), x: i64) {
        acc.0 += 1;
        acc.1 += x;
    }
    fn merge_accumulators(&self, acc: &mut (u64, i64), other: (u64, i64)) {
        acc.0 += other.0;
        acc.1 += other.1;
    }
    fn extract_output(&self, acc: (u64, i64)) -> String {
        format!("{}: n={} sum={}", self.label, acc.0, acc.1)
    }
}

fn globally_empty(p: &Pipeline) {
    p.create("Nothing", Vec::<i64>::new())
        .apply("Sum", Combine::globally(SumFn))
        .capture("sum");
    p.create("NothingEither", Vec::<i64>::new())
        .apply(
            "Describe",
            Combine::globally(Describe {
                label: "stats".into(),
            }),
        )
        .capture("described");
}

/// The default output of an empty global combine is in the global window.
fn check_default<T: Element>(r: &tidewater::PipelineResult, name: &str) -> Result<(), String> {
    for wv in captured::<T>(r, name)? {
        eq(
            &format!("window of the default output in '{name}'"),
            wv.windows,
            Windows::global(),
        )?;
    }
    Ok(())
}

fn check_globally_empty(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    values_eq(&r, "sum", vec![0i64])?;
    values_eq(&r, "described", vec!["stats: n=0 sum=0".to_string()])?;
    check_default::<i64>(&r, "sum")?;
    check_default::<String>(&r, "described")
}

fn is_negative(x: &i64) -> bool {
    *x < 0
}

fn globally_filtered_empty(p: &Pipeline) {
    p.create("Xs", (1i64..=500).collect())
        .filter("Negative", is_negative)
        .apply(
            "Describe",
            Combine::globally(Describe {
                label: "negatives".into(),
            }),
        )
        .capture("described");
}

fn check_globally_filtered_empty(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    values_eq(&r, "described", vec!["negatives: n=0 sum=0".to_string()])?;
    check_default::<String>(&r, "described")
}
