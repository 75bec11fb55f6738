use crate::pipeline::output_types;
use crate::plan::{CreatePayload, FunctionSpec, IsBounded, urn};
use crate::transform::{PBegin, PInput};
use crate::{Element, PCollection, PTransform, Pipeline};

/// A bounded PCollection of fixed elements, in the global window at the minimum
/// timestamp. The elements travel in the plan as JSON.
///
/// ```
/// let p = tidewater::Pipeline::new(Default::default());
/// let xs = p.apply("Xs", tidewater::Create::of(vec![1u8, 2]));
/// assert!(xs.is_bounded());
/// ```
pub struct Create<T> {
    elements: Vec<T>,
}

impl<T: Element> Create<T> {
    /// The given elements.
    pub fn of(elements: Vec<T>) -> Self {
        Create { elements }
    }

    /// The given elements at the given timestamps (Beam's `Create.timestamped`), in
    /// the global window: a Create of the pairs, then a step giving each value its
    /// timestamp.
    ///
    /// ```
    /// use tidewater::{Create, Timestamp};
    /// tidewater_runner_direct::register();
    /// let p = tidewater::Pipeline::new(Default::default());
    /// p.apply("Xs", Create::timestamped(vec![('a', Timestamp::from_millis(5))])).capture("xs");
    /// let xs = p.run().unwrap().captured::<char>("xs").unwrap();
    /// assert_eq!((xs[0].value, xs[0].timestamp), ('a', Timestamp::from_millis(5)));
    /// ```
    pub fn timestamped(elements: Vec<(T, crate::Timestamp)>) -> CreateTimestamped<T> {
        CreateTimestamped { elements }
    }
}

/// The elements of [`Create::timestamped`], with their timestamps.
pub struct CreateTimestamped<T> {
    elements: Vec<(T, crate::Timestamp)>,
}

/// Gives each value of a [`Create::timestamped`] its timestamp.
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(bound = "")]
pub struct ReifiedTimestampFn<T>(std::marker::PhantomData<fn(T)>);

impl<T: Element> crate::DoFn for ReifiedTimestampFn<T> {
    type In = (T, crate::Timestamp);
    type Out = T;
    fn process(
        &mut self,
        (value, ts): (T, crate::Timestamp),
        ctx: &mut crate::ProcessContext<'_, T>,
    ) -> Result<(), crate::UserError> {
        if ts < crate::Timestamp::MIN || ts > crate::Timestamp::MAX {
            return Err(format!(
                "timestamp {ts:?} is outside [{:?}, {:?}]",
                crate::Timestamp::MIN,
                crate::Timestamp::MAX
            )
            .into());
        }
        ctx.output_with_timestamp(value, ts);
        Ok(())
    }
}

impl<T: Element> PTransform<PBegin> for CreateTimestamped<T> {
    type Output = PCollection<T>;
    fn expand(self, input: PBegin) -> PCollection<T> {
        let p = input.pipeline().clone();
        p.apply("Values", Create::of(self.elements)).apply(
            "Timestamps",
            crate::ParDo::of(ReifiedTimestampFn::<T>(std::marker::PhantomData)),
        )
    }
}

impl<T: Element> PTransform<PBegin> for Create<T> {
    type Output = PCollection<T>;
    fn expand(self, input: PBegin) -> PCollection<T> {
        let p = input.pipeline().clone();
        let elements = match self
            .elements
            .iter()
            .map(crate::plan::Json::of)
            .collect::<Result<Vec<_>, _>>()
        {
            Ok(v) => v,
            Err(e) => {
                p.record_error(format!(
                    "Create's elements must serialize to JSON to travel in the plan: {e}"
                ));
                Vec::new()
            }
        };
        let payload =
            crate::plan::Json::of(&CreatePayload { elements }).expect("JSON values serialize");
        let spec = FunctionSpec {
            urn: urn::CREATE.into(),
            payload,
        };
        let out = p.set_primitive(spec, false, output_types::<T>("main"), IsBounded::Bounded);
        p.pcollection(out[0])
    }
}

/// A single `()` element: the root that reads and other sources expand from (Beam's
/// `Impulse`).
///
/// ```
/// let p = tidewater::Pipeline::new(Default::default());
/// let one: tidewater::PCollection<()> = p.apply("Start", tidewater::Impulse);
/// ```
pub struct Impulse;

impl PTransform<PBegin> for Impulse {
    type Output = PCollection<()>;
    fn expand(self, input: PBegin) -> PCollection<()> {
        let p = input.pipeline().clone();
        let spec = FunctionSpec {
            urn: urn::IMPULSE.into(),
            payload: crate::plan::Json::null(),
        };
        let out = p.set_primitive(spec, false, output_types::<()>("main"), IsBounded::Bounded);
        p.pcollection(out[0])
    }
}

impl Pipeline {
    /// Shorthand for `apply(name, Create::of(elements))`.
    ///
    /// ```
    /// let p = tidewater::Pipeline::new(Default::default());
    /// let words = p.create("Words", vec!["a".to_string()]);
    /// assert_eq!(words.name(), "Words.main");
    /// ```
    pub fn create<T: Element>(&self, name: &str, elements: Vec<T>) -> PCollection<T> {
        self.apply(name, Create::of(elements))
    }
}
