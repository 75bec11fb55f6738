use serde::{Deserialize, Serialize};
use std::marker::PhantomData;
use tidewater::{Combine, CombineFn, CombineGlobally, CombinePerKey, Element, coder};

/// A fixed-size uniform sample, deterministic given the seed.
///
/// Each element gets a pseudo-random priority from the seed and its encoding; the `n`
/// elements of lowest priority are the sample (bottom-k sampling). The result is the
/// same whatever the order or bundling of the input — so the same on every runner.
///
/// Identical elements share a priority, so the sample is uniform over *distinct*
/// elements: a value that occurs many times is not more likely to be chosen than one
/// that occurs once (and when chosen, its copies come together). Beam's `Sample` is
/// uniform over occurrences but not deterministic; to sample occurrences, pair each
/// element with something that tells copies apart (an offset, an id) first.
///
/// ```
/// use tidewater_transforms::Sample;
/// let p = tidewater::Pipeline::new(Default::default());
/// let s: tidewater::PCollection<Vec<u32>> = p.create("Xs", (0u32..100).collect()).apply("Sample", Sample::fixed_size_globally(5, 42));
/// ```
pub struct Sample;

impl Sample {
    /// `n` elements of each window.
    pub fn fixed_size_globally<T: Element>(n: usize, seed: u64) -> CombineGlobally<SampleFn<T>> {
        Combine::globally(SampleFn {
            n,
            seed,
            _t: PhantomData,
        })
    }
    /// `n` values of each key.
    pub fn fixed_size_per_key<T: Element>(n: usize, seed: u64) -> CombinePerKey<SampleFn<T>> {
        Combine::per_key(SampleFn {
            n,
            seed,
            _t: PhantomData,
        })
    }
}

/// Keeps the `n` elements of lowest priority.
#[derive(Serialize, Deserialize)]
#[serde(bound = "")]
pub struct SampleFn<T> {
    n: usize,
    seed: u64,
    #[serde(skip)]
    _t: PhantomData<fn(T)>,
}

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl<T: Element> SampleFn<T> {
    /// (priority, encoding): the encoding breaks ties so the order is total.
    fn priority(&self, x: &T) -> (u64, Vec<u8>) {
        let mut bytes = Vec::new();
        // Elements are already known to encode: they crossed a coder to get here.
        let _ = coder::encode_into(x, &mut bytes);
        let mut h = mix(self.seed ^ 0x9E37_79B9_7F4A_7C15);
        for chunk in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w[..chunk.len()].copy_from_slice(chunk);
            h = mix(h ^ u64::from_le_bytes(w));
        }
        (mix(h ^ bytes.len() as u64), bytes)
    }

    fn insert(&self, acc: &mut Vec<(u64, Vec<u8>, T)>, p: (u64, Vec<u8>), x: T) {
        let at = acc.partition_point(|(q, b, _)| (*q, b.as_slice()) <= (p.0, p.1.as_slice()));
        if at >= self.n {
            return;
        }
        acc.insert(at, (p.0, p.1, x));
        acc.truncate(self.n);
    }
}

impl<T: Element> CombineFn for SampleFn<T> {
    type In = T;
    type Acc = Vec<(u64, Vec<u8>, T)>;
    type Out = Vec<T>;
    fn create_accumulator(&self) -> Self::Acc {
        Vec::new()
    }
    fn add_input(&self, acc: &mut Self::Acc, x: T) {
        let p = self.priority(&x);
        self.insert(acc, p, x);
    }
    fn merge_accumulators(&self, acc: &mut Self::Acc, other: Self::Acc) {
        for (q, b, x) in other {
            self.insert(acc, (q, b), x);
        }
    }
    fn extract_output(&self, acc: Self::Acc) -> Vec<T> {
        acc.into_iter().map(|(_, _, x)| x).collect()
    }
}
