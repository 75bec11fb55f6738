//! Where a stateful DoFn's timers live, as its cells do: in memory (the
//! [`TimerService`]) or, with `--state-backend fjall`, in the embedded store beside the
//! cells ([`super::EmbeddedTimers`], Flink's RocksDB timer service), so that a timer per
//! key is no more bounded by memory than a cell per key.

use crate::timers::{Timer, TimerService};
use tidewater::exec::TimeDomain;
use tidewater::{BoundedWindow, Timestamp};

/// One of a stateful DoFn's timers: of an encoded key, named by the DoFn's timer id.
pub type KeyTimer = Timer<Vec<u8>, String>;

/// A stateful DoFn's pending timers (Beam's `TimerInternals`): named per key and
/// window in two time domains. A timer fires once its clock has passed it (strictly),
/// earliest first; setting one with the key, window, name and domain of a pending one
/// replaces it; every pending timer holds the output watermark at its output
/// timestamp. The order of timers due at the same time is the backend's.
pub trait KeyedTimers: Send {
    /// Sets (or resets) a timer; whether (key, window) may have had no timer before
    /// (the caller then keeps the window until it expires; `true` when unsure).
    fn set(&mut self, t: KeyTimer) -> bool;
    /// Deletes a timer, if set.
    fn delete(&mut self, key: &[u8], window: &BoundedWindow, name: &str, domain: TimeDomain);
    /// The earliest timer of `domain` that `now` has passed, removed.
    fn pop_due(&mut self, domain: TimeDomain, now: Timestamp) -> Option<KeyTimer>;
    /// The earliest pending timer of `domain`.
    fn next(&self, domain: TimeDomain) -> Option<Timestamp>;
    /// Whether a timer of `domain` is due at `now`.
    fn has_due(&self, domain: TimeDomain, now: Timestamp) -> bool {
        self.next(domain).is_some_and(|t| t < now)
    }
    /// The earliest pending timer of `domain`, whole (for reports).
    fn first(&self, domain: TimeDomain) -> Option<KeyTimer>;
    /// Deletes every timer of (key, window): the window expired.
    fn delete_window(&mut self, key: &[u8], window: &BoundedWindow);
    /// The earliest output timestamp of a pending timer: the watermark hold.
    fn earliest_output(&self) -> Option<Timestamp>;
    /// Number of pending timers.
    fn len(&self) -> usize;
    /// No pending timers.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The end of a bundle: an error reading or writing the timers since the last
    /// flush (a timer operation cannot fail by itself).
    fn flush(&mut self) -> Result<(), String> {
        Ok(())
    }
    /// The timers as they are now, in a copy later changes do not touch, to be read
    /// on another thread: the timers' part of a snapshot.
    fn freeze(&self) -> Box<dyn FrozenTimers>;
    /// [`KeyedTimers::freeze`] for a copy that is asked for these windows only (a
    /// delta snapshot's): a backend may copy less.
    fn freeze_windows(&self, windows: &[(Vec<u8>, BoundedWindow)]) -> Box<dyn FrozenTimers> {
        let _ = windows;
        self.freeze()
    }
    /// The timers frozen as of now as the files of the store that keeps them, for a
    /// checkpoint of those files (see [`super::tables`]); `None` where
    /// no store keeps them. The caller flushed them ([`KeyedTimers::flush`]).
    fn freeze_files(&self) -> Option<super::tables::KeyspaceFreeze> {
        None
    }
}

/// Timers one after another, read as they are asked for; an error ends them.
pub type TimerStream = Box<dyn Iterator<Item = Result<KeyTimer, String>>>;

/// The timers as of [`KeyedTimers::freeze`].
pub trait FrozenTimers: Send {
    /// Every timer, in snapshot order of their windows (by key group of
    /// `max_key_groups`, then by [`super::window_id`]; a window's in no particular
    /// order).
    fn all(self: Box<Self>, max_key_groups: u32) -> TimerStream;
    /// The timers of (key, window), in no particular order.
    fn window(&self, key: &[u8], window: &BoundedWindow) -> Result<Vec<KeyTimer>, String>;
}

/// Timers copied out of memory, by window.
struct Copied(std::collections::HashMap<(Vec<u8>, BoundedWindow), Vec<KeyTimer>>);

impl FrozenTimers for Copied {
    fn all(self: Box<Self>, max_key_groups: u32) -> TimerStream {
        let mut windows: Vec<_> = self
            .0
            .into_iter()
            .map(|((key, window), timers)| {
                let (g, id) = super::snapshot_place(&key, &window, max_key_groups);
                (g, id, timers)
            })
            .collect();
        windows.sort_unstable_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
        Box::new(windows.into_iter().flat_map(|(_, _, t)| t).map(Ok))
    }
    fn window(&self, key: &[u8], window: &BoundedWindow) -> Result<Vec<KeyTimer>, String> {
        // The key is copied for the lookup: once per window a delta writes.
        Ok(self
            .0
            .get(&(key.to_vec(), window.clone()))
            .cloned()
            .unwrap_or_default())
    }
}

/// Copies the timers of `windows` out of `timers`.
fn copy<'a>(
    timers: &TimerService<Vec<u8>, String>,
    windows: impl Iterator<Item = (&'a Vec<u8>, &'a BoundedWindow)>,
) -> Box<dyn FrozenTimers> {
    let mut copied = std::collections::HashMap::new();
    for (key, w) in windows {
        let of = timers.of(key, w.clone());
        if !of.is_empty() {
            copied.insert((key.clone(), w.clone()), of);
        }
    }
    Box::new(Copied(copied))
}

impl KeyedTimers for TimerService<Vec<u8>, String> {
    fn set(&mut self, t: KeyTimer) -> bool {
        TimerService::set(self, t)
    }
    fn delete(&mut self, key: &[u8], window: &BoundedWindow, name: &str, domain: TimeDomain) {
        TimerService::delete(self, &key.to_vec(), window.clone(), &name.into(), domain)
    }
    fn pop_due(&mut self, domain: TimeDomain, now: Timestamp) -> Option<KeyTimer> {
        TimerService::pop_due(self, domain, now)
    }
    fn next(&self, domain: TimeDomain) -> Option<Timestamp> {
        TimerService::next(self, domain)
    }
    fn first(&self, domain: TimeDomain) -> Option<KeyTimer> {
        TimerService::first(self, domain)
    }
    fn delete_window(&mut self, key: &[u8], window: &BoundedWindow) {
        TimerService::delete_window(self, &key.to_vec(), window.clone())
    }
    fn earliest_output(&self) -> Option<Timestamp> {
        TimerService::earliest_output(self)
    }
    fn len(&self) -> usize {
        TimerService::len(self)
    }
    fn freeze(&self) -> Box<dyn FrozenTimers> {
        copy(self, self.windows().map(|(k, w)| (k, w)))
    }
    fn freeze_windows(&self, windows: &[(Vec<u8>, BoundedWindow)]) -> Box<dyn FrozenTimers> {
        copy(self, windows.iter().map(|(k, w)| (k, w)))
    }
}
