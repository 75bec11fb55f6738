use crate::exec::{ExecError, GroupingOps};
use crate::plan::{FunctionSpec, GroupingPayload, UserFunction, urn};
use crate::registry;
use crate::{Element, PCollection, PTransform};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::marker::PhantomData;
use std::sync::Arc;

/// An associative, commutative aggregation with an accumulator, so that runners can
/// combine partially before the shuffle ("combiner lifting") and merge after it.
///
/// ```
/// use serde::{Deserialize, Serialize};
/// #[derive(Serialize, Deserialize)]
/// struct SumLen;
/// impl tidewater::CombineFn for SumLen {
///     type In = String;
///     type Acc = u64;
///     type Out = u64;
///     fn create_accumulator(&self) -> u64 { 0 }
///     fn add_input(&self, acc: &mut u64, s: String) { *acc += s.len() as u64 }
///     fn merge_accumulators(&self, acc: &mut u64, other: u64) { *acc += other }
///     fn extract_output(&self, acc: u64) -> u64 { acc }
/// }
/// ```
pub trait CombineFn: Send + Sync + 'static {
    /// Input element type.
    type In: Element;
    /// Accumulator; it crosses the shuffle, so it is an element too.
    type Acc: Element;
    /// Output type.
    type Out: Element;
    /// A new, empty accumulator.
    fn create_accumulator(&self) -> Self::Acc;
    /// Adds one input.
    fn add_input(&self, acc: &mut Self::Acc, input: Self::In);
    /// Merges `other` into `acc`.
    fn merge_accumulators(&self, acc: &mut Self::Acc, other: Self::Acc);
    /// The output of a complete accumulator.
    fn extract_output(&self, acc: Self::Acc) -> Self::Out;
}

/// Entry points for combining.
pub struct Combine;

impl Combine {
    /// Combines the values of each key and window: `(K, In)` becomes `(K, Out)`. Like
    /// [`GroupByKey`](crate::GroupByKey), it refuses a key type with a float or a
    /// `HashMap`/`HashSet` in it.
    ///
    /// ```
    /// # use serde::{Deserialize, Serialize};
    /// # #[derive(Serialize, Deserialize)] struct Total;
    /// # impl tidewater::CombineFn for Total { type In = i64; type Acc = i64; type Out = i64;
    /// #   fn create_accumulator(&self) -> i64 { 0 } fn add_input(&self, a: &mut i64, x: i64) { *a += x }
    /// #   fn merge_accumulators(&self, a: &mut i64, b: i64) { *a += b } fn extract_output(&self, a: i64) -> i64 { a } }
    /// let p = tidewater::Pipeline::new(Default::default());
    /// let totals = p.create("Kvs", vec![("a".to_string(), 1i64)]).apply("Total", tidewater::Combine::per_key(Total));
    /// ```
    pub fn per_key<F: CombineFn + Serialize + DeserializeOwned>(f: F) -> CombinePerKey<F> {
        CombinePerKey { f }
    }

    /// Combines the occurrences of each distinct element per window: the element is
    /// its own key, and the CombineFn gets `()` for each occurrence. `(T, output)` per
    /// distinct element, as `Combine::per_key` over `(element, ())` gives, without the
    /// step that pairs every element (Beam's `Count.perElement` is this with a count).
    /// Like `per_key`, it refuses an element type that cannot be a key.
    ///
    /// ```
    /// # use serde::{Deserialize, Serialize};
    /// # #[derive(Serialize, Deserialize)] struct Occurrences;
    /// # impl tidewater::CombineFn for Occurrences { type In = (); type Acc = u64; type Out = u64;
    /// #   fn create_accumulator(&self) -> u64 { 0 } fn add_input(&self, a: &mut u64, _: ()) { *a += 1 }
    /// #   fn merge_accumulators(&self, a: &mut u64, b: u64) { *a += b } fn extract_output(&self, a: u64) -> u64 { a } }
    /// let p = tidewater::Pipeline::new(Default::default());
    /// let counts = p.create("Words", vec!["a".to_string(), "b".to_string(), "a".to_string()])
    ///     .apply("Occurrences", tidewater::Combine::per_element(Occurrences));
    /// ```
    pub fn per_element<F: CombineFn<In = ()> + Serialize + DeserializeOwned>(
        f: F,
    ) -> CombinePerElement<F> {
        CombinePerElement { f }
    }

    /// Combines all elements of each window into one; an empty input in the global
    /// window gives the output of an empty accumulator.
    pub fn globally<F: CombineFn + Serialize + DeserializeOwned>(f: F) -> CombineGlobally<F> {
        CombineGlobally { f }
    }
}

/// See [`Combine::per_element`].
pub struct CombinePerElement<F> {
    f: F,
}

/// See [`Combine::per_key`].
pub struct CombinePerKey<F> {
    f: F,
}

impl<F> CombinePerKey<F> {
    /// The CombineFn.
    pub(crate) fn into_fn(self) -> F {
        self.f
    }
}

/// See [`Combine::globally`].
pub struct CombineGlobally<F> {
    f: F,
}

impl<F> CombineGlobally<F> {
    /// No output for an empty input, in the global window too (Beam's
    /// `withoutDefaults()`): by default an empty global window gives the output of an
    /// empty accumulator.
    ///
    /// ```
    /// use tidewater::{Combine, CombineFn};
    /// # #[derive(serde::Serialize, serde::Deserialize)]
    /// # struct Sum;
    /// # impl CombineFn for Sum {
    /// #     type In = u64; type Acc = u64; type Out = u64;
    /// #     fn create_accumulator(&self) -> u64 { 0 }
    /// #     fn add_input(&self, a: &mut u64, x: u64) { *a += x }
    /// #     fn merge_accumulators(&self, a: &mut u64, b: u64) { *a += b }
    /// #     fn extract_output(&self, a: u64) -> u64 { a }
    /// # }
    /// tidewater_runner_direct::register();
    /// let p = tidewater::Pipeline::new(Default::default());
    /// let none = p.create("Nothing", Vec::<u64>::new());
    /// none.apply("Sum", Combine::globally(Sum)).capture("with_default");
    /// none.apply("SumWithout", Combine::globally(Sum).without_defaults()).capture("without");
    /// let r = p.run().unwrap();
    /// assert_eq!(r.captured_values::<u64>("with_default").unwrap(), vec![0]);
    /// assert_eq!(r.captured_values::<u64>("without").unwrap(), Vec::<u64>::new());
    /// ```
    pub fn without_defaults(self) -> CombineGloballyWithoutDefaults<F> {
        CombineGloballyWithoutDefaults { f: self.f }
    }
}

/// See [`CombineGlobally::without_defaults`].
pub struct CombineGloballyWithoutDefaults<F> {
    f: F,
}

/// How a combine's elements map to (key, input) and back: per key, or globally with
/// the unit key.
pub trait CombineShape<F: CombineFn>: Send + Sync + 'static {
    /// The grouping key.
    type Key: Element;
    /// The transform's input element.
    type Input: Element;
    /// The transform's output element.
    type Output: Element;
    /// Splits an input element.
    fn split(x: Self::Input) -> (Self::Key, F::In);
    /// Builds an output element.
    fn join(k: Self::Key, out: F::Out) -> Self::Output;
    /// The output for an empty input in the global window, if the shape has one.
    fn empty_output(make: impl FnOnce() -> F::Out) -> Option<Self::Output>;
    /// Appends the canonical encoding of an input's key (`()` for a global combine).
    fn encode_key(x: &Self::Input, out: &mut Vec<u8>) -> Result<(), ExecError>;
}

/// Per-key shape.
pub struct PerKey<K>(PhantomData<fn() -> K>);
/// Per-element shape: the element is the key, the CombineFn gets `()`.
pub struct PerElement<T>(PhantomData<fn() -> T>);
/// Global shape.
pub struct Globally;
/// Global shape without a default output.
pub struct GloballyWithoutDefaults;

impl<F: CombineFn, K: Element> CombineShape<F> for PerKey<K> {
    type Key = K;
    type Input = (K, F::In);
    type Output = (K, F::Out);
    fn split(x: (K, F::In)) -> (K, F::In) {
        x
    }
    fn join(k: K, out: F::Out) -> (K, F::Out) {
        (k, out)
    }
    fn empty_output(_: impl FnOnce() -> F::Out) -> Option<(K, F::Out)> {
        None
    }
    fn encode_key(x: &(K, F::In), out: &mut Vec<u8>) -> Result<(), ExecError> {
        crate::exec::encode_key(&x.0, out)
    }
}

impl<F: CombineFn<In = ()>, T: Element> CombineShape<F> for PerElement<T> {
    type Key = T;
    type Input = T;
    type Output = (T, F::Out);
    fn split(x: T) -> (T, ()) {
        (x, ())
    }
    fn join(k: T, out: F::Out) -> (T, F::Out) {
        (k, out)
    }
    fn empty_output(_: impl FnOnce() -> F::Out) -> Option<(T, F::Out)> {
        None
    }
    fn encode_key(x: &T, out: &mut Vec<u8>) -> Result<(), ExecError> {
        crate::exec::encode_key(x, out)
    }
}

impl<F: CombineFn> CombineShape<F> for Globally {
    type Key = ();
    type Input = F::In;
    type Output = F::Out;
    fn split(x: F::In) -> ((), F::In) {
        ((), x)
    }
    fn join(_: (), out: F::Out) -> F::Out {
        out
    }
    fn empty_output(make: impl FnOnce() -> F::Out) -> Option<F::Out> {
        Some(make())
    }
    fn encode_key(_: &F::In, out: &mut Vec<u8>) -> Result<(), ExecError> {
        crate::exec::encode_key(&(), out)
    }
}

impl<F: CombineFn> CombineShape<F> for GloballyWithoutDefaults {
    type Key = ();
    type Input = F::In;
    type Output = F::Out;
    fn split(x: F::In) -> ((), F::In) {
        ((), x)
    }
    fn join(_: (), out: F::Out) -> F::Out {
        out
    }
    fn empty_output(_: impl FnOnce() -> F::Out) -> Option<F::Out> {
        None
    }
    fn encode_key(_: &F::In, out: &mut Vec<u8>) -> Result<(), ExecError> {
        crate::exec::encode_key(&(), out)
    }
}

/// The typed operations of a combine of shape `S` with `F`.
pub struct CombineOps<S, F> {
    pub(super) f: Arc<F>,
    _s: PhantomData<fn() -> S>,
}

/// Registers the grouping of a combine of shape `S` with `F` (and the element types it
/// reads, writes and shuffles) and returns its name in the plan.
pub(crate) fn register_combine<S: CombineShape<F>, F: CombineFn + DeserializeOwned>() -> String {
    let name = std::any::type_name::<CombineOps<S, F>>().to_string();
    registry::register_element_type::<S::Input>();
    registry::register_element_type::<S::Output>();
    registry::register_element_type::<(S::Key, F::Acc)>();
    registry::register_grouping::<CombineOps<S, F>>(
        &name,
        Arc::new(|fields| {
            let f: F = erased_serde::deserialize(fields)
                .map_err(|e| crate::plan::without_position(e.to_string()))?;
            Ok(Box::new(CombineOps::<S, F> {
                f: Arc::new(f),
                _s: PhantomData,
            }) as Box<dyn GroupingOps>)
        }),
    );
    name
}

fn apply_combine<S: CombineShape<F>, F: CombineFn + Serialize + DeserializeOwned>(
    input: &PCollection<S::Input>,
    f: F,
    urn: &str,
) -> PCollection<S::Output> {
    let p = input.pipeline().clone();
    super::group_by_key::check_groupable(&p, input.id);
    let name = register_combine::<S, F>();
    let fields = serde_json::to_value(&f).unwrap_or_else(|e| {
        p.record_error(format!(
            "the fields of CombineFn {} do not serialize: {e}",
            std::any::type_name::<F>()
        ));
        serde_json::Value::Null
    });
    let payload = GroupingPayload {
        grouping: UserFunction {
            name,
            fields: fields.into(),
        },
    };
    let spec = FunctionSpec {
        urn: urn.into(),
        payload: serde_json::to_value(payload)
            .expect("payload serializes")
            .into(),
    };
    let bounded = p.is_bounded(&[input.id]);
    let out = p.set_primitive(
        spec,
        true,
        crate::pipeline::output_types::<S::Output>("main"),
        bounded,
    );
    p.pcollection(out[0])
}

impl<K: Element, F: CombineFn + Serialize + DeserializeOwned> PTransform<PCollection<(K, F::In)>>
    for CombinePerKey<F>
{
    type Output = PCollection<(K, F::Out)>;
    fn expand(self, input: PCollection<(K, F::In)>) -> PCollection<(K, F::Out)> {
        crate::key_check::check_key_type::<K>(input.pipeline(), "Combine.perKey");
        apply_combine::<PerKey<K>, F>(&input, self.f, urn::COMBINE_PER_KEY)
    }
}

impl<T: Element, F: CombineFn<In = ()> + Serialize + DeserializeOwned> PTransform<PCollection<T>>
    for CombinePerElement<F>
{
    type Output = PCollection<(T, F::Out)>;
    fn expand(self, input: PCollection<T>) -> PCollection<(T, F::Out)> {
        crate::key_check::check_key_type::<T>(input.pipeline(), "Combine.perElement");
        apply_combine::<PerElement<T>, F>(&input, self.f, urn::COMBINE_PER_KEY)
    }
}

impl<F: CombineFn + Serialize + DeserializeOwned> PTransform<PCollection<F::In>>
    for CombineGlobally<F>
{
    type Output = PCollection<F::Out>;
    fn expand(self, input: PCollection<F::In>) -> PCollection<F::Out> {
        apply_combine::<Globally, F>(&input, self.f, urn::COMBINE_GLOBALLY)
    }
}

impl<F: CombineFn + Serialize + DeserializeOwned> PTransform<PCollection<F::In>>
    for CombineGloballyWithoutDefaults<F>
{
    type Output = PCollection<F::Out>;
    fn expand(self, input: PCollection<F::In>) -> PCollection<F::Out> {
        apply_combine::<GloballyWithoutDefaults, F>(&input, self.f, urn::COMBINE_GLOBALLY)
    }
}

/// A combine's reduction over inputs.
pub(super) struct Combining<S, F> {
    pub(super) f: Arc<F>,
    pub(super) _s: PhantomData<fn() -> S>,
}

impl<S: CombineShape<F>, F: CombineFn> super::reduce::Reduction for Combining<S, F> {
    type Key = S::Key;
    type Input = S::Input;
    type Value = F::In;
    type Acc = F::Acc;
    type Output = S::Output;
    fn split(&self, input: S::Input) -> (S::Key, F::In) {
        S::split(input)
    }
    fn create(&self) -> F::Acc {
        self.f.create_accumulator()
    }
    fn add(&self, acc: &mut F::Acc, v: F::In) {
        self.f.add_input(acc, v)
    }
    fn merge(&self, acc: &mut F::Acc, other: F::Acc) {
        self.f.merge_accumulators(acc, other)
    }
    fn output(&self, key: &S::Key, acc: &F::Acc) -> S::Output {
        S::join(key.clone(), self.f.extract_output(acc.clone()))
    }
    fn take_output(&self, key: &S::Key, acc: F::Acc) -> S::Output {
        S::join(key.clone(), self.f.extract_output(acc))
    }
}

/// A combine's reduction over accumulators lifted before the shuffle.
pub(super) struct MergingAccumulators<S, F> {
    pub(super) f: Arc<F>,
    pub(super) _s: PhantomData<fn() -> S>,
}

impl<S: CombineShape<F>, F: CombineFn> super::reduce::Reduction for MergingAccumulators<S, F> {
    type Key = S::Key;
    type Input = (S::Key, F::Acc);
    type Value = F::Acc;
    type Acc = F::Acc;
    type Output = S::Output;
    fn split(&self, input: (S::Key, F::Acc)) -> (S::Key, F::Acc) {
        input
    }
    fn create(&self) -> F::Acc {
        self.f.create_accumulator()
    }
    fn add(&self, acc: &mut F::Acc, v: F::Acc) {
        self.f.merge_accumulators(acc, v)
    }
    fn merge(&self, acc: &mut F::Acc, other: F::Acc) {
        self.f.merge_accumulators(acc, other)
    }
    fn output(&self, key: &S::Key, acc: &F::Acc) -> S::Output {
        S::join(key.clone(), self.f.extract_output(acc.clone()))
    }
    fn take_output(&self, key: &S::Key, acc: F::Acc) -> S::Output {
        S::join(key.clone(), self.f.extract_output(acc))
    }
}

pub(super) fn panic_message(p: Box<dyn std::any::Any + Send>) -> String {
    let message = p
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_default();
    format!("panicked: {message}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::downcast_batch;
    use crate::exec::{AnyBatch, Batch, GroupingPhase};
    use crate::{BoundedWindow, PaneInfo, Timestamp, WindowedValue, Windows};

    #[derive(Serialize, serde::Deserialize)]
    struct Total;

    impl CombineFn for Total {
        type In = i64;
        type Acc = i64;
        type Out = i64;
        fn create_accumulator(&self) -> i64 {
            0
        }
        fn add_input(&self, a: &mut i64, x: i64) {
            *a += x;
        }
        fn merge_accumulators(&self, a: &mut i64, b: i64) {
            *a += b;
        }
        fn extract_output(&self, a: i64) -> i64 {
            a
        }
    }

    fn window(start: i64) -> BoundedWindow {
        BoundedWindow::Interval {
            start: Timestamp(start),
            end: Timestamp(start + 10),
        }
    }

    fn input(key: &str, x: i64, start: i64) -> WindowedValue<(String, i64)> {
        WindowedValue {
            value: (key.to_string(), x),
            timestamp: Timestamp(start),
            windows: Windows::One(window(start)),
            pane: PaneInfo::NO_FIRING,
        }
    }

    /// (key, accumulator, window start), sorted.
    fn drained(batch: Box<dyn AnyBatch>) -> Vec<(String, i64, i64)> {
        let mut v: Vec<_> = downcast_batch::<(String, i64)>(batch)
            .into_iter()
            .map(|wv| {
                let BoundedWindow::Interval { start, .. } =
                    wv.windows.iter().next().cloned().unwrap()
                else {
                    panic!("interval windows only")
                };
                (wv.value.0, wv.value.1, start.0)
            })
            .collect();
        v.sort();
        v
    }

    #[test]
    fn a_partial_table_emits_only_the_windows_a_watermark_passes() {
        let ops = CombineOps::<PerKey<String>, Total> {
            f: Arc::new(Total),
            _s: PhantomData,
        };
        let mut table = ops.new_table(GroupingPhase::Partial);
        let batch = vec![
            input("a", 1, 0),
            input("b", 2, 0),
            input("a", 3, 10),
            input("a", 4, 20),
            input("a", 5, 0),
        ];
        table.add(Box::new(Batch { items: batch })).unwrap();
        // [0, 10) ends at 9: a watermark of 9 passes nothing yet, 10 passes it.
        assert!(drained(table.finish_ended_before(Timestamp(9)).unwrap()).is_empty());
        assert_eq!(table.groups(), 4);
        assert_eq!(
            drained(table.finish_ended_before(Timestamp(10)).unwrap()),
            vec![("a".into(), 6, 0), ("b".into(), 2, 0)]
        );
        assert_eq!(table.groups(), 2);
        // The kept groups go on accumulating under their keys.
        let more = vec![input("a", 10, 10), input("b", 7, 0)];
        table.add(Box::new(Batch { items: more })).unwrap();
        assert_eq!(
            drained(table.finish_ended_before(Timestamp(20)).unwrap()),
            vec![("a".into(), 13, 10), ("b".into(), 7, 0)]
        );
        assert_eq!(drained(table.finish().unwrap()), vec![("a".into(), 4, 20)]);
        assert_eq!(table.groups(), 0);
    }
}
