//! Event time.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A point in event time, in milliseconds since the Unix epoch (Beam Java's `Instant`).
///
/// ```
/// use tidewater::Timestamp;
/// assert!(Timestamp::MIN < Timestamp::from_millis(0));
/// assert!(Timestamp::from_millis(0) < tidewater::GlobalWindow::MAX_TIMESTAMP);
/// ```
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Timestamp(pub i64);

impl Timestamp {
    /// The smallest timestamp an element may carry (Beam's `TIMESTAMP_MIN_VALUE`).
    pub const MIN: Timestamp = Timestamp(-9_223_372_036_854_775);
    /// The largest timestamp an element may carry (Beam's `TIMESTAMP_MAX_VALUE`).
    pub const MAX: Timestamp = Timestamp(9_223_372_036_854_775);

    /// A timestamp `ms` milliseconds after the epoch.
    ///
    /// ```
    /// assert_eq!(tidewater::Timestamp::from_millis(5).millis(), 5);
    /// ```
    pub const fn from_millis(ms: i64) -> Self {
        Timestamp(ms)
    }

    /// Milliseconds since the epoch.
    ///
    /// ```
    /// assert_eq!(tidewater::Timestamp::from_millis(-3).millis(), -3);
    /// ```
    pub const fn millis(self) -> i64 {
        self.0
    }
}

impl fmt::Debug for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if *self == Timestamp::MIN {
            write!(f, "MIN")
        } else if *self == Timestamp::MAX {
            write!(f, "MAX")
        } else if *self == crate::GlobalWindow::MAX_TIMESTAMP {
            write!(f, "END_OF_GLOBAL_WINDOW")
        } else {
            write!(f, "{}ms", self.0)
        }
    }
}
