//! Flatten: the union (as a multiset) of its inputs.

use crate::case::RunResult;
use crate::check::{eq, metadata_eq, succeeded, values, values_eq};
use crate::Case;
use tidewater::runner::Feature::{Capture, Create, Flatten, GroupByKey, ParDo};
use tidewater::{BoundedWindow, FlattenExt, PaneInfo, Pipeline, Timestamp};

pub(crate) fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "flatten/two_inputs",
            features: &[Create, Flatten, Capture],
            build: two_inputs,
            check: check_two_inputs,
        },
        Case {
            name: "flatten/single_input",
            features: &[Create, Flatten, Capture],
            build: single_input,
            check: check_single_input,
        },
        Case {
            name: "flatten/with_empty_input",
            features: &[Create, ParDo, Flatten, Capture],
            build: with_empty,
            check: check_with_empty,
        },
        Case {
            name: "flatten/same_pcollection_twice",
            features: &[Create, Flatten, Capture],
            build: same_twice,
            check: check_same_twice,
        },
        Case {
            name: "flatten/pardo_inputs_then_group",
            features: &[Create, ParDo, Flatten, GroupByKey, Capture],
            build: pardo_inputs,
            check: check_pardo_inputs,
        },
        Case {
            name: "flatten/many_elements_then_pardo",
            features: &[Create, Flatten, ParDo, Capture],
            build: many_then_pardo,
            check: check_many_then_pardo,
        },
    ]
}

fn two_inputs(p: &Pipeline) {
    let a = p.create("A", vec![1i64, 2, 3]);
    let b = p.create("B", vec![3i64, 4]);
    vec![a, b].apply_flatten("Both").capture("both");
}

fn check_two_inputs(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    values_eq(&r, "both", vec![1i64, 2, 3, 3, 4])?;
    metadata_eq::<i64>(
        &r,
        "both",
        Timestamp::MIN,
        BoundedWindow::Global,
        PaneInfo::NO_FIRING,
    )
}

fn single_input(p: &Pipeline) {
    vec![p.create("A", vec!["x".to_string(), "y".to_string()])]
        .apply_flatten("One")
        .capture("one");
}

fn check_single_input(r: RunResult) -> Result<(), String> {
    values_eq(
        &succeeded(r)?,
        "one",
        vec!["x".to_string(), "y".to_string()],
    )
}

fn is_negative(x: &i64) -> bool {
    *x < 0
}

fn with_empty(p: &Pipeline) {
    let a = p.create("A", vec![1i64, 2]);
    let none = p.create("B", vec![3i64, 4]).filter("Negative", is_negative);
    let empty = p.create("C", Vec::<i64>::new());
    vec![none, a, empty].apply_flatten("All").capture("all");
}

fn check_with_empty(r: RunResult) -> Result<(), String> {
    values_eq(&succeeded(r)?, "all", vec![1i64, 2])
}

/// Beam semantics: a PCollection listed twice contributes its elements twice.
fn same_twice(p: &Pipeline) {
    let a = p.create("A", vec![1i64, 2]);
    let b = p.create("B", vec![10i64]);
    vec![a.clone(), a.clone()]
        .apply_flatten("Twice")
        .capture("twice");
    vec![a.clone(), b, a]
        .apply_flatten("Sandwich")
        .capture("sandwich");
}

fn check_same_twice(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    let errors: Vec<String> = [
        values_eq(&r, "twice", vec![1i64, 1, 2, 2]),
        values_eq(&r, "sandwich", vec![1i64, 1, 2, 2, 10]),
    ]
    .into_iter()
    .filter_map(Result::err)
    .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("; "))
    }
}

fn tag_left(x: i64) -> (String, i64) {
    ("left".to_string(), x)
}

fn tag_right(x: i64) -> (String, i64) {
    ("right".to_string(), x)
}

fn tag_odd(x: &i64) -> String {
    if x % 2 == 0 { "even" } else { "odd" }.to_string()
}

fn pardo_inputs(p: &Pipeline) {
    let left = p.create("Left", vec![1i64, 2, 3]).map("TagLeft", tag_left);
    let right = p.create("Right", vec![4i64, 5]).map("TagRight", tag_right);
    let parity = p
        .create("Parity", vec![7i64, 8])
        .with_keys("TagParity", tag_odd);
    vec![left, right, parity]
        .apply_flatten("All")
        .group_by_key("Group")
        .capture("groups");
}

fn check_pardo_inputs(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    let groups: Vec<(String, Vec<i64>)> = values::<(String, Vec<i64>)>(&r, "groups")?
        .into_iter()
        .map(|(k, mut vs)| {
            vs.sort_unstable();
            (k, vs)
        })
        .collect();
    let expected = vec![
        ("even".to_string(), vec![8]),
        ("left".into(), vec![1, 2, 3]),
        ("odd".into(), vec![7]),
        ("right".into(), vec![4, 5]),
    ];
    eq("groups", groups, expected)
}

fn double(x: u64) -> u64 {
    2 * x
}

fn many_then_pardo(p: &Pipeline) {
    let a = p.create("A", (0u64..2_000).collect());
    let b = p.create("B", (2_000u64..2_500).collect());
    vec![a, b]
        .apply_flatten("Both")
        .map("Double", double)
        .capture("doubled");
}

fn check_many_then_pardo(r: RunResult) -> Result<(), String> {
    values_eq(
        &succeeded(r)?,
        "doubled",
        (0u64..2_500).map(|x| 2 * x).collect(),
    )
}
