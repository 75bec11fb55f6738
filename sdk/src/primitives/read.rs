use crate::plan::{urn, FunctionSpec, IsBounded, UserFunction};
use crate::transform::PBegin;
use crate::{PCollection, PTransform, Source};
use serde::de::DeserializeOwned;
use serde::Serialize;

/// Reads a [`Source`] (Beam's `Read`): bounded or unbounded as the source says.
pub struct Read<S> {
    source: S,
}

impl Read<()> {
    /// Reads `source`; its fields travel in the plan.
    pub fn from<S: Source + Serialize + DeserializeOwned>(source: S) -> Read<S> {
        Read { source }
    }
}

impl<S: Source + Serialize + DeserializeOwned> PTransform<PBegin> for Read<S> {
    type Output = PCollection<S::Output>;
    fn expand(self, input: PBegin) -> PCollection<S::Output> {
        let p = crate::PInput::pipeline(&input).clone();
        let name = crate::registry::register_source::<S>();
        let fields = serde_json::to_value(&self.source).unwrap_or_else(|e| {
            p.record_error(format!("the fields of source {name} do not serialize: {e}"));
            serde_json::Value::Null
        });
        let payload = serde_json::json!({ "source": UserFunction { name, fields } });
        let bounded = if self.source.is_bounded() {
            IsBounded::Bounded
        } else {
            IsBounded::Unbounded
        };
        let out = p.set_primitive(
            FunctionSpec {
                urn: urn::READ.into(),
                payload,
            },
            true,
            crate::pipeline::output_types::<S::Output>("main"),
            bounded,
        );
        p.pcollection(out[0])
    }
}
