//! Runs a stateful DoFn: state per key and window in a [`StateBackend`], event- and
//! processing-time timers, watermark holds from pending timers, and garbage collection
//! of a window's state and timers once it expires.

use crate::state::StateBackend;
use std::collections::{BTreeMap, BTreeSet};
use tidewater::exec::{
    AnyBatch, ErasedStatefulDoFn, ExecError, FiredTimer, StateAccess, StateCells, TimeDomain,
};
use tidewater::{BoundedWindow, Timestamp};

type TimerId = (Vec<u8>, BoundedWindow, String, TimeDomain);

/// Pending timers, by id and by firing time.
#[derive(Default)]
struct Timers {
    by_id: BTreeMap<TimerId, (Timestamp, Timestamp)>,
    queue: BTreeSet<(TimeDomain, Timestamp, Vec<u8>, BoundedWindow, String)>,
}

impl Timers {
    fn set(&mut self, id: TimerId, at: Timestamp, output: Timestamp) {
        self.clear(&id);
        self.queue
            .insert((id.3, at, id.0.clone(), id.1, id.2.clone()));
        self.by_id.insert(id, (at, output));
    }

    fn clear(&mut self, id: &TimerId) {
        if let Some((at, _)) = self.by_id.remove(id) {
            self.queue
                .remove(&(id.3, at, id.0.clone(), id.1, id.2.clone()));
        }
    }

    /// The earliest timer of `domain` due before `now`, removed.
    fn pop_due(&mut self, domain: TimeDomain, now: Timestamp) -> Option<FiredTimer> {
        let first = self
            .queue
            .range(
                (
                    domain,
                    Timestamp(i64::MIN),
                    Vec::new(),
                    BoundedWindow::Global,
                    String::new(),
                )..,
            )
            .next()
            .cloned()?;
        if first.0 != domain || first.1 >= now {
            return None;
        }
        self.queue.remove(&first);
        let (_, at, key, window, name) = first;
        let (_, output) = self
            .by_id
            .remove(&(key.clone(), window, name.clone(), domain))
            .unwrap_or((at, at));
        Some(FiredTimer {
            key,
            window,
            name,
            domain,
            at,
            output,
        })
    }

    fn clear_window(&mut self, key: &[u8], window: &BoundedWindow) {
        let from = (key.to_vec(), *window, String::new(), TimeDomain::EventTime);
        let ids: Vec<TimerId> = self
            .by_id
            .range(from..)
            .take_while(|((k, w, _, _), _)| k == key && w == window)
            .map(|(id, _)| id.clone())
            .collect();
        for id in ids {
            self.clear(&id);
        }
    }

    /// The earliest output timestamp of any pending timer: a processing-time timer's
    /// output (the timestamp of the element that set it) holds the watermark too, so
    /// that what it emits is not late downstream.
    fn earliest_output(&self) -> Option<Timestamp> {
        self.by_id.values().map(|(_, o)| *o).min()
    }
}

/// The runner of one stateful ParDo.
pub struct StatefulRunner {
    dofn: Box<dyn ErasedStatefulDoFn>,
    state: Box<dyn StateBackend>,
    timers: Timers,
    allowed_lateness_ms: i64,
    /// Windows holding state or timers, by expiry time.
    live: BTreeSet<(Timestamp, Vec<u8>, BoundedWindow)>,
    input_watermark: Timestamp,
    output_watermark: Timestamp,
    processing_time: Timestamp,
    dropped: i64,
}

fn gc_time(w: &BoundedWindow, lateness: i64) -> Timestamp {
    Timestamp(
        w.max_timestamp()
            .millis()
            .saturating_add(lateness)
            .min(Timestamp::MAX.millis()),
    )
}

/// The state and timers a DoFn call sees.
struct Access<'a> {
    state: &'a mut dyn StateBackend,
    timers: &'a mut Timers,
    live: &'a mut BTreeSet<(Timestamp, Vec<u8>, BoundedWindow)>,
    lateness: i64,
    watermark: Timestamp,
    processing_time: Timestamp,
    dropped: &'a mut i64,
}

impl Access<'_> {
    fn touch(&mut self, key: &[u8], window: &BoundedWindow) {
        self.live
            .insert((gc_time(window, self.lateness), key.to_vec(), *window));
    }
}

impl StateCells for Access<'_> {
    fn get(&self, key: &[u8], window: &BoundedWindow, name: &str) -> Option<&[u8]> {
        self.state.get(key, window, name)
    }
    fn put(&mut self, key: &[u8], window: &BoundedWindow, name: &str, value: Vec<u8>) {
        self.touch(key, window);
        self.state.put(key, window, name, value)
    }
    fn bag(&self, key: &[u8], window: &BoundedWindow, name: &str) -> Vec<&[u8]> {
        self.state.bag(key, window, name)
    }
    fn bag_add(&mut self, key: &[u8], window: &BoundedWindow, name: &str, value: Vec<u8>) {
        self.touch(key, window);
        self.state.bag_add(key, window, name, value)
    }
    fn map_get(
        &self,
        key: &[u8],
        window: &BoundedWindow,
        name: &str,
        entry: &[u8],
    ) -> Option<&[u8]> {
        self.state.map_get(key, window, name, entry)
    }
    fn map_put(
        &mut self,
        key: &[u8],
        window: &BoundedWindow,
        name: &str,
        entry: Vec<u8>,
        value: Vec<u8>,
    ) -> bool {
        self.touch(key, window);
        self.state.map_put(key, window, name, entry, value)
    }
    fn map_remove(&mut self, key: &[u8], window: &BoundedWindow, name: &str, entry: &[u8]) {
        self.state.map_remove(key, window, name, entry)
    }
    fn map_entries(&self, key: &[u8], window: &BoundedWindow, name: &str) -> Vec<(&[u8], &[u8])> {
        self.state.map_entries(key, window, name)
    }
    fn clear(&mut self, key: &[u8], window: &BoundedWindow, name: &str) {
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
        self.touch(key, window);
        self.timers.set(
            (key.to_vec(), *window, name.to_string(), domain),
            at,
            output,
        );
        Ok(())
    }
    fn clear_timer(&mut self, key: &[u8], window: &BoundedWindow, name: &str, domain: TimeDomain) {
        self.timers
            .clear(&(key.to_vec(), *window, name.to_string(), domain));
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
    fn drop_late(&mut self) {
        *self.dropped += 1;
    }
}

impl StatefulRunner {
    /// A runner of `dofn` over `state`; windows expire `allowed_lateness_ms` after their end.
    pub fn new(
        dofn: Box<dyn ErasedStatefulDoFn>,
        state: Box<dyn StateBackend>,
        allowed_lateness_ms: i64,
    ) -> Self {
        StatefulRunner {
            dofn,
            state,
            timers: Timers::default(),
            allowed_lateness_ms,
            live: BTreeSet::new(),
            input_watermark: Timestamp::MIN,
            output_watermark: Timestamp::MIN,
            processing_time: Timestamp(0),
            dropped: 0,
        }
    }

    /// Inputs dropped because their window had expired, since the last call.
    pub fn take_dropped(&mut self) -> i64 {
        std::mem::take(&mut self.dropped)
    }

    fn access(&mut self) -> (&mut dyn ErasedStatefulDoFn, Access<'_>) {
        (
            self.dofn.as_mut(),
            Access {
                state: self.state.as_mut(),
                timers: &mut self.timers,
                live: &mut self.live,
                lateness: self.allowed_lateness_ms,
                watermark: self.input_watermark,
                processing_time: self.processing_time,
                dropped: &mut self.dropped,
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
        dofn.process(batch, &mut access)
    }

    /// Advances time: fires due timers in time order, then drops the state and timers
    /// of expired windows. Returns the outputs.
    pub fn advance(
        &mut self,
        watermark: Timestamp,
        processing_time: Timestamp,
        outputs: &mut Vec<Box<dyn AnyBatch>>,
    ) -> Result<(), ExecError> {
        self.input_watermark = self.input_watermark.max(watermark);
        self.processing_time = self.processing_time.max(processing_time);
        loop {
            let fired = self
                .timers
                .pop_due(TimeDomain::EventTime, self.input_watermark)
                .or_else(|| {
                    self.timers
                        .pop_due(TimeDomain::ProcessingTime, self.processing_time)
                });
            let Some(timer) = fired else { break };
            let (dofn, mut access) = self.access();
            outputs.push(dofn.on_timer(&timer, &mut access)?);
        }
        while let Some(first) = self.live.first().cloned() {
            if first.0 >= self.input_watermark {
                break;
            }
            self.live.remove(&first);
            self.state.clear_window(&first.1, &first.2);
            self.timers.clear_window(&first.1, &first.2);
        }
        let hold = self.timers.earliest_output();
        let candidate = hold.map_or(self.input_watermark, |h| h.min(self.input_watermark));
        self.output_watermark = self.output_watermark.max(candidate);
        Ok(())
    }

    /// Whether a timer is due or a window expires at these times.
    pub fn has_due_work(&self, watermark: Timestamp, processing_time: Timestamp) -> bool {
        let due = |d: TimeDomain, now: Timestamp| {
            self.timers
                .queue
                .iter()
                .any(|(dom, at, ..)| *dom == d && *at < now)
        };
        due(TimeDomain::EventTime, watermark)
            || due(TimeDomain::ProcessingTime, processing_time)
            || self.live.first().is_some_and(|f| f.0 < watermark)
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

    /// Cells held (for tests of garbage collection).
    pub fn state_cells(&self) -> usize {
        self.state.len()
    }
}
