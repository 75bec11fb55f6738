//! An element with its event-time metadata.

use crate::{PaneInfo, Timestamp, Windows};
use serde::{Deserialize, Serialize};

/// A value with its timestamp, windows and pane (Beam's `WindowedValue`).
///
/// ```
/// let wv = tidewater::WindowedValue::in_global_window("a");
/// assert_eq!(wv.timestamp, tidewater::Timestamp::MIN);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct WindowedValue<T> {
    /// The element.
    pub value: T,
    /// Its event time.
    pub timestamp: Timestamp,
    /// The windows it belongs to.
    pub windows: Windows,
    /// The pane that produced it.
    pub pane: PaneInfo,
}

impl<T> WindowedValue<T> {
    /// `value` at the minimum timestamp in the global window, as `Create` and `Impulse`
    /// produce it.
    pub fn in_global_window(value: T) -> Self {
        WindowedValue {
            value,
            timestamp: Timestamp::MIN,
            windows: Windows::global(),
            pane: PaneInfo::NO_FIRING,
        }
    }

    /// The same metadata around another value.
    ///
    /// ```
    /// let wv = tidewater::WindowedValue::in_global_window(1).with_value("x");
    /// assert_eq!(wv.value, "x");
    /// ```
    pub fn with_value<U>(&self, value: U) -> WindowedValue<U> {
        WindowedValue {
            value,
            timestamp: self.timestamp,
            windows: self.windows.clone(),
            pane: self.pane,
        }
    }
}
