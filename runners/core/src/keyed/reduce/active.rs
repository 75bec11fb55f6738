//! The reducer's active windows: per (key, window) the trigger's state, pane counts
//! and input time range ([`WindowState`]), how each stands against the snapshots
//! ([`Written`]), the index over them ([`ActiveWindows`]), and the watermark hold a
//! window's state implies (Beam's `WatermarkHold`).

use crate::triggers::TriggerState;
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use std::cell::Cell;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use tidewater::exec::KeyId;
use tidewater::{
    AccumulationMode, BoundedWindow, Timestamp, TimestampCombiner, Timing, WindowingStrategy,
};

/// What the reducer keeps per active (key, window) besides the contents.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct WindowState {
    pub(super) trigger: TriggerState,
    /// The trigger finished: later data for the window is dropped until it expires.
    pub(super) closed: bool,
    pub(super) panes: u64,
    pub(super) non_speculative_panes: i64,
    pub(super) last_timing: Option<Timing>,
    /// Inputs arrived since the last pane.
    pub(super) new_data: bool,
    /// Earliest and latest input timestamps of the pane (all panes when accumulating).
    pub(super) min_ts: MaybeTs,
    pub(super) max_ts: MaybeTs,
    /// Which activation of (key, window) this is: a queued window timer of an earlier
    /// one (a window expired or merged away, its key's number since reused) is stale.
    /// Given afresh on restore.
    #[serde(skip)]
    pub(super) serial: u64,
    /// How the window stands against the snapshots: see [`Written`].
    #[serde(skip)]
    pub(super) written: Cell<Written>,
    /// The hold this activation has an entry for in `Reducer::holds`, if it has one.
    #[serde(skip)]
    pub(super) registered: Cell<MaybeTs>,
    /// The reducer's bundle count when an input last came (or the window came into
    /// memory): the least recently touched windows go to the store first.
    #[serde(skip)]
    pub(super) touched: u32,
}

/// An optional timestamp in the 8 bytes of one (a timestamp lies within
/// [`Timestamp::MIN`, `Timestamp::MAX`], far from `i64::MIN`, which stands for none),
/// written as an `Option<Timestamp>`: a window's state is per (key, window), so its
/// size is most of a windowed job's memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct MaybeTs(i64);

impl MaybeTs {
    pub(super) const NONE: MaybeTs = MaybeTs(i64::MIN);

    pub(super) fn get(self) -> Option<Timestamp> {
        (self != Self::NONE).then_some(Timestamp(self.0))
    }
}

impl Default for MaybeTs {
    fn default() -> Self {
        Self::NONE
    }
}

impl From<Option<Timestamp>> for MaybeTs {
    fn from(t: Option<Timestamp>) -> Self {
        t.map_or(Self::NONE, |t| MaybeTs(t.0))
    }
}

impl Serialize for MaybeTs {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.get().serialize(s)
    }
}

impl<'de> Deserialize<'de> for MaybeTs {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Option::<Timestamp>::deserialize(d).map(MaybeTs::from)
    }
}

/// A window against the snapshots, so that a delta snapshot writes only the windows
/// new or changed since the previous one (and the ids of those gone): a window's input
/// usually comes within a short stretch of processing time, while the window stays
/// open until the watermark passes it. Anything that changes the window (its state,
/// contents or timers; a popped timer too) goes through [`ActiveWindows::get_mut`],
/// which marks it changed. (The direct runner checks every delta against a full
/// snapshot.) No bytes are kept for unchanged windows: full snapshots are the rare
/// ones, and kept bytes would double the state's memory and cost a free per change.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) enum Written {
    /// Opened since the last snapshot: in no snapshot yet, so its going needs no
    /// deletion in the next delta.
    #[default]
    New,
    /// In the last snapshot, changed since.
    Changed,
    /// In the last snapshot as it is now.
    Clean,
}

/// The active windows of a reducer: their state by (key, window) in a hash map (one
/// lookup per input, however many windows are open), and per key how many are open (to
/// forget a key with none left) and, under a merging WindowFn, which (merging needs
/// them; a key's many fixed windows would make each removal a scan).
#[derive(Default)]
pub(super) struct ActiveWindows {
    pub(super) map: FxHashMap<(KeyId, BoundedWindow), WindowState>,
    pub(super) open: FxHashMap<KeyId, u32>,
    /// Each key's windows, kept only when `merging`.
    pub(super) of_key: FxHashMap<KeyId, Vec<BoundedWindow>>,
    pub(super) merging: bool,
}

impl ActiveWindows {
    pub(super) fn new(merging: bool) -> Self {
        ActiveWindows {
            merging,
            ..Default::default()
        }
    }

    pub(super) fn get(&self, kw: &(KeyId, BoundedWindow)) -> Option<&WindowState> {
        self.map.get(kw)
    }

    pub(super) fn len(&self) -> usize {
        self.map.len()
    }

    /// A window's state to change: the snapshots forget its bytes.
    pub(super) fn get_mut(&mut self, kw: &(KeyId, BoundedWindow)) -> Option<&mut WindowState> {
        let st = self.map.get_mut(kw)?;
        if st.written.get() == Written::Clean {
            st.written.set(Written::Changed);
        }
        Some(st)
    }

    pub(super) fn contains_key(&self, kw: &(KeyId, BoundedWindow)) -> bool {
        self.map.contains_key(kw)
    }

    pub(super) fn insert(&mut self, (k, w): (KeyId, BoundedWindow), st: WindowState) {
        if self.merging {
            if self.map.insert((k, w.clone()), st).is_none() {
                // Most keys have one window open at a time: room for one, not Vec's four.
                self.of_key
                    .entry(k)
                    .or_insert_with(|| Vec::with_capacity(1))
                    .push(w);
                *self.open.entry(k).or_default() += 1;
            }
        } else if self.map.insert((k, w), st).is_none() {
            *self.open.entry(k).or_default() += 1;
        }
    }

    pub(super) fn remove(&mut self, kw: &(KeyId, BoundedWindow)) -> Option<WindowState> {
        let st = self.map.remove(kw)?;
        let (k, w) = (kw.0, &kw.1);
        if let Some(n) = self.open.get_mut(&k) {
            *n -= 1;
            if *n == 0 {
                self.open.remove(&k);
            }
        }
        if let Some(ws) = self.of_key.get_mut(&k) {
            // Unordered (`of_key` sorts): no shifting of a key's open windows.
            if let Some(i) = ws.iter().position(|x| x == w) {
                ws.swap_remove(i);
            }
            if ws.is_empty() {
                self.of_key.remove(&k);
            }
        }
        Some(st)
    }

    /// `k`'s windows, in window order (under a merging WindowFn).
    pub(super) fn of_key(&self, k: KeyId) -> Vec<BoundedWindow> {
        debug_assert!(self.merging, "windows per key are kept only for merging");
        let mut ws = self.of_key.get(&k).cloned().unwrap_or_default();
        ws.sort();
        ws
    }

    pub(super) fn has_key(&self, k: KeyId) -> bool {
        self.open.contains_key(&k)
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = (&(KeyId, BoundedWindow), &WindowState)> {
        self.map.iter()
    }
}

impl std::ops::Index<&(KeyId, BoundedWindow)> for ActiveWindows {
    type Output = WindowState;
    fn index(&self, kw: &(KeyId, BoundedWindow)) -> &WindowState {
        &self.map[kw]
    }
}

/// The watermark hold of window `w` in state `s`, if it holds: a window with input
/// not yet in a pane, or an accumulating one with no pane yet, holds the output
/// watermark at its pane's output time (Beam's WatermarkHold).
pub(super) fn hold_of(
    strategy: &WindowingStrategy,
    w: &BoundedWindow,
    s: &WindowState,
) -> Option<Timestamp> {
    let holds = s.new_data
        || (!s.closed
            && strategy.accumulation_mode == AccumulationMode::Accumulating
            && s.panes == 0);
    holds.then(|| match strategy.timestamp_combiner {
        TimestampCombiner::EndOfWindow => end_of(w),
        TimestampCombiner::EarliestInPane | TimestampCombiner::LatestInPane => {
            s.min_ts.get().unwrap_or(end_of(w)).min(end_of(w))
        }
    })
}

/// Gives window `w` of key `k` (state `st`) an entry in the hold queue for its hold,
/// unless it has one there already.
pub(super) fn register_hold(
    holds: &mut BinaryHeap<Reverse<HoldEntry>>,
    strategy: &WindowingStrategy,
    k: KeyId,
    w: &BoundedWindow,
    st: &WindowState,
) {
    if let Some(h) = hold_of(strategy, w, st) {
        if st.registered.get().get() != Some(h) {
            holds.push(Reverse((h, st.serial, k, w.clone())));
            st.registered.set(Some(h).into());
        }
    }
}

/// A window's hold in `Reducer::holds`: the time, then the window's activation.
pub(super) type HoldEntry = (Timestamp, u64, KeyId, BoundedWindow);

/// The end of window `w`: its max timestamp.
pub(super) fn end_of(w: &BoundedWindow) -> Timestamp {
    w.max_timestamp()
}
