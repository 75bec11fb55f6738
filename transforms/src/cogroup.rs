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

/// Keyed PCollections under tags, for an N-way [`CoGroupByKey`] (Beam's
/// `KeyedPCollectionTuple`): every input is `(K, V)` with its own value type; the result
/// holds, per key and window, the values of each input, read back by its tag.
///
/// ```
/// use tidewater::TupleTag;
/// use tidewater_transforms::{CoGbkResult, CoGroupByKey, KeyedPCollectionTuple};
/// tidewater_runner_direct::register();
/// let p = tidewater::Pipeline::new(Default::default());
/// let emails = TupleTag::<String>::new("emails");
/// let phones = TupleTag::<u32>::new("phones");
/// let visits = TupleTag::<u64>::new("visits");
/// let joined = KeyedPCollectionTuple::of(&emails, p.create("E", vec![('a', "a@x".to_string())]))
///     .and(&phones, p.create("P", vec![('a', 555u32), ('b', 777)]))
///     .and(&visits, p.create("V", vec![('b', 3u64), ('b', 4)]))
///     .apply("Join", CoGroupByKey);
/// joined
///     .map_with("Row", (emails, phones, visits), |(e, ph, v), (k, r): (char, CoGbkResult)| {
///         (k, r.all(e).len(), r.only(ph), r.all(v).iter().sum::<u64>())
///     })
///     .capture("rows");
/// let mut rows = p.run().unwrap().captured_values::<(char, usize, Option<u32>, u64)>("rows").unwrap();
/// rows.sort();
/// assert_eq!(rows, vec![('a', 1, Some(555), 0), ('b', 0, Some(777), 7)]);
/// ```
pub struct KeyedPCollectionTuple<K> {
    pipeline: tidewater::Pipeline,
    inputs: Vec<KeyedInput<K>>,
}

/// One tagged input: its PCollection's id and how to tag it inside the join.
struct KeyedInput<K> {
    tag: String,
    id: usize,
    tagged: std::rc::Rc<dyn Fn(u32) -> PCollection<(K, RawValue)>>,
}

impl<K> Clone for KeyedInput<K> {
    fn clone(&self) -> Self {
        KeyedInput {
            tag: self.tag.clone(),
            id: self.id,
            tagged: self.tagged.clone(),
        }
    }
}

impl<K> Clone for KeyedPCollectionTuple<K> {
    fn clone(&self) -> Self {
        KeyedPCollectionTuple {
            pipeline: self.pipeline.clone(),
            inputs: self.inputs.clone(),
        }
    }
}

/// A value of one input, encoded, with the input's index.
type RawValue = (u32, Vec<u8>);

fn encode_value<K, V: Element>(index: &u32, (k, v): (K, V)) -> (K, RawValue) {
    let mut bytes = Vec::new();
    // The exchange carries these bytes, not `v`: a value that does not encode must fail
    // here (a panic in user code, reported with the transform and the element), not
    // travel as empty bytes and fail to decode later.
    if let Err(e) = tidewater::coder::encode_into(&v, &mut bytes) {
        panic!("CoGroupByKey: a value of input {index} does not encode: {e}");
    }
    (k, (*index, bytes))
}

impl<K: Element> KeyedPCollectionTuple<K> {
    /// A tuple of one input, `pc` under `tag`.
    pub fn of<V: Element>(tag: &tidewater::TupleTag<V>, pc: PCollection<(K, V)>) -> Self {
        KeyedPCollectionTuple {
            pipeline: tidewater::PInput::pipeline(&pc).clone(),
            inputs: Vec::new(),
        }
        .and(tag, pc)
    }

    /// Adds `pc` under `tag` (tags must differ: a repeated one is a construction error).
    pub fn and<V: Element>(
        mut self,
        tag: &tidewater::TupleTag<V>,
        pc: PCollection<(K, V)>,
    ) -> Self {
        let name = tag.name().to_string();
        let id = tidewater::PInput::pcollections(&pc)[0].1;
        let step = format!("Tag[{name}]");
        self.inputs.push(KeyedInput {
            tag: name,
            id,
            tagged: std::rc::Rc::new(move |index| pc.map_with(&step, index, encode_value::<K, V>)),
        });
        self
    }

    /// Applies `t` (a [`CoGroupByKey`]) under `name`.
    pub fn apply<T: PTransform<Self>>(self, name: &str, t: T) -> T::Output {
        self.pipeline.clone().apply_to(name, self, t)
    }
}

impl<K: Element> tidewater::PInput for KeyedPCollectionTuple<K> {
    fn pipeline(&self) -> &tidewater::Pipeline {
        &self.pipeline
    }
    fn pcollections(&self) -> Vec<(String, usize)> {
        self.inputs.iter().map(|i| (i.tag.clone(), i.id)).collect()
    }
}

/// The values of every input of an N-way [`CoGroupByKey`] for one key and window
/// (Beam's `CoGbkResult`), read by tag.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CoGbkResult {
    tags: Vec<String>,
    /// Per input (in tag order), its values, encoded.
    values: Vec<Vec<Vec<u8>>>,
}

impl CoGbkResult {
    fn index(&self, tag: &str) -> usize {
        self.tags.iter().position(|t| t == tag).unwrap_or_else(|| {
            panic!(
                "CoGbkResult has no input tagged '{tag}' (its tags: {})",
                self.tags.join(", ")
            )
        })
    }

    /// Every value the input under `tag` had for this key and window (none: empty). A
    /// tag the join did not have is a user error (it panics, naming the tags).
    pub fn all<T: Element>(&self, tag: &tidewater::TupleTag<T>) -> Vec<T> {
        self.values[self.index(tag.name())]
            .iter()
            .map(|b| {
                tidewater::coder::decode(b).unwrap_or_else(|e| {
                    panic!(
                        "CoGbkResult: the values under '{}' are not {}: {e}",
                        tag.name(),
                        std::any::type_name::<T>()
                    )
                })
            })
            .collect()
    }

    /// The first value under `tag`, if any (Beam's `getOnly` with a default).
    pub fn only<T: Element>(&self, tag: &tidewater::TupleTag<T>) -> Option<T> {
        self.all(tag).into_iter().next()
    }

    /// Whether the input under `tag` had any value for this key and window.
    pub fn contains<T>(&self, tag: &tidewater::TupleTag<T>) -> bool {
        !self.values[self.index(tag.name())].is_empty()
    }
}

// `map_with` hands its parameters over by reference: here a `&Vec<String>`.
#[allow(clippy::ptr_arg)]
fn to_result<K>(tags: &Vec<String>, (k, raw): (K, Vec<RawValue>)) -> (K, CoGbkResult) {
    let mut values = vec![Vec::new(); tags.len()];
    for (i, bytes) in raw {
        if let Some(v) = values.get_mut(i as usize) {
            v.push(bytes);
        }
    }
    (
        k,
        CoGbkResult {
            tags: tags.clone(),
            values,
        },
    )
}

impl<K: Element> PTransform<KeyedPCollectionTuple<K>> for CoGroupByKey {
    type Output = PCollection<(K, CoGbkResult)>;
    fn expand(self, input: KeyedPCollectionTuple<K>) -> Self::Output {
        let tags: Vec<String> = input.inputs.iter().map(|i| i.tag.clone()).collect();
        let mut seen = std::collections::BTreeSet::new();
        for t in &tags {
            if !seen.insert(t) {
                input.pipeline.record_error(format!(
                    "CoGroupByKey: two inputs are tagged '{t}'; every input needs its own tag"
                ));
            }
        }
        let tagged: Vec<PCollection<(K, RawValue)>> = input
            .inputs
            .iter()
            .enumerate()
            .map(|(i, x)| (x.tagged)(i as u32))
            .collect();
        tagged
            .apply_flatten("Flatten")
            .apply("GroupByKey", GroupByKey)
            .map_with("Result", tags, to_result::<K>)
    }
}
