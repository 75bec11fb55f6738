//! GroupByKey: one output per key in the global window, on time, at the end of the
//! window; the order of values within a group is unspecified.

use crate::case::RunResult;
use crate::check::{captured, eq, metadata_eq, succeeded};
use crate::Case;
use serde::{Deserialize, Serialize};
use tidewater::runner::Feature::{Capture, Create, GroupByKey, ParDo};
use tidewater::{
    BoundedWindow, DoFn, Element, GlobalWindow, PaneInfo, Pipeline, PipelineResult, ProcessContext,
    Timestamp, UserError,
};

pub(crate) fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "group_by_key/basic",
            features: &[Create, GroupByKey, Capture],
            build: basic,
            check: check_basic,
        },
        Case {
            name: "group_by_key/many_keys",
            features: &[Create, ParDo, GroupByKey, Capture],
            build: many_keys,
            check: check_many_keys,
        },
        Case {
            name: "group_by_key/composite_keys",
            features: &[Create, GroupByKey, Capture],
            build: composite_keys,
            check: check_composite_keys,
        },
        Case {
            name: "group_by_key/downstream_context",
            features: &[Create, GroupByKey, ParDo, Capture],
            build: downstream,
            check: check_downstream,
        },
        Case {
            name: "group_by_key/twice",
            features: &[Create, GroupByKey, ParDo, Capture],
            build: twice,
            check: check_twice,
        },
    ]
}

/// The groups captured under `name`, each group's values sorted, groups sorted.
fn groups<K: Element + Ord, V: Element + Ord>(
    r: &PipelineResult,
    name: &str,
) -> Result<Vec<(K, Vec<V>)>, String> {
    let mut gs: Vec<(K, Vec<V>)> = captured::<(K, Vec<V>)>(r, name)?
        .into_iter()
        .map(|wv| {
            let (k, mut vs) = wv.value;
            vs.sort();
            (k, vs)
        })
        .collect();
    gs.sort();
    Ok(gs)
}

fn kv(k: &str, v: i64) -> (String, i64) {
    (k.to_string(), v)
}

fn basic(p: &Pipeline) {
    let input = vec![
        kv("b", 2),
        kv("a", 1),
        kv("b", 20),
        kv("c", 3),
        kv("a", 1),
        kv("b", -2),
    ];
    p.create("Kvs", input)
        .group_by_key("Group")
        .capture("groups");
}

fn check_basic(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    let expected = vec![
        ("a".to_string(), vec![1i64, 1]),
        ("b".into(), vec![-2, 2, 20]),
        ("c".into(), vec![3]),
    ];
    eq("groups", groups::<String, i64>(&r, "groups")?, expected)?;
    metadata_eq::<(String, Vec<i64>)>(
        &r,
        "groups",
        GlobalWindow::MAX_TIMESTAMP,
        BoundedWindow::Global,
        PaneInfo::ON_TIME_AND_ONLY_FIRING,
    )
}

const MANY: u32 = 3_000;
const KEYS: u32 = 37;

fn by_modulus(x: &u32) -> u32 {
    x % KEYS
}

fn many_keys(p: &Pipeline) {
    p.create("Xs", (0..MANY).collect())
        .with_keys("Key", by_modulus)
        .group_by_key("Group")
        .capture("groups");
}

fn check_many_keys(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    let expected: Vec<(u32, Vec<u32>)> = (0..KEYS)
        .map(|k| (k, (0..MANY).filter(|x| x % KEYS == k).collect()))
        .collect();
    eq("groups", groups::<u32, u32>(&r, "groups")?, expected)
}

type CompositeKey = (String, Option<u8>, Vec<i32>);

fn composite_input() -> Vec<(CompositeKey, char)> {
    let k1: CompositeKey = ("x".into(), None, vec![]);
    let k2: CompositeKey = ("x".into(), Some(0), vec![]);
    let k3: CompositeKey = ("x".into(), Some(0), vec![1, -1]);
    let k4: CompositeKey = (String::new(), None, vec![0]);
    vec![
        (k1.clone(), 'a'),
        (k2.clone(), 'b'),
        (k3.clone(), 'c'),
        (k1, 'd'),
        (k3, 'e'),
        (k4, 'f'),
        (k2, 'g'),
    ]
}

fn composite_keys(p: &Pipeline) {
    p.create("Kvs", composite_input())
        .group_by_key("Group")
        .capture("groups");
}

fn check_composite_keys(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    let expected: Vec<(CompositeKey, Vec<char>)> = vec![
        ((String::new(), None, vec![0]), vec!['f']),
        (("x".into(), None, vec![]), vec!['a', 'd']),
        (("x".into(), Some(0), vec![]), vec!['b', 'g']),
        (("x".into(), Some(0), vec![1, -1]), vec!['c', 'e']),
    ];
    eq(
        "groups",
        groups::<CompositeKey, char>(&r, "groups")?,
        expected,
    )
}

/// Reports the timestamp, window and pane each group arrives with.
#[derive(Serialize, Deserialize)]
struct DescribeGroup;

impl DoFn for DescribeGroup {
    type In = (String, Vec<i64>);
    type Out = (String, usize, Timestamp, BoundedWindow, PaneInfo);
    fn process(
        &mut self,
        (k, vs): (String, Vec<i64>),
        ctx: &mut ProcessContext<'_, Self::Out>,
    ) -> Result<(), UserError> {
        let out = (k, vs.len(), ctx.timestamp(), ctx.window(), ctx.pane());
        ctx.output(out);
        Ok(())
    }
}

fn downstream(p: &Pipeline) {
    p.create("Kvs", vec![kv("a", 1), kv("b", 2), kv("a", 3)])
        .group_by_key("Group")
        .apply("Describe", tidewater::ParDo::of(DescribeGroup))
        .capture("described");
}

fn check_downstream(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    let mut got: Vec<_> =
        captured::<(String, usize, Timestamp, BoundedWindow, PaneInfo)>(&r, "described")?
            .into_iter()
            .map(|wv| wv.value)
            .collect();
    got.sort_by(|a, b| a.0.cmp(&b.0));
    let on_time = |k: &str, n: usize| {
        (
            k.to_string(),
            n,
            GlobalWindow::MAX_TIMESTAMP,
            BoundedWindow::Global,
            PaneInfo::ON_TIME_AND_ONLY_FIRING,
        )
    };
    eq(
        "(key, group size, timestamp, window, pane) seen by a ParDo after the GroupByKey",
        got,
        vec![on_time("a", 2), on_time("b", 1)],
    )
}

fn group_size((k, vs): (String, Vec<i64>)) -> (usize, String) {
    (vs.len(), k)
}

/// Groups words by count, then groups the counts: two shuffles in a row.
fn twice(p: &Pipeline) {
    let input = vec![
        kv("a", 1),
        kv("b", 1),
        kv("b", 1),
        kv("c", 1),
        kv("c", 1),
        kv("d", 1),
        kv("d", 1),
        kv("d", 1),
    ];
    p.create("Kvs", input)
        .group_by_key("ByWord")
        .map("Size", group_size)
        .group_by_key("BySize")
        .capture("by_size");
}

fn check_twice(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    let expected = vec![
        (1usize, vec!["a".to_string()]),
        (2, vec!["b".into(), "c".into()]),
        (3, vec!["d".into()]),
    ];
    eq(
        "words by count",
        groups::<usize, String>(&r, "by_size")?,
        expected,
    )?;
    metadata_eq::<(usize, Vec<String>)>(
        &r,
        "by_size",
        GlobalWindow::MAX_TIMESTAMP,
        BoundedWindow::Global,
        PaneInfo::ON_TIME_AND_ONLY_FIRING,
    )
}
