//! tidewater_transforms::Count: per element, per key, globally.

use crate::case::RunResult;
use crate::check::{metadata_eq, succeeded, values_eq};
use crate::Case;
use tidewater::runner::Feature::{Capture, CombineGlobally, CombinePerKey, Create};
use tidewater::{BoundedWindow, GlobalWindow, PaneInfo, Pipeline};
use tidewater_transforms::Count;

pub(crate) fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "count/per_element",
            features: &[Create, CombinePerKey, Capture],
            build: per_element,
            check: check_per_element,
        },
        Case {
            name: "count/per_key",
            features: &[Create, CombinePerKey, Capture],
            build: per_key,
            check: check_per_key,
        },
        Case {
            name: "count/globally",
            features: &[Create, CombineGlobally, Capture],
            build: globally,
            check: check_globally,
        },
    ]
}

fn words() -> Vec<String> {
    let mut v: Vec<String> = (0..1_000).map(|i| format!("w{}", i % 7)).collect();
    v.push("rare".into());
    v
}

fn expected_counts() -> Vec<(String, u64)> {
    let mut v: Vec<(String, u64)> = (0..7)
        .map(|k| (format!("w{k}"), if k < 1_000 % 7 { 143 } else { 142 }))
        .collect();
    v.push(("rare".into(), 1));
    v
}

fn per_element(p: &Pipeline) {
    p.create("Words", words())
        .apply("Count", Count::per_element())
        .capture("counts");
}

fn check_per_element(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    values_eq(&r, "counts", expected_counts())?;
    metadata_eq::<(String, u64)>(
        &r,
        "counts",
        GlobalWindow::MAX_TIMESTAMP,
        BoundedWindow::Global,
        PaneInfo::ON_TIME_AND_ONLY_FIRING,
    )
}

fn per_key(p: &Pipeline) {
    let kvs: Vec<(String, i64)> = words().into_iter().zip(0..).collect();
    p.create("Kvs", kvs)
        .apply("Count", Count::per_key())
        .capture("counts");
}

fn check_per_key(r: RunResult) -> Result<(), String> {
    values_eq(&succeeded(r)?, "counts", expected_counts())
}

fn globally(p: &Pipeline) {
    p.create("Words", words())
        .apply("Count", Count::globally())
        .capture("count");
    p.create("Nothing", Vec::<String>::new())
        .apply("CountNothing", Count::globally())
        .capture("zero");
}

fn check_globally(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    values_eq(&r, "count", vec![1_001u64])?;
    values_eq(&r, "zero", vec![0u64])
}
