//! The group-also-by-window reducer (Beam's `ReduceFnRunner`): for each key and window
//! it buffers or combines inputs, merges windows, drops late data, asks the trigger when
//! to fire, and emits panes with their timing, index and timestamp. One reducer per
//! grouping transform; every runner uses it.

use crate::delta::{decode_table, encode_delta, encode_entry, encode_table_len, entry_id};
use crate::keyed::{KeyedSnapshot, SnapshotKind};
use crate::snapshot::{decode_part, Scope};
use crate::timers::{Timer, TimerService};
use crate::triggers::{TimeDomain, TriggerContext, TriggerState, TriggerStateMachine};
use crate::windowing::{gc_time, merge_windows, WindowAssigner};
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use std::cell::Cell;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use tidewater::exec::{key_group_of, AnyBatch, ExecError, KeyId, ReduceFnState, StepMetrics};
use tidewater::{
    AccumulationMode, BoundedWindow, ClosingBehavior, OnTimeBehavior, PaneInfo, Timestamp,
    TimestampCombiner, Timing, WindowingStrategy,
};

/// Counter of elements dropped because their window had expired.
pub const DROPPED_DUE_TO_LATENESS: &str = "dropped_due_to_lateness";
/// Counter of elements dropped because their window's trigger had finished.
pub const DROPPED_DUE_TO_CLOSED_WINDOW: &str = "dropped_due_to_closed_window";

/// What the reducer keeps per active (key, window) besides the contents.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct WindowState {
    trigger: TriggerState,
    /// The trigger finished: later data for the window is dropped until it expires.
    closed: bool,
    panes: u64,
    non_speculative_panes: i64,
    last_timing: Option<Timing>,
    /// Inputs arrived since the last pane.
    new_data: bool,
    /// Earliest and latest input timestamps of the pane (all panes when accumulating).
    min_ts: Option<Timestamp>,
    max_ts: Option<Timestamp>,
    /// Which activation of (key, window) this is: a queued window timer of an earlier
    /// one (a window expired or merged away, its key's number since reused) is stale.
    /// Given afresh on restore.
    #[serde(skip)]
    serial: u64,
    /// How the window stands against the snapshots: see [`Written`].
    #[serde(skip)]
    written: Cell<Written>,
    /// The hold this activation has an entry for in [`Reducer::holds`], if it has one.
    #[serde(skip)]
    registered: Cell<Option<Timestamp>>,
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
enum Written {
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
struct ActiveWindows {
    map: FxHashMap<(KeyId, BoundedWindow), WindowState>,
    open: FxHashMap<KeyId, u32>,
    /// Each key's windows, kept only when `merging`.
    of_key: FxHashMap<KeyId, Vec<BoundedWindow>>,
    merging: bool,
}

impl ActiveWindows {
    fn new(merging: bool) -> Self {
        ActiveWindows {
            merging,
            ..Default::default()
        }
    }

    fn get(&self, kw: &(KeyId, BoundedWindow)) -> Option<&WindowState> {
        self.map.get(kw)
    }

    fn len(&self) -> usize {
        self.map.len()
    }

    /// A window's state to change: the snapshots forget its bytes.
    fn get_mut(&mut self, kw: &(KeyId, BoundedWindow)) -> Option<&mut WindowState> {
        let st = self.map.get_mut(kw)?;
        if st.written.get() == Written::Clean {
            st.written.set(Written::Changed);
        }
        Some(st)
    }

    fn contains_key(&self, kw: &(KeyId, BoundedWindow)) -> bool {
        self.map.contains_key(kw)
    }

    fn insert(&mut self, (k, w): (KeyId, BoundedWindow), st: WindowState) {
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

    fn remove(&mut self, kw: &(KeyId, BoundedWindow)) -> Option<WindowState> {
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
    fn of_key(&self, k: KeyId) -> Vec<BoundedWindow> {
        debug_assert!(self.merging, "windows per key are kept only for merging");
        let mut ws = self.of_key.get(&k).cloned().unwrap_or_default();
        ws.sort();
        ws
    }

    fn has_key(&self, k: KeyId) -> bool {
        self.open.contains_key(&k)
    }

    fn iter(&self) -> impl Iterator<Item = (&(KeyId, BoundedWindow), &WindowState)> {
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
fn hold_of(strategy: &WindowingStrategy, w: &BoundedWindow, s: &WindowState) -> Option<Timestamp> {
    let holds = s.new_data
        || (!s.closed
            && strategy.accumulation_mode == AccumulationMode::Accumulating
            && s.panes == 0);
    holds.then(|| match strategy.timestamp_combiner {
        TimestampCombiner::EndOfWindow => end_of(w),
        TimestampCombiner::EarliestInPane | TimestampCombiner::LatestInPane => {
            s.min_ts.unwrap_or(end_of(w)).min(end_of(w))
        }
    })
}

/// Gives window `w` of key `k` (state `st`) an entry in the hold queue for its hold,
/// unless it has one there already.
fn register_hold(
    holds: &mut BinaryHeap<Reverse<HoldEntry>>,
    strategy: &WindowingStrategy,
    k: KeyId,
    w: &BoundedWindow,
    st: &WindowState,
) {
    if let Some(h) = hold_of(strategy, w, st) {
        if st.registered.get() != Some(h) {
            holds.push(Reverse((h, st.serial, k, w.clone())));
            st.registered.set(Some(h));
        }
    }
}

/// The reducer of one grouping transform.
pub struct Reducer {
    strategy: WindowingStrategy,
    assigner: WindowAssigner,
    trigger: TriggerStateMachine,
    state: Box<dyn ReduceFnState>,
    windows: ActiveWindows,
    /// Trigger timers; a timer is named by its time, so setting one twice keeps one.
    timers: TimerService<KeyId, Timestamp>,
    /// The timers every window has, at its end and at its garbage-collection time, by
    /// time: set once when the window becomes active, never moved, so they need no
    /// per-window index (a popped one whose window is gone, merged away or expired,
    /// is skipped). A trigger's timer at one of these times is this one.
    window_timers: BTreeMap<Timestamp, Vec<WindowTimer>>,
    /// The allocation of the latest time's timers once all were popped, for the next
    /// new time: every window of a fixed WindowFn ends at the same time, so each time
    /// holds as many timers as keys, and growing a list that long afresh for each
    /// time was 3% of a windowed count's time.
    spare_window_timers: Vec<WindowTimer>,
    /// The serial of the latest window activation.
    next_serial: u64,
    input_watermark: Timestamp,
    output_watermark: Timestamp,
    processing_time: Timestamp,
    /// A union part set the clocks (later ones lower the watermarks).
    restored_clocks: bool,
    /// The windows' watermark holds (see [`hold_of`]), earliest first, so that the
    /// output watermark needs no scan of every open window at every watermark move
    /// (while the windows of a slow input wait, there are many). Every window that
    /// holds has an entry for its hold (pushed by every change that may add or lower
    /// one: activation, merge, input, restore); an entry whose window is gone, is
    /// another activation or no longer holds there is dropped when it comes first.
    holds: BinaryHeap<Reverse<HoldEntry>>,
    /// The windows gone since the last snapshot that it held (canonical key, window):
    /// the deletions of the next delta.
    removed: Vec<(Box<[u8]>, BoundedWindow)>,
    /// A snapshot was taken since the reducer was made: the next may be a delta.
    has_base: bool,
    /// More windows went than are open: the next snapshot is full (smaller than the
    /// deletions), and `removed` is not kept.
    removed_overflow: bool,
}

/// A window's own timer in [`Reducer::window_timers`]: the key, the window and its
/// activation's serial.
type WindowTimer = (KeyId, BoundedWindow, u64);

/// A key group's entries in a snapshot: encoded one after another, and where each is.
type EncodedEntries = (Vec<u8>, Vec<(usize, usize)>);

/// A window's hold in [`Reducer::holds`]: the time, then the window's activation.
type HoldEntry = (Timestamp, u64, KeyId, BoundedWindow);

/// One (key, window) of a reducer in a snapshot: the entry of a key group table (see
/// [`crate::delta`]) whose id is a [`WindowId`] and whose value is a [`WindowBody`].
#[derive(Serialize, Deserialize)]
struct WindowId {
    key: Vec<u8>,
    window: BoundedWindow,
}

/// What a snapshot holds of a (key, window).
#[derive(Serialize, Deserialize)]
struct WindowBody {
    state: WindowState,
    contents: Option<Vec<u8>>,
    timers: Vec<(TimeDomain, Timestamp)>,
}

/// A window as restore reads it.
struct WindowEntry {
    key: Vec<u8>,
    window: BoundedWindow,
    state: WindowState,
    contents: Option<Vec<u8>>,
    timers: Vec<(TimeDomain, Timestamp)>,
}

/// The id of window `w` of canonical key `key` in its key group's table.
fn window_id(key: &[u8], w: &BoundedWindow) -> Vec<u8> {
    postcard::to_allocvec(&WindowIdRef { key, window: w }).expect("snapshot parts are plain data")
}

/// A [`WindowId`] as the snapshot writes it, borrowed: the same bytes (postcard writes
/// a byte string and a sequence of bytes alike).
#[derive(Serialize)]
struct WindowIdRef<'a> {
    #[serde(serialize_with = "bytes")]
    key: &'a [u8],
    window: &'a BoundedWindow,
}

/// A [`WindowBody`] as the snapshot writes it, borrowed from the state.
#[derive(Serialize)]
struct WindowBodyRef<'a> {
    state: &'a WindowState,
    #[serde(serialize_with = "optional_bytes")]
    contents: Option<Vec<u8>>,
    timers: Vec<(TimeDomain, Timestamp)>,
}

fn bytes<S: serde::Serializer>(b: &&[u8], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_bytes(b)
}

fn optional_bytes<S: serde::Serializer>(b: &Option<Vec<u8>>, s: S) -> Result<S::Ok, S::Error> {
    match b {
        Some(b) => s.serialize_some(&BytesRef(b)),
        None => s.serialize_none(),
    }
}

/// A byte string, serialized as one.
struct BytesRef<'a>(&'a [u8]);

impl Serialize for BytesRef<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(self.0)
    }
}

/// An operator's clocks in a snapshot.
#[derive(Serialize, Deserialize)]
pub(crate) struct Clocks {
    pub(crate) input_watermark: Timestamp,
    pub(crate) output_watermark: Timestamp,
    pub(crate) processing_time: Timestamp,
}

impl Clocks {
    /// Restores clocks from a union part: the first part sets them; every later one
    /// (from another old instance) lowers the watermarks to the earliest and raises
    /// processing time to the latest.
    pub(crate) fn restore(
        self,
        restored: &mut bool,
        input_watermark: &mut Timestamp,
        output_watermark: &mut Timestamp,
        processing_time: &mut Timestamp,
    ) {
        if std::mem::replace(restored, true) {
            *input_watermark = (*input_watermark).min(self.input_watermark);
            *output_watermark = (*output_watermark).min(self.output_watermark);
            *processing_time = (*processing_time).max(self.processing_time);
        } else {
            *input_watermark = self.input_watermark;
            *output_watermark = self.output_watermark;
            *processing_time = self.processing_time;
        }
    }
}

pub(crate) fn unexpected_scope(scope: Scope, of: &str) -> ExecError {
    ExecError::Downstream(Box::new(tidewater::Error::Checkpoint {
        message: format!("{of} has no state of scope {scope:?}"),
    }))
}

fn end_of(w: &BoundedWindow) -> Timestamp {
    w.max_timestamp()
}

impl Reducer {
    /// A reducer over `state` for `strategy`.
    pub fn new(
        strategy: WindowingStrategy,
        assigner: WindowAssigner,
        state: Box<dyn ReduceFnState>,
    ) -> Self {
        let trigger =
            TriggerStateMachine::with_merging(&strategy.trigger, strategy.window_fn.is_merging());
        Reducer {
            windows: ActiveWindows::new(strategy.window_fn.is_merging()),
            strategy,
            assigner,
            trigger,
            state,
            timers: TimerService::default(),
            window_timers: BTreeMap::new(),
            spare_window_timers: Vec::new(),
            next_serial: 0,
            input_watermark: Timestamp::MIN,
            output_watermark: Timestamp::MIN,
            processing_time: Timestamp(0),
            restored_clocks: false,
            holds: BinaryHeap::new(),
            removed: Vec::new(),
            has_base: false,
            removed_overflow: false,
        }
    }

    /// When a window's state is dropped: the end of the window plus the allowed lateness.
    fn gc_time(&self, w: &BoundedWindow) -> Timestamp {
        gc_time(w, self.strategy.allowed_lateness_ms)
    }

    fn expired(&self, w: &BoundedWindow) -> bool {
        self.gc_time(w) < self.input_watermark
    }

    /// The output watermark: the input watermark held back by windows that still hold
    /// data to emit, never going backwards.
    pub fn output_watermark(&self) -> Timestamp {
        self.output_watermark
    }

    /// The input watermark the reducer has seen.
    pub fn input_watermark(&self) -> Timestamp {
        self.input_watermark
    }

    /// Moves the processing-time clock forward (before processing elements, so that
    /// processing-time triggers measure from now).
    pub fn set_processing_time(&mut self, now: Timestamp) {
        self.processing_time = self.processing_time.max(now);
    }

    /// Adds a batch of inputs and fires the panes their triggers call for.
    pub fn process(
        &mut self,
        batch: Box<dyn AnyBatch>,
        metrics: &mut StepMetrics,
    ) -> Result<(), ExecError> {
        let mut arrivals = Vec::new();
        let (mut late, mut closed) = (0i64, 0i64);
        {
            let windows = &self.windows;
            let lateness = self.strategy.allowed_lateness_ms;
            let gc = |w: &BoundedWindow| gc_time(w, lateness);
            let watermark = self.input_watermark;
            self.state.add(batch, &mut |k, w, ts| {
                if gc(&w) < watermark {
                    late += 1;
                    return false;
                }
                if windows.get(&(k, w.clone())).is_some_and(|s| s.closed) {
                    closed += 1;
                    return false;
                }
                arrivals.push((k, w, ts));
                true
            })?;
        }
        if late > 0 {
            metrics.inc_counter(DROPPED_DUE_TO_LATENESS, late);
        }
        if closed > 0 {
            metrics.inc_counter(DROPPED_DUE_TO_CLOSED_WINDOW, closed);
        }
        for (k, w, ts) in arrivals {
            let w = self.activate(k, w)?;
            self.on_element(k, w, ts)?;
        }
        self.update_output_watermark();
        Ok(())
    }

    /// Makes (k, w) active, merging it with k's other windows if the WindowFn merges;
    /// returns the window the element now belongs to.
    fn activate(&mut self, k: KeyId, w: BoundedWindow) -> Result<BoundedWindow, ExecError> {
        if !self.windows.contains_key(&(k, w.clone())) {
            let st = self.new_window_state();
            let serial = st.serial;
            register_hold(&mut self.holds, &self.strategy, k, &w, &st);
            self.windows.insert((k, w.clone()), st);
            self.set_window_timers(k, w.clone(), serial);
        }
        if !self.strategy.window_fn.is_merging() {
            return Ok(w);
        }
        // As in Beam, a window whose trigger finished takes no part in merging: new input
        // next to a closed session starts a new one.
        let active: Vec<BoundedWindow> = self
            .windows
            .of_key(k)
            .into_iter()
            .filter(|w| !self.windows[&(k, w.clone())].closed)
            .collect();
        let mut result = w;
        let merges = tidewater::exec::catch_user(std::panic::AssertUnwindSafe(|| {
            merge_windows(&self.assigner, &active)
        }))
        .map_err(|_| "the WindowFn panicked while merging windows".to_string())
        .and_then(|r| r)
        .map_err(|message| ExecError::User {
            phase: tidewater::exec::Phase::Process,
            element: Some(format!("with key {}", self.state.key_debug(k))),
            message,
        })?;
        for (from, into) in merges {
            let mut states: Vec<WindowState> = Vec::with_capacity(from.len());
            for f in &from {
                states.extend(self.remove_window(&(k, f.clone())));
            }
            for f in &from {
                self.remove_timers(k, f.clone());
            }
            self.state.merge(k, &from, into.clone())?;
            let mut timers = Vec::new();
            let trigger = {
                let trigger_states: Vec<TriggerState> =
                    states.iter().map(|s| s.trigger.clone()).collect();
                let mut ctx = TriggerContext {
                    window: into.clone(),
                    watermark: self.input_watermark,
                    processing_time: self.processing_time,
                    timers: &mut timers,
                };
                self.trigger.on_merge(&trigger_states, &mut ctx)
            };
            // Pane numbering continues in a window that absorbed others; a merge that
            // makes a new window starts its panes afresh (Beam keeps pane state per
            // window).
            let kept = from
                .iter()
                .position(|f| *f == into)
                .and_then(|p| states.get(p).filter(|_| states.len() == from.len()));
            // A window that absorbed others keeps its activation and the timers it
            // had; a new one gets its own.
            let fresh = kept.is_none();
            let serial = match kept {
                Some(s) => s.serial,
                None => {
                    self.next_serial += 1;
                    self.next_serial
                }
            };
            let merged = WindowState {
                serial,
                trigger,
                closed: states.iter().any(|s| s.closed),
                panes: kept.map_or(0, |s| s.panes),
                non_speculative_panes: kept.map_or(0, |s| s.non_speculative_panes),
                last_timing: kept.and_then(|s| s.last_timing),
                new_data: states.iter().any(|s| s.new_data),
                min_ts: states.iter().filter_map(|s| s.min_ts).min(),
                max_ts: states.iter().filter_map(|s| s.max_ts).max(),
                written: Cell::new(Written::New),
                registered: Cell::new(None),
            };
            register_hold(&mut self.holds, &self.strategy, k, &into, &merged);
            self.windows.insert((k, into.clone()), merged);
            self.add_timers(k, into.clone(), timers);
            if fresh {
                self.set_window_timers(k, into.clone(), serial);
            }
            if from.contains(&result) {
                result = into;
            }
        }
        Ok(result)
    }

    /// Removes window `kw`; one the last snapshot holds goes into the deletions of the
    /// next delta.
    fn remove_window(&mut self, kw: &(KeyId, BoundedWindow)) -> Option<WindowState> {
        let st = self.windows.remove(kw)?;
        if st.written.get() != Written::New && !self.removed_overflow {
            if self.removed.len() > self.windows.len() + 4096 {
                self.removed_overflow = true;
                self.removed = Vec::new();
            } else {
                self.removed
                    .push((self.state.key_bytes(kw.0).into(), kw.1.clone()));
            }
        }
        Some(st)
    }

    fn new_window_state(&mut self) -> WindowState {
        self.next_serial += 1;
        WindowState {
            serial: self.next_serial,
            trigger: self.trigger.initial_state(),
            closed: false,
            panes: 0,
            non_speculative_panes: 0,
            last_timing: None,
            new_data: false,
            min_ts: None,
            max_ts: None,
            written: Cell::new(Written::New),
            registered: Cell::new(None),
        }
    }

    /// The end-of-window and garbage-collection timers every window has.
    /// Sets the end-of-window and garbage-collection timers of a window that just
    /// became active (once per window: they are never moved).
    fn set_window_timers(&mut self, k: KeyId, w: BoundedWindow, serial: u64) {
        let (end, gc) = (end_of(&w), self.gc_time(&w));
        // Without allowed lateness they are one timer.
        if gc != end {
            self.push_window_timer(gc, (k, w.clone(), serial));
        }
        self.push_window_timer(end, (k, w, serial));
    }

    /// Queues a window's own timer at `at`.
    fn push_window_timer(&mut self, at: Timestamp, timer: WindowTimer) {
        let spare = &mut self.spare_window_timers;
        self.window_timers
            .entry(at)
            .or_insert_with(|| std::mem::take(spare))
            .push(timer);
    }

    /// Whether `at` in `domain` is one of `w`'s own end-of-window and
    /// garbage-collection timers, which every active window has.
    fn is_window_timer(&self, w: &BoundedWindow, domain: TimeDomain, at: Timestamp) -> bool {
        domain == TimeDomain::EventTime && (at == end_of(w) || at == self.gc_time(w))
    }

    /// The earliest due event-time timer, of a window (with its activation's serial)
    /// or of a trigger.
    fn pop_due_event_timer(&mut self) -> Option<((KeyId, BoundedWindow), Option<u64>)> {
        let wm = self.input_watermark;
        let window_first = self
            .window_timers
            .first_key_value()
            .map(|(t, _)| *t)
            .filter(|t| *t < wm);
        // Due once the watermark has passed them, as every timer.
        let trigger_first = self.timers.next(TimeDomain::EventTime).filter(|t| *t < wm);
        match (window_first, trigger_first) {
            (Some(w), t) if t.is_none_or(|t| w <= t) => {
                let mut entry = self.window_timers.first_entry().expect("a first time");
                let due = entry.get_mut().pop();
                if entry.get().is_empty() {
                    let spare = entry.remove();
                    if spare.capacity() > self.spare_window_timers.capacity() {
                        self.spare_window_timers = spare;
                    }
                }
                due.map(|(k, w, serial)| ((k, w), Some(serial)))
            }
            (_, Some(_)) => self
                .timers
                .pop_due(TimeDomain::EventTime, wm)
                .map(|t| ((t.key, t.window), None)),
            _ => None,
        }
    }

    fn add_timers(&mut self, k: KeyId, w: BoundedWindow, timers: Vec<(TimeDomain, Timestamp)>) {
        for (domain, at) in timers {
            if self.is_window_timer(&w, domain, at) {
                continue;
            }
            self.timers.set(Timer {
                key: k,
                window: w.clone(),
                name: at,
                domain,
                at,
                output: at,
            });
        }
    }

    fn on_element(&mut self, k: KeyId, w: BoundedWindow, ts: Timestamp) -> Result<(), ExecError> {
        let mut timers = Vec::new();
        let fire = {
            let st = self.windows.get_mut(&(k, w.clone())).expect("activated");
            st.new_data = true;
            // Late input (behind the output watermark) gets no hold, so it does not
            // move the pane's output time (Beam's WatermarkHold).
            if ts >= self.output_watermark {
                st.min_ts = Some(st.min_ts.map_or(ts, |m| m.min(ts)));
                st.max_ts = Some(st.max_ts.map_or(ts, |m| m.max(ts)));
            }
            let mut ctx = TriggerContext {
                window: w.clone(),
                watermark: self.input_watermark,
                processing_time: self.processing_time,
                timers: &mut timers,
            };
            self.trigger.on_element(&mut st.trigger, ts, &mut ctx);
            register_hold(&mut self.holds, &self.strategy, k, &w, st);
            self.trigger.should_fire(&st.trigger, &ctx)
        };
        self.add_timers(k, w.clone(), timers);
        if fire {
            self.fire(k, w, false)?;
        }
        Ok(())
    }

    /// Advances time: fires the panes whose timers are due, emits final panes and drops
    /// the state of windows that expired.
    pub fn advance(
        &mut self,
        input_watermark: Timestamp,
        processing_time: Timestamp,
    ) -> Result<(), ExecError> {
        self.input_watermark = self.input_watermark.max(input_watermark);
        self.processing_time = self.processing_time.max(processing_time);
        loop {
            let next = self.pop_due_event_timer().or_else(|| {
                self.timers
                    .pop_due(TimeDomain::ProcessingTime, self.processing_time)
                    .map(|t| ((t.key, t.window), None))
            });
            let Some((kw, serial)) = next else {
                break;
            };
            let expired = self.expired(&kw.1);
            // Taken as changed (`get_mut`): its timers do change, whatever comes of it.
            let Some(st) = self.windows.get_mut(&kw) else {
                continue;
            };
            if serial.is_some_and(|s| s != st.serial) {
                continue;
            }
            let (k, w) = kw;
            if expired {
                self.expire(k, w)?;
                continue;
            }
            let fire = {
                let mut none = Vec::new();
                let ctx = TriggerContext {
                    window: w.clone(),
                    watermark: self.input_watermark,
                    processing_time: self.processing_time,
                    timers: &mut none,
                };
                !st.closed && self.trigger.should_fire(&st.trigger, &ctx)
            };
            if fire {
                self.fire(k, w, false)?;
            }
        }
        self.update_output_watermark();
        Ok(())
    }

    /// The window expired: fire what the trigger still would, emit the final pane, drop
    /// everything.
    fn expire(&mut self, k: KeyId, w: BoundedWindow) -> Result<(), ExecError> {
        // Beam builds the final pane at expiry whatever the trigger says; whether it is
        // emitted is decided like every pane (new data, an on-time pane under
        // FIRE_ALWAYS, or EMIT_ALWAYS at closing).
        let kw = (k, w);
        if !self.windows[&kw].closed {
            self.fire(k, kw.1.clone(), true)?;
        }
        self.state.clear(k, kw.1.clone());
        self.remove_window(&kw);
        self.remove_timers(k, kw.1);
        // A key with no window left is forgotten, so memory follows the live keys.
        if !self.windows.has_key(k) {
            self.state.forget_key(k);
        }
        Ok(())
    }

    /// Drops every timer of (k, w), through the per-window index (no scan of all
    /// timers).
    fn remove_timers(&mut self, k: KeyId, w: BoundedWindow) {
        self.timers.delete_window(&k, w);
    }

    fn fire(&mut self, k: KeyId, w: BoundedWindow, is_final: bool) -> Result<(), ExecError> {
        let watermark = self.input_watermark;
        let mut timers = Vec::new();
        let (pane, timestamp, emit, finished) = {
            let st = self
                .windows
                .get_mut(&(k, w.clone()))
                .expect("active window");
            // Beam's PaneInfoTracker: late once an on-time or late pane went out, or once
            // the output watermark passed the window (its on-time moment is gone
            // downstream); early while the input watermark has not passed its end.
            let timing = match st.last_timing {
                Some(Timing::OnTime) | Some(Timing::Late) => Timing::Late,
                _ if self.output_watermark > end_of(&w) => Timing::Late,
                _ if watermark <= end_of(&w) => Timing::Early,
                _ => Timing::OnTime,
            };
            let mut ctx = TriggerContext {
                window: w.clone(),
                watermark,
                processing_time: self.processing_time,
                timers: &mut timers,
            };
            self.trigger.on_fire(&mut st.trigger, &mut ctx);
            let finished = self.trigger.is_finished(&st.trigger);
            let emit = st.new_data
                || (timing == Timing::OnTime
                    && self.strategy.on_time_behavior == OnTimeBehavior::FireAlways
                    && st.panes > 0)
                || (is_final && self.strategy.closing_behavior == ClosingBehavior::EmitAlways);
            let pane = PaneInfo {
                timing,
                is_first: st.panes == 0,
                is_last: finished || is_final,
                index: st.panes,
                non_speculative_index: if timing == Timing::Early {
                    -1
                } else {
                    st.non_speculative_panes
                },
            };
            let timestamp = match self.strategy.timestamp_combiner {
                TimestampCombiner::EndOfWindow => end_of(&w),
                TimestampCombiner::EarliestInPane => st.min_ts.unwrap_or(end_of(&w)),
                TimestampCombiner::LatestInPane => st.max_ts.unwrap_or(end_of(&w)).min(end_of(&w)),
            };
            if emit {
                st.panes += 1;
                if timing != Timing::Early {
                    st.non_speculative_panes += 1;
                }
                st.last_timing = Some(timing);
                st.new_data = false;
                // The output time of a pane comes from the input since the previous
                // pane, in either accumulation mode (Beam's holds are per pane).
                st.min_ts = None;
                st.max_ts = None;
            }
            if finished {
                st.closed = true;
            }
            (pane, timestamp, emit, finished)
        };
        self.add_timers(k, w.clone(), timers);
        if emit {
            let clear = self.strategy.accumulation_mode == AccumulationMode::Discarding
                || finished
                || is_final;
            self.state.emit(k, w, timestamp, pane, clear)?;
        } else if finished {
            self.state.clear(k, w);
        }
        Ok(())
    }

    fn update_output_watermark(&mut self) {
        // The output watermark never passes the input's: once it is there, no hold can
        // move it.
        if self.output_watermark >= self.input_watermark {
            return;
        }
        let hold = self.earliest_hold();
        debug_assert_eq!(
            hold,
            self.windows
                .iter()
                .filter_map(|((_, w), s)| hold_of(&self.strategy, w, s))
                .min(),
            "the hold queue does not have the earliest hold of the windows"
        );
        let candidate = match hold {
            Some(h) => h.min(self.input_watermark),
            None => self.input_watermark,
        };
        self.output_watermark = self.output_watermark.max(candidate);
    }

    /// The earliest hold of any window: the first entry of the queue that is its
    /// window's hold now (the ones before it are dropped; a window whose entry is
    /// dropped gets a new one when it holds again).
    fn earliest_hold(&mut self) -> Option<Timestamp> {
        // Past this many entries per window, mostly stale, the queue is built afresh.
        if self.holds.len() > 2 * self.windows.len() + 1024 {
            self.holds.clear();
            for ((k, w), st) in self.windows.iter() {
                st.registered.set(None);
                register_hold(&mut self.holds, &self.strategy, *k, w, st);
            }
        }
        while let Some(Reverse((t, serial, k, w))) = self.holds.peek() {
            if let Some(st) = self.windows.get(&(*k, w.clone())) {
                if st.serial == *serial && st.registered.get() == Some(*t) {
                    if hold_of(&self.strategy, w, st) == Some(*t) {
                        return Some(*t);
                    }
                    st.registered.set(None);
                }
            }
            self.holds.pop();
        }
        None
    }

    /// Everything emitted since the last call.
    pub fn take_output(&mut self) -> Box<dyn AnyBatch> {
        self.state.take_output()
    }

    /// Whether a timer is due at or before these times.
    pub fn has_due_timers(&self, watermark: Timestamp, processing_time: Timestamp) -> bool {
        self.window_timers
            .first_key_value()
            .is_some_and(|(t, _)| *t < watermark)
            || self.timers.has_due(TimeDomain::EventTime, watermark)
            || self
                .timers
                .has_due(TimeDomain::ProcessingTime, processing_time)
    }

    /// The keys the reducer knows: those with a window (for memory checks).
    pub fn live_keys(&self) -> usize {
        self.state.live_keys()
    }

    /// The earliest pending processing-time timer.
    pub fn next_processing_timer(&self) -> Option<Timestamp> {
        self.timers.next(TimeDomain::ProcessingTime)
    }

    /// The reducer's keyed state (windows, trigger states, contents, timers) as one
    /// part per key group: with [`SnapshotKind::Full`] a table of every window of each
    /// key group that holds any; with [`SnapshotKind::Delta`], once a snapshot was
    /// taken, a delta of each key group something changed in since (the windows new or
    /// changed, and those gone). Says whether the parts are a delta.
    pub fn snapshot_key_groups(
        &mut self,
        max_key_groups: u32,
        kind: SnapshotKind,
    ) -> Result<KeyedSnapshot, ExecError> {
        let delta = kind == SnapshotKind::Delta && self.has_base && !self.removed_overflow;
        // Each key group's entries sorted by id, so that the same state gives the same
        // bytes whatever the hash map's order: encoded one after another into the
        // group's buffer, then put in order by their spans.
        let wm = self.input_watermark;
        // A window's own timer is pending when the watermark has not passed it, or in
        // a time not yet handled (a window made active by late data since the last
        // advance).
        let unhandled: std::collections::HashSet<(Timestamp, KeyId, &BoundedWindow, u64)> = self
            .window_timers
            .range(..wm)
            .flat_map(|(t, ws)| ws.iter().map(move |(k, w, s)| (*t, *k, w, *s)))
            .collect();
        let mut groups: BTreeMap<u32, EncodedEntries> = BTreeMap::new();
        let (mut id, mut body) = (Vec::new(), Vec::new());
        for ((k, w), st) in self.windows.iter() {
            if delta && st.written.get() == Written::Clean {
                continue;
            }
            st.written.set(Written::Clean);
            let key = self.state.key_bytes(*k);
            let (buf, spans) = groups.entry(key_group_of(key, max_key_groups)).or_default();
            let start = buf.len();
            self.encode_entry(key, w, *k, st, wm, &unhandled, &mut id, &mut body, buf)?;
            spans.push((start, buf.len()));
        }
        let mut deleted: BTreeMap<u32, Vec<Vec<u8>>> = BTreeMap::new();
        if delta {
            for (key, w) in &self.removed {
                deleted
                    .entry(key_group_of(key, max_key_groups))
                    .or_default()
                    .push(window_id(key, w));
            }
        }
        self.removed.clear();
        self.removed_overflow = false;
        self.has_base = true;
        let mut parts = Vec::with_capacity(groups.len() + deleted.len());
        let mut written = groups.into_iter().peekable();
        let mut gone = deleted.into_iter().peekable();
        loop {
            // The next key group with new or changed entries, deletions, or both.
            let g = match (written.peek(), gone.peek()) {
                (Some((a, _)), Some((b, _))) => *a.min(b),
                (Some((a, _)), None) => *a,
                (None, Some((b, _))) => *b,
                (None, None) => break,
            };
            let (buf, mut spans) = match written.peek() {
                Some((a, _)) if *a == g => written.next().expect("peeked").1,
                _ => Default::default(),
            };
            spans.sort_unstable_by(|a, b| entry_id(&buf[a.0..a.1]).cmp(entry_id(&buf[b.0..b.1])));
            let entries: Vec<&[u8]> = spans.iter().map(|&(a, b)| &buf[a..b]).collect();
            if !delta {
                let mut out = Vec::with_capacity(buf.len() + 10);
                encode_table_len(entries.len(), &mut out);
                for e in &entries {
                    out.extend_from_slice(e);
                }
                parts.push((Scope::KeyGroup(g), out));
                continue;
            }
            let mut ids = match gone.peek() {
                Some((b, _)) if *b == g => gone.next().expect("peeked").1,
                _ => Vec::new(),
            };
            ids.sort_unstable();
            ids.dedup();
            let ids: Vec<&[u8]> = ids.iter().map(|i| &i[..]).collect();
            parts.push((Scope::KeyGroupDelta(g), encode_delta(&ids, &entries)));
        }
        Ok(KeyedSnapshot {
            parts,
            later: None,
            delta,
        })
    }

    /// Appends to `out` the table entry of window `w` of key `k` (canonical key `key`,
    /// state `st`), with the input watermark `wm` and the window timers below it not
    /// yet handled; `id` and `body` are scratch space.
    #[allow(clippy::too_many_arguments)]
    fn encode_entry(
        &self,
        key: &[u8],
        w: &BoundedWindow,
        k: KeyId,
        st: &WindowState,
        wm: Timestamp,
        unhandled: &std::collections::HashSet<(Timestamp, KeyId, &BoundedWindow, u64)>,
        id: &mut Vec<u8>,
        body: &mut Vec<u8>,
        out: &mut Vec<u8>,
    ) -> Result<(), ExecError> {
        let (end, gc) = (end_of(w), self.gc_time(w));
        let mut timers: Vec<(TimeDomain, Timestamp)> = [end, gc]
            .into_iter()
            .enumerate()
            .filter(|&(i, t)| {
                (i == 0 || t != end) && (t >= wm || unhandled.contains(&(t, k, w, st.serial)))
            })
            .map(|(_, t)| (TimeDomain::EventTime, t))
            .collect();
        timers.extend(
            self.timers
                .of(&k, w.clone())
                .into_iter()
                .map(|t| (t.domain, t.at)),
        );
        let value = WindowBodyRef {
            state: st,
            contents: self.state.encode_contents(k, w.clone())?,
            timers,
        };
        id.clear();
        body.clear();
        *id = postcard::to_extend(&WindowIdRef { key, window: w }, std::mem::take(id))
            .expect("snapshot parts are plain data");
        *body = postcard::to_extend(&value, std::mem::take(body))
            .expect("snapshot parts are plain data");
        encode_entry(id, body, out);
        Ok(())
    }

    /// Adds a key group written by [`Reducer::snapshot_key_groups`].
    pub fn restore_key_group(&mut self, bytes: &[u8]) -> Result<(), ExecError> {
        let downstream = |e: tidewater::Error| ExecError::Downstream(Box::new(e));
        for (id, body) in decode_table(bytes).map_err(downstream)? {
            let WindowId { key, window } = decode_part(id, "a reducer window's id")?;
            let WindowBody {
                state,
                contents,
                timers,
            } = decode_part(body, "a reducer window")?;
            let e = WindowEntry {
                key,
                window,
                state,
                contents,
                timers,
            };
            // The trigger's methods index its state by node: a state of another shape
            // would panic at the next element or timer.
            if !self.trigger.is_state_for(&e.state.trigger) {
                return Err(ExecError::Downstream(Box::new(
                    tidewater::Error::Checkpoint {
                        message: format!(
                            "the trigger state of window {:?} does not fit the trigger",
                            e.window
                        ),
                    },
                )));
            }
            let k = self.state.intern_key(&e.key)?;
            if let Some(c) = &e.contents {
                self.state.restore_contents(k, e.window.clone(), c)?;
            }
            let mut st = e.state;
            self.next_serial += 1;
            st.serial = self.next_serial;
            register_hold(&mut self.holds, &self.strategy, k, &e.window, &st);
            self.windows.insert((k, e.window.clone()), st);
            // The window's own timers that were pending go back into their queue.
            for &(domain, at) in &e.timers {
                if self.is_window_timer(&e.window, domain, at) {
                    self.push_window_timer(at, (k, e.window.clone(), self.next_serial));
                }
            }
            self.add_timers(k, e.window, e.timers);
        }
        Ok(())
    }

    /// The clocks, for a snapshot.
    pub(crate) fn clocks(&self) -> Clocks {
        Clocks {
            input_watermark: self.input_watermark,
            output_watermark: self.output_watermark,
            processing_time: self.processing_time,
        }
    }

    /// Restores the clocks of one old instance (see [`Clocks::restore`]).
    pub(crate) fn restore_clocks(&mut self, c: Clocks) {
        c.restore(
            &mut self.restored_clocks,
            &mut self.input_watermark,
            &mut self.output_watermark,
            &mut self.processing_time,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The borrowed forms the snapshot writes decode as the owned forms restore reads,
    /// byte for byte.
    #[test]
    fn window_entries_encode_alike_borrowed_and_owned() {
        let state = WindowState {
            serial: 7,
            trigger: postcard::from_bytes(&[0]).expect("a trigger state"),
            closed: false,
            panes: 2,
            non_speculative_panes: 1,
            last_timing: None,
            new_data: true,
            min_ts: Some(Timestamp(5)),
            max_ts: Some(Timestamp(900)),
            written: Cell::default(),
            registered: Cell::default(),
        };
        let window = BoundedWindow::Interval {
            start: Timestamp(0),
            end: Timestamp(1000),
        };
        let timers = vec![
            (TimeDomain::EventTime, Timestamp(999)),
            (TimeDomain::ProcessingTime, Timestamp(42)),
        ];
        for key in [&b"apple"[..], &[][..]] {
            let id = window_id(key, &window);
            let owned_id = WindowId {
                key: key.to_vec(),
                window: window.clone(),
            };
            assert_eq!(id, postcard::to_allocvec(&owned_id).unwrap());
            let back: WindowId = postcard::from_bytes(&id).unwrap();
            assert_eq!((&back.key[..], &back.window), (key, &window));
        }
        for contents in [Some(vec![1, 2, 3, 200]), None] {
            let borrowed = WindowBodyRef {
                state: &state,
                contents: contents.clone(),
                timers: timers.clone(),
            };
            let owned = WindowBody {
                state: state.clone(),
                contents: contents.clone(),
                timers: timers.clone(),
            };
            let bytes = postcard::to_allocvec(&borrowed).unwrap();
            assert_eq!(bytes, postcard::to_allocvec(&owned).unwrap());
            let back: WindowBody = postcard::from_bytes(&bytes).unwrap();
            assert_eq!(back.contents, contents);
            assert_eq!(back.timers, timers);
        }
    }
}
