//! Impulse: a single `()` element, the root sources expand from.

use crate::case::RunResult;
use crate::check::{captured, eq, metadata_eq, succeeded, values_eq};
use crate::Case;
use tidewater::runner::Feature::{Capture, Impulse, ParDo};
use tidewater::{BoundedWindow, PCollection, PaneInfo, Pipeline, Timestamp};

pub(crate) fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "impulse/single_element",
            features: &[Impulse, Capture],
            build: single,
            check: check_single,
        },
        Case {
            name: "impulse/expand_with_flat_map",
            features: &[Impulse, ParDo, Capture],
            build: expand,
            check: check_expand,
        },
    ]
}

fn single(p: &Pipeline) {
    let start: PCollection<()> = p.apply("Start", tidewater::Impulse);
    start.capture("start");
}

fn check_single(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    eq(
        "number of impulse elements",
        captured::<()>(&r, "start")?.len(),
        1,
    )?;
    metadata_eq::<()>(
        &r,
        "start",
        Timestamp::MIN,
        BoundedWindow::Global,
        PaneInfo::NO_FIRING,
    )
}

fn ten(_: ()) -> Vec<u32> {
    (0..10).collect()
}

fn expand(p: &Pipeline) {
    p.apply("Start", tidewater::Impulse)
        .flat_map("Generate", ten)
        .capture("generated");
}

fn check_expand(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    values_eq(&r, "generated", (0u32..10).collect())?;
    metadata_eq::<u32>(
        &r,
        "generated",
        Timestamp::MIN,
        BoundedWindow::Global,
        PaneInfo::NO_FIRING,
    )
}
