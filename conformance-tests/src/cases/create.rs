//! Create: fixed elements, in the global window at the minimum timestamp.

use crate::case::RunResult;
use crate::check::{eq, metadata_eq, succeeded, values, values_eq};
use crate::Case;
use serde::{Deserialize, Serialize};
use tidewater::runner::Feature::{Capture, Create};
use tidewater::{BoundedWindow, PaneInfo, Pipeline, Timestamp};

pub(crate) fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "create/elements",
            features: &[Create, Capture],
            build: elements,
            check: check_elements,
        },
        Case {
            name: "create/structs",
            features: &[Create, Capture],
            build: structs,
            check: check_structs,
        },
        Case {
            name: "create/many",
            features: &[Create, Capture],
            build: many,
            check: check_many,
        },
        Case {
            name: "create/empty",
            features: &[Create, Capture],
            build: empty,
            check: check_empty,
        },
    ]
}

fn elements(p: &Pipeline) {
    p.create("Xs", vec![3i64, 1, -2, 1, i64::MAX]).capture("xs");
}

fn check_elements(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    values_eq(&r, "xs", vec![-2i64, 1, 1, 3, i64::MAX])?;
    metadata_eq::<i64>(
        &r,
        "xs",
        Timestamp::MIN,
        BoundedWindow::Global,
        PaneInfo::NO_FIRING,
    )
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
struct Record {
    name: String,
    tags: Vec<String>,
    score: Option<u32>,
}

fn records() -> Vec<Record> {
    vec![
        Record {
            name: "a".into(),
            tags: vec![],
            score: None,
        },
        Record {
            name: "b".into(),
            tags: vec!["x".into(), "y".into()],
            score: Some(7),
        },
        Record {
            name: "ünïcødé".into(),
            tags: vec![String::new()],
            score: Some(0),
        },
    ]
}

fn structs(p: &Pipeline) {
    p.create("Records", records()).capture("records");
}

fn check_structs(r: RunResult) -> Result<(), String> {
    values_eq(&succeeded(r)?, "records", records())
}

const MANY: i64 = 5_000;

fn many(p: &Pipeline) {
    p.create("Numbers", (0..MANY).collect()).capture("numbers");
}

fn check_many(r: RunResult) -> Result<(), String> {
    let got = values::<i64>(&succeeded(r)?, "numbers")?;
    eq("number of elements", got.len(), MANY as usize)?;
    eq("elements", got, (0..MANY).collect())
}

fn empty(p: &Pipeline) {
    p.create("Nothing", Vec::<String>::new()).capture("nothing");
}

fn check_empty(r: RunResult) -> Result<(), String> {
    values_eq::<String>(&succeeded(r)?, "nothing", vec![])
}
