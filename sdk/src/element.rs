//! What a value must be to travel in a [`PCollection`](crate::PCollection).

use serde::Serialize;
use serde::de::DeserializeOwned;
use std::fmt::Debug;

/// A value that can be an element of a PCollection.
///
/// Elements are plain Rust values. They are encoded (see [`crate::coder`]) only where
/// they cross a shuffle, a process or a snapshot; `Debug` names an element in error
/// messages. The trait is implemented for every type that qualifies.
///
/// ```
/// fn takes<T: tidewater::Element>() {}
/// takes::<(String, u64)>();
/// ```
pub trait Element: Clone + Debug + Serialize + DeserializeOwned + Send + Sync + 'static {}

impl<T> Element for T where T: Clone + Debug + Serialize + DeserializeOwned + Send + Sync + 'static {}

/// A key/value pair, Beam's `KV`. It is a plain tuple so that patterns such as
/// `|(word, count)|` work.
///
/// ```
/// let kv: tidewater::KV<&str, i64> = ("a", 1);
/// assert_eq!(kv.0, "a");
/// ```
pub type KV<K, V> = (K, V);
