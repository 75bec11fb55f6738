//! Keys as every runner sees them: one canonical encoding, one fixed hash, key groups.
//!
//! - The **canonical encoding** of a key is the element coder's bytes of the key alone
//!   (postcard; no window, no value). Grouping, state and partitioning all use it, so a
//!   key lands in the same group, state cell and worker wherever it is processed.
//! - The **key hash** is fixed and documented, because it decides where keyed state
//!   lives in a snapshot: 64-bit FNV-1a over the canonical bytes, finished with
//!   MurmurHash3's `fmix64` so that the low bits are well mixed. It must never change
//!   without a snapshot format version bump.
//! - A key's **key group** is `hash % max_key_groups` (Flink's `maxParallelism`; default
//!   [`DEFAULT_MAX_KEY_GROUPS`]). Keyed state is snapshotted per key group, and key
//!   groups are assigned to workers in contiguous ranges ([`key_group_worker`], Flink's
//!   `KeyGroupRangeAssignment`), so a snapshot taken with W workers restores with any
//!   other number of workers up to `max_key_groups`.

use super::{AnyBatch, Batch, ExecError, Phase, downcast_batch};
use crate::{Element, WindowedValue, coder};
use std::marker::PhantomData;

/// The number of key groups when none is configured (Flink's default maxParallelism is
/// 128 too).
pub const DEFAULT_MAX_KEY_GROUPS: u32 = 128;

/// Appends the canonical encoding of `key` to `out`.
///
/// ```
/// let mut b = Vec::new();
/// tidewater::exec::encode_key(&"a".to_string(), &mut b).unwrap();
/// assert_eq!(b, vec![1, b'a']);
/// ```
pub fn encode_key<K: Element>(key: &K, out: &mut Vec<u8>) -> Result<(), ExecError> {
    coder::encode_into(key, out).map_err(|e| ExecError::User {
        phase: Phase::Process,
        element: Some(format!("{key:?}")),
        message: format!("key does not encode: {e}"),
    })
}

/// `a == b`, inline for the short byte strings keys and state names are: two
/// overlapping loads from each end instead of a call to `memcmp`, which costs more than
/// the comparison of a few bytes (the key index and in-memory state compare a key per
/// element).
///
/// ```
/// use tidewater::exec::bytes_eq;
/// assert!(bytes_eq(b"count", b"count"));
/// assert!(!bytes_eq(b"count", b"counts"));
/// assert!(!bytes_eq(b"abcdefghij", b"abcdefghiJ"));
/// ```
#[inline(always)]
pub fn bytes_eq(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    let word = |s: &[u8], at: usize| u64::from_le_bytes(s[at..at + 8].try_into().expect("8"));
    let half = |s: &[u8], at: usize| u32::from_le_bytes(s[at..at + 4].try_into().expect("4"));
    match n {
        0 => true,
        1..=3 => a[0] == b[0] && a[n / 2] == b[n / 2] && a[n - 1] == b[n - 1],
        4..=7 => half(a, 0) == half(b, 0) && half(a, n - 4) == half(b, n - 4),
        8..=16 => word(a, 0) == word(b, 0) && word(a, n - 8) == word(b, n - 8),
        _ => a == b,
    }
}

/// The fixed hash of a canonical key encoding.
///
/// ```
/// // Fixed for ever: snapshots place keyed state by it.
/// assert_eq!(tidewater::exec::key_hash(b""), 0xefd0_1f60_ba99_2926);
/// assert_eq!(tidewater::exec::key_hash(b"\x01a"), 0x30cc_dd7f_603d_5594);
/// ```
pub fn key_hash(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    // MurmurHash3 fmix64.
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

/// The key group of a key hash.
///
/// ```
/// use tidewater::exec::{key_group, key_hash};
/// assert!(key_group(key_hash(b"\x01a"), 128) < 128);
/// ```
pub fn key_group(hash: u64, max_key_groups: u32) -> u32 {
    (hash % u64::from(max_key_groups.max(1))) as u32
}

/// The key group of a canonical key encoding.
pub fn key_group_of(key: &[u8], max_key_groups: u32) -> u32 {
    key_group(key_hash(key), max_key_groups)
}

/// The worker (of `workers`) that owns `key_group`: contiguous ranges of key groups per
/// worker, as Flink's `computeOperatorIndexForKeyGroup`.
///
/// ```
/// use tidewater::exec::key_group_worker;
/// let owners: Vec<usize> = (0..8).map(|g| key_group_worker(g, 8, 3)).collect();
/// assert_eq!(owners, vec![0, 0, 0, 1, 1, 1, 2, 2]);
/// ```
pub fn key_group_worker(key_group: u32, max_key_groups: u32, workers: usize) -> usize {
    (u64::from(key_group) * workers as u64 / u64::from(max_key_groups.max(1))) as usize
}

/// The key groups `worker` (of `workers`) owns: the inverse of [`key_group_worker`].
///
/// ```
/// use tidewater::exec::key_groups_of_worker;
/// assert_eq!(key_groups_of_worker(1, 3, 8), 3..6);
/// ```
pub fn key_groups_of_worker(
    worker: usize,
    workers: usize,
    max_key_groups: u32,
) -> std::ops::Range<u32> {
    let workers = workers.max(1) as u64;
    let max = u64::from(max_key_groups.max(1));
    // The smallest g with g * workers / max >= w is ceil(w * max / workers).
    let first = |w: u64| (w * max).div_ceil(workers) as u32;
    first(worker as u64)..first(worker as u64 + 1)
}

/// Key operations on batches of a keyed element type, for runners that do not know
/// the type: hashing for exchange, and splitting a batch by target.
pub trait KeyOps: Send + Sync {
    /// Appends the key hash of every element of `batch`, in order.
    fn key_hashes(&self, batch: &dyn AnyBatch, out: &mut Vec<u64>) -> Result<(), ExecError>;
    /// Splits `batch` into `targets` batches; element `i` goes to `route(hash_i)`.
    fn split_by(
        &self,
        batch: Box<dyn AnyBatch>,
        targets: usize,
        route: &mut dyn FnMut(u64) -> usize,
    ) -> Result<Vec<Box<dyn AnyBatch>>, ExecError>;
    /// Decodes a batch of these elements that [`AnyBatch::encode`] wrote: what an
    /// exchange between processes receives.
    fn decode_batch(&self, bytes: &[u8]) -> Result<Box<dyn AnyBatch>, ExecError>;
}

/// [`KeyOps`] for elements of type `T` whose key is encoded by a function.
pub struct KeyedBy<T> {
    encode: fn(&T, &mut Vec<u8>) -> Result<(), ExecError>,
    _t: PhantomData<fn() -> T>,
}

impl<T: Element> KeyedBy<T> {
    /// Key operations that encode an element's key with `encode`.
    pub fn new(encode: fn(&T, &mut Vec<u8>) -> Result<(), ExecError>) -> Self {
        KeyedBy {
            encode,
            _t: PhantomData,
        }
    }
}

/// [`KeyOps`] for `(K, V)` elements, keyed by `K`.
///
/// ```
/// use tidewater::exec::{pair_key_ops, Batch, KeyOps, key_hash, AnyBatch};
/// use tidewater::WindowedValue;
/// let ops = pair_key_ops::<String, u32>();
/// let batch = Batch { items: vec![WindowedValue::in_global_window(("a".to_string(), 1u32))] };
/// let mut hashes = Vec::new();
/// ops.key_hashes(&batch, &mut hashes).unwrap();
/// assert_eq!(hashes, vec![key_hash(&[1, b'a'])]);
/// ```
pub fn pair_key_ops<K: Element, V: Element>() -> KeyedBy<(K, V)> {
    KeyedBy::new(|(k, _), out| encode_key(k, out))
}

impl<T: Element> KeyOps for KeyedBy<T> {
    fn key_hashes(&self, batch: &dyn AnyBatch, out: &mut Vec<u64>) -> Result<(), ExecError> {
        let any: &dyn std::any::Any = batch.as_any();
        let batch = any.downcast_ref::<Batch<T>>().ok_or_else(|| {
            ExecError::Downstream(Box::new(crate::Error::Internal(format!(
                "key hashes of a batch of {} where {} was expected",
                batch.element_type(),
                std::any::type_name::<T>()
            ))))
        })?;
        let mut buf = Vec::new();
        out.reserve(batch.items.len());
        for wv in &batch.items {
            buf.clear();
            (self.encode)(&wv.value, &mut buf)?;
            out.push(key_hash(&buf));
        }
        Ok(())
    }

    fn split_by(
        &self,
        batch: Box<dyn AnyBatch>,
        targets: usize,
        route: &mut dyn FnMut(u64) -> usize,
    ) -> Result<Vec<Box<dyn AnyBatch>>, ExecError> {
        let mut parts: Vec<Vec<WindowedValue<T>>> = (0..targets).map(|_| Vec::new()).collect();
        let mut buf = Vec::new();
        for wv in downcast_batch::<T>(batch) {
            buf.clear();
            (self.encode)(&wv.value, &mut buf)?;
            let t = route(key_hash(&buf));
            assert!(t < targets, "route gave target {t} of {targets}");
            parts[t].push(wv);
        }
        Ok(parts
            .into_iter()
            .map(|items| Box::new(Batch { items }) as Box<dyn AnyBatch>)
            .collect())
    }

    fn decode_batch(&self, bytes: &[u8]) -> Result<Box<dyn AnyBatch>, ExecError> {
        use super::ElementType;
        super::TypedElementType::<T>::default()
            .decode_batch(bytes)
            .map_err(|e| {
                ExecError::Downstream(Box::new(crate::Error::Coder {
                    transform: "exchange".into(),
                    element: "?".into(),
                    message: e.to_string(),
                }))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_byte_strings_compare_as_slices_do() {
        let strings: Vec<Vec<u8>> = (0..40usize)
            .flat_map(|n| {
                let base: Vec<u8> = (0..n as u8).collect();
                // The same length, one byte changed at each place.
                let mut variants = vec![base.clone()];
                for i in 0..n {
                    let mut v = base.clone();
                    v[i] ^= 0x80;
                    variants.push(v);
                }
                variants
            })
            .collect();
        for a in &strings {
            for b in &strings {
                assert_eq!(bytes_eq(a, b), a == b, "{a:?} {b:?}");
            }
        }
    }

    #[test]
    fn ranges_cover_every_key_group_once() {
        for max in [1u32, 7, 128, 1000] {
            for workers in 1..=9usize {
                let mut owner = vec![usize::MAX; max as usize];
                for w in 0..workers {
                    for g in key_groups_of_worker(w, workers, max) {
                        assert_eq!(owner[g as usize], usize::MAX);
                        owner[g as usize] = w;
                    }
                }
                for g in 0..max {
                    assert_eq!(owner[g as usize], key_group_worker(g, max, workers));
                }
            }
        }
    }

    #[test]
    fn split_by_routes_each_element_by_its_key() {
        let ops = pair_key_ops::<String, u32>();
        let items: Vec<_> = ["a", "b", "a", "c"]
            .iter()
            .enumerate()
            .map(|(i, k)| WindowedValue::in_global_window((k.to_string(), i as u32)))
            .collect();
        let parts = ops
            .split_by(Box::new(Batch { items }), 2, &mut |h| {
                key_group_worker(key_group(h, 128), 128, 2)
            })
            .unwrap();
        let mut seen = Vec::new();
        for (t, p) in parts.into_iter().enumerate() {
            for wv in downcast_batch::<(String, u32)>(p) {
                let mut b = Vec::new();
                encode_key(&wv.value.0, &mut b).unwrap();
                assert_eq!(key_group_worker(key_group_of(&b, 128), 128, 2), t);
                seen.push(wv.value.1);
            }
        }
        seen.sort();
        assert_eq!(seen, vec![0, 1, 2, 3]);
    }
}
