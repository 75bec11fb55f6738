//! Byte strings in a cell's encoding written and read as one run (`serialize_bytes`,
//! `deserialize_byte_buf`) rather than a byte at a time, as serde does a `Vec<u8>`: in
//! postcard both are a length and then the bytes, so the encoding is the same and
//! whatever was written before reads alike; only the calls per byte are gone.

use serde::de::{Deserializer, SeqAccess, Visitor};
use serde::ser::Serializer;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A byte string written as one run.
struct Run<'a>(&'a [u8]);

impl Serialize for Run<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(self.0)
    }
}

/// A byte string read as one run (or, from a format that writes bytes as a sequence,
/// element by element).
struct Owned(Vec<u8>);

impl<'de> Deserialize<'de> for Owned {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Owned;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a byte string")
            }
            fn visit_bytes<E: serde::de::Error>(self, v: &[u8]) -> Result<Owned, E> {
                Ok(Owned(v.to_vec()))
            }
            fn visit_byte_buf<E: serde::de::Error>(self, v: Vec<u8>) -> Result<Owned, E> {
                Ok(Owned(v))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Owned, A::Error> {
                let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1 << 16));
                while let Some(b) = seq.next_element::<u8>()? {
                    out.push(b);
                }
                Ok(Owned(out))
            }
        }
        d.deserialize_byte_buf(V)
    }
}

/// `#[serde(with)]` for a byte string held inline while short (a cell's value, see
/// `SmallValue`): the same bytes as a `Vec<u8>`'s.
pub(super) mod one {
    use super::*;

    pub(in crate::state) fn serialize<S: Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
        Run(v).serialize(s)
    }

    pub(in crate::state) fn deserialize<'de, D: Deserializer<'de>, const N: usize>(
        d: D,
    ) -> Result<smallvec::SmallVec<[u8; N]>, D::Error> {
        Ok(smallvec::SmallVec::from_vec(Owned::deserialize(d)?.0))
    }
}

/// `#[serde(with)]` for a `Vec<Vec<u8>>`.
pub(super) mod many {
    use super::*;

    pub(in crate::state) fn serialize<S: Serializer>(
        v: &[Vec<u8>],
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.collect_seq(v.iter().map(|b| Run(b)))
    }

    pub(in crate::state) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Vec<Vec<u8>>, D::Error> {
        Ok(Vec::<Owned>::deserialize(d)?
            .into_iter()
            .map(|b| b.0)
            .collect())
    }
}

/// `#[serde(with)]` for a `BTreeMap<Vec<u8>, Vec<u8>>`.
pub(super) mod map {
    use super::*;

    pub(in crate::state) fn serialize<S: Serializer>(
        v: &BTreeMap<Vec<u8>, Vec<u8>>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.collect_map(v.iter().map(|(k, v)| (Run(k), Run(v))))
    }

    pub(in crate::state) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<BTreeMap<Vec<u8>, Vec<u8>>, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = BTreeMap<Vec<u8>, Vec<u8>>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a map of byte strings")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut m: A,
            ) -> Result<Self::Value, A::Error> {
                let mut out = BTreeMap::new();
                while let Some((k, v)) = m.next_entry::<Owned, Owned>()? {
                    out.insert(k.0, v.0);
                }
                Ok(out)
            }
        }
        d.deserialize_map(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize, Deserialize, PartialEq, Debug)]
    enum ByteByByte {
        Value(Vec<u8>),
        Bag(Vec<Vec<u8>>),
        Map(BTreeMap<Vec<u8>, Vec<u8>>),
    }

    #[derive(Serialize, Deserialize, PartialEq, Debug)]
    enum Runs {
        Value(#[serde(with = "one")] smallvec::SmallVec<[u8; 16]>),
        Bag(#[serde(with = "many")] Vec<Vec<u8>>),
        Map(#[serde(with = "map")] BTreeMap<Vec<u8>, Vec<u8>>),
    }

    /// The same postcard bytes as serde's own `Vec<u8>` encoding, both ways.
    #[test]
    fn runs_are_the_bytes_serde_writes_byte_by_byte() {
        let bytes: Vec<u8> = (0..=255).chain(0..44).collect();
        let map: BTreeMap<Vec<u8>, Vec<u8>> =
            [(vec![], vec![1]), (vec![2; 300], bytes.clone())].into();
        let cases = [
            (ByteByByte::Value(vec![]), Runs::Value([][..].into())),
            // Held inline, and on the heap.
            (
                ByteByByte::Value(vec![1, 2, 3]),
                Runs::Value([1, 2, 3][..].into()),
            ),
            (
                ByteByByte::Value(bytes.clone()),
                Runs::Value(bytes.as_slice().into()),
            ),
            (
                ByteByByte::Bag(vec![vec![], bytes.clone(), vec![9]]),
                Runs::Bag(vec![vec![], bytes.clone(), vec![9]]),
            ),
            (ByteByByte::Map(map.clone()), Runs::Map(map.clone())),
        ];
        for (old, new) in cases {
            let (o, n) = (
                postcard::to_allocvec(&old).unwrap(),
                postcard::to_allocvec(&new).unwrap(),
            );
            assert_eq!(o, n, "{new:?}");
            assert_eq!(postcard::from_bytes::<Runs>(&o).unwrap(), new);
            assert_eq!(postcard::from_bytes::<ByteByByte>(&n).unwrap(), old);
        }
    }
}
