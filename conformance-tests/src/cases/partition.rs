//! Partition: every element in exactly the partition its function chooses.

use crate::case::RunResult;
use crate::check::{metadata_eq, succeeded, user_code_error, values_eq, ExpectedUserError};
use crate::Case;
use tidewater::runner::Feature::{Capture, Create, MultipleOutputs, ParDo};
use tidewater::{BoundedWindow, PaneInfo, Partition, Pipeline, Split3, Timestamp};

pub(crate) fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "partition/three_ways",
            features: &[Create, ParDo, MultipleOutputs, Capture],
            build: three_ways,
            check: check_three_ways,
        },
        Case {
            name: "partition/single",
            features: &[Create, ParDo, Capture],
            build: single,
            check: check_single,
        },
        Case {
            name: "partition/same_fn_different_counts",
            features: &[Create, ParDo, MultipleOutputs, Capture],
            build: same_fn_different_counts,
            check: check_same_fn_different_counts,
        },
        Case {
            name: "partition/with_params",
            features: &[Create, ParDo, MultipleOutputs, Capture],
            build: with_params,
            check: check_with_params,
        },
        Case {
            name: "partition/split_by_variant",
            features: &[Create, ParDo, MultipleOutputs, Capture],
            build: split_by_variant,
            check: check_split_by_variant,
        },
        Case {
            name: "partition/out_of_range_fails",
            features: &[Create, ParDo, MultipleOutputs],
            build: out_of_range,
            check: check_out_of_range,
        },
    ]
}

fn by_remainder(x: &i64, n: usize) -> usize {
    x.rem_euclid(n as i64) as usize
}

fn three_ways(p: &Pipeline) {
    let parts = p
        .create("Xs", (-5i64..10).collect())
        .apply("ByRemainder", Partition::of(3, by_remainder));
    for (i, part) in parts.iter().enumerate() {
        part.capture(&format!("part{i}"));
    }
}

fn check_three_ways(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    for i in 0..3 {
        let name = format!("part{i}");
        values_eq(
            &r,
            &name,
            (-5i64..10).filter(|x| x.rem_euclid(3) == i).collect(),
        )?;
        metadata_eq::<i64>(
            &r,
            &name,
            Timestamp::MIN,
            BoundedWindow::Global,
            PaneInfo::NO_FIRING,
        )?;
    }
    Ok(())
}

/// Partition `i` holds the elements at or above `i` of the thresholds, which travel in
/// the plan as the function's parameters.
fn with_params(p: &Pipeline) {
    let parts = p.create("Xs", (-5i64..25).collect()).apply(
        "ByThresholds",
        Partition::of_with(3, vec![0i64, 10], |limits: &Vec<i64>, x: &i64, _n| {
            limits.iter().filter(|l| x >= l).count()
        }),
    );
    for (i, part) in parts.iter().enumerate() {
        part.capture(&format!("part{i}"));
    }
}

fn check_with_params(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    values_eq(&r, "part0", (-5i64..0).collect())?;
    values_eq(&r, "part1", (0i64..10).collect())?;
    values_eq(&r, "part2", (10i64..25).collect())
}

/// `split3`: numbers, words and empty lines into three PCollections of their own types.
fn split_by_variant(p: &Pipeline) {
    let lines = p.create(
        "Lines",
        ["7", "x", "", "-2", "yy", ""].map(String::from).to_vec(),
    );
    let (numbers, words, empty) = lines.split3("Kinds", |l: String| {
        if l.is_empty() {
            Split3::Third(())
        } else {
            match l.parse::<i64>() {
                Ok(n) => Split3::First(n),
                Err(_) => Split3::Second(l.len()),
            }
        }
    });
    numbers.capture("numbers");
    words.capture("word_lengths");
    empty.capture("empty");
}

fn check_split_by_variant(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    values_eq(&r, "numbers", vec![-2i64, 7])?;
    values_eq(&r, "word_lengths", vec![1usize, 2])?;
    values_eq(&r, "empty", vec![(), ()])
}

fn always_first(_: &i64, _: usize) -> usize {
    0
}

fn single(p: &Pipeline) {
    let parts = p
        .create("Xs", vec![1i64, 2, 3])
        .apply("All", Partition::of(1, always_first));
    parts[0].capture("all");
}

fn check_single(r: RunResult) -> Result<(), String> {
    values_eq(&succeeded(r)?, "all", vec![1i64, 2, 3])
}

fn by_modulus(x: &u32, n: usize) -> usize {
    *x as usize % n
}

/// One partition function, two partition counts: each application must use its own.
fn same_fn_different_counts(p: &Pipeline) {
    let xs = p.create("Xs", (0u32..12).collect());
    let halves = xs.apply("InTwo", Partition::of(2, by_modulus));
    let thirds = xs.apply("InThree", Partition::of(3, by_modulus));
    for (i, part) in halves.iter().enumerate() {
        part.capture(&format!("half{i}"));
    }
    for (i, part) in thirds.iter().enumerate() {
        part.capture(&format!("third{i}"));
    }
}

fn check_same_fn_different_counts(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    for i in 0..2 {
        values_eq(
            &r,
            &format!("half{i}"),
            (0u32..12).filter(|x| *x as usize % 2 == i).collect(),
        )?;
    }
    for i in 0..3 {
        values_eq(
            &r,
            &format!("third{i}"),
            (0u32..12).filter(|x| *x as usize % 3 == i).collect(),
        )?;
    }
    Ok(())
}

fn too_far(x: &i64, n: usize) -> usize {
    if *x == 42 {
        n
    } else {
        0
    }
}

fn out_of_range(p: &Pipeline) {
    p.create("Xs", vec![1i64, 42, 3])
        .apply("Split", Partition::of(2, too_far));
}

fn check_out_of_range(r: RunResult) -> Result<(), String> {
    user_code_error(
        r,
        ExpectedUserError {
            transform: "Split",
            phase: "process",
            element: Some("42"),
            message: &["returned 2", "2 partitions"],
        },
    )
}
