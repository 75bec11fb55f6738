use serde::{Deserialize, Serialize};
use tidewater::{Element, FlattenExt, GroupByKey, PCollection, PTransform};

/// Joins two keyed PCollections: for each key (and window), the values from each side.
/// A key present on one side only gets an empty vector for the other.
///
/// ```
/// use tidewater_transforms::CoGroupExt;
/// let p = tidewater::Pipeline::new(Default::default());
/// let emails = p.create("Emails", vec![("amy".to_string(), "amy@x".to_string())]);
/// let phones = p.create("Phones", vec![("amy".to_string(), 555u32)]);
/// let joined: tidewater::PCollection<(String, (Vec<String>, Vec<u32>))> =
///     (emails, phones).apply_cogroup("Join");
/// ```
pub struct CoGroupByKey;

/// A value from one side of a [`CoGroupByKey`].
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Union<A, B> {
    /// From the first input.
    Left(A),
    /// From the second input.
    Right(B),
}

fn left<K, A, B>(kv: (K, A)) -> (K, Union<A, B>) {
    (kv.0, Union::Left(kv.1))
}
fn right<K, A, B>(kv: (K, B)) -> (K, Union<A, B>) {
    (kv.0, Union::Right(kv.1))
}
fn split<K, A, B>(kv: (K, Vec<Union<A, B>>)) -> (K, (Vec<A>, Vec<B>)) {
    let mut l = Vec::new();
    let mut r = Vec::new();
    for u in kv.1 {
        match u {
            Union::Left(a) => l.push(a),
            Union::Right(b) => r.push(b),
        }
    }
    (kv.0, (l, r))
}

impl<K: Element, A: Element, B: Element> PTransform<(PCollection<(K, A)>, PCollection<(K, B)>)>
    for CoGroupByKey
{
    type Output = PCollection<(K, (Vec<A>, Vec<B>))>;
    fn expand(self, (a, b): (PCollection<(K, A)>, PCollection<(K, B)>)) -> Self::Output {
        let a = a.map("TagLeft", left::<K, A, B>);
        let b = b.map("TagRight", right::<K, A, B>);
        vec![a, b]
            .apply_flatten("Flatten")
            .apply("GroupByKey", GroupByKey)
            .map("Split", split::<K, A, B>)
    }
}

/// The output of a [`CoGroupByKey`]: per key, the values of each side.
pub type CoGrouped<K, A, B> = PCollection<(K, (Vec<A>, Vec<B>))>;

/// CoGroupByKey as a method on a pair of keyed PCollections.
pub trait CoGroupExt<K, A, B> {
    /// Applies [`CoGroupByKey`] under `name`.
    fn apply_cogroup(&self, name: &str) -> CoGrouped<K, A, B>;
}

impl<K: Element, A: Element, B: Element> CoGroupExt<K, A, B>
    for (PCollection<(K, A)>, PCollection<(K, B)>)
{
    fn apply_cogroup(&self, name: &str) -> CoGrouped<K, A, B> {
        self.0.pipeline().apply_to(name, self.clone(), CoGroupByKey)
    }
}
