use crate::pipeline::output_types;
use crate::plan::{FunctionSpec, urn};
use crate::transform::PInput;
use crate::{Element, PCollection, PTransform};

/// The union of several PCollections of the same type. An empty list is a
/// construction error (`p.apply_to(name, list, Flatten)` records it; a list's own
/// [`FlattenExt::apply_flatten`] has no pipeline to record it in when empty).
///
/// ```
/// use tidewater::{Flatten, FlattenExt, PCollection};
/// let p = tidewater::Pipeline::new(Default::default());
/// let a = p.create("A", vec![1i64]);
/// let b = p.create("B", vec![2i64]);
/// let both = vec![a, b].apply_flatten("Both");
/// assert!(p.construction_errors().is_empty());
///
/// let none: Vec<PCollection<i64>> = Vec::new();
/// let _ = p.apply_to("Nothing", none, Flatten);
/// assert!(p.construction_errors()[0].contains("needs at least one input"));
/// ```
pub struct Flatten;

impl<T: Element> PTransform<Vec<PCollection<T>>> for Flatten {
    type Output = PCollection<T>;
    fn expand(self, inputs: Vec<PCollection<T>>) -> PCollection<T> {
        if inputs.is_empty() {
            let p = crate::Pipeline::expanding().expect("Flatten is expanded through apply");
            p.record_error(
                "Flatten needs at least one input PCollection, and got an empty list".into(),
            );
            return p.orphan();
        }
        let p = inputs.pipeline().clone();
        let ids: Vec<usize> = inputs.iter().map(|c| c.id).collect();
        let bounded = p.is_bounded(&ids);
        let out = p.set_primitive(
            FunctionSpec {
                urn: urn::FLATTEN.into(),
                payload: crate::plan::Json::null(),
            },
            false,
            output_types::<T>("main"),
            bounded,
        );
        p.pcollection(out[0])
    }
}

/// Flatten as a method on a list of PCollections.
///
/// ```
/// use tidewater::{FlattenExt, PCollection, PTransform};
/// /// Flattens the inputs it keeps: possibly none.
/// struct KeepNone;
/// impl PTransform<PCollection<u8>> for KeepNone {
///     type Output = PCollection<u8>;
///     fn expand(self, _input: PCollection<u8>) -> PCollection<u8> {
///         Vec::<PCollection<u8>>::new().apply_flatten("Kept")
///     }
/// }
/// let p = tidewater::Pipeline::new(Default::default());
/// let _ = p.create("Xs", vec![1u8]).apply("KeepNone", KeepNone);
/// assert!(p.construction_errors()[0].contains("Flatten needs at least one input"));
/// ```
pub trait FlattenExt<T> {
    /// Shorthand for applying [`Flatten`] under `name`.
    fn apply_flatten(&self, name: &str) -> PCollection<T>;
}

impl<T: Element> FlattenExt<T> for Vec<PCollection<T>> {
    /// Flattens the list; an empty list has no pipeline, so inside a composite's
    /// `expand` it is a construction error of the pipeline being built, and elsewhere
    /// it panics (use `p.apply_to(name, list, Flatten)` for a list that may be empty).
    fn apply_flatten(&self, name: &str) -> PCollection<T> {
        match self.first() {
            Some(c) => c.pipeline().clone(),
            None => crate::Pipeline::expanding().unwrap_or_else(|| {
                panic!(
                    "Flatten '{name}' needs at least one input PCollection; an empty list has no \
                     pipeline to report this to (p.apply_to(name, list, Flatten) does)"
                )
            }),
        }
        .apply_transform(name, self.clone(), Flatten)
    }
}
