//! Encoding elements to bytes where they cross a shuffle, a process or a snapshot.
//!
//! Every element type uses one coder: serde into postcard's compact, deterministic
//! binary form. Keys are grouped by these bytes, so a key type must serialize the
//! same value to the same bytes. A keyed transform (GroupByKey, Combine.perKey, a
//! stateful ParDo) refuses at construction a key type with a float (`0.0` and `-0.0`
//! are equal but encode differently) or a `HashMap`/`HashSet` (equal maps encode their
//! entries in different orders) written in it. A `HashMap` inside a field of your own
//! struct cannot be seen from the type's name: use a `BTreeMap` there yourself.
//!
//! The values of a stateful DoFn's state cells (a value, a bag's items, a map's values,
//! a combining cell's accumulator) are the exception: they outlive the job's binary in
//! savepoints, so they are written self-describing ([`encode_state_into`], MessagePack
//! with struct fields by name). A state struct of a new version of a job that gains a
//! field with `#[serde(default)]`, loses one, or orders its fields otherwise reads the
//! values the old version wrote. Map keys and set members stay in the element coder:
//! they are looked up by their bytes, which must not change.

use serde::Serialize;
use serde::de::DeserializeOwned;

/// The URN that names the element coder in a plan.
pub const ELEMENT_CODER_URN: &str = "tidewater:coder:postcard:v1";

/// An element that failed to encode or decode.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct CoderError(String);

impl CoderError {
    pub(crate) fn new(message: String) -> Self {
        CoderError(message)
    }
}

/// Appends the encoding of `value` to `out`.
///
/// ```
/// let mut buf = Vec::new();
/// tidewater::coder::encode_into(&"hi".to_string(), &mut buf).unwrap();
/// assert_eq!(tidewater::coder::decode::<String>(&buf).unwrap(), "hi");
/// ```
pub fn encode_into<T: Serialize + ?Sized>(value: &T, out: &mut Vec<u8>) -> Result<(), CoderError> {
    postcard::serialize_with_flavor(value, AppendTo(out))
        .map_err(|e| CoderError(format!("cannot encode {}: {e}", std::any::type_name::<T>())))
}

/// A postcard output that appends to a borrowed vector, copying slices whole: keys are
/// encoded on the hot path of every grouping.
struct AppendTo<'a>(&'a mut Vec<u8>);

impl postcard::ser_flavors::Flavor for AppendTo<'_> {
    type Output = ();

    #[inline]
    fn try_extend(&mut self, data: &[u8]) -> postcard::Result<()> {
        self.0.extend_from_slice(data);
        Ok(())
    }

    #[inline]
    fn try_push(&mut self, data: u8) -> postcard::Result<()> {
        self.0.push(data);
        Ok(())
    }

    fn finalize(self) -> postcard::Result<()> {
        Ok(())
    }
}

/// Decodes one value that fills `bytes` exactly.
///
/// ```
/// assert!(tidewater::coder::decode::<u32>(&[0xff]).is_err());
/// ```
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, CoderError> {
    match postcard::take_from_bytes::<T>(bytes) {
        Ok((v, [])) => Ok(v),
        Ok((_, rest)) => Err(CoderError(format!(
            "decoding {} left {} trailing bytes",
            std::any::type_name::<T>(),
            rest.len()
        ))),
        Err(e) => Err(CoderError(format!(
            "cannot decode {}: {e}",
            std::any::type_name::<T>()
        ))),
    }
}

/// Appends the self-describing encoding of a state cell's value (see the module
/// documentation).
///
/// ```
/// #[derive(serde::Serialize)]
/// struct V1 { count: u64 }
/// #[derive(serde::Deserialize, Debug, PartialEq)]
/// struct V2 { count: u64, #[serde(default)] longest: usize }
/// let mut buf = Vec::new();
/// tidewater::coder::encode_state_into(&V1 { count: 3 }, &mut buf).unwrap();
/// assert_eq!(tidewater::coder::decode_state::<V2>(&buf).unwrap(), V2 { count: 3, longest: 0 });
/// ```
pub fn encode_state_into<T: Serialize + ?Sized>(
    value: &T,
    out: &mut Vec<u8>,
) -> Result<(), CoderError> {
    let mut ser = rmp_serde::Serializer::new(out).with_struct_map();
    value.serialize(&mut ser).map_err(|e| {
        CoderError(format!(
            "cannot encode state of type {}: {e}",
            std::any::type_name::<T>()
        ))
    })
}

/// Decodes a state cell's value that fills `bytes` exactly (see
/// [`encode_state_into`]).
///
/// ```
/// assert!(tidewater::coder::decode_state::<u32>(&[0xc1]).is_err());
/// let mut buf = Vec::new();
/// tidewater::coder::encode_state_into(&7u32, &mut buf).unwrap();
/// assert_eq!(tidewater::coder::decode_state::<u32>(&buf).unwrap(), 7);
/// buf.push(0);
/// let e = tidewater::coder::decode_state::<u32>(&buf).unwrap_err();
/// assert!(e.to_string().contains("left trailing bytes"), "{e}");
/// // A byte that is no value at all trails too.
/// buf.pop();
/// buf.push(0xc1);
/// assert!(tidewater::coder::decode_state::<u32>(&buf).is_err());
/// ```
pub fn decode_state<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, CoderError> {
    // Read from the slice itself: a reader over it would allocate a buffer per value,
    // and a state read is on the hot path of every stateful DoFn.
    let mut de = rmp_serde::Deserializer::from_read_ref(bytes);
    let v = T::deserialize(&mut de).map_err(|e| {
        CoderError(format!(
            "cannot read state of type {} from the bytes written: {e}",
            std::any::type_name::<T>()
        ))
    })?;
    // The value must fill the bytes: what follows it would read as another value.
    match <serde::de::IgnoredAny as serde::Deserialize>::deserialize(&mut de) {
        Err(rmp_serde::decode::Error::InvalidMarkerRead(e))
            if e.kind() == std::io::ErrorKind::UnexpectedEof =>
        {
            Ok(v)
        }
        _ => Err(CoderError(format!(
            "reading state of type {} left trailing bytes",
            std::any::type_name::<T>()
        ))),
    }
}

/// A state cell's value as JSON, without its type: its encoding names its fields (see
/// [`encode_state_into`]). `None` for bytes that are not such a value.
///
/// ```
/// #[derive(serde::Serialize)]
/// struct Tally { count: u64 }
/// let mut buf = Vec::new();
/// tidewater::coder::encode_state_into(&Tally { count: 3 }, &mut buf).unwrap();
/// assert_eq!(tidewater::coder::state_to_json(&buf).unwrap().to_string(), r#"{"count":3}"#);
/// ```
pub fn state_to_json(bytes: &[u8]) -> Option<serde_json::Value> {
    decode_state(bytes).ok()
}

/// Encodes then decodes `value`, as the direct runner does to every element to prove
/// that it survives a shuffle.
///
/// ```
/// assert_eq!(tidewater::coder::round_trip(&(1u8, "a".to_string())).unwrap(), (1, "a".to_string()));
/// ```
pub fn round_trip<T: Serialize + DeserializeOwned>(value: &T) -> Result<T, CoderError> {
    let mut buf = Vec::new();
    encode_into(value, &mut buf)?;
    decode(&buf)
}
