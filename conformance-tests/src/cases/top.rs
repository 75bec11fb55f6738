//! tidewater_transforms::Top: the n largest or smallest, sorted best first.

use crate::case::RunResult;
use crate::check::{succeeded, values_eq};
use crate::Case;
use tidewater::runner::Feature::{Capture, CombineGlobally, CombinePerKey, Create};
use tidewater::Pipeline;
use tidewater_transforms::Top;

pub(crate) fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "top/globally",
            features: &[Create, CombineGlobally, Capture],
            build: globally,
            check: check_globally,
        },
        Case {
            name: "top/per_key",
            features: &[Create, CombinePerKey, Capture],
            build: per_key,
            check: check_per_key,
        },
    ]
}

fn globally(p: &Pipeline) {
    let xs: Vec<i64> = (0..1_000)
        .map(|i| (i * 37) % 1_000 - 500)
        .chain([499, 499, -500])
        .collect();
    let xs = p.create("Xs", xs);
    xs.apply("Largest", Top::largest(4)).capture("largest");
    xs.apply("Smallest", Top::smallest(3)).capture("smallest");
    p.create("Few", vec![2i64, 1])
        .apply("LargestOfFew", Top::largest(5))
        .capture("few");
    p.create("Nothing", Vec::<i64>::new())
        .apply("LargestOfNothing", Top::largest(2))
        .capture("nothing");
}

fn check_globally(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    values_eq(&r, "largest", vec![vec![499i64, 499, 499, 498]])?;
    values_eq(&r, "smallest", vec![vec![-500i64, -500, -499]])?;
    values_eq(&r, "few", vec![vec![2i64, 1]])?;
    values_eq(&r, "nothing", vec![Vec::<i64>::new()])
}

fn per_key(p: &Pipeline) {
    let kvs: Vec<(String, u32)> = (0u32..600)
        .map(|i| (format!("k{}", i % 3), (i * 7) % 600))
        .collect();
    let kvs = p.create("Kvs", kvs);
    kvs.apply("Largest", Top::largest_per_key(2))
        .capture("largest");
    kvs.apply("Smallest", Top::smallest_per_key(2))
        .capture("smallest");
}

fn check_per_key(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    // Key k{j} holds the values v with v ≡ 7j (mod 3) (7 and 600 are coprime, 3 | 600).
    let values_of = |j: u32| {
        let mut v: Vec<u32> = (0u32..600)
            .filter(|i| i % 3 == j)
            .map(|i| (i * 7) % 600)
            .collect();
        v.sort_unstable();
        v
    };
    let largest: Vec<(String, Vec<u32>)> = (0..3)
        .map(|j| {
            (
                format!("k{j}"),
                values_of(j).into_iter().rev().take(2).collect(),
            )
        })
        .collect();
    let smallest: Vec<(String, Vec<u32>)> = (0..3)
        .map(|j| (format!("k{j}"), values_of(j).into_iter().take(2).collect()))
        .collect();
    values_eq(&r, "largest", largest)?;
    values_eq(&r, "smallest", smallest)
}
