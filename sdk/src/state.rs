//! Stateful DoFns: state per key and window, and timers.

use crate::coder;
use crate::exec::catch_user;
use crate::exec::{
    AnyBatch, Batch, ErasedStatefulDoFn, ExecError, FiredTimer, Phase, StateAccess, TimeDomain,
};
use crate::{
    BoundedWindow, CombineFn, Element, PaneInfo, Timestamp, UserError, WindowedValue, Windows,
};
use std::panic::AssertUnwindSafe;

/// A DoFn over `(K, V)` with state per key and window, and timers (Beam's stateful
/// `DoFn` with `@StateId` / `@TimerId`). State cells are named; a cell's type is fixed
/// by how it is used.
///
/// ```
/// use serde::{Deserialize, Serialize};
/// use tidewater::{StateContext, StatefulDoFn, UserError};
///
/// /// The running count per word: (word, count so far) for every occurrence.
/// #[derive(Serialize, Deserialize)]
/// struct RunningCount;
///
/// impl StatefulDoFn for RunningCount {
///     type Key = String;
///     type Value = u64;
///     type Out = (String, u64);
///     fn process(&mut self, word: &String, n: u64, ctx: &mut StateContext<'_, (String, u64)>) -> Result<(), UserError> {
///         let count = ctx.read_value::<u64>("count")?.unwrap_or(0) + n;
///         ctx.write_value("count", &count)?;
///         ctx.output((word.clone(), count));
///         Ok(())
///     }
/// }
/// ```
pub trait StatefulDoFn: Send + 'static {
    /// Key.
    type Key: Element;
    /// Value.
    type Value: Element;
    /// Output.
    type Out: Element;
    /// Once per element (and window).
    fn process(
        &mut self,
        key: &Self::Key,
        value: Self::Value,
        ctx: &mut StateContext<'_, Self::Out>,
    ) -> Result<(), UserError>;
    /// When timer `name` of `key` fires; `ctx.timestamp()` is the timer's output time.
    fn on_timer(
        &mut self,
        _key: &Self::Key,
        _name: &str,
        _ctx: &mut StateContext<'_, Self::Out>,
    ) -> Result<(), UserError> {
        Ok(())
    }
    /// The state cells it uses (`vec![COUNT.cell()]`), for the check that a savepoint
    /// restores into a new version of the job: a cell whose type changed is refused
    /// before the job runs, naming it. Undeclared cells are not checked up front; a
    /// value that does not read as its new type fails when it is read, naming its
    /// type.
    fn state_cells(&self) -> Vec<crate::StateCell> {
        Vec::new()
    }
}

/// State, timers and outputs of one key and window.
pub struct StateContext<'a, O> {
    state: &'a mut dyn StateAccess,
    key: &'a [u8],
    window: BoundedWindow,
    timestamp: Timestamp,
    out: &'a mut Vec<WindowedValue<O>>,
    /// Where writes encode their values; reused from call to call.
    scratch: &'a mut Vec<u8>,
}

fn encode<T: serde::Serialize>(v: &T) -> Result<Vec<u8>, UserError> {
    let mut b = Vec::new();
    coder::encode_into(v, &mut b)?;
    Ok(b)
}

impl<O: Element> StateContext<'_, O> {
    /// Outputs `value` at the element's (or timer's) timestamp, in its window.
    pub fn output(&mut self, value: O) {
        self.out.push(WindowedValue {
            value,
            timestamp: self.timestamp,
            windows: Windows::One(self.window.clone()),
            pane: PaneInfo::NO_FIRING,
        });
    }

    /// The element's timestamp (in `on_timer`, the timer's output timestamp).
    pub fn timestamp(&self) -> Timestamp {
        self.timestamp
    }

    /// The window.
    pub fn window(&self) -> BoundedWindow {
        self.window.clone()
    }

    /// The current processing time.
    pub fn processing_time(&self) -> Timestamp {
        self.state.processing_time()
    }

    /// Value state `name`.
    pub fn read_value<T: Element>(&self, name: &str) -> Result<Option<T>, UserError> {
        Ok(self
            .state
            .get(self.key, &self.window, name)
            .map(|b| coder::decode_state(&b))
            .transpose()?)
    }

    /// Writes value state `name`.
    pub fn write_value<T: Element>(&mut self, name: &str, v: &T) -> Result<(), UserError> {
        self.scratch.clear();
        coder::encode_state_into(v, self.scratch)?;
        self.state.put(self.key, &self.window, name, self.scratch);
        Ok(())
    }

    /// Clears state `name` (any kind).
    pub fn clear(&mut self, name: &str) {
        self.state.clear(self.key, &self.window, name);
    }

    /// Adds to bag state `name`.
    pub fn bag_add<T: Element>(&mut self, name: &str, v: &T) -> Result<(), UserError> {
        self.scratch.clear();
        coder::encode_state_into(v, self.scratch)?;
        self.state
            .bag_add(self.key, &self.window, name, self.scratch);
        Ok(())
    }

    /// Encodes `k` then `v` into the scratch buffer; the end of `k`.
    fn encode_entry<K: Element, V: Element>(&mut self, k: &K, v: &V) -> Result<usize, UserError> {
        self.scratch.clear();
        coder::encode_into(k, self.scratch)?;
        let end = self.scratch.len();
        coder::encode_state_into(v, self.scratch)?;
        Ok(end)
    }

    /// Bag state `name`, in insertion order.
    pub fn bag_read<T: Element>(&self, name: &str) -> Result<Vec<T>, UserError> {
        self.state
            .bag(self.key, &self.window, name)
            .into_iter()
            .map(|b| coder::decode_state(&b).map_err(Into::into))
            .collect()
    }

    /// Adds `input` to combining state `name` with `f`.
    pub fn combine_add<F: CombineFn>(
        &mut self,
        name: &str,
        f: &F,
        input: F::In,
    ) -> Result<(), UserError> {
        let mut acc = match self.state.get(self.key, &self.window, name) {
            Some(b) => coder::decode_state(&b)?,
            None => f.create_accumulator(),
        };
        f.add_input(&mut acc, input);
        self.write_value(name, &acc)
    }

    /// The output of combining state `name` (of an empty accumulator if never added to).
    pub fn combine_read<F: CombineFn>(&self, name: &str, f: &F) -> Result<F::Out, UserError> {
        let acc = match self.state.get(self.key, &self.window, name) {
            Some(b) => coder::decode_state(&b)?,
            None => f.create_accumulator(),
        };
        Ok(f.extract_output(acc))
    }

    /// Writes entry `k` of map state `name`.
    pub fn map_put<K: Element, V: Element>(
        &mut self,
        name: &str,
        k: &K,
        v: &V,
    ) -> Result<(), UserError> {
        let end = self.encode_entry(k, v)?;
        let (kb, vb) = self.scratch.split_at(end);
        self.state.map_put(self.key, &self.window, name, kb, vb);
        Ok(())
    }

    /// Entry `k` of map state `name`.
    pub fn map_get<K: Element, V: Element>(
        &self,
        name: &str,
        k: &K,
    ) -> Result<Option<V>, UserError> {
        let kb = encode(k)?;
        Ok(self
            .state
            .map_get(self.key, &self.window, name, &kb)
            .map(|b| coder::decode_state(&b))
            .transpose()?)
    }

    /// Removes entry `k` of map state `name`.
    pub fn map_remove<K: Element>(&mut self, name: &str, k: &K) -> Result<(), UserError> {
        self.scratch.clear();
        coder::encode_into(k, self.scratch)?;
        self.state
            .map_remove(self.key, &self.window, name, self.scratch);
        Ok(())
    }

    /// The entries of map state `name`, ordered by encoded key.
    pub fn map_entries<K: Element, V: Element>(
        &self,
        name: &str,
    ) -> Result<Vec<(K, V)>, UserError> {
        self.state
            .map_entries(self.key, &self.window, name)
            .into_iter()
            .map(|(k, v)| Ok((coder::decode(&k)?, coder::decode_state(&v)?)))
            .collect()
    }

    /// Adds `v` to set state `name`; whether it was new.
    pub fn set_add<T: Element>(&mut self, name: &str, v: &T) -> Result<bool, UserError> {
        self.scratch.clear();
        coder::encode_into(v, self.scratch)?;
        Ok(self
            .state
            .map_put(self.key, &self.window, name, self.scratch, &[]))
    }

    /// Whether set state `name` holds `v`.
    pub fn set_contains<T: Element>(&self, name: &str, v: &T) -> Result<bool, UserError> {
        let b = encode(v)?;
        Ok(self
            .state
            .map_get(self.key, &self.window, name, &b)
            .is_some())
    }

    /// The members of set state `name`, ordered by encoding.
    pub fn set_read<T: Element>(&self, name: &str) -> Result<Vec<T>, UserError> {
        self.state
            .map_entries(self.key, &self.window, name)
            .into_iter()
            .map(|(k, _)| coder::decode(&k).map_err(Into::into))
            .collect()
    }

    /// Sets (or resets) event-time timer `name` to fire once the watermark passes `at`;
    /// its outputs get timestamp `at`.
    pub fn set_event_timer(&mut self, name: &str, at: Timestamp) -> Result<(), UserError> {
        self.set_event_timer_with_output(name, at, at)
    }

    /// Like [`StateContext::set_event_timer`] with another output timestamp (which holds
    /// the output watermark back until the timer fires); it may not be after `at` (an
    /// error, as in Beam).
    pub fn set_event_timer_with_output(
        &mut self,
        name: &str,
        at: Timestamp,
        output: Timestamp,
    ) -> Result<(), UserError> {
        Ok(self.state.set_timer(
            self.key,
            &self.window,
            name,
            TimeDomain::EventTime,
            at,
            output,
        )?)
    }

    /// Sets (or resets) processing-time timer `name` to fire `delay_ms` from now.
    pub fn set_processing_timer(&mut self, name: &str, delay_ms: i64) -> Result<(), UserError> {
        let at = Timestamp(
            self.state
                .processing_time()
                .millis()
                .saturating_add(delay_ms),
        );
        let output = self.timestamp;
        Ok(self.state.set_timer(
            self.key,
            &self.window,
            name,
            TimeDomain::ProcessingTime,
            at,
            output,
        )?)
    }

    /// Clears timer `name` in `domain`.
    pub fn clear_timer(&mut self, name: &str, domain: TimeDomain) {
        self.state.clear_timer(self.key, &self.window, name, domain);
    }
}

/// Runs a typed [`StatefulDoFn`] behind [`ErasedStatefulDoFn`].
pub struct StatefulInvoker<F: StatefulDoFn> {
    f: F,
    key_buf: Vec<u8>,
    /// The [`StateContext`]'s encoding buffer, kept between calls.
    scratch: Vec<u8>,
}

impl<F: StatefulDoFn> StatefulInvoker<F> {
    /// Wraps `f`.
    pub fn new(f: F) -> Self {
        StatefulInvoker {
            f,
            key_buf: Vec::new(),
            scratch: Vec::new(),
        }
    }
}

fn user(phase: Phase, element: Option<String>, message: String) -> ExecError {
    ExecError::User {
        phase,
        element,
        message,
    }
}

fn panic_text(p: Box<dyn std::any::Any + Send>) -> String {
    let m = p
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_default();
    format!("panicked: {m}")
}

impl<F: StatefulDoFn> ErasedStatefulDoFn for StatefulInvoker<F> {
    fn input_type(&self) -> &'static str {
        std::any::type_name::<(F::Key, F::Value)>()
    }
    fn output_type(&self) -> &'static str {
        std::any::type_name::<F::Out>()
    }
    fn key_ops(&self) -> std::sync::Arc<dyn crate::exec::KeyOps> {
        std::sync::Arc::new(crate::exec::pair_key_ops::<F::Key, F::Value>())
    }
    fn key_type(&self) -> &'static str {
        std::any::type_name::<F::Key>()
    }
    fn state_cells(&self) -> Vec<crate::StateCell> {
        self.f.state_cells()
    }

    fn process(
        &mut self,
        input: Box<dyn AnyBatch>,
        state: &mut dyn StateAccess,
    ) -> Result<Box<dyn AnyBatch>, ExecError> {
        let input = crate::exec::downcast_batch::<(F::Key, F::Value)>(input);
        // Most stateful DoFns output about once per input.
        let mut out = Vec::with_capacity(input.len());
        let StatefulInvoker {
            f,
            key_buf,
            scratch,
            ..
        } = self;
        // One panic guard for the batch (a guard per element costs some instructions
        // per element); a panic names the key being processed, from its encoding.
        let run = catch_user(AssertUnwindSafe(|| -> Result<(), ExecError> {
            for wv in input {
                let (k, v) = wv.value;
                key_buf.clear();
                crate::exec::encode_key(&k, key_buf)?;
                // The value is cloned for every window but the last, which takes it.
                let windows = wv.windows.iter();
                let last = windows.len().saturating_sub(1);
                let mut v = Some(v);
                for (i, w) in windows.enumerate() {
                    if state.is_expired(w) {
                        state.drop_late(wv.timestamp, w);
                        continue;
                    }
                    let v = if i == last { v.take() } else { v.clone() };
                    let v = v.expect("the value is kept until the last window");
                    let mut ctx = StateContext {
                        state: &mut *state,
                        key: key_buf,
                        window: w.clone(),
                        timestamp: wv.timestamp,
                        out: &mut out,
                        scratch,
                    };
                    if let Err(e) = f.process(&k, v, &mut ctx) {
                        return Err(user(
                            Phase::Process,
                            Some(format!("key {k:?}")),
                            e.to_string(),
                        ));
                    }
                }
            }
            Ok(())
        }));
        match run {
            Ok(r) => r?,
            Err(p) => {
                return Err(user(
                    Phase::Process,
                    Some(format!("key {}", self.key_debug(&self.key_buf))),
                    panic_text(p),
                ));
            }
        }
        Ok(Box::new(Batch { items: out }))
    }

    fn key_debug(&self, key: &[u8]) -> String {
        match coder::decode::<F::Key>(key) {
            Ok(k) => format!("{k:?}"),
            Err(_) => format!("{key:02x?}"),
        }
    }

    fn on_timer(
        &mut self,
        timer: &FiredTimer,
        state: &mut dyn StateAccess,
    ) -> Result<Box<dyn AnyBatch>, ExecError> {
        let k: F::Key = coder::decode(&timer.key).map_err(|e| {
            user(
                Phase::Process,
                None,
                format!("timer key does not decode: {e}"),
            )
        })?;
        let mut out = Vec::new();
        let mut ctx = StateContext {
            state,
            key: &timer.key,
            window: timer.window.clone(),
            timestamp: timer.output,
            out: &mut out,
            scratch: &mut self.scratch,
        };
        let f = &mut self.f;
        let describe = || Some(format!("timer '{}' of key {k:?}", timer.name));
        match catch_user(AssertUnwindSafe(|| f.on_timer(&k, &timer.name, &mut ctx))) {
            Ok(Ok(())) => Ok(Box::new(Batch { items: out })),
            Ok(Err(e)) => Err(user(Phase::Process, describe(), e.to_string())),
            Err(p) => Err(user(Phase::Process, describe(), panic_text(p))),
        }
    }
}
