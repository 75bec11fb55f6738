//! What a reducer tells about its windows ("why hasn't my window fired?"): the oldest
//! window still holding data back, what its trigger waits for (asked of the trigger's
//! state machine), and what was dropped as late. A running engine asks about once a
//! second, off the per-record path.

use super::active::hold_of;
use super::Reducer;
use crate::triggers::{show, TriggerContext, Wait};
use crate::windowing::gc_time;
use serde::{Deserialize, Serialize};
use std::cmp::Reverse;
use tidewater::{BoundedWindow, Timestamp};

/// A keyed operator's windows, as it reports them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WindowReport {
    /// Its input watermark, in ms (`None`: none yet).
    pub input_watermark_ms: Option<i64>,
    /// Its output watermark, in ms.
    pub output_watermark_ms: Option<i64>,
    /// Windows open (per key).
    pub open_windows: u64,
    /// The window holding the output watermark back the longest, if one holds.
    pub oldest: Option<OpenWindow>,
    /// Elements dropped because their window had expired (past its end plus the
    /// allowed lateness), since the operator started (a restore starts afresh).
    pub dropped_late: u64,
    /// Elements dropped because their window's trigger had finished.
    pub dropped_closed: u64,
    /// The last element dropped.
    pub last_dropped: Option<DroppedElement>,
    /// The windowing's allowed lateness, in ms.
    pub allowed_lateness_ms: i64,
    /// A stateful DoFn's pending timers (`None` for a grouping).
    #[serde(default)]
    pub timers: Option<TimersReport>,
}

impl WindowReport {
    /// The event time its output waits for the watermark to pass: its oldest window's
    /// end, or its earliest event-time timer ([`i64::MAX`]: nothing waits). Of a
    /// keyed task's instances, the one that waits for the earliest says the most.
    pub fn waits_until_ms(&self) -> i64 {
        let timer = self
            .timers
            .as_ref()
            .and_then(|t| t.next_event_time.as_ref())
            .map(|t| t.at_ms);
        let window = self.oldest.as_ref().map(|o| o.end_ms);
        timer.or(window).unwrap_or(i64::MAX)
    }

    /// Whether it has anything to say: a grouping always does (even that no window
    /// holds input back); a stateful DoFn only with timers pending or input dropped
    /// (one without emits as elements arrive, waiting for nothing).
    pub fn says_something(&self) -> bool {
        self.timers.as_ref().is_none_or(|t| t.pending > 0)
            || self.dropped_late + self.dropped_closed > 0
    }
}

/// A stateful DoFn's pending timers: what its output waits for.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TimersReport {
    /// Timers pending.
    pub pending: u64,
    /// The earliest event-time timer: it fires once the input watermark passes it.
    pub next_event_time: Option<PendingTimer>,
    /// The earliest processing-time timer: it fires once the clock passes it.
    pub next_processing_time: Option<PendingTimer>,
    /// The processing time the operator last saw, in ms.
    pub processing_time_ms: i64,
}

/// A pending timer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PendingTimer {
    /// The DoFn's name for it.
    pub name: String,
    /// Its key, as its type's `Debug` shows it.
    pub key: String,
    /// The key's key group.
    pub key_group: Option<u32>,
    /// Its window.
    pub window: String,
    /// When it fires, in ms.
    pub at_ms: i64,
}

/// An open window.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OpenWindow {
    /// Its key, as its coder shows it.
    pub key: String,
    /// The key's key group, when the operator knows how many there are.
    pub key_group: Option<u32>,
    /// The window.
    pub window: String,
    /// Its end (max timestamp), in ms.
    pub end_ms: i64,
    /// When it expires (its end plus the allowed lateness), in ms.
    pub expires_ms: i64,
    /// Panes it emitted so far.
    pub panes: u64,
    /// What its trigger waits for.
    pub waiting_for: Wait,
}

/// A dropped element.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DroppedElement {
    /// Its timestamp, in ms.
    pub timestamp_ms: i64,
    /// Its window.
    pub window: String,
    /// Why: `late` (the window had expired) or `closed` (its trigger had finished).
    pub reason: String,
    /// The input watermark then, in ms.
    pub watermark_ms: Option<i64>,
}

/// A window as the reports show it.
pub fn show_window(w: &BoundedWindow) -> String {
    match w {
        BoundedWindow::Global => "the global window".into(),
        _ => format!("[{}, {})", show(w.start()), show(w.end())),
    }
}

pub(crate) fn ms(t: Timestamp) -> Option<i64> {
    (t > Timestamp::MIN).then(|| t.millis())
}

impl Reducer {
    /// Records an element dropped before it reached a window.
    pub(super) fn note_dropped(&mut self, ts: Timestamp, w: &BoundedWindow, late: bool) {
        self.last_dropped = Some(DroppedElement {
            timestamp_ms: ts.millis(),
            window: show_window(w),
            reason: if late { "late" } else { "closed" }.into(),
            watermark_ms: ms(self.input_watermark),
        });
    }

    /// The report now; `max_key_groups` places the key (when known).
    pub fn report(&mut self, max_key_groups: Option<u32>) -> WindowReport {
        let oldest = self.earliest_hold().and_then(|_| {
            let Reverse((_, _, k, w)) = self.holds.peek()?.clone();
            let st = self.windows.get(&(k, w.clone()))?;
            debug_assert!(hold_of(&self.strategy, &w, st).is_some());
            let mut timers = Vec::new();
            let ctx = TriggerContext::new(
                w.clone(),
                self.input_watermark,
                self.processing_time,
                &mut timers,
            );
            let waiting_for = if st.closed {
                Wait::Finished
            } else {
                self.trigger.waiting_for(&st.trigger, &ctx)
            };
            Some(OpenWindow {
                key: self.state.key_debug(k),
                key_group: max_key_groups
                    .map(|max| tidewater::exec::key_group_of(self.state.key_bytes(k), max)),
                window: show_window(&w),
                end_ms: w.max_timestamp().millis(),
                expires_ms: gc_time(&w, self.strategy.allowed_lateness_ms).millis(),
                panes: st.panes,
                waiting_for,
            })
        });
        WindowReport {
            input_watermark_ms: ms(self.input_watermark),
            output_watermark_ms: ms(self.output_watermark),
            // In memory and in the store.
            open_windows: (self.windows.len() + self.cold.as_ref().map_or(0, |c| c.windows()))
                as u64,
            oldest,
            dropped_late: self.dropped_late,
            dropped_closed: self.dropped_closed,
            last_dropped: self.last_dropped.clone(),
            allowed_lateness_ms: self.strategy.allowed_lateness_ms,
            timers: None,
        }
    }
}
