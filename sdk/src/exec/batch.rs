use super::SplitMix64;
use crate::coder::{self, CoderError};
use crate::{Element, WindowedValue};
use std::any::Any;

/// A typed batch of windowed elements behind one box: the unit that moves between
/// operators.
pub trait AnyBatch: Send + 'static {
    /// Number of elements.
    fn len(&self) -> usize;
    /// No elements.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The registered name of the element type.
    fn element_type(&self) -> &'static str;
    /// For downcasting to `Batch<T>`.
    fn as_any(&self) -> &dyn Any;
    /// For downcasting to `Batch<T>`.
    fn as_any_mut(&mut self) -> &mut dyn Any;
    /// For downcasting to `Batch<T>` by value.
    fn into_any(self: Box<Self>) -> Box<dyn Any>;
    /// A copy (for fan-out to several consumers).
    fn clone_batch(&self) -> Box<dyn AnyBatch>;
    /// An empty batch of the same type.
    fn empty_like(&self) -> Box<dyn AnyBatch>;
    /// Moves the elements of `other` (same type) to the end of this batch.
    fn append(&mut self, other: Box<dyn AnyBatch>);
    /// Splits off the elements from `at` on.
    fn split_off(&mut self, at: usize) -> Box<dyn AnyBatch>;
    /// Cuts the batch into consecutive chunks of the given sizes (the last chunk takes
    /// what remains), in one pass.
    fn into_chunks(
        self: Box<Self>,
        sizes: &mut dyn Iterator<Item = usize>,
    ) -> Vec<Box<dyn AnyBatch>>;
    /// Shuffles the elements.
    fn shuffle(&mut self, rng: &mut SplitMix64);
    /// Replaces every element by its encoded-then-decoded copy; on failure the index and
    /// the coder's error.
    fn round_trip(&mut self) -> Result<(), (usize, CoderError)>;
    /// Debug form of element `i`.
    fn debug_element(&self, i: usize) -> String;
    /// Replaces every element's windows by `f(timestamp, windows)` (window assignment).
    fn assign_windows(
        &mut self,
        f: &mut dyn FnMut(crate::Timestamp, &crate::Windows) -> crate::Windows,
    );
    /// The elements in window `w` of its latest pane (copies; with their other windows
    /// dropped): a side input's value for the window.
    fn in_window(&self, w: &crate::BoundedWindow) -> Box<dyn AnyBatch>;
    /// The elements by window: an element in several windows is copied into each, with
    /// that window alone.
    fn explode_by_window(self: Box<Self>) -> Vec<(crate::BoundedWindow, Box<dyn AnyBatch>)>;
    /// The elements grouped by their (whole) set of windows, in first-seen order.
    fn group_by_windows(self: Box<Self>) -> Vec<(crate::Windows, Box<dyn AnyBatch>)>;
    /// Moves the elements for which `take(windows, timestamp)` holds into a new batch.
    fn take_where(
        &mut self,
        take: &mut dyn FnMut(&crate::Windows, crate::Timestamp) -> bool,
    ) -> Box<dyn AnyBatch>;
    /// The smallest timestamp, if any.
    fn min_timestamp(&self) -> Option<crate::Timestamp>;
    /// The distinct windows of the elements, in first-seen order.
    fn distinct_windows(&self) -> Vec<crate::BoundedWindow>;
    /// Sets the timestamps of the elements, in order (`ts.len() == self.len()`).
    fn set_timestamps(&mut self, ts: &[crate::Timestamp]);
    /// Appends the encoding of every element (with its metadata) to `out`, each
    /// prefixed by its length.
    fn encode(&self, out: &mut Vec<u8>) -> Result<(), CoderError>;
}

/// The concrete batch of `T`s.
#[derive(Clone, Debug)]
pub struct Batch<T> {
    /// The elements.
    pub items: Vec<WindowedValue<T>>,
}

impl<T: Element> AnyBatch for Batch<T> {
    fn len(&self) -> usize {
        self.items.len()
    }
    fn element_type(&self) -> &'static str {
        std::any::type_name::<T>()
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
    fn clone_batch(&self) -> Box<dyn AnyBatch> {
        Box::new(self.clone())
    }
    fn empty_like(&self) -> Box<dyn AnyBatch> {
        Box::new(Batch::<T> { items: Vec::new() })
    }
    fn append(&mut self, other: Box<dyn AnyBatch>) {
        let mut other = downcast_batch::<T>(other);
        // Appending to nothing takes the other's elements where they lie.
        if self.items.is_empty() && other.capacity() >= self.items.capacity() {
            self.items = other;
        } else {
            self.items.append(&mut other);
        }
    }
    fn split_off(&mut self, at: usize) -> Box<dyn AnyBatch> {
        Box::new(Batch {
            items: self.items.split_off(at),
        })
    }
    fn shuffle(&mut self, rng: &mut SplitMix64) {
        rng.shuffle(&mut self.items);
    }
    fn into_chunks(
        self: Box<Self>,
        sizes: &mut dyn Iterator<Item = usize>,
    ) -> Vec<Box<dyn AnyBatch>> {
        let mut items = self.items;
        let len = items.len();
        let mut starts = Vec::new();
        let mut start = 0;
        while start < len {
            starts.push(start);
            start += sizes.next().unwrap_or(len).clamp(1, len - start);
        }
        // One chunk is the batch itself. Otherwise the chunks are cut off the end, each
        // copied once, and the first keeps the allocation, shrunk to fit.
        let mut out: Vec<Box<dyn AnyBatch>> = Vec::with_capacity(starts.len());
        for &s in starts.iter().skip(1).rev() {
            out.push(Box::new(Batch {
                items: items.split_off(s),
            }));
        }
        if !items.is_empty() {
            if !out.is_empty() {
                items.shrink_to_fit();
            }
            out.push(Box::new(Batch { items }));
        }
        out.reverse();
        out
    }
    fn round_trip(&mut self) -> Result<(), (usize, CoderError)> {
        let mut buf = Vec::new();
        for (i, item) in self.items.iter_mut().enumerate() {
            buf.clear();
            coder::encode_into(item, &mut buf).map_err(|e| (i, e))?;
            let decoded: WindowedValue<T> = coder::decode(&buf).map_err(|e| (i, e))?;
            // A value that decodes to something else (a field the coder skips) would
            // change crossing a real shuffle: refuse it rather than hide it. A value
            // holding an unordered collection (a HashMap, a HashSet) prints its entries
            // in another order once decoded: the same characters in another order are
            // accepted, since values (unlike keys) need not encode deterministically.
            let (before, after) = (format!("{:?}", item.value), format!("{:?}", decoded.value));
            if before != after && !same_characters(&before, &after) {
                return Err((i, CoderError::new(where_they_differ(&before, &after))));
            }
            *item = decoded;
        }
        Ok(())
    }
    fn assign_windows(
        &mut self,
        f: &mut dyn FnMut(crate::Timestamp, &crate::Windows) -> crate::Windows,
    ) {
        for item in &mut self.items {
            item.windows = f(item.timestamp, &item.windows);
        }
    }
    fn in_window(&self, w: &crate::BoundedWindow) -> Box<dyn AnyBatch> {
        // Of a side input fired several times in the window, the latest pane counts.
        let latest = self
            .items
            .iter()
            .filter(|wv| wv.windows.iter().any(|x| x == w))
            .map(|wv| wv.pane.index)
            .max();
        let items = self
            .items
            .iter()
            .filter(|wv| wv.windows.iter().any(|x| x == w) && Some(wv.pane.index) == latest)
            .map(|wv| WindowedValue {
                value: wv.value.clone(),
                timestamp: wv.timestamp,
                windows: crate::Windows::One(w.clone()),
                pane: wv.pane,
            })
            .collect();
        Box::new(Batch { items })
    }
    fn explode_by_window(self: Box<Self>) -> Vec<(crate::BoundedWindow, Box<dyn AnyBatch>)> {
        let mut out: Vec<(crate::BoundedWindow, Vec<WindowedValue<T>>)> = Vec::new();
        let mut index = rustc_hash::FxHashMap::default();
        let mut push = |w: crate::BoundedWindow, wv: WindowedValue<T>| {
            let i = *index.entry(w.clone()).or_insert_with(|| {
                out.push((w.clone(), Vec::new()));
                out.len() - 1
            });
            out[i].1.push(wv);
        };
        for wv in self.items {
            match &wv.windows {
                crate::Windows::One(w) => push(w.clone(), wv),
                crate::Windows::Many(ws) => {
                    for w in ws.clone() {
                        push(
                            w.clone(),
                            WindowedValue {
                                value: wv.value.clone(),
                                timestamp: wv.timestamp,
                                windows: crate::Windows::One(w),
                                pane: wv.pane,
                            },
                        );
                    }
                }
            }
        }
        out.into_iter()
            .map(|(w, items)| (w, Box::new(Batch { items }) as Box<dyn AnyBatch>))
            .collect()
    }
    fn group_by_windows(self: Box<Self>) -> Vec<(crate::Windows, Box<dyn AnyBatch>)> {
        let mut out: Vec<(crate::Windows, Vec<WindowedValue<T>>)> = Vec::new();
        let mut index = rustc_hash::FxHashMap::default();
        for wv in self.items {
            let i = *index.entry(wv.windows.clone()).or_insert_with(|| {
                out.push((wv.windows.clone(), Vec::new()));
                out.len() - 1
            });
            out[i].1.push(wv);
        }
        out.into_iter()
            .map(|(w, items)| (w, Box::new(Batch { items }) as Box<dyn AnyBatch>))
            .collect()
    }
    fn take_where(
        &mut self,
        take: &mut dyn FnMut(&crate::Windows, crate::Timestamp) -> bool,
    ) -> Box<dyn AnyBatch> {
        let (taken, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut self.items)
            .into_iter()
            .partition(|wv| take(&wv.windows, wv.timestamp));
        self.items = kept;
        Box::new(Batch { items: taken })
    }
    fn min_timestamp(&self) -> Option<crate::Timestamp> {
        self.items.iter().map(|wv| wv.timestamp).min()
    }
    fn distinct_windows(&self) -> Vec<crate::BoundedWindow> {
        let mut seen = Vec::new();
        for w in self.items.iter().flat_map(|wv| wv.windows.iter()) {
            if !seen.contains(w) {
                seen.push(w.clone());
            }
        }
        seen
    }
    fn set_timestamps(&mut self, ts: &[crate::Timestamp]) {
        for (item, t) in self.items.iter_mut().zip(ts) {
            item.timestamp = *t;
        }
    }
    fn debug_element(&self, i: usize) -> String {
        format!("{:?}", self.items[i].value)
    }
    fn encode(&self, out: &mut Vec<u8>) -> Result<(), CoderError> {
        let mut buf = Vec::new();
        for item in &self.items {
            buf.clear();
            coder::encode_into(item, &mut buf)?;
            coder::encode_into(&(buf.len() as u64), out)?;
            out.extend_from_slice(&buf);
        }
        Ok(())
    }
}

/// Where a value's debug form and its decoded copy's first differ, with some context:
/// which field the coder does not carry.
fn where_they_differ(before: &str, after: &str) -> String {
    let at = before
        .chars()
        .zip(after.chars())
        .take_while(|(a, b)| a == b)
        .count();
    let around = |s: &str| -> String {
        let from = at.saturating_sub(40);
        let cut: String = s.chars().skip(from).take(80).collect();
        let more = s.chars().count() > from + 80;
        format!(
            "{}{cut}{}",
            if from > 0 { "…" } else { "" },
            if more { "…" } else { "" }
        )
    };
    format!(
        "it decodes to something else, first differing at character {at}: {} decodes to {} (a field the coder skips or does not restore?)",
        around(before),
        around(after)
    )
}

/// Whether two strings hold the same characters, in any order.
fn same_characters(a: &str, b: &str) -> bool {
    let sorted = |s: &str| {
        let mut c: Vec<char> = s.chars().collect();
        c.sort_unstable();
        c
    };
    a.len() == b.len() && sorted(a) == sorted(b)
}

/// Unboxes a batch whose element type the caller knows.
///
/// # Panics
/// If the batch holds another type: the plan's types were checked when it was decoded,
/// so this is a runner bug.
pub fn downcast_batch<T: Element>(batch: Box<dyn AnyBatch>) -> Vec<WindowedValue<T>> {
    let name = batch.element_type();
    match batch.into_any().downcast::<Batch<T>>() {
        Ok(b) => b.items,
        Err(_) => panic!(
            "batch of {name} where {} was expected",
            std::any::type_name::<T>()
        ),
    }
}

/// What a runner can do with an element type it knows only by name.
pub trait ElementType: Send + Sync {
    /// The registered name.
    fn name(&self) -> &'static str;
    /// An empty batch.
    fn new_batch(&self) -> Box<dyn AnyBatch>;
    /// A batch from the JSON values of `Create`'s payload, in the global window.
    fn batch_from_json(&self, values: &[crate::plan::Json]) -> Result<Box<dyn AnyBatch>, String>;
    /// Decodes what [`AnyBatch::encode`] wrote.
    fn decode_batch(&self, bytes: &[u8]) -> Result<Box<dyn AnyBatch>, CoderError>;
}

/// [`ElementType`] for `T`.
pub struct TypedElementType<T>(std::marker::PhantomData<fn() -> T>);

impl<T> Default for TypedElementType<T> {
    fn default() -> Self {
        TypedElementType(std::marker::PhantomData)
    }
}

impl<T: Element> ElementType for TypedElementType<T> {
    fn name(&self) -> &'static str {
        std::any::type_name::<T>()
    }
    fn new_batch(&self) -> Box<dyn AnyBatch> {
        Box::new(Batch::<T> { items: Vec::new() })
    }
    fn batch_from_json(&self, values: &[crate::plan::Json]) -> Result<Box<dyn AnyBatch>, String> {
        let items = values
            .iter()
            .enumerate()
            .map(|(i, v)| {
                v.parse::<T>()
                    .map(WindowedValue::in_global_window)
                    .map_err(|e| {
                        let e = crate::plan::without_position(e.to_string());
                        format!("element {i} ({v:?}) is not a {}: {e}", self.name())
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Box::new(Batch { items }))
    }
    fn decode_batch(&self, mut bytes: &[u8]) -> Result<Box<dyn AnyBatch>, CoderError> {
        let mut items = Vec::new();
        while !bytes.is_empty() {
            let (len, rest) = postcard::take_from_bytes::<u64>(bytes)
                .map_err(|e| coder_error(format!("bad length prefix: {e}")))?;
            let len = len as usize;
            if rest.len() < len {
                return Err(coder_error(format!(
                    "element of {len} bytes but {} remain",
                    rest.len()
                )));
            }
            items.push(coder::decode::<WindowedValue<T>>(&rest[..len])?);
            bytes = &rest[len..];
        }
        Ok(Box::new(Batch { items }))
    }
}

fn coder_error(msg: String) -> CoderError {
    CoderError::new(msg)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(n: i64) -> Box<dyn AnyBatch> {
        Box::new(Batch {
            items: (0..n).map(WindowedValue::in_global_window).collect(),
        })
    }

    fn values(b: Box<dyn AnyBatch>) -> Vec<i64> {
        downcast_batch::<i64>(b)
            .into_iter()
            .map(|wv| wv.value)
            .collect()
    }

    #[test]
    fn chunks_are_consecutive_and_the_last_takes_the_rest() {
        let chunks = |n: i64, sizes: &[usize]| -> Vec<Vec<i64>> {
            batch(n)
                .into_chunks(&mut sizes.iter().copied())
                .into_iter()
                .map(values)
                .collect()
        };
        assert_eq!(chunks(5, &[2, 2]), vec![vec![0, 1], vec![2, 3], vec![4]]);
        assert_eq!(chunks(5, &[2, 0, 9]), vec![vec![0, 1], vec![2], vec![3, 4]]);
        assert_eq!(chunks(3, &[]), vec![vec![0, 1, 2]]);
        assert_eq!(chunks(3, &[3, 3]), vec![vec![0, 1, 2]]);
        assert!(chunks(0, &[2]).is_empty());
        let mut ones = std::iter::repeat(1);
        assert_eq!(batch(1000).into_chunks(&mut ones).len(), 1000);
    }

    #[test]
    fn append_keeps_the_order() {
        let mut all = batch(0);
        all.append(batch(2));
        all.append(batch(3));
        all.append(batch(0));
        assert_eq!(values(all), vec![0, 1, 0, 1, 2]);
    }
}
