use serde::{Deserialize, Serialize};
use std::marker::PhantomData;
use tidewater::{Combine, CombineFn, Element, PCollection, PTransform};

/// Counts elements: per element, per key or globally.
///
/// ```
/// use tidewater_transforms::Count;
/// let p = tidewater::Pipeline::new(Default::default());
/// let xs = p.create("Xs", vec![1u8, 1, 2]);
/// let per: tidewater::PCollection<(u8, u64)> = xs.apply("PerElement", Count::per_element());
/// let all: tidewater::PCollection<u64> = xs.apply("Globally", Count::globally());
/// ```
pub struct Count;

impl Count {
    /// `T` becomes `(T, number of occurrences)`.
    pub fn per_element() -> CountPerElement {
        CountPerElement
    }
    /// `(K, V)` becomes `(K, number of values)`.
    pub fn per_key() -> CountPerKey {
        CountPerKey
    }
    /// The number of elements (0 for an empty input).
    pub fn globally() -> CountGlobally {
        CountGlobally
    }
}

/// See [`Count::per_element`].
pub struct CountPerElement;
/// See [`Count::per_key`].
pub struct CountPerKey;
/// See [`Count::globally`].
pub struct CountGlobally;

/// Counts its inputs.
#[derive(Serialize, Deserialize)]
#[serde(bound = "")]
pub struct CountFn<T>(PhantomData<fn(T)>);

impl<T> Default for CountFn<T> {
    fn default() -> Self {
        CountFn(PhantomData)
    }
}

impl<T: Element> CombineFn for CountFn<T> {
    type In = T;
    type Acc = u64;
    type Out = u64;
    fn create_accumulator(&self) -> u64 {
        0
    }
    fn add_input(&self, acc: &mut u64, _: T) {
        *acc += 1;
    }
    fn merge_accumulators(&self, acc: &mut u64, other: u64) {
        *acc += other;
    }
    fn extract_output(&self, acc: u64) -> u64 {
        acc
    }
}

impl<T: Element> PTransform<PCollection<T>> for CountPerElement {
    type Output = PCollection<(T, u64)>;
    fn expand(self, input: PCollection<T>) -> PCollection<(T, u64)> {
        // The element is the grouping key itself: no step pairs each one with a unit.
        input.apply("Combine", Combine::per_element(CountFn::<()>::default()))
    }
}

impl<K: Element, V: Element> PTransform<PCollection<(K, V)>> for CountPerKey {
    type Output = PCollection<(K, u64)>;
    fn expand(self, input: PCollection<(K, V)>) -> PCollection<(K, u64)> {
        input.apply("Combine", Combine::per_key(CountFn::<V>::default()))
    }
}

impl<T: Element> PTransform<PCollection<T>> for CountGlobally {
    type Output = PCollection<u64>;
    fn expand(self, input: PCollection<T>) -> PCollection<u64> {
        input.apply("Combine", Combine::globally(CountFn::<T>::default()))
    }
}
