use crate::plan::{CapturePayload, FunctionSpec, IsBounded, urn};
use crate::{Element, PCollection, PTransform};

/// Returns a PCollection's elements in the [`PipelineResult`](crate::PipelineResult)
/// under a name: how tests and small jobs read results on any runner.
///
/// ```
/// tidewater_runner_direct::register();
/// let p = tidewater::Pipeline::new(Default::default());
/// p.create("Xs", vec![3i32, 1]).capture("xs");
/// let r = p.run().unwrap();
/// assert_eq!(r.captured_values::<i32>("xs").unwrap(), vec![1, 3]);
/// ```
pub struct Capture {
    name: String,
}

impl Capture {
    /// Captures under `name`.
    pub fn named(name: &str) -> Self {
        Capture {
            name: name.to_string(),
        }
    }
}

impl<T: Element> PTransform<PCollection<T>> for Capture {
    type Output = ();
    fn expand(self, input: PCollection<T>) {
        let p = input.pipeline().clone();
        if !p.claim_capture_name(&self.name) {
            p.record_error(format!(
                "another Capture already uses the name '{}'; capture names must be unique",
                self.name
            ));
        }
        let payload = serde_json::to_value(CapturePayload { name: self.name })
            .expect("strings serialize")
            .into();
        p.set_primitive(
            FunctionSpec {
                urn: urn::CAPTURE.into(),
                payload,
            },
            false,
            Vec::new(),
            IsBounded::Bounded,
        );
    }
}

impl<T: Element> PCollection<T> {
    /// Shorthand for `apply("Capture[name]", Capture::named(name))`.
    pub fn capture(&self, name: &str) {
        self.apply(&format!("Capture[{name}]"), Capture::named(name))
    }
}
