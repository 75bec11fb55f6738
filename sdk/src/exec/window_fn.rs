//! A user WindowFn as runners call it, whatever its window type (the registry builds
//! one from a plan's fields).

use crate::{BoundedWindow, Timestamp};

/// A user WindowFn as runners call it, whatever its window type: what the registry
/// builds from a plan's fields.
///
/// ```
/// # use serde::{Deserialize, Serialize};
/// use tidewater::{BoundedWindow, CustomWindowFn, Timestamp, WindowFn};
/// #[derive(Serialize, Deserialize)]
/// struct Tens;
/// impl CustomWindowFn for Tens {
///     type Window = BoundedWindow;
///     fn assign(&self, ts: Timestamp) -> Vec<BoundedWindow> {
///         let s = ts.millis().div_euclid(10) * 10;
///         vec![BoundedWindow::Interval { start: Timestamp(s), end: Timestamp(s + 10) }]
///     }
/// }
/// let WindowFn::Custom { name, .. } = WindowFn::custom(Tens) else { unreachable!() };
/// let factory = tidewater::registry::window_fn(&name).unwrap();
/// let f = factory(&mut <dyn erased_serde::Deserializer>::erase(serde_json::Value::Null)).unwrap();
/// assert_eq!(
///     f.assign_timestamp(Timestamp(12)),
///     Some(vec![BoundedWindow::Interval { start: Timestamp(10), end: Timestamp(20) }])
/// );
/// assert!(!f.is_merging());
/// ```
pub trait ErasedWindowFn: Send + Sync {
    /// Assigns every element of `batch` its windows.
    fn assign_batch(
        &self,
        batch: Box<dyn crate::exec::AnyBatch>,
    ) -> Result<Box<dyn crate::exec::AnyBatch>, String>;
    /// The windows of a timestamp, for a WindowFn that needs no element (`None` for an
    /// [`ElementWindowFn`](crate::ElementWindowFn)): how a side input's windows are found from a main input's.
    fn assign_timestamp(&self, ts: Timestamp) -> Option<Vec<BoundedWindow>>;
    /// Whether it merges.
    fn is_merging(&self) -> bool;
    /// Which windows merge into which; an error names a window not of its type.
    fn merge(
        &self,
        windows: &[BoundedWindow],
    ) -> Result<Vec<(Vec<BoundedWindow>, BoundedWindow)>, String>;
}
