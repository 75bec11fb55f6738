//! Helpers for event-time cases: the exact (value, window, timestamp, pane) of every
//! output, compared as a multiset, and the inputs those cases share.

use crate::check::captured;
use std::fmt::Debug;
use tidewater::{
    BoundedWindow, Element, PaneInfo, Pipeline, PipelineResult, Timestamp, Timing, Windows,
};

/// One output element with everything a trigger decides about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Fired<T> {
    pub(crate) value: T,
    pub(crate) window: BoundedWindow,
    pub(crate) timestamp: Timestamp,
    pub(crate) pane: PaneInfo,
}

/// A fired group of a GroupByKey of `(key, t)` inputs.
pub(crate) type Group = Fired<(String, Vec<i64>)>;

/// `[start, end)`.
pub(crate) fn iw(start: i64, end: i64) -> BoundedWindow {
    BoundedWindow::Interval {
        start: Timestamp(start),
        end: Timestamp(end),
    }
}

/// A pane; `is_first` is `index == 0`.
pub(crate) fn pane(timing: Timing, index: u64, non_speculative_index: i64, last: bool) -> PaneInfo {
    PaneInfo {
        timing,
        is_first: index == 0,
        is_last: last,
        index,
        non_speculative_index,
    }
}

/// An early pane (its non-speculative index is -1).
pub(crate) fn early(index: u64, last: bool) -> PaneInfo {
    pane(Timing::Early, index, -1, last)
}

/// The on-time pane.
pub(crate) fn on_time(index: u64, last: bool) -> PaneInfo {
    // Every earlier pane was early, so it is the first non-speculative one.
    pane(Timing::OnTime, index, 0, last)
}

/// A late pane.
pub(crate) fn late(index: u64, non_speculative_index: i64, last: bool) -> PaneInfo {
    pane(Timing::Late, index, non_speculative_index, last)
}

/// The only pane of a window, on time.
pub(crate) const ONLY: PaneInfo = PaneInfo::ON_TIME_AND_ONLY_FIRING;

/// A group `(key, values)` in `window` at `timestamp` in `pane`; values in any order.
pub(crate) fn group(
    key: &str,
    values: &[i64],
    window: BoundedWindow,
    timestamp: i64,
    pane: PaneInfo,
) -> Group {
    let mut values = values.to_vec();
    values.sort_unstable();
    Fired {
        value: (key.to_string(), values),
        window,
        timestamp: Timestamp(timestamp),
        pane,
    }
}

/// A keyed value in `window` at `timestamp` in `pane`.
pub(crate) fn keyed<V>(
    key: &str,
    value: V,
    window: BoundedWindow,
    timestamp: i64,
    pane: PaneInfo,
) -> Fired<(String, V)> {
    Fired {
        value: (key.to_string(), value),
        window,
        timestamp: Timestamp(timestamp),
        pane,
    }
}

/// Every element captured under `name`, each in exactly one window.
pub(crate) fn fired<T: Element>(r: &PipelineResult, name: &str) -> Result<Vec<Fired<T>>, String> {
    captured::<T>(r, name)?
        .into_iter()
        .map(|wv| match wv.windows {
            Windows::One(window) => Ok(Fired {
                value: wv.value,
                window,
                timestamp: wv.timestamp,
                pane: wv.pane,
            }),
            Windows::Many(ws) => Err(format!(
                "capture '{name}': element {:?} is in {} windows, expected one",
                wv.value,
                ws.len()
            )),
        })
        .collect()
}

/// The groups of a GroupByKey captured under `name`, each group's values sorted.
pub(crate) fn fired_groups(r: &PipelineResult, name: &str) -> Result<Vec<Group>, String> {
    Ok(fired::<(String, Vec<i64>)>(r, name)?
        .into_iter()
        .map(|mut f| {
            f.value.1.sort_unstable();
            f
        })
        .collect())
}

fn sort_key<T: Ord + Clone>(f: &Fired<T>) -> (BoundedWindow, u64, T) {
    (f.window.clone(), f.pane.index, f.value.clone())
}

fn render<T: Debug>(fs: &[Fired<T>]) -> String {
    if fs.is_empty() {
        return "\n      (nothing)".into();
    }
    fs.iter()
        .map(|f| {
            let p = &f.pane;
            format!(
                "\n      {:?} in {} at {} pane {:?} first={} last={} index={} nsi={}",
                f.value,
                show_window(&f.window),
                f.timestamp.millis(),
                p.timing,
                p.is_first,
                p.is_last,
                p.index,
                p.non_speculative_index
            )
        })
        .collect()
}

fn show_window(w: &BoundedWindow) -> String {
    match w {
        BoundedWindow::Global => "global".into(),
        BoundedWindow::Interval { start, end } => format!("[{}, {})", start.millis(), end.millis()),
        BoundedWindow::Custom(c) => format!("{c:?}"),
    }
}

/// `got` and `expected` hold the same outputs, in any order.
pub(crate) fn same_outputs<T: Ord + Clone + Debug>(
    what: &str,
    mut got: Vec<Fired<T>>,
    mut expected: Vec<Fired<T>>,
) -> Result<(), String> {
    got.sort_by_key(sort_key);
    expected.sort_by_key(sort_key);
    if got == expected {
        Ok(())
    } else {
        Err(format!(
            "{what}:\n   expected:{}\n   got:{}",
            render(&expected),
            render(&got)
        ))
    }
}

/// The GroupByKey output captured under `name` is exactly `expected`.
pub(crate) fn groups_eq(
    r: &PipelineResult,
    name: &str,
    expected: Vec<Group>,
) -> Result<(), String> {
    same_outputs(
        &format!("capture '{name}'"),
        fired_groups(r, name)?,
        expected,
    )
}

/// The keyed output (e.g. of a Combine) captured under `name` is exactly `expected`.
pub(crate) fn keyed_eq<V: Element + Ord>(
    r: &PipelineResult,
    name: &str,
    expected: Vec<Fired<(String, V)>>,
) -> Result<(), String> {
    same_outputs(
        &format!("capture '{name}'"),
        fired::<(String, V)>(r, name)?,
        expected,
    )
}

/// The counter `name` of `step`, 0 if it was never incremented.
pub(crate) fn counter(r: &PipelineResult, step: &str, name: &str) -> i64 {
    r.metrics.counter(step, name).unwrap_or(0)
}

/// `counter(step, name) == expected`.
pub(crate) fn counter_eq(
    r: &PipelineResult,
    step: &str,
    name: &str,
    expected: i64,
) -> Result<(), String> {
    let got = counter(r, step, name);
    if got == expected {
        Ok(())
    } else {
        Err(format!(
            "counter '{name}' of step '{step}': expected {expected}, got {got}"
        ))
    }
}

/// The counter of elements a grouping dropped because their window had expired.
pub(crate) const DROPPED_LATE: &str = "dropped_due_to_lateness";
/// The counter of elements a grouping dropped because their window's trigger had
/// finished.
pub(crate) const DROPPED_CLOSED: &str = "dropped_due_to_closed_window";

/// `(key, t)` stamped at `t`: the value of every event-time input is its timestamp.
pub(crate) fn at(key: &str, t: i64) -> ((String, i64), Timestamp) {
    ((key.to_string(), t), Timestamp(t))
}

/// The event time of a `(key, t)` input.
pub(crate) fn event_time(kv: &(String, i64)) -> Timestamp {
    Timestamp(kv.1)
}

/// `(key, t)` pairs for Create.
pub(crate) fn kvs(pairs: &[(&str, i64)]) -> Vec<(String, i64)> {
    pairs.iter().map(|(k, t)| (k.to_string(), *t)).collect()
}

/// A construction error recorded by a pipeline built aside (the harness refuses to
/// run a pipeline that does not construct, so refusal cases build the faulty pipeline
/// on their own and report what it said): `transform|message`, or `accepted`.
pub(crate) fn construction_outcome(build: impl FnOnce(&Pipeline)) -> String {
    let q = Pipeline::new(Default::default());
    build(&q);
    match q.to_plan() {
        Ok(_) => "accepted".into(),
        Err(tidewater::Error::Construction { transform, message }) => {
            format!("{transform}|{message}")
        }
        Err(e) => format!("another error|{e}"),
    }
}
