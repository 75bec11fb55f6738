//! tidewater_transforms::Distinct: each distinct element once.

use crate::case::RunResult;
use crate::check::{succeeded, values_eq};
use crate::Case;
use tidewater::runner::Feature::{Capture, CombinePerKey, Create, ParDo};
use tidewater::Pipeline;
use tidewater_transforms::Distinct;

pub(crate) fn cases() -> Vec<Case> {
    vec![Case {
        name: "distinct/elements",
        features: &[Create, ParDo, CombinePerKey, Capture],
        build: elements,
        check: check_elements,
    }]
}

fn elements(p: &Pipeline) {
    let words: Vec<String> = (0..2_000).map(|i| format!("w{}", (i * 7) % 13)).collect();
    p.create("Words", words)
        .apply("Distinct", Distinct)
        .capture("distinct");
    let pairs: Vec<(u8, Option<bool>)> = vec![
        (1, None),
        (1, Some(true)),
        (1, None),
        (2, Some(false)),
        (2, Some(false)),
    ];
    p.create("Pairs", pairs)
        .apply("DistinctPairs", Distinct)
        .capture("distinct_pairs");
}

fn check_elements(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    values_eq(&r, "distinct", (0..13).map(|i| format!("w{i}")).collect())?;
    values_eq(
        &r,
        "distinct_pairs",
        vec![(1u8, None), (1, Some(true)), (2, Some(false))],
    )
}
