use super::WindowAssigner;
use tidewater::{BoundedWindow, Timestamp};

/// For a merging WindowFn, which of one key's active windows merge: each returned pair
/// is (the windows merged, the result). Sessions merge windows that overlap into their
/// span, transitively.
///
/// ```
/// use tidewater::{BoundedWindow, Timestamp};
/// use tidewater_runners_core::windowing::{merge_windows, WindowAssigner};
/// let w = |s, e| BoundedWindow::Interval { start: Timestamp(s), end: Timestamp(e) };
/// let merged = merge_windows(&WindowAssigner::Sessions { gap: 10 }, &[w(0, 10), w(5, 15), w(30, 40)]).unwrap();
/// assert_eq!(merged, vec![(vec![w(0, 10), w(5, 15)], w(0, 15))]);
/// ```
pub fn merge_windows(
    assigner: &WindowAssigner,
    windows: &[BoundedWindow],
) -> Result<Vec<(Vec<BoundedWindow>, BoundedWindow)>, String> {
    match assigner {
        WindowAssigner::Sessions { .. } => Ok(merge_overlapping(windows)),
        WindowAssigner::Custom(f) if f.is_merging() => f.merge(windows),
        _ => Ok(Vec::new()),
    }
}

fn bounds(w: &BoundedWindow) -> (i64, i64) {
    match w {
        BoundedWindow::Global => (i64::MIN, i64::MAX),
        w => (w.start().millis(), w.end().millis()),
    }
}

/// Beam's `MergeOverlappingIntervalWindows`: sort by start, sweep, merge runs that
/// overlap; runs of one window are not reported.
fn merge_overlapping(windows: &[BoundedWindow]) -> Vec<(Vec<BoundedWindow>, BoundedWindow)> {
    let mut sorted: Vec<BoundedWindow> = windows.to_vec();
    sorted.sort_by_key(bounds);
    sorted.dedup();
    let mut out = Vec::new();
    let mut run: Vec<BoundedWindow> = Vec::new();
    let mut run_end = i64::MIN;
    let mut flush = |run: &mut Vec<BoundedWindow>, end: i64| {
        if run.len() > 1 {
            let start = bounds(&run[0]).0;
            out.push((
                std::mem::take(run),
                BoundedWindow::Interval {
                    start: Timestamp(start),
                    end: Timestamp(end),
                },
            ));
        }
        run.clear();
    };
    for w in sorted {
        let (s, e) = bounds(&w);
        if !run.is_empty() && s < run_end {
            run.push(w);
            run_end = run_end.max(e);
        } else {
            flush(&mut run, run_end);
            run.push(w);
            run_end = e;
        }
    }
    flush(&mut run, run_end);
    out
}
