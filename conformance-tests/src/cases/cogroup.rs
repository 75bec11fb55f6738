//! tidewater_transforms::CoGroupByKey: per key, the values of each side; a key on one
//! side only gets an empty vector for the other.

use crate::case::RunResult;
use crate::cases::panes::{event_time, fired, iw, keyed, kvs, same_outputs, ONLY};
use crate::check::{captured, eq, metadata_eq, succeeded};
use crate::Case;
use tidewater::runner::Feature::{Capture, Create, Flatten, GroupByKey, ParDo, WindowInto};
use tidewater::{BoundedWindow, GlobalWindow, PaneInfo, Pipeline, Window, WindowFn};
use tidewater_transforms::CoGroupExt;

pub(crate) fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "cogroup_by_key/join",
            features: &[Create, ParDo, Flatten, GroupByKey, Capture],
            build: join,
            check: check_join,
        },
        Case {
            name: "cogroup_by_key/fixed_windows",
            features: &[Create, ParDo, WindowInto, Flatten, GroupByKey, Capture],
            build: windowed_join,
            check: check_windowed_join,
        },
        Case {
            name: "cogroup_by_key/three_tagged_inputs",
            features: &[Create, ParDo, Flatten, GroupByKey, Capture],
            build: tagged_join,
            check: check_tagged_join,
        },
    ]
}

/// Three inputs of three value types, read back by tag: per key, how many values each
/// input had and their sum or first one.
fn tagged_join(p: &Pipeline) {
    use tidewater::TupleTag;
    use tidewater_transforms::{CoGbkResult, CoGroupByKey, KeyedPCollectionTuple};
    let names = TupleTag::<String>::new("names");
    let scores = TupleTag::<u32>::new("scores");
    let flags = TupleTag::<bool>::new("flags");
    let keys = |n: u64| (0..n).map(|i| i % 7);
    KeyedPCollectionTuple::of(
        &names,
        p.create("Names", keys(20).map(|k| (k, format!("n{k}"))).collect()),
    )
    .and(
        &scores,
        p.create("Scores", keys(50).map(|k| (k + 3, k as u32)).collect()),
    )
    .and(&flags, p.create("Flags", vec![(1u64, true), (12, false)]))
    .apply("Join", CoGroupByKey)
    .map_with(
        "Row",
        (names, scores, flags),
        |(n, s, f), (k, r): (u64, CoGbkResult)| {
            let scores = r.all(s);
            (
                k,
                r.all(n).len(),
                scores.len(),
                scores.iter().sum::<u32>(),
                r.only(f),
            )
        },
    )
    .capture("rows");
}

type Row = (u64, usize, usize, u32, Option<bool>);

fn check_tagged_join(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    let mut expected: Vec<Row> = Vec::new();
    for k in 0..13u64 {
        let names = (0..20u64).filter(|i| i % 7 == k).count();
        let scores: Vec<u32> = (0..50u64)
            .filter(|i| i % 7 + 3 == k)
            .map(|i| (i % 7) as u32)
            .collect();
        let flag = match k {
            1 => Some(true),
            12 => Some(false),
            _ => None,
        };
        if names > 0 || !scores.is_empty() || flag.is_some() {
            expected.push((k, names, scores.len(), scores.iter().sum(), flag));
        }
    }
    crate::check::values_eq(&r, "rows", expected)
}

type Joined = (String, (Vec<String>, Vec<u32>));

fn join(p: &Pipeline) {
    let s = |a: &str, b: &str| (a.to_string(), b.to_string());
    let emails = p.create(
        "Emails",
        vec![
            s("amy", "amy@a"),
            s("carl", "carl@c"),
            s("amy", "amy@b"),
            s("julia", "julia@j"),
        ],
    );
    let phones = p.create(
        "Phones",
        vec![
            ("amy".to_string(), 111u32),
            ("bob".into(), 222),
            ("amy".into(), 333),
            ("bob".into(), 222),
        ],
    );
    let joined: tidewater::PCollection<Joined> = (emails, phones).apply_cogroup("Join");
    joined.capture("joined");
}

fn check_join(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    let mut got: Vec<Joined> = captured::<Joined>(&r, "joined")?
        .into_iter()
        .map(|wv| {
            let (k, (mut a, mut b)) = wv.value;
            a.sort();
            b.sort_unstable();
            (k, (a, b))
        })
        .collect();
    got.sort();
    let expected: Vec<Joined> = vec![
        (
            "amy".into(),
            (vec!["amy@a".into(), "amy@b".into()], vec![111, 333]),
        ),
        ("bob".into(), (vec![], vec![222, 222])),
        ("carl".into(), (vec!["carl@c".into()], vec![])),
        ("julia".into(), (vec!["julia@j".into()], vec![])),
    ];
    eq("joined", got, expected)?;
    metadata_eq::<Joined>(
        &r,
        "joined",
        GlobalWindow::MAX_TIMESTAMP,
        BoundedWindow::Global,
        PaneInfo::ON_TIME_AND_ONLY_FIRING,
    )
}

type Sides = (Vec<i64>, Vec<i64>);

/// Both sides in fixed windows of 10: values meet only within a key *and* a window; a
/// (key, window) on one side only gets an empty vector for the other.
fn windowed_join(p: &Pipeline) {
    let left = p
        .create("Left", kvs(&[("a", 1), ("a", 12), ("b", 5)]))
        .with_timestamps("StampLeft", event_time)
        .apply("WindowLeft", Window::into(WindowFn::fixed(10)));
    let right = p
        .create("Right", kvs(&[("a", 3), ("a", 4), ("c", 15)]))
        .with_timestamps("StampRight", event_time)
        .apply("WindowRight", Window::into(WindowFn::fixed(10)));
    let joined: tidewater::PCollection<(String, Sides)> = (left, right).apply_cogroup("Join");
    joined.capture("joined");
}

fn check_windowed_join(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    let sorted = |(mut a, mut b): Sides| {
        a.sort_unstable();
        b.sort_unstable();
        (a, b)
    };
    let got: Vec<_> = fired::<(String, Sides)>(&r, "joined")?
        .into_iter()
        .map(|mut f| {
            f.value.1 = sorted(f.value.1);
            f
        })
        .collect();
    same_outputs(
        "capture 'joined'",
        got,
        vec![
            keyed("a", (vec![1], vec![3, 4]), iw(0, 10), 9, ONLY),
            keyed("a", (vec![12], vec![]), iw(10, 20), 19, ONLY),
            keyed("b", (vec![5], vec![]), iw(0, 10), 9, ONLY),
            keyed("c", (vec![], vec![15]), iw(10, 20), 19, ONLY),
        ],
    )
}
