use serde::{Deserialize, Serialize};
use std::marker::PhantomData;
use tidewater::{Combine, CombineFn, CombineGlobally, CombinePerKey, Element};

/// The `n` largest (or smallest) elements, as a sorted vector.
///
/// ```
/// use tidewater_transforms::Top;
/// let p = tidewater::Pipeline::new(Default::default());
/// let top2: tidewater::PCollection<Vec<i64>> = p.create("Xs", vec![3i64, 1, 2]).apply("Top", Top::largest(2));
/// ```
pub struct Top;

impl Top {
    /// The `n` largest elements of each window, largest first.
    pub fn largest<T: Element + Ord>(n: usize) -> CombineGlobally<TopFn<T>> {
        Combine::globally(TopFn {
            n,
            largest: true,
            _t: PhantomData,
        })
    }
    /// The `n` smallest elements of each window, smallest first.
    pub fn smallest<T: Element + Ord>(n: usize) -> CombineGlobally<TopFn<T>> {
        Combine::globally(TopFn {
            n,
            largest: false,
            _t: PhantomData,
        })
    }
    /// The `n` largest values of each key, largest first.
    pub fn largest_per_key<T: Element + Ord>(n: usize) -> CombinePerKey<TopFn<T>> {
        Combine::per_key(TopFn {
            n,
            largest: true,
            _t: PhantomData,
        })
    }
    /// The `n` smallest values of each key, smallest first.
    pub fn smallest_per_key<T: Element + Ord>(n: usize) -> CombinePerKey<TopFn<T>> {
        Combine::per_key(TopFn {
            n,
            largest: false,
            _t: PhantomData,
        })
    }
}

/// Keeps the best `n`, sorted best first.
#[derive(Serialize, Deserialize)]
#[serde(bound = "")]
pub struct TopFn<T> {
    n: usize,
    largest: bool,
    #[serde(skip)]
    _t: PhantomData<fn(T)>,
}

impl<T: Ord> TopFn<T> {
    fn better(&self, a: &T, b: &T) -> std::cmp::Ordering {
        if self.largest { b.cmp(a) } else { a.cmp(b) }
    }

    fn insert(&self, acc: &mut Vec<T>, x: T) {
        if acc.len() == self.n
            && acc
                .last()
                .is_some_and(|worst| self.better(&x, worst) != std::cmp::Ordering::Less)
        {
            return;
        }
        let at = acc.partition_point(|y| self.better(y, &x) != std::cmp::Ordering::Greater);
        acc.insert(at, x);
        acc.truncate(self.n);
    }
}

impl<T: Element + Ord> CombineFn for TopFn<T> {
    type In = T;
    type Acc = Vec<T>;
    type Out = Vec<T>;
    fn create_accumulator(&self) -> Vec<T> {
        Vec::new()
    }
    fn add_input(&self, acc: &mut Vec<T>, x: T) {
        self.insert(acc, x);
    }
    fn merge_accumulators(&self, acc: &mut Vec<T>, other: Vec<T>) {
        for x in other {
            self.insert(acc, x);
        }
    }
    fn extract_output(&self, acc: Vec<T>) -> Vec<T> {
        acc
    }
}
