//! A test driver like Beam's `TriggerStateMachineTester`: assigns elements (whose
//! timestamps double as values) to windows, keeps one state per window, merges
//! overlapping session windows on request, and fires the way a reducer would.
//!
//! As in Beam's tester, merging happens only when a test calls `merge_windows`, and an
//! element assigned to a window that the last merge absorbed goes to the merge result.
//! A window whose trigger finished is closed, as Beam's tester removes it from the
//! active windows: it takes no more elements and no part in merges.

use super::{TimeDomain, TriggerContext, TriggerState, TriggerStateMachine};
use std::collections::{BTreeMap, HashMap};
use tidewater::{BoundedWindow, Timestamp, Trigger};

/// The interval window `[start, end)`.
pub(crate) fn iw(start: i64, end: i64) -> BoundedWindow {
    BoundedWindow::Interval {
        start: Timestamp(start),
        end: Timestamp(end),
    }
}

/// The window functions the tests need (the real ones live with the reducer).
#[derive(Clone, Copy, Debug)]
pub(crate) enum WindowFn {
    Global,
    Fixed(i64),
    Sliding { size: i64, period: i64 },
    Sessions(i64),
}

impl WindowFn {
    fn assign(self, ts: i64) -> Vec<BoundedWindow> {
        match self {
            WindowFn::Global => vec![BoundedWindow::Global],
            WindowFn::Fixed(size) => {
                let start = ts.div_euclid(size) * size;
                vec![iw(start, start + size)]
            }
            WindowFn::Sliding { size, period } => {
                let last_start = ts.div_euclid(period) * period;
                let mut windows = Vec::new();
                let mut start = last_start;
                while start > ts - size {
                    windows.push(iw(start, start + size));
                    start -= period;
                }
                windows
            }
            WindowFn::Sessions(gap) => vec![iw(ts, ts + gap)],
        }
    }

    fn is_merging(self) -> bool {
        matches!(self, WindowFn::Sessions(_))
    }
}

fn bounds(w: &BoundedWindow) -> (Timestamp, Timestamp) {
    match w {
        BoundedWindow::Global => (Timestamp::MIN, Timestamp::MAX),
        w => (w.start(), w.end()),
    }
}

pub(crate) struct Tester {
    machine: TriggerStateMachine,
    window_fn: WindowFn,
    watermark: Timestamp,
    processing_time: Timestamp,
    active: BTreeMap<BoundedWindow, TriggerState>,
    closed: BTreeMap<BoundedWindow, TriggerState>,
    merge_result: HashMap<BoundedWindow, BoundedWindow>,
    timers: Vec<(BoundedWindow, TimeDomain, Timestamp)>,
}

impl Tester {
    /// A tester for `trigger`, compiled for merging if the WindowFn merges.
    pub(crate) fn new(trigger: impl Into<Trigger>, window_fn: WindowFn) -> Self {
        let trigger = trigger.into();
        Self::with_machine(
            TriggerStateMachine::with_merging(&trigger, window_fn.is_merging()),
            window_fn,
        )
    }

    pub(crate) fn with_machine(machine: TriggerStateMachine, window_fn: WindowFn) -> Self {
        Tester {
            machine,
            window_fn,
            watermark: Timestamp::MIN,
            processing_time: Timestamp::MIN,
            active: BTreeMap::new(),
            closed: BTreeMap::new(),
            merge_result: HashMap::new(),
            timers: Vec::new(),
        }
    }

    pub(crate) fn machine(&self) -> &TriggerStateMachine {
        &self.machine
    }

    /// Runs `f` with a context for `window`, recording the timers it requests.
    fn with_ctx<R>(
        &mut self,
        window: BoundedWindow,
        f: impl FnOnce(&TriggerStateMachine, &mut TriggerContext<'_>) -> R,
    ) -> R {
        let mut timers = Vec::new();
        let result = {
            let mut ctx = TriggerContext::new(
                window.clone(),
                self.watermark,
                self.processing_time,
                &mut timers,
            );
            f(&self.machine, &mut ctx)
        };
        // Setting a timer again is a no-op, as in Beam's timer internals.
        for (domain, at) in timers {
            if !self.timers.contains(&(window.clone(), domain, at)) {
                self.timers.push((window.clone(), domain, at));
            }
        }
        result
    }

    /// Elements with these timestamps, each in the windows the WindowFn assigns.
    pub(crate) fn inject(&mut self, timestamps: &[i64]) {
        for &ts in timestamps {
            for assigned in self.window_fn.assign(ts) {
                let window = self
                    .merge_result
                    .get(&assigned)
                    .cloned()
                    .unwrap_or(assigned);
                if self.closed.contains_key(&window) {
                    continue; // dropped, as a reducer drops data for a closed window
                }
                let mut state = self
                    .active
                    .remove(&window)
                    .unwrap_or_else(|| self.machine.initial_state());
                self.with_ctx(window.clone(), |m, ctx| {
                    m.on_element(&mut state, Timestamp(ts), ctx)
                });
                self.active.insert(window, state);
            }
        }
    }

    pub(crate) fn advance_watermark(&mut self, to: i64) {
        self.watermark = Timestamp(to);
    }

    pub(crate) fn advance_processing_time(&mut self, to: i64) {
        self.processing_time = Timestamp(to);
    }

    /// The state of `window`: active, closed, or that of a window never seen.
    pub(crate) fn state(&self, window: &BoundedWindow) -> TriggerState {
        self.active
            .get(window)
            .or_else(|| self.closed.get(window))
            .cloned()
            .unwrap_or_else(|| self.machine.initial_state())
    }

    pub(crate) fn should_fire(&mut self, window: &BoundedWindow) -> bool {
        let state = self.state(window);
        self.with_ctx(window.clone(), |m, ctx| m.should_fire(&state, ctx))
    }

    /// Fires `window` if its trigger is ready; returns whether it fired.
    pub(crate) fn fire_if_should_fire(&mut self, window: &BoundedWindow) -> bool {
        let mut state = self.state(window);
        let fired = self.with_ctx(window.clone(), |m, ctx| {
            let fire = m.should_fire(&state, ctx);
            if fire {
                m.on_fire(&mut state, ctx);
            }
            fire
        });
        if self.machine.is_finished(&state) {
            self.active.remove(window);
            self.closed.insert(window.clone(), state);
        } else if fired {
            self.active.insert(window.clone(), state);
        }
        fired
    }

    pub(crate) fn is_finished(&self, window: &BoundedWindow) -> bool {
        self.machine.is_finished(&self.state(window))
    }

    /// Merges the overlapping active windows (sessions), calling on_merge once per
    /// merge result.
    pub(crate) fn merge_windows(&mut self) {
        self.merge_result.clear();
        if !self.window_fn.is_merging() {
            return;
        }
        let mut groups: Vec<Vec<BoundedWindow>> = Vec::new();
        let mut union_end = Timestamp::MIN;
        let mut windows: Vec<BoundedWindow> = self.active.keys().cloned().collect();
        windows.sort_by_key(bounds);
        for w in windows {
            let (start, end) = bounds(&w);
            match groups.last_mut() {
                Some(group) if start < union_end => {
                    group.push(w);
                    union_end = union_end.max(end);
                }
                _ => {
                    groups.push(vec![w]);
                    union_end = end;
                }
            }
        }
        for group in groups.into_iter().filter(|g| g.len() > 1) {
            let start = group.iter().map(|w| bounds(w).0).min().unwrap();
            let end = group.iter().map(|w| bounds(w).1).max().unwrap();
            let result = BoundedWindow::Interval { start, end };
            let merging: Vec<TriggerState> = group
                .iter()
                .map(|w| self.active.remove(w).unwrap())
                .collect();
            let merged = self.with_ctx(result.clone(), |m, ctx| m.on_merge(&merging, ctx));
            for w in group {
                self.merge_result.insert(w, result.clone());
            }
            self.active.insert(result, merged);
        }
    }

    /// The distinct timers requested since the last call, with their windows, in order.
    pub(crate) fn take_timers(&mut self) -> Vec<(BoundedWindow, TimeDomain, Timestamp)> {
        std::mem::take(&mut self.timers)
    }
}
