use crate::Keys;
use serde::{Deserialize, Serialize};
use std::marker::PhantomData;
use tidewater::{Combine, CombineFn, Element, PCollection, PTransform};

/// The distinct elements (per window), by their encoding.
///
/// ```
/// let p = tidewater::Pipeline::new(Default::default());
/// let d = p.create("Xs", vec![1u8, 1, 2]).apply("Distinct", tidewater_transforms::Distinct);
/// ```
pub struct Distinct;

/// Combines to nothing: only the key of each group matters.
#[derive(Serialize, Deserialize)]
#[serde(bound = "")]
struct Nothing<T>(PhantomData<fn(T)>);

impl<T: Element> CombineFn for Nothing<T> {
    type In = T;
    type Acc = ();
    type Out = ();
    fn create_accumulator(&self) {}
    fn add_input(&self, _: &mut (), _: T) {}
    fn merge_accumulators(&self, _: &mut (), _: ()) {}
    fn extract_output(&self, _: ()) {}
}

fn with_unit<T>(x: T) -> (T, ()) {
    (x, ())
}

impl<T: Element> PTransform<PCollection<T>> for Distinct {
    type Output = PCollection<T>;
    fn expand(self, input: PCollection<T>) -> PCollection<T> {
        input
            .map("KeyByElement", with_unit::<T>)
            .apply("Combine", Combine::per_key(Nothing::<()>(PhantomData)))
            .apply("Keys", Keys)
    }
}
