//! Beam's `Deduplicate`: each element once within a duration, in event or processing
//! time.

use serde::{Deserialize, Serialize};
use std::marker::PhantomData;
use tidewater::{
    Duration, Element, EventTimer, PCollection, PTransform, ProcessingTimer, StateContext,
    StateSpec, StatefulDoFn, StatefulParDo, TimeDomain, TimerSpec, Timestamp, UserError,
    ValueState,
};

/// Drops an element equal to one seen in the same window within a duration (Beam's
/// `Deduplicate.values()`, by default 10 minutes of processing time). The duration
/// counts from the first occurrence: in event time from its timestamp (the memory of it
/// goes once the watermark passes that plus the duration), in processing time from when
/// it was processed.
///
/// ```
/// use tidewater::{Duration, TimeDomain};
/// use tidewater_transforms::Deduplicate;
/// tidewater_runner_direct::register();
/// let p = tidewater::Pipeline::new(Default::default());
/// p.create("Xs", vec![1u8, 2, 1, 3, 2])
///     .apply("Dedup", Deduplicate::values().with_duration(TimeDomain::EventTime, Duration::from_minutes(1)))
///     .capture("xs");
/// let mut xs = p.run().unwrap().captured_values::<u8>("xs").unwrap();
/// xs.sort();
/// assert_eq!(xs, vec![1, 2, 3]);
/// ```
pub struct Deduplicate {
    domain: TimeDomain,
    duration_ms: i64,
}

impl Deduplicate {
    /// Each distinct element once per window within 10 minutes of processing time.
    pub fn values() -> Self {
        Deduplicate {
            domain: TimeDomain::ProcessingTime,
            duration_ms: Duration::from_minutes(10).millis(),
        }
    }

    /// Remembers an element for `d` in time `domain`.
    pub fn with_duration(mut self, domain: TimeDomain, d: impl Into<Duration>) -> Self {
        self.domain = domain;
        self.duration_ms = d.into().millis();
        self
    }

    /// The same on `(K, V)` by key alone: the first value of each key within the
    /// duration (Beam's `Deduplicate.keyedValues()`).
    ///
    /// ```
    /// use tidewater_transforms::Deduplicate;
    /// tidewater_runner_direct::register();
    /// let p = tidewater::Pipeline::new(Default::default());
    /// p.create("Kvs", vec![('a', 1u8), ('b', 2)])
    ///     .apply("Dedup", Deduplicate::values().keyed())
    ///     .capture("kvs");
    /// let mut kvs = p.run().unwrap().captured_values::<(char, u8)>("kvs").unwrap();
    /// kvs.sort();
    /// assert_eq!(kvs, vec![('a', 1), ('b', 2)]);
    /// ```
    pub fn keyed(self) -> DeduplicateKeyed {
        DeduplicateKeyed(self)
    }
}

/// See [`Deduplicate::keyed`].
pub struct DeduplicateKeyed(Deduplicate);

#[derive(Serialize, Deserialize)]
#[serde(bound = "")]
struct FirstWithin<K, V> {
    domain: TimeDomain,
    duration_ms: i64,
    #[serde(skip)]
    _kv: PhantomData<fn(K, V)>,
}

const SEEN: ValueState<bool> = StateSpec::value("seen");
const EXPIRY: EventTimer = TimerSpec::event("expiry");
const EXPIRY_PT: ProcessingTimer = TimerSpec::processing("expiry");

impl<K: Element, V: Element> StatefulDoFn for FirstWithin<K, V> {
    type Key = K;
    type Value = V;
    type Out = (K, V);
    fn process(
        &mut self,
        key: &K,
        v: V,
        ctx: &mut StateContext<'_, (K, V)>,
    ) -> Result<(), UserError> {
        if SEEN.read(ctx)?.is_some() {
            return Ok(());
        }
        SEEN.write(ctx, &true)?;
        match self.domain {
            TimeDomain::EventTime => {
                let at = Timestamp(ctx.timestamp().millis().saturating_add(self.duration_ms));
                EXPIRY.set(ctx, at.min(ctx.window().max_timestamp()))?
            }
            TimeDomain::ProcessingTime => EXPIRY_PT.set_after(ctx, self.duration_ms)?,
        }
        ctx.output((key.clone(), v));
        Ok(())
    }

    fn on_timer(
        &mut self,
        _: &K,
        _: &str,
        ctx: &mut StateContext<'_, (K, V)>,
    ) -> Result<(), UserError> {
        SEEN.clear(ctx);
        Ok(())
    }
}

fn first_within<K: Element, V: Element>(d: &Deduplicate) -> FirstWithin<K, V> {
    FirstWithin {
        domain: d.domain,
        duration_ms: d.duration_ms,
        _kv: PhantomData,
    }
}

fn with_unit<T>(x: T) -> (T, ()) {
    (x, ())
}

fn key_of<T>((x, ()): (T, ())) -> T {
    x
}

impl<T: Element> PTransform<PCollection<T>> for Deduplicate {
    type Output = PCollection<T>;
    fn expand(self, input: PCollection<T>) -> PCollection<T> {
        input
            .map("KeyByElement", with_unit::<T>)
            .apply(
                "FirstWithin",
                StatefulParDo::of(first_within::<T, ()>(&self)),
            )
            .map("Element", key_of::<T>)
    }
}

impl<K: Element, V: Element> PTransform<PCollection<(K, V)>> for DeduplicateKeyed {
    type Output = PCollection<(K, V)>;
    fn expand(self, input: PCollection<(K, V)>) -> PCollection<(K, V)> {
        input.apply(
            "FirstWithin",
            StatefulParDo::of(first_within::<K, V>(&self.0)),
        )
    }
}
