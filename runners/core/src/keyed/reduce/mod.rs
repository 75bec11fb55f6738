//! The group-also-by-window reducer (Beam's `ReduceFnRunner`): for each key and window
//! it buffers or combines inputs, merges windows, drops late data, asks the trigger when
//! to fire, and emits panes with their timing, index and timestamp. One reducer per
//! grouping transform; every runner uses it.

use crate::timers::{Timer, TimerService};
use crate::triggers::{TimeDomain, TriggerContext, TriggerState, TriggerStateMachine};
use crate::windowing::{gc_time, merge_windows, WindowAssigner};
use std::cell::Cell;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use tidewater::exec::{Accept, AnyBatch, ExecError, KeyId, ReduceFnState, StepMetrics};
use tidewater::{
    AccumulationMode, BoundedWindow, ClosingBehavior, OnTimeBehavior, PaneInfo, Timestamp,
    TimestampCombiner, Timing, WindowingStrategy,
};

mod active;
mod cold;
mod paging;
pub(crate) mod report;
mod wire;
pub use cold::HOT_WINDOWS;
pub use wire::{decode_key_group, WindowView};

pub use report::{
    show_window, DroppedElement, OpenWindow, PendingTimer, TimersReport, WindowReport,
};

use active::{
    end_of, hold_of, register_hold, ActiveWindows, HoldEntry, MaybeTs, WindowState, Written,
};

/// Counter of elements dropped because their window had expired.
pub const DROPPED_DUE_TO_LATENESS: &str = "dropped_due_to_lateness";
/// Counter of elements dropped because their window's trigger had finished.
pub const DROPPED_DUE_TO_CLOSED_WINDOW: &str = "dropped_due_to_closed_window";

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
    /// The timers a trigger asks for in one call, reused from call to call (a call per
    /// element).
    requested: Vec<(TimeDomain, Timestamp)>,
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
    /// Elements dropped since the start: late (their window expired), and into a
    /// window whose trigger had finished; the last one (for [`Reducer::report`]).
    dropped_late: u64,
    dropped_closed: u64,
    last_dropped: Option<DroppedElement>,
    /// The windows beyond the budget kept in memory, in the store (none: all in
    /// memory).
    cold: Option<cold::Cold>,
    /// Bundles processed: when each window was last touched.
    tick: u32,
    /// Panes emitted by the current `advance`.
    emitted: usize,
}

/// A window's own timer in [`Reducer::window_timers`]: the key, the window and its
/// activation's serial.
type WindowTimer = (KeyId, BoundedWindow, u64);

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
            requested: Vec::new(),
            input_watermark: Timestamp::MIN,
            output_watermark: Timestamp::MIN,
            processing_time: Timestamp(0),
            restored_clocks: false,
            holds: BinaryHeap::new(),
            removed: Vec::new(),
            has_base: false,
            removed_overflow: false,
            dropped_late: 0,
            dropped_closed: 0,
            last_dropped: None,
            cold: None,
            tick: 0,
            emitted: 0,
        }
    }

    /// The reducer with its windows beyond a budget in the store of `state`'s kind
    /// (unchanged when state is in memory), for keys hashed into `max_key_groups`.
    pub fn with_store(
        mut self,
        state: &crate::state::StateChoice,
        max_key_groups: u32,
    ) -> tidewater::Result<Self> {
        self.cold = cold::Cold::open(state, max_key_groups, self.strategy.window_fn.is_merging())?;
        Ok(self)
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
        self.tick = self.tick.wrapping_add(1);
        let mut arrivals = Vec::new();
        let (mut late, mut closed) = (0i64, 0i64);
        let mut last_dropped = None;
        let mut paged = paging::Paged::default();
        let mut failed = None;
        {
            let windows = &self.windows;
            let cold = &mut self.cold;
            let lateness = self.strategy.allowed_lateness_ms;
            let gc = |w: &BoundedWindow| gc_time(w, lateness);
            let watermark = self.input_watermark;
            self.state.add(batch, &mut |k, key, w, ts| {
                if gc(&w) < watermark {
                    late += 1;
                    last_dropped = Some((ts, w, true));
                    return Accept::Drop;
                }
                let mut restore = None;
                if let Some(s) = windows.get(&(k, w.clone())) {
                    if s.closed {
                        closed += 1;
                        last_dropped = Some((ts, w, false));
                        return Accept::Drop;
                    }
                } else if let Some(cold) = cold.as_mut() {
                    // A window in the store comes back before its input is added.
                    match paging::page_in(cold, &mut paged, key, &w) {
                        Ok(Some(e)) if e.state.closed => {
                            closed += 1;
                            last_dropped = Some((ts, w, false));
                            return Accept::Drop;
                        }
                        Ok(Some(e)) => restore = e.contents.take(),
                        Ok(None) => {}
                        Err(e) => {
                            failed.get_or_insert(e);
                            return Accept::Drop;
                        }
                    }
                }
                arrivals.push((k, w, ts));
                match restore {
                    Some(c) => Accept::Restore(c),
                    None => Accept::Take,
                }
            })?;
        }
        if let Some(e) = failed {
            return Err(e);
        }
        self.install_paged(paged)?;
        if let Some((ts, w, is_late)) = last_dropped {
            self.note_dropped(ts, &w, is_late);
        }
        self.dropped_late += late as u64;
        self.dropped_closed += closed as u64;
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
        self.evict()?;
        self.flush_store()
    }

    /// The end of a bundle for the store, if windows go there.
    fn flush_store(&mut self) -> Result<(), ExecError> {
        match self.cold.as_mut() {
            Some(c) => c.flush(),
            None => Ok(()),
        }
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
                min_ts: states.iter().filter_map(|s| s.min_ts.get()).min().into(),
                max_ts: states.iter().filter_map(|s| s.max_ts.get()).max().into(),
                written: Cell::new(Written::New),
                registered: Cell::default(),
                touched: self.tick,
            };
            register_hold(&mut self.holds, &self.strategy, k, &into, &merged);
            self.windows.insert((k, into.clone()), merged);
            self.add_timers(k, into.clone(), &mut timers);
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
        if self.has_base && st.written.get() != Written::New && !self.removed_overflow {
            // Past as many as memory holds windows, the next snapshot is full instead
            // (with windows in the store, past as many as memory holds at most: the
            // deletions are kept in memory).
            let held = self.windows.len() + self.cold.as_ref().map_or(0, |c| c.budget.max(4096));
            if self.removed.len() > held + 4096 {
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
            min_ts: MaybeTs::NONE,
            max_ts: MaybeTs::NONE,
            written: Cell::new(Written::New),
            registered: Cell::default(),
            touched: self.tick,
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

    /// Sets the timers a trigger asked for, emptying `timers`.
    fn add_timers(
        &mut self,
        k: KeyId,
        w: BoundedWindow,
        timers: &mut Vec<(TimeDomain, Timestamp)>,
    ) {
        for (domain, at) in timers.drain(..) {
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
        let mut timers = std::mem::take(&mut self.requested);
        let fire = {
            let st = self.windows.get_mut(&(k, w.clone())).expect("activated");
            st.new_data = true;
            st.touched = self.tick;
            // Late input (behind the output watermark) gets no hold, so it does not
            // move the pane's output time (Beam's WatermarkHold).
            if ts >= self.output_watermark {
                st.min_ts = Some(st.min_ts.get().map_or(ts, |m| m.min(ts))).into();
                st.max_ts = Some(st.max_ts.get().map_or(ts, |m| m.max(ts))).into();
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
        self.add_timers(k, w.clone(), &mut timers);
        self.requested = timers;
        if fire {
            self.fire(k, w, false)?;
        }
        Ok(())
    }

    /// Advances time: fires the panes whose timers are due, emits final panes and drops
    /// the state of windows that expired. Stops after
    /// [`crate::timers::ADVANCE_SLICE`] panes with timers still due (see
    /// [`Reducer::has_due_timers`]): call again once they went on.
    pub fn advance(
        &mut self,
        input_watermark: Timestamp,
        processing_time: Timestamp,
    ) -> Result<(), ExecError> {
        self.input_watermark = self.input_watermark.max(input_watermark);
        self.processing_time = self.processing_time.max(processing_time);
        let mut steps = 0u32;
        self.emitted = 0;
        loop {
            if self.emitted >= crate::timers::ADVANCE_SLICE
                && self.has_due_timers(self.input_watermark, self.processing_time)
            {
                // A slice is out: the engine takes it downstream and advances again.
                // The output watermark stays where it was until the last slice, as if
                // every pane had fired at once.
                self.evict()?;
                return self.flush_store();
            }
            // Windows in the store whose wake is due come back first, in time order
            // with those in memory; windows that stay (fired, not expired) go back
            // out as they pile up.
            if self.page_in_due()? {
                continue;
            }
            steps = steps.wrapping_add(1);
            if steps.is_multiple_of(1024) {
                self.compact_holds();
                if self
                    .cold
                    .as_ref()
                    .is_some_and(|c| self.windows.len() > 2 * c.budget)
                {
                    self.evict()?;
                }
            }
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
        self.evict()?;
        self.flush_store()
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
        let mut timers = std::mem::take(&mut self.requested);
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
                TimestampCombiner::EarliestInPane => st.min_ts.get().unwrap_or(end_of(&w)),
                TimestampCombiner::LatestInPane => {
                    st.max_ts.get().unwrap_or(end_of(&w)).min(end_of(&w))
                }
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
                st.min_ts = MaybeTs::NONE;
                st.max_ts = MaybeTs::NONE;
            }
            if finished {
                st.closed = true;
            }
            (pane, timestamp, emit, finished)
        };
        self.add_timers(k, w.clone(), &mut timers);
        self.requested = timers;
        if emit {
            self.emitted += 1;
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
        // Windows in the store hold where the store's hold queue says, whether due or
        // not (between the slices of an advance, or restored there before the
        // clocks): nothing comes back for the watermark. (Bringing back every window
        // due would bring back all of them at a bounded input's end, where the
        // watermark passes every wake at once.)
        let cold_hold = self.cold.as_ref().and_then(|c| c.earliest_hold());
        let hold = self.earliest_hold();
        debug_assert_eq!(
            hold,
            self.windows
                .iter()
                .filter_map(|((_, w), s)| hold_of(&self.strategy, w, s))
                .min(),
            "the hold queue does not have the earliest hold of the windows"
        );
        let candidate = [hold, cold_hold]
            .into_iter()
            .flatten()
            .fold(self.input_watermark, Timestamp::min);
        self.output_watermark = self.output_watermark.max(candidate);
    }

    /// The earliest hold of any window: the first entry of the queue that is its
    /// window's hold now (the ones before it are dropped; a window whose entry is
    /// dropped gets a new one when it holds again).
    fn earliest_hold(&mut self) -> Option<Timestamp> {
        self.compact_holds();
        while let Some(Reverse((t, serial, k, w))) = self.holds.peek() {
            if let Some(st) = self.windows.get(&(*k, w.clone())) {
                if st.serial == *serial && st.registered.get().get() == Some(*t) {
                    if hold_of(&self.strategy, w, st) == Some(*t) {
                        return Some(*t);
                    }
                    st.registered.set(MaybeTs::NONE);
                }
            }
            self.holds.pop();
        }
        None
    }

    /// Past two entries per window, mostly stale, builds the hold queue afresh (each
    /// window that comes and goes leaves its entry there: at a bounded input's end, a
    /// store's every window).
    fn compact_holds(&mut self) {
        if self.holds.len() > 2 * self.windows.len() + 1024 {
            self.holds = BinaryHeap::new();
            for ((k, w), st) in self.windows.iter() {
                st.registered.set(MaybeTs::NONE);
                register_hold(&mut self.holds, &self.strategy, *k, w, st);
            }
        }
    }

    /// Everything emitted since the last call, in batches.
    pub fn take_output(&mut self) -> Vec<Box<dyn AnyBatch>> {
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
            || self.cold_due(watermark, processing_time)
    }

    /// The keys the reducer knows: those with a window (for memory checks).
    pub fn live_keys(&self) -> usize {
        self.state.live_keys()
    }

    /// The earliest pending processing-time timer.
    pub fn next_processing_timer(&self) -> Option<Timestamp> {
        let cold = self
            .cold
            .as_ref()
            .and_then(|c| c.next(TimeDomain::ProcessingTime));
        match (self.timers.next(TimeDomain::ProcessingTime), cold) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}
