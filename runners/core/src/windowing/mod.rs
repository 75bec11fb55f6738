//! Window assignment and merging: the WindowFns' semantics, once for every runner.

mod assign;
mod merge;

pub use assign::{AssignWindowsFn, WindowAssigner};
pub use merge::merge_windows;

use tidewater::{BoundedWindow, Timestamp};

/// When a window expires and its state is dropped: the end of the window plus the
/// allowed lateness (Beam's garbage-collection time). Input for a window is late once
/// the input watermark has passed this.
///
/// ```
/// use tidewater::{BoundedWindow, Timestamp};
/// use tidewater_runners_core::windowing::gc_time;
/// let w = BoundedWindow::Interval { start: Timestamp::from_millis(0), end: Timestamp::from_millis(10) };
/// assert_eq!(gc_time(&w, 5), Timestamp::from_millis(14));
/// assert_eq!(gc_time(&BoundedWindow::Global, 0), BoundedWindow::Global.max_timestamp());
/// ```
pub fn gc_time(w: &BoundedWindow, allowed_lateness_ms: i64) -> Timestamp {
    Timestamp(
        w.max_timestamp()
            .millis()
            .saturating_add(allowed_lateness_ms)
            .min(Timestamp::MAX.millis()),
    )
}

/// Whether `w` has expired at input watermark `watermark`.
pub fn is_expired(w: &BoundedWindow, allowed_lateness_ms: i64, watermark: Timestamp) -> bool {
    gc_time(w, allowed_lateness_ms) < watermark
}
