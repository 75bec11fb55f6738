//! Windows and panes carried by every element.

use crate::Timestamp;
use serde::{Deserialize, Serialize};

/// The single window of the global windowing strategy.
///
/// ```
/// use tidewater::{GlobalWindow, Timestamp};
/// assert_eq!(GlobalWindow::MAX_TIMESTAMP, Timestamp::from_millis(Timestamp::MAX.millis() - 86_400_000));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GlobalWindow;

impl GlobalWindow {
    /// The end of the global window: one day before [`Timestamp::MAX`], as in Beam, so
    /// that timers at the end of the window can still fire.
    pub const MAX_TIMESTAMP: Timestamp = Timestamp(Timestamp::MAX.0 - 86_400_000);
}

/// A window an element belongs to.
///
/// ```
/// use tidewater::{BoundedWindow, Timestamp};
/// let w = BoundedWindow::Interval { start: Timestamp::from_millis(0), end: Timestamp::from_millis(10) };
/// assert_eq!(w.max_timestamp(), Timestamp::from_millis(9));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum BoundedWindow {
    /// The global window.
    Global,
    /// The half-open interval `[start, end)`.
    Interval {
        /// Inclusive start.
        start: Timestamp,
        /// Exclusive end.
        end: Timestamp,
    },
}

impl BoundedWindow {
    /// The first timestamp of the window: `start` of an interval, [`Timestamp::MIN`]
    /// for the global window.
    ///
    /// ```
    /// use tidewater::{BoundedWindow, Timestamp};
    /// let w = BoundedWindow::Interval { start: Timestamp::from_millis(0), end: Timestamp::from_millis(10) };
    /// assert_eq!(w.start(), Timestamp::from_millis(0));
    /// assert_eq!(BoundedWindow::Global.start(), Timestamp::MIN);
    /// ```
    pub fn start(&self) -> Timestamp {
        match self {
            BoundedWindow::Global => Timestamp::MIN,
            BoundedWindow::Interval { start, .. } => *start,
        }
    }

    /// The end of the window, exclusive: `end` of an interval; for the global window
    /// the timestamp after its [`max_timestamp`](BoundedWindow::max_timestamp).
    ///
    /// ```
    /// use tidewater::{BoundedWindow, GlobalWindow, Timestamp};
    /// let w = BoundedWindow::Interval { start: Timestamp::from_millis(0), end: Timestamp::from_millis(10) };
    /// assert_eq!(w.end(), Timestamp::from_millis(10));
    /// assert_eq!(BoundedWindow::Global.end().millis(), GlobalWindow::MAX_TIMESTAMP.millis() + 1);
    /// ```
    pub fn end(&self) -> Timestamp {
        match self {
            BoundedWindow::Global => Timestamp(GlobalWindow::MAX_TIMESTAMP.0 + 1),
            BoundedWindow::Interval { end, .. } => *end,
        }
    }

    /// The largest timestamp that belongs to the window.
    pub fn max_timestamp(&self) -> Timestamp {
        match self {
            BoundedWindow::Global => GlobalWindow::MAX_TIMESTAMP,
            BoundedWindow::Interval { end, .. } => Timestamp(end.0 - 1),
        }
    }
}

/// The windows of one element: almost always one, so one does not allocate.
///
/// ```
/// use tidewater::{BoundedWindow, Windows};
/// assert_eq!(Windows::global().iter().collect::<Vec<_>>(), vec![&BoundedWindow::Global]);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Windows {
    /// Exactly one window.
    One(BoundedWindow),
    /// Several windows (sliding windows); an element is processed once per window.
    Many(Vec<BoundedWindow>),
}

impl Windows {
    /// The global window alone.
    pub const fn global() -> Self {
        Windows::One(BoundedWindow::Global)
    }

    /// The windows, in order.
    pub fn iter(&self) -> std::slice::Iter<'_, BoundedWindow> {
        match self {
            Windows::One(w) => std::slice::from_ref(w).iter(),
            Windows::Many(ws) => ws.iter(),
        }
    }
}

/// When a pane fired relative to the watermark (Beam's `PaneInfo.Timing`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Timing {
    /// Before the watermark passed the end of the window.
    Early,
    /// The pane fired when the watermark passed the end of the window.
    OnTime,
    /// After the on-time pane.
    Late,
    /// Not produced by a trigger firing (for example an element straight from a source).
    Unknown,
}

/// Which firing of a window produced an element (Beam's `PaneInfo`).
///
/// ```
/// let p = tidewater::PaneInfo::NO_FIRING;
/// assert!(p.is_first && p.is_last);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PaneInfo {
    /// Timing of the firing.
    pub timing: Timing,
    /// The first pane of its window.
    pub is_first: bool,
    /// The last pane of its window: no more will follow.
    pub is_last: bool,
    /// 0 for the first pane, counting every pane of the window.
    pub index: u64,
    /// Counting only on-time and late panes; -1 for early panes.
    pub non_speculative_index: i64,
}

impl PaneInfo {
    /// The pane of an element that no trigger produced.
    pub const NO_FIRING: PaneInfo = PaneInfo {
        timing: Timing::Unknown,
        is_first: true,
        is_last: true,
        index: 0,
        non_speculative_index: 0,
    };
    /// The single on-time pane of a bounded (batch) grouping with the default trigger.
    pub const ON_TIME_AND_ONLY_FIRING: PaneInfo = PaneInfo {
        timing: Timing::OnTime,
        is_first: true,
        is_last: true,
        index: 0,
        non_speculative_index: 0,
    };
}
