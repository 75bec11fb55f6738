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
    ApproximateQuantiles, ApproximateUnique, Deduplicate, GroupIntoBatches, Latest, Regex, Reify,
    Reshuffle, Sum, ToString, ValueInSingleWindow, Wait,
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
            name: "library/hot_key_fanout",
            features: &[Create, ParDo, CombinePerKey, Capture],
            build: fanout,
            check: check_fanout,
        },
        Case {
            name: "library/approximate_unique_and_quantiles",
            features: &[Create, CombineGlobally, CombinePerKey, Capture],
            build: approximate,
            check: check_approximate,
        },
        Case {
            name: "library/wait_on_signals",
            features: &[Create, WindowInto, CombineGlobally, ParDo, Capture],
            build: wait_on,
            check: check_wait_on,
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

#[derive(serde::Serialize, serde::Deserialize)]
struct Total;

impl tidewater::CombineFn for Total {
    type In = u64;
    type Acc = u64;
    type Out = u64;
    fn create_accumulator(&self) -> u64 {
        0
    }
    fn add_input(&self, a: &mut u64, x: u64) {
        *a += x
    }
    fn merge_accumulators(&self, a: &mut u64, b: u64) {
        *a += b
    }
    fn extract_output(&self, a: u64) -> u64 {
        a
    }
}

/// One hot key and a few cold ones, summed in 16 parts first.
fn fanout(p: &Pipeline) {
    let kvs: Vec<(u32, u64)> = (0..5_000u64)
        .map(|i| (if i % 50 == 0 { (i % 7) as u32 + 1 } else { 0 }, i))
        .collect();
    p.create("Kvs", kvs)
        .apply(
            "Sum",
            tidewater::Combine::per_key(Total).with_hot_key_fanout(16),
        )
        .capture("sums");
}

fn check_fanout(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    let mut sums = std::collections::BTreeMap::new();
    for i in 0..5_000u64 {
        let k = if i % 50 == 0 { (i % 7) as u32 + 1 } else { 0 };
        *sums.entry(k).or_insert(0u64) += i;
    }
    values_eq(&r, "sums", sums.into_iter().collect())
}

/// Inputs within the sketches' exact regime, so every runner gives the same numbers.
fn approximate(p: &Pipeline) {
    let xs: Vec<u32> = (0..2_000u32).map(|i| (i * 7919) % 500).collect();
    let pc = p.create("Xs", xs);
    pc.apply("Unique", ApproximateUnique::globally(1_000))
        .capture("unique");
    pc.apply("Quantiles", ApproximateQuantiles::globally(5))
        .capture("quantiles");
    p.create("Kvs", (0..300u32).map(|i| (i % 3, i)).collect::<Vec<_>>())
        .apply("QuantilesPerKey", ApproximateQuantiles::per_key(3))
        .capture("per_key");
}

fn check_approximate(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    values_eq(&r, "unique", vec![500u64])?;
    // 2,000 values, each of 0..500 four times: ranks 0, 499.75, 999.5, 1499.25, 1999.
    values_eq(&r, "quantiles", vec![vec![0u32, 124, 249, 374, 499]])?;
    values_eq(
        &r,
        "per_key",
        vec![
            (0u32, vec![0u32, 147, 297]),
            (1, vec![1, 148, 298]),
            (2, vec![2, 149, 299]),
        ],
    )
}

/// Rows and the signals that they were written, in three windows: every row passes,
/// in its own window, once its window's signals are complete.
fn wait_on(p: &Pipeline) {
    let signals: Vec<(u8, Timestamp)> = (0..9u8).map(|i| (i, ms(i as i64 * 3))).collect();
    let signals = p
        .apply("Signals", CreateT::timestamped(signals))
        .apply("SignalWindows", Window::into(WindowFn::fixed(10)));
    let rows: Vec<(u32, Timestamp)> = (0..30u32).map(|i| (i, ms(i as i64))).collect();
    p.apply("Rows", CreateT::timestamped(rows))
        .apply("RowWindows", Window::into(WindowFn::fixed(10)))
        .apply("AfterSignals", Wait::on(&signals))
        .apply("Reify", Reify::windows())
        .map("Describe", |v: ValueInSingleWindow<u32>| {
            (v.value, v.window.start().millis())
        })
        .capture("rows");
}

fn check_wait_on(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    values_eq(
        &r,
        "rows",
        (0..30u32).map(|i| (i, (i as i64) / 10 * 10)).collect(),
    )
}
