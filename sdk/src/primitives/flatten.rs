use crate::pipeline::output_types;
use crate::plan::{urn, FunctionSpec};
use crate::transform::PInput;
use crate::{Element, PCollection, PTransform};

/// The union of several PCollections of the same type.
///
/// ```
/// use tidewater::FlattenExt;
/// let p = tidewater::Pipeline::new(Default::default());
/// let a = p.create("A", vec![1i64]);
/// let b = p.create("B", vec![2i64]);
/// let both = vec![a, b].apply_flatten("Both");
/// ```
pub struct Flatten;

impl<T: Element> PTransform<Vec<PCollection<T>>> for Flatten {
    type Output = PCollection<T>;
    fn expand(self, inputs: Vec<PCollection<T>>) -> PCollection<T> {
        let p = inputs.pipeline().clone();
        let ids: Vec<usize> = inputs.iter().map(|c| c.id).collect();
        let bounded = p.is_bounded(&ids);
        let out = p.set_primitive(
            FunctionSpec {
                urn: urn::FLATTEN.into(),
                payload: serde_json::Value::Null,
            },
            false,
            output_types::<T>("main"),
            bounded,
        );
        p.pcollection(out[0])
    }
}

/// Flatten as a method on a list of PCollections.
pub trait FlattenExt<T> {
    /// Shorthand for applying [`Flatten`] under `name`.
    fn apply_flatten(&self, name: &str) -> PCollection<T>;
}

impl<T: Element> FlattenExt<T> for Vec<PCollection<T>> {
    fn apply_flatten(&self, name: &str) -> PCollection<T> {
        assert!(
            !self.is_empty(),
            "Flatten '{name}' needs at least one input PCollection"
        );
        self.pipeline()
            .clone()
            .apply_transform(name, self.clone(), Flatten)
    }
}
