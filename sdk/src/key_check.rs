//! Refusing key types whose encoding is not a function of their value, at pipeline
//! construction (Beam's `Coder.verifyDeterministic`).
//!
//! Keys are grouped, hashed and partitioned by their encoded bytes (see
//! [`crate::coder`]), so two equal keys must encode to the same bytes. Two kinds of
//! types break that and are refused as keys of every keyed primitive:
//!
//! - floats (`f32`, `f64`) anywhere in the key: `0.0 == -0.0` but their bits differ,
//!   and NaNs have many encodings. Found structurally, by tracing the key type's
//!   `Deserialize` impl with [`Tracer`], so a float inside a tuple, struct, enum
//!   variant, `Option`, `Vec` or map is found wherever it is nested.
//! - `HashMap` / `HashSet` (std or hashbrown): equal maps iterate, and so encode, their
//!   entries in different orders. serde cannot tell a `HashMap` from a `BTreeMap` (both
//!   deserialize as a map), so these are found by name in
//!   [`std::any::type_name`]: a `HashMap` written in the key type, such as
//!   `(HashMap<String, u32>, u8)`, is seen; one hidden inside a user struct's field
//!   (`struct Basket { items: HashMap<String, u32> }`) is not, and groups wrongly. With
//!   validation on, the direct runner's coder round-trip usually refuses it at run time
//!   (a decoded map of several entries prints in another order), as it does any such
//!   map in an element.
//!
//! Tracing is best effort: a `Deserialize` impl that rejects the minimal values the
//! trace offers (an empty string, a zero) ends that pass of the trace early, and a
//! float behind it is not seen.

use serde::de::{self, DeserializeOwned, DeserializeSeed, IntoDeserializer, Visitor};
use std::collections::{BTreeMap, BTreeSet};

/// How deep the trace descends into nested types before it stops expanding
/// collections and options (recursive types such as trees).
const MAX_DEPTH: usize = 16;
/// Past this depth a pass gives up: only a type that recurses without a collection or
/// an option in between gets here, and that type has no finite value.
const HARD_MAX_DEPTH: usize = 2 * MAX_DEPTH;
/// Each pass takes one variant of every enum; this many passes are enough for every
/// variant of any realistic key type.
const MAX_PASSES: usize = 64;
/// Float paths named in an error message; more are summarized.
const MAX_PATHS_SHOWN: usize = 3;

/// Records against the primitive being expanded why `K` cannot be its key type, if it
/// cannot: `primitive` names it in the message (GroupByKey, Combine.perKey, ...).
pub(crate) fn check_key_type<K: DeserializeOwned>(p: &crate::Pipeline, primitive: &str) {
    if let Err(message) = verify_deterministic_key::<K>(primitive) {
        p.record_error(message);
    }
}

/// Why `K` does not encode deterministically, if it does not.
fn verify_deterministic_key<K: DeserializeOwned>(primitive: &str) -> Result<(), String> {
    let floats = float_paths::<K>();
    let hashes = hash_collections(std::any::type_name::<K>());
    if floats.is_empty() && hashes.is_empty() {
        return Ok(());
    }
    let mut problems = Vec::new();
    if !floats.is_empty() {
        let mut shown: Vec<String> = floats
            .iter()
            .take(MAX_PATHS_SHOWN)
            .map(|(ty, path)| format!("{ty} at {path}"))
            .collect();
        if floats.len() > MAX_PATHS_SHOWN {
            shown.push(format!("{} more", floats.len() - MAX_PATHS_SHOWN));
        }
        problems.push(format!(
            "{} (floats that are equal can encode differently, as 0.0 and -0.0 do: use an integer, \
             e.g. cents, or the float's bits normalized into an integer)",
            shown.join(", ")
        ));
    }
    if !hashes.is_empty() {
        let names: Vec<&str> = hashes.into_iter().collect();
        let instead: Vec<&str> = names
            .iter()
            .map(|n| {
                if *n == "HashMap" {
                    "BTreeMap"
                } else {
                    "BTreeSet"
                }
            })
            .collect();
        problems.push(format!(
            "a {} in the key (equal ones encode their entries in different orders: use a {} instead)",
            names.join(" and a "),
            instead.join(" and a ")
        ));
    }
    Err(format!(
        "the key type {} of {primitive} does not encode deterministically, and keys are grouped by their \
         encoded bytes: {}",
        short_type_name(std::any::type_name::<K>()),
        problems.join("; ")
    ))
}

/// Every float in `K`, as (`"f32"` or `"f64"`, path from the key), shortest paths
/// first.
fn float_paths<K: DeserializeOwned>() -> Vec<(&'static str, String)> {
    let mut trace = Trace::default();
    for _ in 0..MAX_PASSES {
        trace.enum_stack.clear();
        // An error only ends this pass: what it found so far is kept.
        let _ = K::deserialize(Tracer {
            trace: &mut trace,
            depth: 0,
        });
        if trace.every_variant_tried() {
            break;
        }
    }
    let mut floats: Vec<_> = trace.floats.into_iter().collect();
    floats.sort_by_key(|(path, _)| (path.len(), path.clone()));
    floats.into_iter().map(|(path, ty)| (ty, path)).collect()
}

/// The names of the hash collections (`HashMap`, `HashSet`) written in a type name.
fn hash_collections(type_name: &str) -> BTreeSet<&'static str> {
    type_name
        .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
        .filter_map(|path| match path.rsplit("::").next() {
            Some("HashMap") => Some("HashMap"),
            Some("HashSet") => Some("HashSet"),
            _ => None,
        })
        .collect()
}

/// `type_name` without module paths: `(alloc::string::String, f64)` becomes
/// `(String, f64)`.
fn short_type_name(type_name: &str) -> String {
    let mut out = String::new();
    let mut path = String::new();
    for c in type_name.chars().chain(std::iter::once('\0')) {
        if c.is_alphanumeric() || c == '_' || c == ':' {
            path.push(c);
            continue;
        }
        out.push_str(path.rsplit("::").next().unwrap_or(""));
        path.clear();
        if c != '\0' {
            out.push(c);
        }
    }
    out
}

/// What a trace of a type's `Deserialize` impl has found, over all its passes.
#[derive(Default)]
struct Trace {
    /// The current path from the key, one segment per nesting.
    path: Vec<String>,
    /// Every float found: path -> `"f32"` / `"f64"`.
    floats: BTreeMap<String, &'static str>,
    /// Per enum: whether each variant has been taken.
    variants_tried: BTreeMap<&'static str, Vec<bool>>,
    /// Per enum: a variant known to end (no infinite recursion through it).
    ending_variant: BTreeMap<&'static str, u32>,
    /// Per enum: turns through its variants once every one has been tried, so that
    /// enums nested under a later variant are reached too.
    rotation: BTreeMap<&'static str, u32>,
    /// The enums being traced, outermost first.
    enum_stack: Vec<&'static str>,
}

impl Trace {
    fn record_float(&mut self, ty: &'static str) {
        let path = format!("key{}", self.path.concat());
        self.floats.entry(path).or_insert(ty);
    }

    fn every_variant_tried(&self) -> bool {
        self.variants_tried.values().flatten().all(|t| *t)
    }

    /// The variant of `name` to take: an untried one first; in a recursive occurrence,
    /// one known to end; else the next in turn.
    fn choose_variant(&mut self, name: &'static str, count: usize) -> u32 {
        let tried = self
            .variants_tried
            .entry(name)
            .or_insert_with(|| vec![false; count]);
        if let Some(v) = tried.iter().position(|t| !t) {
            tried[v] = true;
            return v as u32;
        }
        if self.enum_stack.contains(&name)
            && let Some(v) = self.ending_variant.get(name)
        {
            return *v;
        }
        let turn = self.rotation.entry(name).or_insert(0);
        *turn += 1;
        (*turn - 1) % count as u32
    }
}

/// A `serde::Deserializer` that produces no data: asked for a type, it records floats
/// and answers with the smallest value of each shape so that the type's `Deserialize`
/// impl descends into all of its parts.
struct Tracer<'a> {
    trace: &'a mut Trace,
    depth: usize,
}

type Error = de::value::Error;

impl Tracer<'_> {
    /// Runs `f` on a tracer one level deeper, with `segment` appended to the path.
    fn descend<R>(
        &mut self,
        segment: String,
        f: impl FnOnce(Tracer<'_>) -> Result<R, Error>,
    ) -> Result<R, Error> {
        if self.depth >= HARD_MAX_DEPTH {
            return Err(de::Error::custom("the type nests too deeply to trace"));
        }
        self.trace.path.push(segment);
        let result = f(Tracer {
            trace: &mut *self.trace,
            depth: self.depth + 1,
        });
        self.trace.path.pop();
        result
    }

    /// Deserializes `seed` with `segment` appended to the path.
    fn under<T: DeserializeSeed<'static>>(
        &mut self,
        segment: String,
        seed: T,
    ) -> Result<T::Value, Error> {
        self.descend(segment, |t| seed.deserialize(t))
    }

    /// A sequence of `segments.len()` elements, each under its segment.
    fn visit_seq<V: Visitor<'static>>(
        &mut self,
        segments: Vec<String>,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_seq(Elements {
            tracer: self,
            segments: segments.into_iter(),
        })
    }

    /// Whether collections and options should still yield an element here.
    fn expand(&self) -> bool {
        self.depth < MAX_DEPTH
    }
}

struct Elements<'t, 'a, I> {
    tracer: &'t mut Tracer<'a>,
    segments: I,
}

impl<I: Iterator<Item = String>> de::SeqAccess<'static> for Elements<'_, '_, I> {
    type Error = Error;
    fn next_element_seed<T: DeserializeSeed<'static>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Error> {
        match self.segments.next() {
            Some(segment) => self.tracer.under(segment, seed).map(Some),
            None => Ok(None),
        }
    }
}

/// One map entry (or none, past [`MAX_DEPTH`]).
struct Entry<'t, 'a> {
    tracer: &'t mut Tracer<'a>,
    left: bool,
}

impl de::MapAccess<'static> for Entry<'_, '_> {
    type Error = Error;
    fn next_key_seed<K: DeserializeSeed<'static>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        if !std::mem::take(&mut self.left) {
            return Ok(None);
        }
        self.tracer.under(".keys()".into(), seed).map(Some)
    }
    fn next_value_seed<V: DeserializeSeed<'static>>(&mut self, seed: V) -> Result<V::Value, Error> {
        self.tracer.under("[_]".into(), seed)
    }
}

/// The enum variant the trace takes.
struct Variant<'t, 'a> {
    tracer: &'t mut Tracer<'a>,
    name: &'static str,
    index: u32,
}

impl<'t, 'a> de::EnumAccess<'static> for Variant<'t, 'a> {
    type Error = Error;
    type Variant = Self;
    fn variant_seed<V: DeserializeSeed<'static>>(self, seed: V) -> Result<(V::Value, Self), Error> {
        let tag: de::value::U32Deserializer<Error> = self.index.into_deserializer();
        Ok((seed.deserialize(tag)?, self))
    }
}

impl de::VariantAccess<'static> for Variant<'_, '_> {
    type Error = Error;
    fn unit_variant(self) -> Result<(), Error> {
        Ok(())
    }
    fn newtype_variant_seed<T: DeserializeSeed<'static>>(self, seed: T) -> Result<T::Value, Error> {
        self.tracer.under(format!("::{}.0", self.name), seed)
    }
    fn tuple_variant<V: Visitor<'static>>(self, len: usize, visitor: V) -> Result<V::Value, Error> {
        let segments = (0..len).map(|i| format!("::{}.{i}", self.name)).collect();
        self.tracer.visit_seq(segments, visitor)
    }
    fn struct_variant<V: Visitor<'static>>(
        self,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        let segments = fields
            .iter()
            .map(|f| format!("::{}.{f}", self.name))
            .collect();
        self.tracer.visit_seq(segments, visitor)
    }
}

macro_rules! zero {
    ($($method:ident => $visit:ident($($value:expr)?),)*) => {
        $(fn $method<V: Visitor<'static>>(self, visitor: V) -> Result<V::Value, Error> {
            visitor.$visit($($value)?)
        })*
    };
}

impl<'a> de::Deserializer<'static> for Tracer<'a> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'static>>(self, _visitor: V) -> Result<V::Value, Error> {
        // The coder (postcard) cannot decode such a type either.
        Err(de::Error::custom("a self-describing type cannot be traced"))
    }

    zero! {
        deserialize_bool => visit_bool(false),
        deserialize_i8 => visit_i8(0),
        deserialize_i16 => visit_i16(0),
        deserialize_i32 => visit_i32(0),
        deserialize_i64 => visit_i64(0),
        deserialize_i128 => visit_i128(0),
        deserialize_u8 => visit_u8(0),
        deserialize_u16 => visit_u16(0),
        deserialize_u32 => visit_u32(0),
        deserialize_u64 => visit_u64(0),
        deserialize_u128 => visit_u128(0),
        deserialize_char => visit_char('a'),
        deserialize_str => visit_str(""),
        deserialize_string => visit_string(String::new()),
        deserialize_bytes => visit_bytes(&[]),
        deserialize_byte_buf => visit_byte_buf(Vec::new()),
        deserialize_unit => visit_unit(),
        deserialize_identifier => visit_u32(0),
    }

    fn deserialize_f32<V: Visitor<'static>>(self, visitor: V) -> Result<V::Value, Error> {
        self.trace.record_float("f32");
        visitor.visit_f32(0.0)
    }

    fn deserialize_f64<V: Visitor<'static>>(self, visitor: V) -> Result<V::Value, Error> {
        self.trace.record_float("f64");
        visitor.visit_f64(0.0)
    }

    fn deserialize_option<V: Visitor<'static>>(mut self, visitor: V) -> Result<V::Value, Error> {
        if !self.expand() {
            return visitor.visit_none();
        }
        self.descend(".unwrap()".into(), |t| visitor.visit_some(t))
    }

    fn deserialize_unit_struct<V: Visitor<'static>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }

    fn deserialize_newtype_struct<V: Visitor<'static>>(
        mut self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.descend(".0".into(), |t| visitor.visit_newtype_struct(t))
    }

    fn deserialize_seq<V: Visitor<'static>>(mut self, visitor: V) -> Result<V::Value, Error> {
        let segments = if self.expand() {
            vec!["[_]".to_string()]
        } else {
            Vec::new()
        };
        self.visit_seq(segments, visitor)
    }

    fn deserialize_tuple<V: Visitor<'static>>(
        mut self,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.visit_seq((0..len).map(|i| format!(".{i}")).collect(), visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'static>>(
        self,
        _name: &'static str,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_tuple(len, visitor)
    }

    fn deserialize_map<V: Visitor<'static>>(mut self, visitor: V) -> Result<V::Value, Error> {
        let left = self.expand();
        visitor.visit_map(Entry {
            tracer: &mut self,
            left,
        })
    }

    fn deserialize_struct<V: Visitor<'static>>(
        mut self,
        _name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.visit_seq(fields.iter().map(|f| format!(".{f}")).collect(), visitor)
    }

    fn deserialize_enum<V: Visitor<'static>>(
        mut self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        if variants.is_empty() {
            return Err(de::Error::custom("an enum without variants has no value"));
        }
        let index = self.trace.choose_variant(name, variants.len());
        self.trace.enum_stack.push(name);
        let result = visitor.visit_enum(Variant {
            tracer: &mut self,
            name: variants[index as usize],
            index,
        });
        self.trace.enum_stack.pop();
        if result.is_ok() {
            self.trace.ending_variant.entry(name).or_insert(index);
        }
        result
    }

    fn deserialize_ignored_any<V: Visitor<'static>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }

    fn is_human_readable(&self) -> bool {
        // As the coder: types that encode differently for humans trace their binary form.
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::{Deserialize, Serialize};
    use std::collections::HashMap;

    #[derive(Serialize, Deserialize)]
    struct Price {
        item: String,
        price: f64,
    }

    #[derive(Serialize, Deserialize)]
    enum Distance {
        Unknown,
        Steps(u32),
        Meters { value: f32 },
    }

    #[derive(Serialize, Deserialize)]
    enum List {
        Cons(Box<List>, f64),
        Nil,
    }

    #[derive(Serialize, Deserialize)]
    struct Tree {
        children: Vec<Tree>,
        weight: f32,
    }

    fn paths<K: DeserializeOwned>() -> Vec<String> {
        float_paths::<K>()
            .into_iter()
            .map(|(ty, path)| format!("{ty} at {path}"))
            .collect()
    }

    #[test]
    fn floats_are_found_wherever_they_nest() {
        assert_eq!(paths::<f64>(), ["f64 at key"]);
        assert_eq!(paths::<(String, f32)>(), ["f32 at key.1"]);
        assert_eq!(paths::<Price>(), ["f64 at key.price"]);
        assert_eq!(paths::<Option<f64>>(), ["f64 at key.unwrap()"]);
        assert_eq!(
            paths::<(u8, Vec<Option<f32>>)>(),
            ["f32 at key.1[_].unwrap()"]
        );
        assert_eq!(paths::<[f64; 2]>(), ["f64 at key.0", "f64 at key.1"]);
        assert_eq!(
            paths::<BTreeMap<String, f64>>(),
            ["f64 at key[_]"],
            "map values"
        );
        assert_eq!(paths::<Vec<(u8, f64)>>(), ["f64 at key[_].1"]);
        assert_eq!(paths::<(u8, Distance)>(), ["f32 at key.1::Meters.value"]);
        assert_eq!(paths::<Box<f32>>(), ["f32 at key"]);
    }

    #[test]
    fn recursive_types_are_traced_to_a_bounded_depth() {
        assert_eq!(paths::<List>()[0], "f64 at key::Cons.1");
        assert_eq!(paths::<Tree>()[0], "f32 at key.weight");
        assert!(paths::<Tree>().len() > 1);
    }

    #[test]
    fn exact_types_have_no_float() {
        assert!(paths::<(String, u64, i8, char, bool, Vec<u8>, ())>().is_empty());
        assert!(paths::<(Option<String>, BTreeMap<String, Vec<u32>>)>().is_empty());
        assert!(paths::<std::time::Duration>().is_empty());
        assert!(paths::<crate::BoundedWindow>().is_empty());
    }

    #[test]
    fn hash_collections_are_found_by_name() {
        let names = |n: &str| hash_collections(n).into_iter().collect::<Vec<_>>();
        assert_eq!(
            names(std::any::type_name::<(HashMap<String, u32>, u8)>()),
            ["HashMap"]
        );
        assert_eq!(
            names(std::any::type_name::<(u8, hashbrown::HashSet<u8>)>()),
            ["HashSet"]
        );
        assert_eq!(
            names(std::any::type_name::<rustc_hash::FxHashMap<u8, u8>>()),
            ["HashMap"]
        );
        assert!(names(std::any::type_name::<BTreeMap<String, u32>>()).is_empty());
    }

    #[test]
    fn type_names_lose_their_module_paths() {
        assert_eq!(
            short_type_name(std::any::type_name::<(HashMap<String, u32>, Price)>()),
            "(HashMap<String, u32>, Price)"
        );
    }
}
