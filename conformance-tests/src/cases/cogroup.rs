//! tidewater_transforms::CoGroupByKey: per key, the values of each side; a key on one
//! side only gets an empty vector for the other.

use crate::case::RunResult;
use crate::check::{captured, eq, metadata_eq, succeeded};
use crate::Case;
use tidewater::runner::Feature::{Capture, Create, Flatten, GroupByKey, ParDo};
use tidewater::{BoundedWindow, GlobalWindow, PaneInfo, Pipeline};
use tidewater_transforms::CoGroupExt;

pub(crate) fn cases() -> Vec<Case> {
    vec![Case {
        name: "cogroup_by_key/join",
        features: &[Create, ParDo, Flatten, GroupByKey, Capture],
        build: join,
        check: check_join,
    }]
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
