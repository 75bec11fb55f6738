//! tidewater_transforms::Sample: a fixed-size sample that does not depend on the
//! order or bundling of the input.

use crate::case::RunResult;
use crate::check::{eq, succeeded, values};
use crate::Case;
use std::collections::BTreeSet;
use tidewater::runner::Feature::{Capture, CombineGlobally, CombinePerKey, Create, Flatten};
use tidewater::{FlattenExt, Pipeline};
use tidewater_transforms::Sample;

pub(crate) fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "sample/globally",
            features: &[Create, Flatten, CombineGlobally, Capture],
            build: globally,
            check: check_globally,
        },
        Case {
            name: "sample/per_key",
            features: &[Create, CombinePerKey, Capture],
            build: per_key,
            check: check_per_key,
        },
    ]
}

const N: u32 = 1_000;

/// The same elements three ways: in order, reversed, and as a Flatten of two
/// interleaved halves; each sampled with the same seed.
fn globally(p: &Pipeline) {
    let in_order = p.create("InOrder", (0..N).collect());
    let reversed = p.create("Reversed", (0..N).rev().collect());
    let odd = p.create("Odd", (0..N).filter(|x| x % 2 == 1).collect());
    let even = p.create("Even", (0..N).filter(|x| x % 2 == 0).collect());
    let halves = vec![odd, even].apply_flatten("Halves");
    in_order
        .apply("SampleInOrder", Sample::fixed_size_globally(10, 42))
        .capture("in_order");
    reversed
        .apply("SampleReversed", Sample::fixed_size_globally(10, 42))
        .capture("reversed");
    halves
        .apply("SampleHalves", Sample::fixed_size_globally(10, 42))
        .capture("halves");
    p.create("Few", vec![7u32, 8])
        .apply("SampleFew", Sample::fixed_size_globally(10, 42))
        .capture("few");
}

fn one_sample(r: &tidewater::PipelineResult, name: &str) -> Result<Vec<u32>, String> {
    let mut samples = values::<Vec<u32>>(r, name)?;
    if samples.len() != 1 {
        return Err(format!(
            "capture '{name}': expected one sample, got {samples:?}"
        ));
    }
    Ok(samples.remove(0))
}

fn check_globally(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    let sample = one_sample(&r, "in_order")?;
    eq("size of the sample", sample.len(), 10)?;
    let distinct: BTreeSet<u32> = sample.iter().copied().collect();
    eq("distinct elements in the sample", distinct.len(), 10)?;
    if let Some(x) = sample.iter().find(|x| **x >= N) {
        return Err(format!("the sample holds {x}, which is not in the input"));
    }
    eq(
        "sample of the reversed input (same seed)",
        one_sample(&r, "reversed")?,
        sample.clone(),
    )?;
    eq(
        "sample of the flattened halves (same seed)",
        one_sample(&r, "halves")?,
        sample,
    )?;
    let mut few = one_sample(&r, "few")?;
    few.sort_unstable();
    eq("sample of fewer elements than its size", few, vec![7, 8])
}

fn per_key(p: &Pipeline) {
    let kvs: Vec<(u8, u32)> = (0..N)
        .map(|i| ((i % 4) as u8, i))
        .chain([(9, 1), (9, 2)])
        .collect();
    p.create("Kvs", kvs)
        .apply("Sample", Sample::fixed_size_per_key(5, 7))
        .capture("samples");
}

fn check_per_key(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    let samples = values::<(u8, Vec<u32>)>(&r, "samples")?;
    eq(
        "sampled keys",
        samples.iter().map(|(k, _)| *k).collect::<Vec<_>>(),
        vec![0, 1, 2, 3, 9],
    )?;
    for (k, s) in samples {
        let expected_len = if k == 9 { 2 } else { 5 };
        eq(
            &format!("size of the sample of key {k}"),
            s.len(),
            expected_len,
        )?;
        eq(
            &format!("distinct elements in the sample of key {k}"),
            s.iter().collect::<BTreeSet<_>>().len(),
            expected_len,
        )?;
        let belongs = |x: &u32| {
            if k == 9 {
                [1, 2].contains(x)
            } else {
                *x < N && x % 4 == u32::from(k)
            }
        };
        if let Some(x) = s.iter().find(|x| !belongs(x)) {
            return Err(format!(
                "the sample of key {k} holds {x}, which is not one of its values"
            ));
        }
    }
    Ok(())
}
