//! Beam's `ApproximateUnique` and `ApproximateQuantiles`: sketches that combine in
//! bounded memory, exact while the input is small.

use serde::{Deserialize, Serialize};
use std::marker::PhantomData;
use tidewater::{Combine, CombineFn, CombineGlobally, CombinePerKey, Element};

/// A 64-bit hash of `x`'s encoding, well mixed (FNV-1a, then splitmix64's finalizer):
/// the same on every process and every run.
fn hash_of<T: Element>(x: &T) -> u64 {
    let mut bytes = Vec::new();
    let _ = tidewater::coder::encode_into(x, &mut bytes);
    let mut h = tidewater::exec::key_hash(&bytes);
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

/// The estimated number of distinct elements (Beam's `ApproximateUnique`): a K-minimum
/// values sketch of `sample_size` hashes, exact up to `sample_size` distinct elements,
/// with a standard error of about `2 / sqrt(sample_size)` beyond.
///
/// ```
/// use tidewater_transforms::ApproximateUnique;
/// tidewater_runner_direct::register();
/// let p = tidewater::Pipeline::new(Default::default());
/// let xs: Vec<u32> = (0..10_000).map(|i| i % 300).collect();
/// p.create("Xs", xs).apply("Unique", ApproximateUnique::globally(1000)).capture("n");
/// p.create("Kvs", vec![('a', 1u8), ('a', 1), ('a', 2), ('b', 9)])
///     .apply("UniquePerKey", ApproximateUnique::per_key(16))
///     .capture("per_key");
/// let r = p.run().unwrap();
/// assert_eq!(r.captured_values::<u64>("n").unwrap(), vec![300]); // exact: 300 < 1000
/// let mut per_key = r.captured_values::<(char, u64)>("per_key").unwrap();
/// per_key.sort();
/// assert_eq!(per_key, vec![('a', 2), ('b', 1)]);
/// ```
pub struct ApproximateUnique;

impl ApproximateUnique {
    /// Distinct elements of each window, estimated with `sample_size` hashes (at
    /// least 16).
    pub fn globally<T: Element>(sample_size: usize) -> CombineGlobally<ApproximateUniqueFn<T>> {
        Combine::globally(ApproximateUniqueFn::new(sample_size))
    }
    /// Distinct values of each key and window.
    pub fn per_key<V: Element>(sample_size: usize) -> CombinePerKey<ApproximateUniqueFn<V>> {
        Combine::per_key(ApproximateUniqueFn::new(sample_size))
    }
}

/// The K-minimum-values sketch; see [`ApproximateUnique`].
#[derive(Serialize, Deserialize)]
#[serde(bound = "")]
pub struct ApproximateUniqueFn<T> {
    sample_size: usize,
    #[serde(skip)]
    _t: PhantomData<fn(T)>,
}

impl<T> ApproximateUniqueFn<T> {
    fn new(sample_size: usize) -> Self {
        ApproximateUniqueFn {
            sample_size: sample_size.max(16),
            _t: PhantomData,
        }
    }

    /// Keeps the `sample_size` smallest distinct hashes, sorted.
    fn keep(&self, acc: &mut Vec<u64>, h: u64) {
        match acc.binary_search(&h) {
            Ok(_) => {}
            Err(i) if i < self.sample_size => {
                acc.insert(i, h);
                acc.truncate(self.sample_size);
            }
            Err(_) => {}
        }
    }
}

impl<T: Element> CombineFn for ApproximateUniqueFn<T> {
    type In = T;
    type Acc = Vec<u64>;
    type Out = u64;
    fn create_accumulator(&self) -> Vec<u64> {
        Vec::new()
    }
    fn add_input(&self, acc: &mut Vec<u64>, x: T) {
        self.keep(acc, hash_of(&x));
    }
    fn merge_accumulators(&self, acc: &mut Vec<u64>, other: Vec<u64>) {
        for h in other {
            self.keep(acc, h);
        }
    }
    fn extract_output(&self, acc: Vec<u64>) -> u64 {
        if acc.len() < self.sample_size {
            return acc.len() as u64;
        }
        // The k-th smallest of n uniform hashes sits near k/n of the range.
        let kth = *acc.last().expect("full") as f64 / u64::MAX as f64;
        ((acc.len() as f64 - 1.0) / kth).round() as u64
    }
}

/// `n` quantiles of each window, smallest and largest included (Beam's
/// `ApproximateQuantiles.globally(n)`): `n = 2` gives (min, max), `n = 5` the
/// quartiles. A compacting sketch (in the style of Manku-Rajagopalan-Lindsay and KLL)
/// keeps at most about `buffer × log(count / buffer)` elements; while the input holds no
/// more than `buffer` elements the quantiles are exact.
///
/// ```
/// use tidewater_transforms::ApproximateQuantiles;
/// tidewater_runner_direct::register();
/// let p = tidewater::Pipeline::new(Default::default());
/// p.create("Xs", (0..=100u32).rev().collect::<Vec<_>>())
///     .apply("Quartiles", ApproximateQuantiles::globally(5))
///     .capture("q");
/// let r = p.run().unwrap();
/// assert_eq!(r.captured_values::<Vec<u32>>("q").unwrap(), vec![vec![0, 25, 50, 75, 100]]);
/// ```
pub struct ApproximateQuantiles;

impl ApproximateQuantiles {
    /// `n` quantiles (at least 2) of each window, with a buffer of 4096 elements.
    pub fn globally<T: Element + Ord>(n: usize) -> CombineGlobally<ApproximateQuantilesFn<T>> {
        Combine::globally(ApproximateQuantilesFn::new(n, 4096))
    }
    /// `n` quantiles of each key's values, per window.
    pub fn per_key<V: Element + Ord>(n: usize) -> CombinePerKey<ApproximateQuantilesFn<V>> {
        Combine::per_key(ApproximateQuantilesFn::new(n, 4096))
    }
    /// `n` quantiles with a buffer of `buffer` elements (more: more exact, more memory).
    pub fn globally_with_buffer<T: Element + Ord>(
        n: usize,
        buffer: usize,
    ) -> CombineGlobally<ApproximateQuantilesFn<T>> {
        Combine::globally(ApproximateQuantilesFn::new(n, buffer))
    }
}

/// The compacting quantile sketch; see [`ApproximateQuantiles`].
#[derive(Serialize, Deserialize)]
#[serde(bound = "")]
pub struct ApproximateQuantilesFn<T> {
    n: usize,
    buffer: usize,
    #[serde(skip)]
    _t: PhantomData<fn(T)>,
}

/// Levels of the sketch: level `i` holds elements that each stand for `2^i` inputs.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(bound = "T: Element")]
pub struct QuantileSketch<T> {
    levels: Vec<Vec<T>>,
    /// Alternates which half a compaction keeps, so that its error cancels out.
    parity: bool,
}

impl<T: Ord + Clone> ApproximateQuantilesFn<T> {
    fn new(n: usize, buffer: usize) -> Self {
        ApproximateQuantilesFn {
            n: n.max(2),
            buffer: buffer.max(8),
            _t: PhantomData,
        }
    }

    /// Halves every level that is over the buffer into the next one.
    fn compact(&self, s: &mut QuantileSketch<T>) {
        let mut i = 0;
        while i < s.levels.len() {
            if s.levels[i].len() > self.buffer {
                let mut level = std::mem::take(&mut s.levels[i]);
                level.sort();
                let start = usize::from(s.parity);
                s.parity = !s.parity;
                let kept: Vec<T> = level.into_iter().skip(start).step_by(2).collect();
                if s.levels.len() == i + 1 {
                    s.levels.push(Vec::new());
                }
                s.levels[i + 1].extend(kept);
            }
            i += 1;
        }
    }
}

impl<T: Element + Ord> CombineFn for ApproximateQuantilesFn<T> {
    type In = T;
    type Acc = QuantileSketch<T>;
    type Out = Vec<T>;
    fn create_accumulator(&self) -> QuantileSketch<T> {
        QuantileSketch {
            levels: vec![Vec::new()],
            parity: false,
        }
    }
    fn add_input(&self, acc: &mut QuantileSketch<T>, x: T) {
        acc.levels[0].push(x);
        if acc.levels[0].len() > self.buffer {
            self.compact(acc);
        }
    }
    fn merge_accumulators(&self, acc: &mut QuantileSketch<T>, other: QuantileSketch<T>) {
        for (i, level) in other.levels.into_iter().enumerate() {
            if acc.levels.len() <= i {
                acc.levels.push(Vec::new());
            }
            acc.levels[i].extend(level);
        }
        self.compact(acc);
    }
    fn extract_output(&self, acc: QuantileSketch<T>) -> Vec<T> {
        let mut weighted: Vec<(T, u64)> = acc
            .levels
            .into_iter()
            .enumerate()
            .flat_map(|(i, level)| level.into_iter().map(move |x| (x, 1u64 << i)))
            .collect();
        if weighted.is_empty() {
            return Vec::new();
        }
        weighted.sort_by(|a, b| a.0.cmp(&b.0));
        let total: u64 = weighted.iter().map(|(_, w)| w).sum();
        // Quantile j of n - 1 is the element at rank j * (total - 1) / (n - 1).
        let mut out = Vec::with_capacity(self.n);
        let (mut seen, mut at) = (0u64, 0usize);
        for j in 0..self.n {
            let rank = (j as u64 * (total - 1)) / (self.n as u64 - 1);
            while at + 1 < weighted.len() && seen + weighted[at].1 <= rank {
                seen += weighted[at].1;
                at += 1;
            }
            out.push(weighted[at].0.clone());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unique_estimates_within_the_standard_error_beyond_the_sample() {
        let f = ApproximateUniqueFn::<u64>::new(1024);
        // Two partial sketches merged, as a lifted combine does.
        let (mut a, mut b) = (f.create_accumulator(), f.create_accumulator());
        for i in 0..100_000u64 {
            f.add_input(if i % 2 == 0 { &mut a } else { &mut b }, i % 50_000);
        }
        f.merge_accumulators(&mut a, b);
        let n = f.extract_output(a) as f64;
        // 2 / sqrt(1024) = 6.25%; allow three standard errors' worth of slack.
        assert!((n - 50_000.0).abs() / 50_000.0 < 0.19, "{n}");
    }

    #[test]
    fn quantiles_are_exact_within_the_buffer_and_close_beyond() {
        let f = ApproximateQuantilesFn::<u32>::new(11, 64);
        let mut acc = f.create_accumulator();
        for x in (0..=50u32).rev() {
            f.add_input(&mut acc, x);
        }
        assert_eq!(
            f.extract_output(acc),
            vec![0, 5, 10, 15, 20, 25, 30, 35, 40, 45, 50]
        );
        // 100,000 values through a buffer of 256: every decile within 2% of its rank.
        let f = ApproximateQuantilesFn::<u32>::new(11, 256);
        let mut parts: Vec<_> = (0..4).map(|_| f.create_accumulator()).collect();
        for x in 0..100_000u32 {
            let v = x.wrapping_mul(2_654_435_761) % 100_000;
            f.add_input(&mut parts[(x % 4) as usize], v);
        }
        let mut acc = parts.pop().unwrap();
        for p in parts {
            f.merge_accumulators(&mut acc, p);
        }
        let size: usize = acc.levels.iter().map(Vec::len).sum();
        assert!(size < 4 * 256 * 8, "bounded: {size}");
        for (j, q) in f.extract_output(acc).into_iter().enumerate() {
            let expected = (j as f64 * 99_999.0 / 10.0) as i64;
            assert!(
                (i64::from(q) - expected).abs() < 2_000,
                "decile {j}: {q} vs {expected}"
            );
        }
    }
}
