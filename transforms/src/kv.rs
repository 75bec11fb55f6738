use tidewater::{Element, PCollection, PTransform};

/// The keys of `(K, V)` pairs.
///
/// ```
/// let p = tidewater::Pipeline::new(Default::default());
/// let ks: tidewater::PCollection<String> = p.create("Kvs", vec![("a".to_string(), 1i64)]).apply("Keys", tidewater_transforms::Keys);
/// ```
pub struct Keys;
/// The values of `(K, V)` pairs.
pub struct Values;
/// `(K, V)` becomes `(V, K)`.
pub struct KvSwap;

fn key<K, V>(kv: (K, V)) -> K {
    kv.0
}
fn value<K, V>(kv: (K, V)) -> V {
    kv.1
}
fn swap<K, V>(kv: (K, V)) -> (V, K) {
    (kv.1, kv.0)
}

impl<K: Element, V: Element> PTransform<PCollection<(K, V)>> for Keys {
    type Output = PCollection<K>;
    fn expand(self, input: PCollection<(K, V)>) -> PCollection<K> {
        input.map("Key", key::<K, V>)
    }
}

impl<K: Element, V: Element> PTransform<PCollection<(K, V)>> for Values {
    type Output = PCollection<V>;
    fn expand(self, input: PCollection<(K, V)>) -> PCollection<V> {
        input.map("Value", value::<K, V>)
    }
}

impl<K: Element, V: Element> PTransform<PCollection<(K, V)>> for KvSwap {
    type Output = PCollection<(V, K)>;
    fn expand(self, input: PCollection<(K, V)>) -> PCollection<(V, K)> {
        input.map("Swap", swap::<K, V>)
    }
}
