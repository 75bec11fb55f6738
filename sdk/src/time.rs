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

    /// The wall clock now, in milliseconds since the Unix epoch (0 if the system clock
    /// is set before it): processing time outside a TestStream.
    ///
    /// ```
    /// assert!(tidewater::Timestamp::wall_clock().millis() > 1_600_000_000_000);
    /// ```
    pub fn wall_clock() -> Self {
        Timestamp(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis() as i64)
                .unwrap_or(0),
        )
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

/// A length of event or processing time, in milliseconds (Beam Java's `Duration`):
/// window sizes, periods, gaps, allowed lateness, trigger delays, TestStream steps.
///
/// Every parameter that takes one is `impl Into<Duration>`, so it also accepts a
/// [`std::time::Duration`] and, as before there was a type, a bare integer of
/// milliseconds.
///
/// ```
/// use tidewater::{Duration, Timestamp, WindowFn};
/// assert_eq!(Duration::from_secs(10), Duration::from_millis(10_000));
/// assert_eq!(Duration::from(std::time::Duration::from_millis(1500)).millis(), 1500);
/// assert_eq!(WindowFn::fixed(Duration::from_secs(10)), WindowFn::fixed(10_000));
/// assert_eq!(Timestamp::from_millis(5) + Duration::from_secs(1), Timestamp::from_millis(1005));
/// ```
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Duration(i64);

impl Duration {
    /// No time at all.
    pub const ZERO: Duration = Duration(0);

    /// `ms` milliseconds.
    ///
    /// ```
    /// assert_eq!(tidewater::Duration::from_millis(7).millis(), 7);
    /// ```
    pub const fn from_millis(ms: i64) -> Duration {
        Duration(ms)
    }

    /// `s` seconds.
    ///
    /// ```
    /// assert_eq!(tidewater::Duration::from_secs(2).millis(), 2000);
    /// ```
    pub const fn from_secs(s: i64) -> Duration {
        Duration(s.saturating_mul(1000))
    }

    /// `m` minutes.
    ///
    /// ```
    /// assert_eq!(tidewater::Duration::from_minutes(1).millis(), 60_000);
    /// ```
    pub const fn from_minutes(m: i64) -> Duration {
        Duration(m.saturating_mul(60_000))
    }

    /// `h` hours.
    ///
    /// ```
    /// assert_eq!(tidewater::Duration::from_hours(1).millis(), 3_600_000);
    /// ```
    pub const fn from_hours(h: i64) -> Duration {
        Duration(h.saturating_mul(3_600_000))
    }

    /// The length in milliseconds.
    ///
    /// ```
    /// assert_eq!(tidewater::Duration::from_secs(-1).millis(), -1000);
    /// ```
    pub const fn millis(self) -> i64 {
        self.0
    }
}

impl From<i64> for Duration {
    /// A bare integer is milliseconds.
    fn from(ms: i64) -> Duration {
        Duration(ms)
    }
}

impl From<std::time::Duration> for Duration {
    /// Whole milliseconds (saturating at `i64::MAX`).
    fn from(d: std::time::Duration) -> Duration {
        Duration(i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
    }
}

impl fmt::Debug for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}ms", self.0)
    }
}

impl std::ops::Add<Duration> for Timestamp {
    type Output = Timestamp;
    /// The timestamp `d` later (saturating).
    fn add(self, d: Duration) -> Timestamp {
        Timestamp(self.0.saturating_add(d.0))
    }
}

impl std::ops::Sub<Duration> for Timestamp {
    type Output = Timestamp;
    /// The timestamp `d` earlier (saturating).
    fn sub(self, d: Duration) -> Timestamp {
        Timestamp(self.0.saturating_sub(d.0))
    }
}

impl std::ops::Sub<Timestamp> for Timestamp {
    type Output = Duration;
    /// The time from `other` to `self`.
    fn sub(self, other: Timestamp) -> Duration {
        Duration(self.0.saturating_sub(other.0))
    }
}

impl std::ops::Add for Duration {
    type Output = Duration;
    fn add(self, other: Duration) -> Duration {
        Duration(self.0.saturating_add(other.0))
    }
}

impl std::ops::Mul<i64> for Duration {
    type Output = Duration;
    fn mul(self, n: i64) -> Duration {
        Duration(self.0.saturating_mul(n))
    }
}
