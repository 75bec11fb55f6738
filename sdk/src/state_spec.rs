//! Typed state and timer declarations for stateful DoFns (Beam's `@StateId` /
//! `@TimerId` specs): a cell's name and type are declared once, usually as a `const`,
//! and read and written through it, so that using a cell with the wrong type is a
//! compile error, not a decode error at run time.
//!
//! ```
//! use serde::{Deserialize, Serialize};
//! use tidewater::{StateContext, StateSpec, StatefulDoFn, TimerSpec, UserError, ValueState, EventTimer};
//!
//! const COUNT: ValueState<u64> = StateSpec::value("count");
//! const FLUSH: EventTimer = TimerSpec::event("flush");
//!
//! /// Counts each key's values; emits the count when its window ends.
//! #[derive(Serialize, Deserialize)]
//! struct CountAtEnd;
//!
//! impl StatefulDoFn for CountAtEnd {
//!     type Key = String;
//!     type Value = u32;
//!     type Out = (String, u64);
//!     fn process(&mut self, _k: &String, _v: u32, ctx: &mut StateContext<'_, (String, u64)>) -> Result<(), UserError> {
//!         let n = COUNT.read(ctx)?.unwrap_or(0);
//!         COUNT.write(ctx, &(n + 1))?;
//!         // COUNT.write(ctx, &"one") would not compile: COUNT holds a u64.
//!         FLUSH.set(ctx, ctx.window().max_timestamp())
//!     }
//!     fn on_timer(&mut self, k: &String, name: &str, ctx: &mut StateContext<'_, (String, u64)>) -> Result<(), UserError> {
//!         if FLUSH.is(name) {
//!             let n = COUNT.read(ctx)?.unwrap_or(0);
//!             ctx.output((k.clone(), n));
//!             COUNT.clear(ctx);
//!         }
//!         Ok(())
//!     }
//! }
//!
//! tidewater_runner_direct::register();
//! let p = tidewater::Pipeline::new(Default::default());
//! p.create("Kvs", vec![("a".to_string(), 1u32), ("a".to_string(), 2), ("b".to_string(), 3)])
//!     .apply("Count", tidewater::StatefulParDo::of(CountAtEnd))
//!     .capture("counts");
//! let mut counts = p.run().unwrap().captured_values::<(String, u64)>("counts").unwrap();
//! counts.sort();
//! assert_eq!(counts, vec![("a".to_string(), 2), ("b".to_string(), 1)]);
//! ```

use crate::exec::TimeDomain;
use crate::{CombineFn, Duration, Element, StateContext, Timestamp, UserError};
use std::marker::PhantomData;

/// Where typed state cells are declared: `StateSpec::value::<u64>("count")` and the
/// like (see the module documentation).
pub struct StateSpec;

impl StateSpec {
    /// A value cell.
    ///
    /// ```
    /// const LAST: tidewater::ValueState<String> = tidewater::StateSpec::value("last");
    /// assert_eq!(LAST.name(), "last");
    /// ```
    pub const fn value<T: Element>(name: &'static str) -> ValueState<T> {
        ValueState {
            name,
            _t: PhantomData,
        }
    }

    /// A bag: values in insertion order.
    ///
    /// ```
    /// const SEEN: tidewater::BagState<u32> = tidewater::StateSpec::bag("seen");
    /// assert_eq!(SEEN.name(), "seen");
    /// ```
    pub const fn bag<T: Element>(name: &'static str) -> BagState<T> {
        BagState {
            name,
            _t: PhantomData,
        }
    }

    /// A set, ordered by encoding.
    ///
    /// ```
    /// const IDS: tidewater::SetState<u64> = tidewater::StateSpec::set("ids");
    /// assert_eq!(IDS.name(), "ids");
    /// ```
    pub const fn set<T: Element>(name: &'static str) -> SetState<T> {
        SetState {
            name,
            _t: PhantomData,
        }
    }

    /// A map, ordered by encoded key.
    ///
    /// ```
    /// const PRICES: tidewater::MapState<String, u64> = tidewater::StateSpec::map("prices");
    /// assert_eq!(PRICES.name(), "prices");
    /// ```
    pub const fn map<K: Element, V: Element>(name: &'static str) -> MapState<K, V> {
        MapState {
            name,
            _kv: PhantomData,
        }
    }

    /// A combining cell: inputs are added with `f`, reads give `f`'s output.
    ///
    /// ```
    /// # #[derive(serde::Serialize, serde::Deserialize)]
    /// # struct Sum;
    /// # impl tidewater::CombineFn for Sum {
    /// #     type In = u64; type Acc = u64; type Out = u64;
    /// #     fn create_accumulator(&self) -> u64 { 0 }
    /// #     fn add_input(&self, a: &mut u64, x: u64) { *a += x }
    /// #     fn merge_accumulators(&self, a: &mut u64, b: u64) { *a += b }
    /// #     fn extract_output(&self, a: u64) -> u64 { a }
    /// # }
    /// const TOTAL: tidewater::CombiningState<Sum> = tidewater::StateSpec::combining("total", Sum);
    /// assert_eq!(TOTAL.name(), "total");
    /// ```
    pub const fn combining<F: CombineFn>(name: &'static str, f: F) -> CombiningState<F> {
        CombiningState { name, f }
    }
}

/// A declared state cell, as [`crate::StatefulDoFn::state_cells`] lists it: its name
/// and what its values are. A savepoint records them, and a new version of the job
/// whose cell holds another type is refused before it runs, naming the cell, its old
/// type and its new one (a struct that gains a `#[serde(default)]` field keeps its
/// name, and reads the old values: see [`crate::coder`]).
///
/// ```
/// const COUNT: tidewater::ValueState<u64> = tidewater::StateSpec::value("count");
/// const SEEN: tidewater::MapState<String, u32> = tidewater::StateSpec::map("seen");
/// assert_eq!(COUNT.cell().to_string(), "count: value of u64");
/// assert_eq!(SEEN.cell().to_string(), "seen: map of alloc::string::String to u32");
/// ```
///
/// A cell whose declared type changed still restores when every value the savepoint
/// holds for it reads as the new type ([`StateCell::reads`]): say a `u32` that became
/// a `u64`, or a struct renamed.
#[derive(Clone, Debug)]
pub struct StateCell {
    /// The cell's name.
    pub name: &'static str,
    /// What the cell holds: `value of T`, `bag of T`, `set of T`, `map of K to V`,
    /// `combining of A` (A: the accumulator).
    pub holds: String,
    /// Whether stored bytes read as the cell's types.
    pub reads: CellReader,
}

/// Whether stored bytes read as a cell's types: what lets a cell whose declared type
/// changed restore a savepoint, when every value it holds reads as the new type.
#[derive(Clone, Copy)]
pub struct CellReader {
    /// A value, a bag's item, a map's value or a combining cell's accumulator (written
    /// self-describing, [`crate::coder::encode_state_into`]).
    pub value: fn(&[u8]) -> bool,
    /// A map's key or a set's member (their canonical encoding).
    pub key: fn(&[u8]) -> bool,
}

impl std::fmt::Debug for CellReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CellReader")
    }
}

fn reads_state<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> bool {
    crate::coder::decode_state::<T>(bytes).is_ok()
}

fn reads_key<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> bool {
    crate::coder::decode::<T>(bytes).is_ok()
}

fn reads_anything(_: &[u8]) -> bool {
    true
}

/// Cells are the same declaration when their names and types are.
impl PartialEq for StateCell {
    fn eq(&self, other: &Self) -> bool {
        (self.name, &self.holds) == (other.name, &other.holds)
    }
}

impl Eq for StateCell {}

impl std::fmt::Display for StateCell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.name, self.holds)
    }
}

fn cell(
    name: &'static str,
    holds: String,
    value: fn(&[u8]) -> bool,
    key: fn(&[u8]) -> bool,
) -> StateCell {
    StateCell {
        name,
        holds,
        reads: CellReader { value, key },
    }
}

fn ty<T>() -> &'static str {
    std::any::type_name::<T>()
}

/// A typed value cell; see [`StateSpec::value`]. Its type is fixed where it is
/// declared:
///
/// ```compile_fail
/// const COUNT: tidewater::ValueState<u64> = tidewater::StateSpec::value("count");
/// fn bump(ctx: &mut tidewater::StateContext<'_, u64>) -> Result<(), tidewater::UserError> {
///     COUNT.write(ctx, &"one") // a &str is not a u64: does not compile
/// }
/// ```
pub struct ValueState<T> {
    name: &'static str,
    _t: PhantomData<fn() -> T>,
}

/// A typed bag; see [`StateSpec::bag`].
pub struct BagState<T> {
    name: &'static str,
    _t: PhantomData<fn() -> T>,
}

/// A typed set; see [`StateSpec::set`].
pub struct SetState<T> {
    name: &'static str,
    _t: PhantomData<fn() -> T>,
}

/// A typed map; see [`StateSpec::map`].
pub struct MapState<K, V> {
    name: &'static str,
    _kv: PhantomData<fn() -> (K, V)>,
}

/// A typed combining cell; see [`StateSpec::combining`].
pub struct CombiningState<F> {
    name: &'static str,
    f: F,
}

impl<T: Element> ValueState<T> {
    /// The cell's name.
    pub const fn name(&self) -> &'static str {
        self.name
    }
    /// The cell's declaration.
    pub fn cell(&self) -> StateCell {
        cell(
            self.name,
            format!("value of {}", ty::<T>()),
            reads_state::<T>,
            reads_anything,
        )
    }
    /// The value, if written.
    pub fn read<O: Element>(&self, ctx: &StateContext<'_, O>) -> Result<Option<T>, UserError> {
        ctx.read_value(self.name)
    }
    /// Writes the value.
    pub fn write<O: Element>(&self, ctx: &mut StateContext<'_, O>, v: &T) -> Result<(), UserError> {
        ctx.write_value(self.name, v)
    }
    /// Clears the cell.
    pub fn clear<O: Element>(&self, ctx: &mut StateContext<'_, O>) {
        ctx.clear(self.name)
    }
}

impl<T: Element> BagState<T> {
    /// The bag's name.
    pub const fn name(&self) -> &'static str {
        self.name
    }
    /// The cell's declaration.
    pub fn cell(&self) -> StateCell {
        cell(
            self.name,
            format!("bag of {}", ty::<T>()),
            reads_state::<T>,
            reads_anything,
        )
    }
    /// Adds a value.
    pub fn add<O: Element>(&self, ctx: &mut StateContext<'_, O>, v: &T) -> Result<(), UserError> {
        ctx.bag_add(self.name, v)
    }
    /// Every value, in insertion order.
    pub fn read<O: Element>(&self, ctx: &StateContext<'_, O>) -> Result<Vec<T>, UserError> {
        ctx.bag_read(self.name)
    }
    /// Empties the bag.
    pub fn clear<O: Element>(&self, ctx: &mut StateContext<'_, O>) {
        ctx.clear(self.name)
    }
}

impl<T: Element> SetState<T> {
    /// The set's name.
    pub const fn name(&self) -> &'static str {
        self.name
    }
    /// The cell's declaration.
    pub fn cell(&self) -> StateCell {
        cell(
            self.name,
            format!("set of {}", ty::<T>()),
            reads_anything,
            reads_key::<T>,
        )
    }
    /// Adds a member; whether it was new.
    pub fn add<O: Element>(&self, ctx: &mut StateContext<'_, O>, v: &T) -> Result<bool, UserError> {
        ctx.set_add(self.name, v)
    }
    /// Whether `v` is a member.
    pub fn contains<O: Element>(
        &self,
        ctx: &StateContext<'_, O>,
        v: &T,
    ) -> Result<bool, UserError> {
        ctx.set_contains(self.name, v)
    }
    /// Every member, ordered by encoding.
    pub fn read<O: Element>(&self, ctx: &StateContext<'_, O>) -> Result<Vec<T>, UserError> {
        ctx.set_read(self.name)
    }
    /// Empties the set.
    pub fn clear<O: Element>(&self, ctx: &mut StateContext<'_, O>) {
        ctx.clear(self.name)
    }
}

impl<K: Element, V: Element> MapState<K, V> {
    /// The map's name.
    pub const fn name(&self) -> &'static str {
        self.name
    }
    /// The cell's declaration.
    pub fn cell(&self) -> StateCell {
        cell(
            self.name,
            format!("map of {} to {}", ty::<K>(), ty::<V>()),
            reads_state::<V>,
            reads_key::<K>,
        )
    }
    /// Writes entry `k`.
    pub fn put<O: Element>(
        &self,
        ctx: &mut StateContext<'_, O>,
        k: &K,
        v: &V,
    ) -> Result<(), UserError> {
        ctx.map_put(self.name, k, v)
    }
    /// Entry `k`, if any.
    pub fn get<O: Element>(
        &self,
        ctx: &StateContext<'_, O>,
        k: &K,
    ) -> Result<Option<V>, UserError> {
        ctx.map_get(self.name, k)
    }
    /// Removes entry `k`.
    pub fn remove<O: Element>(
        &self,
        ctx: &mut StateContext<'_, O>,
        k: &K,
    ) -> Result<(), UserError> {
        ctx.map_remove(self.name, k)
    }
    /// Every entry, ordered by encoded key.
    pub fn entries<O: Element>(&self, ctx: &StateContext<'_, O>) -> Result<Vec<(K, V)>, UserError> {
        ctx.map_entries(self.name)
    }
    /// Empties the map.
    pub fn clear<O: Element>(&self, ctx: &mut StateContext<'_, O>) {
        ctx.clear(self.name)
    }
}

impl<F: CombineFn> CombiningState<F> {
    /// The cell's name.
    pub const fn name(&self) -> &'static str {
        self.name
    }
    /// The cell's declaration.
    pub fn cell(&self) -> StateCell {
        cell(
            self.name,
            format!("combining of {}", ty::<F::Acc>()),
            reads_state::<F::Acc>,
            reads_anything,
        )
    }
    /// Adds an input.
    pub fn add<O: Element>(
        &self,
        ctx: &mut StateContext<'_, O>,
        x: F::In,
    ) -> Result<(), UserError> {
        ctx.combine_add(self.name, &self.f, x)
    }
    /// The combined output (of an empty accumulator if nothing was added).
    pub fn read<O: Element>(&self, ctx: &StateContext<'_, O>) -> Result<F::Out, UserError> {
        ctx.combine_read(self.name, &self.f)
    }
    /// Clears the cell.
    pub fn clear<O: Element>(&self, ctx: &mut StateContext<'_, O>) {
        ctx.clear(self.name)
    }
}

/// Where typed timers are declared: `TimerSpec::event("flush")`,
/// `TimerSpec::processing("timeout")`.
pub struct TimerSpec;

impl TimerSpec {
    /// An event-time timer: fires once the watermark passes it.
    ///
    /// ```
    /// const FLUSH: tidewater::EventTimer = tidewater::TimerSpec::event("flush");
    /// assert!(FLUSH.is("flush"));
    /// ```
    pub const fn event(name: &'static str) -> EventTimer {
        EventTimer { name }
    }

    /// A processing-time timer: fires once processing time passes it.
    ///
    /// ```
    /// const TIMEOUT: tidewater::ProcessingTimer = tidewater::TimerSpec::processing("timeout");
    /// assert_eq!(TIMEOUT.name(), "timeout");
    /// ```
    pub const fn processing(name: &'static str) -> ProcessingTimer {
        ProcessingTimer { name }
    }
}

/// A typed event-time timer; see [`TimerSpec::event`].
pub struct EventTimer {
    name: &'static str,
}

/// A typed processing-time timer; see [`TimerSpec::processing`].
pub struct ProcessingTimer {
    name: &'static str,
}

impl EventTimer {
    /// The timer's name, as `on_timer` receives it.
    pub const fn name(&self) -> &'static str {
        self.name
    }
    /// Whether `on_timer`'s `name` is this timer's.
    pub fn is(&self, name: &str) -> bool {
        self.name == name
    }
    /// Sets (or resets) it to fire once the watermark passes `at`; what it outputs gets
    /// timestamp `at`.
    pub fn set<O: Element>(
        &self,
        ctx: &mut StateContext<'_, O>,
        at: Timestamp,
    ) -> Result<(), UserError> {
        ctx.set_event_timer(self.name, at)
    }
    /// Like [`EventTimer::set`] with another output timestamp, which holds the output
    /// watermark back until the timer fires. It may not be after `at` (an error, as in
    /// Beam).
    pub fn set_with_output<O: Element>(
        &self,
        ctx: &mut StateContext<'_, O>,
        at: Timestamp,
        output: Timestamp,
    ) -> Result<(), UserError> {
        ctx.set_event_timer_with_output(self.name, at, output)
    }
    /// Clears it.
    pub fn clear<O: Element>(&self, ctx: &mut StateContext<'_, O>) {
        ctx.clear_timer(self.name, TimeDomain::EventTime)
    }
}

impl ProcessingTimer {
    /// The timer's name, as `on_timer` receives it.
    pub const fn name(&self) -> &'static str {
        self.name
    }
    /// Whether `on_timer`'s `name` is this timer's.
    pub fn is(&self, name: &str) -> bool {
        self.name == name
    }
    /// Sets (or resets) it to fire `delay` from now.
    pub fn set_after<O: Element>(
        &self,
        ctx: &mut StateContext<'_, O>,
        delay: impl Into<Duration>,
    ) -> Result<(), UserError> {
        ctx.set_processing_timer(self.name, delay.into().millis())
    }
    /// Clears it.
    pub fn clear<O: Element>(&self, ctx: &mut StateContext<'_, O>) {
        ctx.clear_timer(self.name, TimeDomain::ProcessingTime)
    }
}
