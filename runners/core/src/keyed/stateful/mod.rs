//! Runs a stateful DoFn: state per key and window in a [`StateBackend`], event- and
//! processing-time timers, watermark holds from pending timers, and garbage collection
//! of a window's state and timers once it expires.

use crate::keyed::operator::KeyedOperator;
use crate::keyed::reduce::report::ms;
use crate::keyed::reduce::{
    show_window, DroppedElement, PendingTimer, TimersReport, WindowReport, DROPPED_DUE_TO_LATENESS,
};
use crate::keyed::snapshot::{
    unexpected_scope, Clocks, KeyedSnapshot, LaterParts, ScopedParts, SnapshotKind,
};
use crate::snapshot::{decode_part, encode_part, Scope};
use crate::state::{decode_cell, decode_cells, CellEntry, KeyedTimers, StateBackend, StateChoice};
use crate::timers::{Timer, ADVANCE_SLICE};
use crate::windowing::gc_time;
use std::borrow::Cow;
use tidewater::exec::{
    key_group_of, AnyBatch, ErasedStatefulDoFn, ExecError, FiredTimer, StateAccess, StateCells,
    StepMetrics, TimeDomain, BATCH_SIZE,
};
use tidewater::{BoundedWindow, Timestamp};

pub use crate::state::KeyTimer;

mod changes;
mod files;
mod wire;

use changes::Changes;
use wire::{read_key_group, KeyGroupPart};

/// A key group part of a stateful runner ([`StatefulRunner::snapshot`]), for an
/// offline reader: its cells and its timers.
pub fn decode_key_group(bytes: &[u8]) -> Result<(Vec<CellEntry>, Vec<KeyTimer>), ExecError> {
    match read_key_group(bytes)? {
        KeyGroupPart::Windows(windows, timers) => {
            let mut cells = Vec::new();
            for w in windows {
                for (name, bytes) in w.cells {
                    cells.push(CellEntry {
                        key: w.key.to_vec(),
                        window: w.window.clone(),
                        name: name.to_string(),
                        contents: decode_cell(bytes).map_err(state_failed)?,
                    });
                }
            }
            Ok((cells, timers))
        }
        KeyGroupPart::Old(st) if st.cells.is_empty() => Ok((Vec::new(), st.timers)),
        KeyGroupPart::Old(st) => Ok((decode_cells(&st.cells).map_err(state_failed)?, st.timers)),
    }
}

/// The runner of one stateful ParDo.
pub struct StatefulRunner {
    dofn: Box<dyn ErasedStatefulDoFn>,
    state: Box<dyn StateBackend>,
    timers: Box<dyn KeyedTimers>,
    allowed_lateness_ms: i64,
    input_watermark: Timestamp,
    output_watermark: Timestamp,
    processing_time: Timestamp,
    dropped: i64,
    /// Inputs dropped as late since the runner started, and the last one.
    dropped_total: u64,
    last_dropped: Option<DroppedElement>,
    /// A union part set the clocks (later ones lower the watermarks).
    restored_clocks: bool,
    /// Outputs not yet taken.
    output: Vec<Box<dyn AnyBatch>>,
    /// The windows changed since the last snapshot: what the next delta writes.
    changes: Changes,
    /// The key groups this instance owns (what a restore from files reads).
    owned: std::ops::Range<u32>,
    /// Where snapshots put the store's files, if they are taken as files (see
    /// `files.rs`).
    tables: Option<crate::state::tables::TableDir>,
    /// Where a restore reads them.
    restore_tables: Option<crate::state::tables::TableDir>,
}

/// The state and timers a DoFn call sees. The backend expires the windows that hold
/// cells, and those that get a timer as it is set ([`StateBackend::keep_window`]).
struct Access<'a> {
    state: &'a mut dyn StateBackend,
    timers: &'a mut dyn KeyedTimers,
    lateness: i64,
    watermark: Timestamp,
    processing_time: Timestamp,
    dropped: &'a mut i64,
    last_dropped: &'a mut Option<DroppedElement>,
    changes: &'a mut Changes,
}

impl Access<'_> {
    /// (key, window) changes: the next delta snapshot writes it.
    fn changed(&mut self, key: &[u8], window: &BoundedWindow) {
        let state = &*self.state;
        self.changes.note(key, window, || state.windows());
    }
}

/// An error of the state backend, as the step's.
fn state_failed(message: String) -> ExecError {
    ExecError::Downstream(Box::new(tidewater::Error::Checkpoint {
        message: format!("the state backend failed: {message}"),
    }))
}

impl StateCells for Access<'_> {
    fn get(&self, key: &[u8], window: &BoundedWindow, name: &str) -> Option<Cow<'_, [u8]>> {
        self.state.get(key, window, name)
    }
    fn put(&mut self, key: &[u8], window: &BoundedWindow, name: &str, value: &[u8]) {
        self.changed(key, window);
        self.state.put(key, window, name, value)
    }
    fn bag(&self, key: &[u8], window: &BoundedWindow, name: &str) -> Vec<Cow<'_, [u8]>> {
        self.state.bag(key, window, name)
    }
    fn bag_add(&mut self, key: &[u8], window: &BoundedWindow, name: &str, value: &[u8]) {
        self.changed(key, window);
        self.state.bag_add(key, window, name, value)
    }
    fn map_get(
        &self,
        key: &[u8],
        window: &BoundedWindow,
        name: &str,
        entry: &[u8],
    ) -> Option<Cow<'_, [u8]>> {
        self.state.map_get(key, window, name, entry)
    }
    fn map_put(
        &mut self,
        key: &[u8],
        window: &BoundedWindow,
        name: &str,
        entry: &[u8],
        value: &[u8],
    ) -> bool {
        self.changed(key, window);
        self.state.map_put(key, window, name, entry, value)
    }
    fn map_remove(&mut self, key: &[u8], window: &BoundedWindow, name: &str, entry: &[u8]) {
        self.changed(key, window);
        self.state.map_remove(key, window, name, entry)
    }
    fn map_entries(
        &self,
        key: &[u8],
        window: &BoundedWindow,
        name: &str,
    ) -> tidewater::exec::MapEntries<'_> {
        self.state.map_entries(key, window, name)
    }
    fn clear(&mut self, key: &[u8], window: &BoundedWindow, name: &str) {
        self.changed(key, window);
        self.state.clear(key, window, name)
    }
}

impl StateAccess for Access<'_> {
    fn set_timer(
        &mut self,
        key: &[u8],
        window: &BoundedWindow,
        name: &str,
        domain: TimeDomain,
        at: Timestamp,
        output: Timestamp,
    ) -> Result<(), String> {
        // As in Beam, only the timer's time is checked against the window's expiry: a
        // timer set from on_timer while the watermark jumped past the window still
        // fires (in time order) before the window's state is dropped.
        let gc = gc_time(window, self.lateness);
        if domain == TimeDomain::EventTime && at > gc {
            return Err(format!("cannot set event-time timer '{name}' at {at:?}: it is after window {window:?} expires at {gc:?}"));
        }
        // As in Beam: what an event-time timer outputs cannot be later than when it
        // fires (the hold it keeps would be released before its output comes).
        if domain == TimeDomain::EventTime && output > at {
            return Err(format!("cannot set event-time timer '{name}' at {at:?} with output timestamp {output:?}: an output timestamp may not be after the timer's time"));
        }
        self.changed(key, window);
        let first = self.timers.set(Timer {
            key: key.to_vec(),
            window: window.clone(),
            name: name.to_string(),
            domain,
            at,
            output,
        });
        if first {
            self.state.keep_window(key, window);
        }
        Ok(())
    }
    fn clear_timer(&mut self, key: &[u8], window: &BoundedWindow, name: &str, domain: TimeDomain) {
        self.changed(key, window);
        self.timers.delete(key, window, name, domain);
    }
    fn processing_time(&self) -> Timestamp {
        self.processing_time
    }
    fn input_watermark(&self) -> Timestamp {
        self.watermark
    }
    fn is_expired(&self, window: &BoundedWindow) -> bool {
        gc_time(window, self.lateness) < self.watermark
    }
    fn drop_late(&mut self, timestamp: Timestamp, window: &BoundedWindow) {
        *self.dropped += 1;
        *self.last_dropped = Some(DroppedElement {
            timestamp_ms: timestamp.millis(),
            window: show_window(window),
            reason: "late".into(),
            watermark_ms: ms(self.watermark),
        });
    }
}

impl StatefulRunner {
    /// A runner of `dofn` over a backend of kind `state`, for keys hashed into
    /// `max_key_groups` key groups; windows expire `allowed_lateness_ms` after their end.
    pub fn new(
        dofn: Box<dyn ErasedStatefulDoFn>,
        state: &StateChoice,
        max_key_groups: u32,
        allowed_lateness_ms: i64,
    ) -> tidewater::Result<Self> {
        Ok(StatefulRunner {
            dofn,
            state: state.backend(max_key_groups, allowed_lateness_ms)?,
            timers: state.timers(max_key_groups)?,
            allowed_lateness_ms,
            input_watermark: Timestamp::MIN,
            output_watermark: Timestamp::MIN,
            processing_time: Timestamp(0),
            dropped: 0,
            dropped_total: 0,
            last_dropped: None,
            restored_clocks: false,
            output: Vec::new(),
            changes: Changes::default(),
            owned: 0..max_key_groups,
            tables: state.tables().cloned(),
            restore_tables: state.tables().cloned(),
        })
    }

    /// This runner reading the table files a restored checkpoint names in `dir` (by
    /// default where its own checkpoints put them, if anywhere).
    pub fn reading_tables_in(mut self, dir: crate::state::tables::TableDir) -> Self {
        self.restore_tables = Some(dir);
        self
    }

    /// This runner as an instance owning key groups `owned` (all of them by default).
    pub fn owning(mut self, owned: std::ops::Range<u32>) -> Self {
        self.owned = owned;
        self
    }

    /// Inputs dropped because their window had expired, since the last call.
    pub fn take_dropped(&mut self) -> i64 {
        let n = std::mem::take(&mut self.dropped);
        self.dropped_total += n as u64;
        n
    }

    /// Its timers and windows, for "why hasn't my window fired?".
    pub fn report(&mut self, max_key_groups: u32) -> WindowReport {
        let dropped_late = self.dropped_total + self.dropped as u64;
        let pending = |domain| {
            self.timers.first(domain).map(|t| PendingTimer {
                name: t.name,
                key: self.dofn.key_debug(&t.key),
                key_group: Some(key_group_of(&t.key, max_key_groups)),
                window: show_window(&t.window),
                at_ms: t.at.millis(),
            })
        };
        WindowReport {
            input_watermark_ms: ms(self.input_watermark),
            output_watermark_ms: ms(self.output_watermark),
            open_windows: self.state.windows() as u64,
            oldest: None,
            dropped_late,
            dropped_closed: 0,
            last_dropped: self.last_dropped.clone(),
            allowed_lateness_ms: self.allowed_lateness_ms,
            timers: Some(TimersReport {
                pending: self.timers.len() as u64,
                next_event_time: pending(TimeDomain::EventTime),
                next_processing_time: pending(TimeDomain::ProcessingTime),
                processing_time_ms: self.processing_time.millis(),
            }),
        }
    }

    fn access(&mut self) -> (&mut dyn ErasedStatefulDoFn, Access<'_>) {
        (
            self.dofn.as_mut(),
            Access {
                state: self.state.as_mut(),
                timers: self.timers.as_mut(),
                lateness: self.allowed_lateness_ms,
                watermark: self.input_watermark,
                processing_time: self.processing_time,
                dropped: &mut self.dropped,
                last_dropped: &mut self.last_dropped,
                changes: &mut self.changes,
            },
        )
    }

    /// Moves the processing-time clock forward (before processing elements, so that
    /// timers they set are relative to now).
    pub fn set_processing_time(&mut self, now: Timestamp) {
        self.processing_time = self.processing_time.max(now);
    }

    /// Processes elements; returns the outputs.
    pub fn process(&mut self, batch: Box<dyn AnyBatch>) -> Result<Box<dyn AnyBatch>, ExecError> {
        let (dofn, mut access) = self.access();
        let out = dofn.process(batch, &mut access);
        self.flush()?;
        out
    }

    /// The end of a bundle for the state backend (see [`StateBackend::flush`]).
    fn flush(&mut self) -> Result<(), ExecError> {
        self.state.flush().map_err(state_failed)?;
        self.timers.flush().map_err(state_failed)
    }

    /// Advances time: fires due timers in time order, then drops the state and timers
    /// of expired windows. The timers' outputs go into `outputs` (batches of this DoFn's
    /// outputs only: the last one may grow). Stops after [`ADVANCE_SLICE`] outputs with
    /// timers still due ([`StatefulRunner::has_due_work`]): call again once they went on.
    pub fn advance(
        &mut self,
        watermark: Timestamp,
        processing_time: Timestamp,
        outputs: &mut Vec<Box<dyn AnyBatch>>,
    ) -> Result<(), ExecError> {
        self.input_watermark = self.input_watermark.max(watermark);
        self.processing_time = self.processing_time.max(processing_time);
        let mut fired_out = 0;
        loop {
            if fired_out >= ADVANCE_SLICE {
                // The rest fire in the next slice, once these went downstream (the
                // caller advances again while work is due); the timers not fired yet
                // hold the output watermark, and no window expires before them.
                self.flush()?;
                self.update_output_watermark();
                return Ok(());
            }
            let fired = self
                .timers
                .pop_due(TimeDomain::EventTime, self.input_watermark)
                .or_else(|| {
                    self.timers
                        .pop_due(TimeDomain::ProcessingTime, self.processing_time)
                });
            let Some(t) = fired else { break };
            let state = &*self.state;
            self.changes.note(&t.key, &t.window, || state.windows());
            let timer = FiredTimer {
                key: t.key,
                window: t.window,
                name: t.name,
                domain: t.domain,
                at: t.at,
                output: t.output,
            };
            let (dofn, mut access) = self.access();
            let out = dofn.on_timer(&timer, &mut access)?;
            fired_out += out.len().max(1);
            // Timers' outputs in batches, not a batch each: the timers of every key
            // that fire at one time come to as many calls.
            match outputs.last_mut() {
                _ if out.is_empty() => {}
                Some(last) if last.len() < BATCH_SIZE => last.append(out),
                _ => outputs.push(out),
            }
        }
        let (timers, changes) = (&mut self.timers, &mut self.changes);
        let held = self.state.windows();
        self.state.expire(self.input_watermark, &mut |key, window| {
            changes.note(key, window, || held);
            timers.delete_window(key, window)
        });
        self.flush()?;
        self.update_output_watermark();
        Ok(())
    }

    /// The output watermark: the input watermark, held back by the pending timers'
    /// output timestamps.
    fn update_output_watermark(&mut self) {
        let hold = self.timers.earliest_output();
        let candidate = hold.map_or(self.input_watermark, |h| h.min(self.input_watermark));
        self.output_watermark = self.output_watermark.max(candidate);
    }

    /// Whether a timer is due or a window expires at these times.
    pub fn has_due_work(&self, watermark: Timestamp, processing_time: Timestamp) -> bool {
        self.timers.has_due(TimeDomain::EventTime, watermark)
            || self
                .timers
                .has_due(TimeDomain::ProcessingTime, processing_time)
            || self.state.next_expiry().is_some_and(|t| t < watermark)
    }

    /// The input watermark seen.
    pub fn input_watermark(&self) -> Timestamp {
        self.input_watermark
    }

    /// The output watermark: the input watermark held back by pending event-time
    /// timers' output timestamps.
    pub fn output_watermark(&self) -> Timestamp {
        self.output_watermark
    }

    /// The keys with a live window (state or timers).
    pub fn live_keys(&self) -> usize {
        self.state.live_keys()
    }

    /// Cells held (for tests of garbage collection).
    pub fn state_cells(&self) -> usize {
        self.state.len()
    }

    /// Keeps `out` for [`StatefulRunner::take_outputs`] unless it is empty.
    pub fn push_output(&mut self, out: Box<dyn AnyBatch>) {
        if !out.is_empty() {
            self.output.push(out);
        }
    }

    /// The outputs kept since the last call.
    pub fn take_outputs(&mut self) -> Vec<Box<dyn AnyBatch>> {
        std::mem::take(&mut self.output)
    }

    /// The earliest pending processing-time timer.
    pub fn next_processing_timer(&self) -> Option<Timestamp> {
        self.timers.next(TimeDomain::ProcessingTime)
    }

    /// The runner's keyed state (cells and timers) as one part per key group that
    /// holds any, still to be encoded from a frozen copy of the state (see
    /// [`StateBackend::freeze`]), and its clocks as a union part; whether the parts are
    /// a delta. Under [`SnapshotKind::Delta`], after an earlier snapshot, the key group
    /// parts are deltas of the windows changed since (unless more changed than the
    /// state holds, see [`Changes`]). The windows to expire are not written: a restore
    /// finds them again from the cells and timers.
    pub fn snapshot(
        &mut self,
        max_key_groups: u32,
        instance: u32,
        kind: SnapshotKind,
    ) -> Result<(LaterParts, ScopedParts, bool), ExecError> {
        self.state.sync().map_err(state_failed)?;
        self.timers.flush().map_err(state_failed)?;
        // An incremental snapshot is the store's files where they are taken (a
        // full one, e.g. a savepoint's, stays in parts anyone can read).
        let files = match (&self.tables, kind) {
            (Some(dir), SnapshotKind::Delta) => self.files_later(dir, instance),
            _ => None,
        };
        let changed = match files {
            // What changed is in the store's new files: nothing is tracked (a set
            // insert per window written) until a snapshot in parts.
            Some(_) => {
                self.changes = Changes::default();
                None
            }
            None => self.changes.restart(),
        };
        let (later, delta) = match changed {
            _ if files.is_some() => (files.expect("files"), false),
            Some(changed) if kind == SnapshotKind::Delta => {
                let cells = self.state.freeze_windows(&changed);
                let timers = self.timers.freeze_windows(&changed);
                let later = LaterParts::new(move |emit| {
                    wire::delta_parts(changed, cells, timers, max_key_groups, emit)
                        .map_err(state_failed)
                });
                (later, true)
            }
            _ => {
                let (cells, timers) = (self.state.freeze(), self.timers.freeze());
                let later = LaterParts::new(move |emit| {
                    wire::full_parts(cells, timers, max_key_groups, emit).map_err(state_failed)
                });
                (later, false)
            }
        };
        let clocks = encode_part(&Clocks {
            input_watermark: self.input_watermark,
            output_watermark: self.output_watermark,
            processing_time: self.processing_time,
        });
        Ok((later, vec![(Scope::Union(instance), clocks)], delta))
    }

    /// Restores a timer; its window expires in time, as it would have (the backend
    /// keeps those with cells as they are restored).
    fn restore_timer(&mut self, t: KeyTimer) {
        self.state.keep_window(&t.key, &t.window);
        self.timers.set(t);
    }

    /// Adds a part written by [`StatefulRunner::snapshot`]: parts of several old
    /// instances may be restored into one. Of several union parts, the earliest
    /// watermarks count.
    pub fn restore(&mut self, scope: Scope, bytes: &[u8]) -> Result<(), ExecError> {
        match scope {
            Scope::KeyGroup(_) => {
                let checkpoint = |message| {
                    ExecError::Downstream(Box::new(tidewater::Error::Checkpoint { message }))
                };
                match read_key_group(bytes)? {
                    KeyGroupPart::Windows(windows, timers) => {
                        self.state.restore_windows(&windows).map_err(checkpoint)?;
                        for t in timers {
                            self.restore_timer(t);
                        }
                    }
                    KeyGroupPart::Old(st) => {
                        if !st.cells.is_empty() {
                            self.state.restore_add(&st.cells).map_err(checkpoint)?;
                        }
                        for t in st.timers {
                            self.restore_timer(t);
                        }
                        for (_, key, window) in st.live {
                            self.state.keep_window(&key, &window);
                        }
                    }
                }
                // The restored timers written out as a bundle's are (in the embedded
                // store: its memtables), before the next key group is read.
                self.timers.flush().map_err(checkpoint)?;
                // What was restored is the base of the next delta: the next snapshot
                // is full.
                self.changes = Changes::default();
            }
            Scope::Files(_) => {
                self.restore_files(bytes)?;
                self.changes = Changes::default();
            }
            Scope::Union(_) => {
                let c: Clocks = decode_part(bytes, "stateful ParDo clocks")?;
                c.restore(
                    &mut self.restored_clocks,
                    &mut self.input_watermark,
                    &mut self.output_watermark,
                    &mut self.processing_time,
                );
            }
            other => return Err(unexpected_scope(other, "a stateful ParDo")),
        }
        Ok(())
    }
}

impl KeyedOperator for StatefulRunner {
    fn process(
        &mut self,
        batch: Box<dyn AnyBatch>,
        processing_time: Timestamp,
    ) -> std::result::Result<(), ExecError> {
        self.set_processing_time(processing_time);
        for chunk in batch.into_chunks(&mut std::iter::repeat(BATCH_SIZE)) {
            let out = StatefulRunner::process(self, chunk)?;
            self.push_output(out);
        }
        Ok(())
    }

    fn advance(
        &mut self,
        input_watermark: Timestamp,
        processing_time: Timestamp,
    ) -> std::result::Result<(), ExecError> {
        let mut outputs = Vec::new();
        StatefulRunner::advance(self, input_watermark, processing_time, &mut outputs)?;
        for out in outputs {
            self.push_output(out);
        }
        Ok(())
    }

    fn has_due_work(&self, input_watermark: Timestamp, processing_time: Timestamp) -> bool {
        input_watermark > StatefulRunner::input_watermark(self)
            || StatefulRunner::has_due_work(self, input_watermark, processing_time)
    }

    fn input_watermark(&self) -> Timestamp {
        StatefulRunner::input_watermark(self)
    }

    fn output_watermark(&self) -> Timestamp {
        StatefulRunner::output_watermark(self)
    }

    fn next_wakeup(&self) -> Option<Timestamp> {
        self.next_processing_timer()
    }

    fn take_output(&mut self) -> Vec<Box<dyn AnyBatch>> {
        self.take_outputs()
    }

    fn live_keys(&self) -> usize {
        StatefulRunner::live_keys(self)
    }

    fn report(&mut self, max_key_groups: u32) -> Option<WindowReport> {
        Some(StatefulRunner::report(self, max_key_groups))
    }

    fn take_metrics(&mut self) -> StepMetrics {
        let mut m = StepMetrics::default();
        let dropped = self.take_dropped();
        if dropped > 0 {
            m.inc_counter(DROPPED_DUE_TO_LATENESS, dropped);
        }
        m
    }

    fn snapshot(
        &mut self,
        max_key_groups: u32,
        instance: u32,
        kind: SnapshotKind,
    ) -> std::result::Result<KeyedSnapshot, ExecError> {
        let (later, parts, delta) = StatefulRunner::snapshot(self, max_key_groups, instance, kind)?;
        Ok(KeyedSnapshot {
            parts,
            later: Some(later),
            delta,
        })
    }

    fn restore(&mut self, scope: Scope, bytes: &[u8]) -> std::result::Result<(), ExecError> {
        StatefulRunner::restore(self, scope, bytes)
    }

    fn read_tables_in(&mut self, dir: crate::state::tables::TableDir) {
        self.restore_tables = Some(dir);
    }
}
