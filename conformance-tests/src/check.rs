//! Helpers for cases' checks: each returns `Err` with what was expected and what came.

use crate::case::RunResult;
use std::fmt::Debug;
use tidewater::{
    BoundedWindow, Element, Error, PaneInfo, PipelineResult, Timestamp, WindowedValue, Windows,
};

/// The result of a run that had to succeed.
pub fn succeeded(result: RunResult) -> Result<PipelineResult, String> {
    result.map_err(|e| format!("the pipeline failed: {e}"))
}

/// The elements captured under `name`, with metadata.
pub fn captured<T: Element>(
    r: &PipelineResult,
    name: &str,
) -> Result<Vec<WindowedValue<T>>, String> {
    r.captured::<T>(name)
        .map_err(|e| format!("capture '{name}': {e}"))
}

/// The values captured under `name`, sorted.
pub fn values<T: Element + Ord>(r: &PipelineResult, name: &str) -> Result<Vec<T>, String> {
    let mut v = r
        .captured_values::<T>(name)
        .map_err(|e| format!("capture '{name}': {e}"))?;
    v.sort();
    Ok(v)
}

/// `actual == expected`.
pub fn eq<T: PartialEq + Debug>(what: &str, actual: T, expected: T) -> Result<(), String> {
    if actual == expected {
        Ok(())
    } else {
        Err(format!("{what}: expected {expected:?}, got {actual:?}"))
    }
}

/// The values captured under `name` are exactly `expected`, as a multiset.
pub fn values_eq<T: Element + Ord>(
    r: &PipelineResult,
    name: &str,
    mut expected: Vec<T>,
) -> Result<(), String> {
    expected.sort();
    eq(
        &format!("capture '{name}'"),
        values::<T>(r, name)?,
        expected,
    )
}

/// Every element captured under `name` has this timestamp, window and pane.
pub fn metadata_eq<T: Element>(
    r: &PipelineResult,
    name: &str,
    timestamp: Timestamp,
    window: BoundedWindow,
    pane: PaneInfo,
) -> Result<(), String> {
    for wv in captured::<T>(r, name)? {
        let what = format!("capture '{name}', element {:?}", wv.value);
        eq(&format!("{what}: timestamp"), wv.timestamp, timestamp)?;
        eq(
            &format!("{what}: windows"),
            &wv.windows,
            &Windows::One(window.clone()),
        )?;
        eq(&format!("{what}: pane"), wv.pane, pane)?;
    }
    Ok(())
}

/// What a failing run must have reported.
pub struct ExpectedUserError<'a> {
    /// The failing transform's full name.
    pub transform: &'a str,
    /// The lifecycle step.
    pub phase: &'a str,
    /// Text the element description must contain, or `None` if no element may be named.
    pub element: Option<&'a str>,
    /// Texts the message must contain.
    pub message: &'a [&'a str],
}

/// The run failed with [`Error::UserCode`] as described.
pub fn user_code_error(result: RunResult, expected: ExpectedUserError<'_>) -> Result<(), String> {
    let e = match result {
        Ok(_) => {
            return Err(format!(
                "the run succeeded; expected it to fail in '{}'",
                expected.transform
            ))
        }
        Err(e) => e,
    };
    let Error::UserCode {
        transform,
        phase,
        element,
        message,
        ..
    } = &e
    else {
        return Err(format!(
            "expected a user-code error from '{}', got: {e}",
            expected.transform
        ));
    };
    eq("failing transform", transform.as_str(), expected.transform)?;
    eq("failing phase", *phase, expected.phase)?;
    match (expected.element, element) {
        (Some(want), Some(got)) if got.contains(want) => {}
        (None, None) => {}
        (want, got) => {
            return Err(format!(
                "failing element: expected one containing {want:?}, got {got:?} (error: {e})"
            ))
        }
    }
    for m in expected.message {
        if !message.contains(m) {
            return Err(format!(
                "error message: expected it to contain {m:?}, got {message:?}"
            ));
        }
    }
    let shown = e.to_string();
    if !shown.contains(expected.transform) {
        return Err(format!(
            "the error's message does not name the transform '{}': {shown}",
            expected.transform
        ));
    }
    Ok(())
}
