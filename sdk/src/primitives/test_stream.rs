use crate::plan::{FunctionSpec, IsBounded, urn};
use crate::transform::PBegin;
use crate::{Element, PCollection, PTransform, Timestamp};
use serde::{Deserialize, Serialize};

/// One step of a [`TestStream`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TestStreamEvent {
    /// Elements (as JSON) with their event timestamps, in the global window.
    Elements(Vec<(crate::plan::Json, Timestamp)>),
    /// The source's watermark advances to this time.
    Watermark(Timestamp),
    /// Processing time advances by this many ms.
    ProcessingTime(i64),
}

/// A scripted unbounded source for tests: element batches, watermark advances and
/// processing-time advances, in order (Beam's `TestStream`). The runner drives its
/// clock from the script, so results are deterministic.
///
/// ```
/// use tidewater::{TestStream, Timestamp};
/// let p = tidewater::Pipeline::new(Default::default());
/// let words = p.apply("Words", TestStream::new()
///     .add_elements(vec![("a".to_string(), Timestamp(1)), ("b".to_string(), Timestamp(2))])
///     .advance_watermark_to(Timestamp(10))
///     .advance_processing_time(1000)
///     .advance_watermark_to_infinity());
/// assert!(!words.is_bounded());
/// ```
pub struct TestStream<T> {
    events: Vec<TestStreamEvent>,
    error: Option<String>,
    _t: std::marker::PhantomData<fn() -> T>,
}

impl<T: Element> Default for TestStream<T> {
    fn default() -> Self {
        TestStream::new()
    }
}

impl<T: Element> TestStream<T> {
    /// An empty script.
    pub fn new() -> Self {
        TestStream {
            events: Vec::new(),
            error: None,
            _t: std::marker::PhantomData,
        }
    }

    /// Adds elements with their event timestamps.
    pub fn add_elements(mut self, elements: Vec<(T, Timestamp)>) -> Self {
        let mut values = Vec::new();
        for (v, ts) in elements {
            match crate::plan::Json::of(&v) {
                Ok(j) => values.push((j, ts)),
                Err(e) => {
                    self.error.get_or_insert(format!(
                        "TestStream element {v:?} does not serialize to JSON: {e}"
                    ));
                }
            }
        }
        self.events.push(TestStreamEvent::Elements(values));
        self
    }

    /// Advances the watermark; it may not go backwards.
    pub fn advance_watermark_to(mut self, ts: Timestamp) -> Self {
        let last = self.events.iter().rev().find_map(|e| match e {
            TestStreamEvent::Watermark(w) => Some(*w),
            _ => None,
        });
        if let Some(last) = last.filter(|l| *l > ts) {
            self.error.get_or_insert(format!(
                "TestStream watermark cannot go back from {last:?} to {ts:?}"
            ));
        }
        self.events.push(TestStreamEvent::Watermark(ts));
        self
    }

    /// Advances the watermark past the end of every window: the stream ends.
    pub fn advance_watermark_to_infinity(self) -> Self {
        self.advance_watermark_to(Timestamp::MAX)
    }

    /// Advances processing time by `step` (positive; a [`Duration`](crate::Duration),
    /// or milliseconds).
    ///
    /// ```
    /// use tidewater::{Duration, TestStream, Timestamp};
    /// let script = TestStream::new()
    ///     .add_elements(vec![(1u8, Timestamp::from_millis(0))])
    ///     .advance_processing_time(Duration::from_secs(10))
    ///     .advance_watermark_to_infinity();
    /// ```
    pub fn advance_processing_time(mut self, step: impl Into<crate::Duration>) -> Self {
        let ms = step.into().millis();
        if ms <= 0 {
            self.error.get_or_insert(format!(
                "TestStream processing time must advance by a positive amount, got {ms} ms"
            ));
        }
        self.events.push(TestStreamEvent::ProcessingTime(ms));
        self
    }
}

impl<T: Element> PTransform<PBegin> for TestStream<T> {
    type Output = PCollection<T>;
    fn expand(self, input: PBegin) -> PCollection<T> {
        let p = crate::PInput::pipeline(&input).clone();
        if let Some(e) = self.error {
            p.record_error(e);
        }
        let payload = serde_json::json!({ "events": self.events });
        let spec = FunctionSpec {
            urn: urn::TEST_STREAM.into(),
            payload: payload.into(),
        };
        let out = p.set_primitive(
            spec,
            false,
            crate::pipeline::output_types::<T>("main"),
            IsBounded::Unbounded,
        );
        p.pcollection(out[0])
    }
}
