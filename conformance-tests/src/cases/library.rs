//! The Beam transform library of `tidewater_transforms`: Reify, Latest, Reshuffle,
//! GroupIntoBatches, Deduplicate, Regex, ToString, and Combine.globally without
//! defaults.

use crate::case::RunResult;
use crate::check::{eq, succeeded, values, values_eq};
use crate::Case;
use tidewater::runner::Feature::{
    Capture, CombineGlobally, CombinePerKey, Create, ParDo, StatefulParDo, WindowInto,
};
use tidewater::{Create as CreateT, Pipeline, TimeDomain, Timestamp, Window, WindowFn};
use tidewater_transforms::{
    Deduplicate, GroupIntoBatches, Latest, Regex, Reify, Reshuffle, Sum, ToString,
    ValueInSingleWindow,
};

pub(crate) fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "library/latest_per_window",
            features: &[
                Create,
                WindowInto,
                ParDo,
                CombinePerKey,
                CombineGlobally,
                Capture,
            ],
            build: latest,
            check: check_latest,
        },
        Case {
            name: "library/reshuffle_keeps_timestamps_and_windows",
            features: &[Create, WindowInto, ParDo, StatefulParDo, Capture],
            build: reshuffle,
            check: check_reshuffle,
        },
        Case {
            name: "library/group_into_batches",
            features: &[Create, WindowInto, StatefulParDo, ParDo, Capture],
            build: batches,
            check: check_batches,
        },
        Case {
            name: "library/deduplicate",
            features: &[Create, ParDo, StatefulParDo, Capture],
            build: dedup,
            check: check_dedup,
        },
        Case {
            name: "library/regex_and_to_string",
            features: &[Create, ParDo, CombineGlobally, Capture],
            build: text,
            check: check_text,
        },
    ]
}

fn ms(t: i64) -> Timestamp {
    Timestamp::from_millis(t)
}

/// Keys a..c over three 10 ms windows, timestamps out of order.
fn stamped() -> Vec<((char, u32), Timestamp)> {
    (0..60u32)
        .map(|i| {
            let key = ['a', 'b', 'c'][(i % 3) as usize];
            // A permutation of 0..60 ms: each window's latest element is not its last.
            let t = (i * 37) % 60;
            ((key, i), ms(t as i64))
        })
        .collect()
}

fn latest(p: &Pipeline) {
    let xs = p
        .apply("Xs", CreateT::timestamped(stamped()))
        .apply("Windows", Window::into(WindowFn::fixed(10)));
    xs.apply("LatestPerKey", Latest::per_key())
        .capture("per_key");
    xs.apply("Latest", Latest::globally()).capture("latest");
}

/// The expected latest per (window, key) and per window, from the definition.
fn check_latest(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    let xs = stamped();
    let mut per_key = Vec::new();
    let mut latest = Vec::new();
    for w in 0..6 {
        let in_w: Vec<_> = xs.iter().filter(|(_, t)| t.millis() / 10 == w).collect();
        for key in ['a', 'b', 'c'] {
            if let Some(((k, v), _)) = in_w
                .iter()
                .filter(|((k, _), _)| *k == key)
                .max_by_key(|(_, t)| *t)
            {
                per_key.push((*k, *v));
            }
        }
        if let Some((kv, _)) = in_w.iter().max_by_key(|(_, t)| *t) {
            latest.push(*kv);
        }
    }
    values_eq(&r, "per_key", per_key)?;
    values_eq(&r, "latest", latest)
}

fn reshuffle(p: &Pipeline) {
    let xs: Vec<(u32, Timestamp)> = (0..500u32).map(|i| (i, ms((i % 50) as i64))).collect();
    p.apply("Xs", CreateT::timestamped(xs))
        .apply("Windows", Window::into(WindowFn::fixed(10)))
        .apply("Reshuffle", Reshuffle::via_random_key())
        .apply("Reify", Reify::windows())
        .map("Describe", |v: ValueInSingleWindow<u32>| {
            (v.value, v.timestamp.millis(), v.window.start().millis())
        })
        .capture("described");
}

fn check_reshuffle(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    let expected = (0..500u32)
        .map(|i| {
            let t = (i % 50) as i64;
            (i, t, t / 10 * 10)
        })
        .collect();
    values_eq(&r, "described", expected)
}

fn batches(p: &Pipeline) {
    // Key k has 10 + k values per window in two windows of 100 ms.
    let mut kvs = Vec::new();
    for k in 0..4u32 {
        for i in 0..(10 + k) {
            kvs.push(((k, i), ms(5)));
            kvs.push(((k, 100 + i), ms(105)));
        }
    }
    p.apply("Kvs", CreateT::timestamped(kvs))
        .apply("Windows", Window::into(WindowFn::fixed(100)))
        .apply("Batches", GroupIntoBatches::of_size(4))
        .map("Shape", |(k, mut vs): (u32, Vec<u32>)| {
            vs.sort();
            (k, vs.len(), vs[0] >= 100)
        })
        .capture("shapes");
}

/// Per key and window: full batches of 4 and one of what is left; every batch within
/// one window. (Which values share a batch depends on arrival order.)
fn check_batches(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    let mut expected = Vec::new();
    for k in 0..4u32 {
        let n = 10 + k as usize;
        for second in [false, true] {
            expected.extend(std::iter::repeat_n((k, 4usize, second), n / 4));
            if !n.is_multiple_of(4) {
                expected.push((k, n % 4, second));
            }
        }
    }
    values_eq(&r, "shapes", expected)
}

fn dedup(p: &Pipeline) {
    let words: Vec<String> = (0..300).map(|i| format!("w{}", (i * 7) % 17)).collect();
    p.create("Words", words)
        .apply(
            "Dedup",
            Deduplicate::values().with_duration(TimeDomain::EventTime, 60_000),
        )
        .capture("distinct");
    let kvs: Vec<(u8, u8)> = vec![(1, 1), (2, 2), (1, 1), (3, 3), (2, 2)];
    p.create("Kvs", kvs)
        .apply("DedupKeyed", Deduplicate::values().keyed())
        .capture("keyed");
}

fn check_dedup(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    values_eq(&r, "distinct", (0..17).map(|i| format!("w{i}")).collect())?;
    values_eq(&r, "keyed", vec![(1u8, 1u8), (2, 2), (3, 3)])
}

fn text(p: &Pipeline) {
    let lines = p.create(
        "Lines",
        vec![
            "user=ann bytes=120".to_string(),
            "user=bob bytes=7".to_string(),
            "garbage".to_string(),
            "user=ann bytes=30".to_string(),
        ],
    );
    lines
        .apply("Bytes", Regex::find(r"bytes=(\d+)", 1))
        .map("Parse", |s: String| s.parse::<u64>().unwrap_or(0))
        .apply("Total", Sum::globally())
        .apply("TotalText", ToString::elements())
        .capture("total");
    lines
        .apply("Users", Regex::find_all(r"user=(\w+)", 1))
        .capture("users");
    lines
        .apply("Valid", Regex::matches(r"user=\w+ bytes=\d+"))
        .apply("Masked", Regex::replace_all(r"=\w+", "=?"))
        .capture("masked");
    let nothing = p.create("Nothing", Vec::<u64>::new());
    nothing
        .apply("SumWithout", Sum::<u64>::globally().without_defaults())
        .capture("without_defaults");
}

fn check_text(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    values_eq(&r, "total", vec!["157".to_string()])?;
    values_eq(
        &r,
        "users",
        vec!["ann".to_string(), "ann".to_string(), "bob".to_string()],
    )?;
    values_eq(&r, "masked", vec!["user=? bytes=?".to_string(); 3])?;
    eq(
        "without_defaults",
        values::<u64>(&r, "without_defaults")?,
        vec![],
    )
}
