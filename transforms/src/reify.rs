//! Beam's `Reify` and `Latest`: an element's timestamp and window as data, and the
//! element with the latest timestamp.

use serde::{Deserialize, Serialize};
use std::marker::PhantomData;
use tidewater::{
    BoundedWindow, Combine, CombineFn, Element, ElementContext, PCollection, PTransform, PaneInfo,
    Timestamp,
};

/// A value with its event timestamp (Beam's `TimestampedValue`).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct TimestampedValue<T> {
    /// The value.
    pub value: T,
    /// Its timestamp.
    pub timestamp: Timestamp,
}

/// A value with its timestamp, window and pane (Beam's `ValueInSingleWindow`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ValueInSingleWindow<T> {
    /// The value.
    pub value: T,
    /// Its timestamp.
    pub timestamp: Timestamp,
    /// The window it is in (an element in several windows gives one of these each).
    pub window: BoundedWindow,
    /// The pane it came in.
    pub pane: PaneInfo,
}

/// Turns what the runner keeps beside each element into data (Beam's `Reify`).
///
/// ```
/// use tidewater::{Create, Duration, Timestamp, Window, WindowFn};
/// use tidewater_transforms::{Reify, TimestampedValue};
/// tidewater_runner_direct::register();
/// let p = tidewater::Pipeline::new(Default::default());
/// p.apply("Xs", Create::timestamped(vec![('a', Timestamp::from_millis(1500))]))
///     .apply("Ts", Reify::timestamps())
///     .capture("ts");
/// let r = p.run().unwrap();
/// assert_eq!(
///     r.captured_values::<TimestampedValue<char>>("ts").unwrap(),
///     vec![TimestampedValue { value: 'a', timestamp: Timestamp::from_millis(1500) }]
/// );
/// ```
pub struct Reify;

impl Reify {
    /// Each element with its timestamp.
    pub fn timestamps() -> ReifyTimestamps {
        ReifyTimestamps
    }

    /// Each element with its timestamp, window and pane, once per window.
    ///
    /// ```
    /// use tidewater::{Create, Duration, Timestamp, Window, WindowFn};
    /// use tidewater_transforms::Reify;
    /// tidewater_runner_direct::register();
    /// let p = tidewater::Pipeline::new(Default::default());
    /// p.apply("Xs", Create::timestamped(vec![(7u8, Timestamp::from_millis(1500))]))
    ///     .apply("Secs", Window::into(WindowFn::fixed(Duration::from_secs(1))))
    ///     .apply("Windows", Reify::windows())
    ///     .map("Start", |v: tidewater_transforms::ValueInSingleWindow<u8>| (v.value, v.window.start()))
    ///     .capture("starts");
    /// let r = p.run().unwrap();
    /// assert_eq!(r.captured_values::<(u8, Timestamp)>("starts").unwrap(), vec![(7, Timestamp::from_millis(1000))]);
    /// ```
    pub fn windows() -> ReifyWindows {
        ReifyWindows
    }
}

/// See [`Reify::timestamps`].
pub struct ReifyTimestamps;

/// See [`Reify::windows`].
pub struct ReifyWindows;

fn with_timestamp<T: Element>(value: T, c: &ElementContext) -> TimestampedValue<T> {
    TimestampedValue {
        value,
        timestamp: c.timestamp(),
    }
}

fn in_window<T: Element>(value: T, c: &ElementContext) -> ValueInSingleWindow<T> {
    ValueInSingleWindow {
        value,
        timestamp: c.timestamp(),
        window: c.window(),
        pane: c.pane(),
    }
}

impl<T: Element> PTransform<PCollection<T>> for ReifyTimestamps {
    type Output = PCollection<TimestampedValue<T>>;
    fn expand(self, input: PCollection<T>) -> Self::Output {
        input.map_with_context("ReifyTimestamps", with_timestamp::<T>)
    }
}

impl<T: Element> PTransform<PCollection<T>> for ReifyWindows {
    type Output = PCollection<ValueInSingleWindow<T>>;
    fn expand(self, input: PCollection<T>) -> Self::Output {
        input.map_with_context("ReifyWindows", in_window::<T>)
    }
}

/// The element with the latest timestamp, per window (Beam's `Latest`). Of several
/// with the same timestamp, the one whose encoding sorts last wins, so that every
/// runner and every merge order picks the same. An empty window gives no output (Beam
/// gives `null` in the global window; Rust has no null).
///
/// ```
/// use tidewater::{Create, Timestamp};
/// use tidewater_transforms::Latest;
/// tidewater_runner_direct::register();
/// let p = tidewater::Pipeline::new(Default::default());
/// let xs = p.apply("Xs", Create::timestamped(vec![
///     (('a', 1), Timestamp::from_millis(5)),
///     (('a', 2), Timestamp::from_millis(9)),
///     (('b', 3), Timestamp::from_millis(1)),
///     (('a', 4), Timestamp::from_millis(7)),
/// ]));
/// xs.apply("LatestPerKey", Latest::per_key()).capture("per_key");
/// xs.apply("Latest", Latest::globally()).capture("latest");
/// let r = p.run().unwrap();
/// let mut per_key = r.captured_values::<(char, i32)>("per_key").unwrap();
/// per_key.sort();
/// assert_eq!(per_key, vec![('a', 2), ('b', 3)]);
/// assert_eq!(r.captured_values::<(char, i32)>("latest").unwrap(), vec![('a', 2)]);
/// ```
pub struct Latest;

impl Latest {
    /// The latest element of each window.
    pub fn globally() -> LatestGlobally {
        LatestGlobally
    }

    /// The latest value of each key and window.
    pub fn per_key() -> LatestPerKey {
        LatestPerKey
    }
}

/// See [`Latest::globally`].
pub struct LatestGlobally;

/// See [`Latest::per_key`].
pub struct LatestPerKey;

/// Keeps the value with the latest timestamp (ties: the largest encoding).
#[derive(Serialize, Deserialize)]
#[serde(bound = "")]
pub struct LatestFn<T>(#[serde(skip)] PhantomData<fn(T)>);

fn later<T: Element>(a: &TimestampedValue<T>, b: &TimestampedValue<T>) -> bool {
    match a.timestamp.cmp(&b.timestamp) {
        std::cmp::Ordering::Equal => {
            let enc = |v: &T| {
                let mut b = Vec::new();
                let _ = tidewater::coder::encode_into(v, &mut b);
                b
            };
            enc(&a.value) > enc(&b.value)
        }
        o => o == std::cmp::Ordering::Greater,
    }
}

impl<T: Element> CombineFn for LatestFn<T> {
    type In = TimestampedValue<T>;
    type Acc = Option<TimestampedValue<T>>;
    type Out = Option<T>;
    fn create_accumulator(&self) -> Self::Acc {
        None
    }
    fn add_input(&self, acc: &mut Self::Acc, x: TimestampedValue<T>) {
        if acc.as_ref().is_none_or(|a| later(&x, a)) {
            *acc = Some(x);
        }
    }
    fn merge_accumulators(&self, acc: &mut Self::Acc, other: Self::Acc) {
        if let Some(x) = other {
            self.add_input(acc, x);
        }
    }
    fn extract_output(&self, acc: Self::Acc) -> Option<T> {
        acc.map(|a| a.value)
    }
}

fn keyed_with_timestamp<K: Element, V: Element>(
    (k, v): (K, V),
    c: &ElementContext,
) -> (K, TimestampedValue<V>) {
    (
        k,
        TimestampedValue {
            value: v,
            timestamp: c.timestamp(),
        },
    )
}

fn some_value<K: Element, V: Element>((k, v): (K, Option<V>)) -> Option<(K, V)> {
    v.map(|v| (k, v))
}

impl<T: Element> PTransform<PCollection<T>> for LatestGlobally {
    type Output = PCollection<T>;
    fn expand(self, input: PCollection<T>) -> PCollection<T> {
        input
            .apply("Reify", Reify::timestamps())
            .apply(
                "Combine",
                Combine::globally(LatestFn::<T>(PhantomData)).without_defaults(),
            )
            .flat_map("Unwrap", std::convert::identity::<Option<T>>)
    }
}

impl<K: Element, V: Element> PTransform<PCollection<(K, V)>> for LatestPerKey {
    type Output = PCollection<(K, V)>;
    fn expand(self, input: PCollection<(K, V)>) -> PCollection<(K, V)> {
        input
            .map_with_context("Reify", keyed_with_timestamp::<K, V>)
            .apply("Combine", Combine::per_key(LatestFn::<V>(PhantomData)))
            .flat_map("Unwrap", some_value::<K, V>)
    }
}
