use serde::{Deserialize, Serialize};
use std::marker::PhantomData;
use tidewater::{Combine, CombineFn, CombineGlobally, CombinePerKey, Element};

/// A number that Sum, Min, Max and Mean work on.
pub trait Numeric: Element + Copy + PartialOrd + std::ops::Add<Output = Self> {
    /// Additive identity.
    const ZERO: Self;
    /// Smallest value (Max's identity).
    const MIN: Self;
    /// Largest value (Min's identity).
    const MAX: Self;
    /// As a float, for Mean.
    fn to_f64(self) -> f64;
}

macro_rules! numeric {
    ($($t:ty: $zero:expr),*) => {$(
        impl Numeric for $t {
            const ZERO: Self = $zero;
            const MIN: Self = <$t>::MIN;
            const MAX: Self = <$t>::MAX;
            fn to_f64(self) -> f64 {
                self as f64
            }
        }
    )*};
}
numeric!(i8: 0, i16: 0, i32: 0, i64: 0, u8: 0, u16: 0, u32: 0, u64: 0, usize: 0, isize: 0, f32: 0.0, f64: 0.0);

macro_rules! combine_entry {
    ($(#[$doc:meta])* $name:ident, $fn:ident) => {
        $(#[$doc])*
        pub struct $name<T>(PhantomData<fn(T)>);

        impl<T: Numeric> $name<T> {
            /// Over all elements of each window.
            pub fn globally() -> CombineGlobally<$fn<T>> {
                Combine::globally($fn(PhantomData))
            }
            /// Over the values of each key and window.
            pub fn per_key() -> CombinePerKey<$fn<T>> {
                Combine::per_key($fn(PhantomData))
            }
        }
    };
}

combine_entry!(
    /// Sum of numbers; 0 for an empty input.
    ///
    /// ```
    /// use tidewater_transforms::Sum;
    /// let p = tidewater::Pipeline::new(Default::default());
    /// let total = p.create("Xs", vec![1i64, 2]).apply("Sum", Sum::<i64>::globally());
    /// ```
    Sum, SumFn
);
combine_entry!(
    /// Smallest number; the type's largest value for an empty input, as Beam's Min.
    Min, MinFn
);
combine_entry!(
    /// Largest number; the type's smallest value for an empty input, as Beam's Max.
    Max, MaxFn
);
combine_entry!(
    /// Arithmetic mean as `f64`; NaN for an empty input, as Beam's Mean.
    Mean, MeanFn
);

/// Adds.
#[derive(Serialize, Deserialize)]
#[serde(bound = "")]
pub struct SumFn<T>(PhantomData<fn(T)>);
/// Keeps the smallest.
#[derive(Serialize, Deserialize)]
#[serde(bound = "")]
pub struct MinFn<T>(PhantomData<fn(T)>);
/// Keeps the largest.
#[derive(Serialize, Deserialize)]
#[serde(bound = "")]
pub struct MaxFn<T>(PhantomData<fn(T)>);
/// Sum and count.
#[derive(Serialize, Deserialize)]
#[serde(bound = "")]
pub struct MeanFn<T>(PhantomData<fn(T)>);

impl<T: Numeric> CombineFn for SumFn<T> {
    type In = T;
    type Acc = T;
    type Out = T;
    fn create_accumulator(&self) -> T {
        T::ZERO
    }
    fn add_input(&self, acc: &mut T, x: T) {
        *acc = *acc + x;
    }
    fn merge_accumulators(&self, acc: &mut T, other: T) {
        *acc = *acc + other;
    }
    fn extract_output(&self, acc: T) -> T {
        acc
    }
}

impl<T: Numeric> CombineFn for MinFn<T> {
    type In = T;
    type Acc = T;
    type Out = T;
    fn create_accumulator(&self) -> T {
        T::MAX
    }
    fn add_input(&self, acc: &mut T, x: T) {
        if x < *acc {
            *acc = x;
        }
    }
    fn merge_accumulators(&self, acc: &mut T, other: T) {
        self.add_input(acc, other);
    }
    fn extract_output(&self, acc: T) -> T {
        acc
    }
}

impl<T: Numeric> CombineFn for MaxFn<T> {
    type In = T;
    type Acc = T;
    type Out = T;
    fn create_accumulator(&self) -> T {
        T::MIN
    }
    fn add_input(&self, acc: &mut T, x: T) {
        if x > *acc {
            *acc = x;
        }
    }
    fn merge_accumulators(&self, acc: &mut T, other: T) {
        self.add_input(acc, other);
    }
    fn extract_output(&self, acc: T) -> T {
        acc
    }
}

impl<T: Numeric> CombineFn for MeanFn<T> {
    type In = T;
    type Acc = (f64, u64);
    type Out = f64;
    fn create_accumulator(&self) -> (f64, u64) {
        (0.0, 0)
    }
    fn add_input(&self, acc: &mut (f64, u64), x: T) {
        acc.0 += x.to_f64();
        acc.1 += 1;
    }
    fn merge_accumulators(&self, acc: &mut (f64, u64), other: (f64, u64)) {
        acc.0 += other.0;
        acc.1 += other.1;
    }
    fn extract_output(&self, acc: (f64, u64)) -> f64 {
        if acc.1 == 0 {
            f64::NAN
        } else {
            acc.0 / acc.1 as f64
        }
    }
}
