use crate::plan::{FunctionSpec, IsBounded, UserFunction, urn};
use crate::transform::PBegin;
use crate::{Element, PCollection, PTransform, ReadStatus, Source, Timestamp, UserError};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// Reads a [`Source`] (Beam's `Read`): bounded or unbounded as the source says.
pub struct Read<S> {
    source: S,
    /// Registers the source's type (and what completes it once decoded); its name.
    register: Arc<dyn Fn() -> String>,
    /// Why the read cannot be built, found at construction.
    check: Result<(), String>,
}

impl Read<()> {
    /// Reads `source`; its fields travel in the plan.
    pub fn from<S: Source + Serialize + DeserializeOwned>(source: S) -> Read<S> {
        Read {
            source,
            register: Arc::new(crate::registry::register_source::<S>),
            check: Ok(()),
        }
    }
}

impl Read<()> {
    /// Reads an [`AsyncSource`](crate::io::AsyncSource) through its bridge to the
    /// source driver: `Read::from(SourceBridge::new(source))`.
    ///
    /// ```
    /// # use tidewater::io::{AsyncSource, AsyncSourceReader};
    /// # use tidewater::{ReadStatus, Timestamp, UserError};
    /// # #[derive(serde::Serialize, serde::Deserialize)]
    /// # struct Empty;
    /// # struct Nothing;
    /// # #[async_trait::async_trait]
    /// # impl AsyncSource for Empty {
    /// #     type Output = u64;
    /// #     type Position = u64;
    /// #     type Reader = Nothing;
    /// #     fn is_bounded(&self) -> bool { true }
    /// #     fn initial_position(&self, _: usize, _: usize) -> u64 { 0 }
    /// #     async fn open(&self, _: usize, _: usize, _: u64) -> Result<Nothing, UserError> { Ok(Nothing) }
    /// # }
    /// # #[async_trait::async_trait]
    /// # impl AsyncSourceReader for Nothing {
    /// #     type Output = u64;
    /// #     type Position = u64;
    /// #     async fn read(&mut self, _: usize, _: &mut Vec<(u64, Timestamp)>) -> Result<ReadStatus, UserError> { Ok(ReadStatus::Done) }
    /// #     fn position(&self) -> u64 { 0 }
    /// #     fn watermark(&self) -> Timestamp { Timestamp::MAX }
    /// # }
    /// let p = tidewater::Pipeline::new(Default::default());
    /// let numbers = p.apply("Read", tidewater::Read::from_async(Empty));
    /// ```
    pub fn from_async<S>(source: S) -> Read<crate::io::SourceBridge<S>>
    where
        S: crate::io::AsyncSource + Serialize + DeserializeOwned,
    {
        Read::from(crate::io::SourceBridge::new(source))
    }
}

impl<S: Source + Serialize + DeserializeOwned> Read<S> {
    /// Gives every record the event time `f(&record)` as it is read, and each partition
    /// the watermark `watermarks` estimates from those times, in place of the source's
    /// own (Flink's `WatermarkStrategy` on a source, Beam's timestamp policies). A
    /// partition's estimate is part of its position, so a restored job goes on with it.
    ///
    /// A record earlier than its partition's watermark (out of order by more than the
    /// estimator allows) is read all the same; a grouping downstream drops it if its
    /// window has expired, as any late record.
    ///
    /// ```
    /// use tidewater::{Read, Timestamp, WatermarkEstimator};
    /// # use serde::{Deserialize, Serialize};
    /// # #[derive(Serialize, Deserialize)]
    /// # struct Numbers { n: u64 }
    /// # impl tidewater::Source for Numbers {
    /// #     type Output = u64;
    /// #     type Position = u64;
    /// #     fn is_bounded(&self) -> bool { true }
    /// #     fn initial_position(&self, p: usize, _: usize) -> u64 { p as u64 }
    /// #     fn read(&mut self, _: usize, n: usize, next: &mut u64, max: usize, _: Timestamp,
    /// #             out: &mut Vec<(u64, Timestamp)>) -> Result<tidewater::ReadStatus, tidewater::UserError> {
    /// #         for _ in 0..max {
    /// #             if *next >= self.n { return Ok(tidewater::ReadStatus::Done); }
    /// #             out.push((*next, Timestamp::MIN));
    /// #             *next += n as u64;
    /// #         }
    /// #         Ok(tidewater::ReadStatus::More)
    /// #     }
    /// #     fn watermark(&self, _: usize, _: usize, _: &u64) -> Timestamp { Timestamp::MIN }
    /// # }
    /// /// The number is the second it happened in.
    /// fn seconds(n: &u64) -> Timestamp {
    ///     Timestamp::from_millis(*n as i64 * 1000)
    /// }
    /// let p = tidewater::Pipeline::new(Default::default());
    /// let numbers = p.apply(
    ///     "Read",
    ///     Read::from(Numbers { n: 10 })
    ///         .with_timestamps(seconds, WatermarkEstimator::MonotonicallyIncreasing),
    /// );
    /// ```
    #[track_caller]
    pub fn with_timestamps<F>(
        self,
        f: F,
        watermarks: WatermarkEstimator,
    ) -> Read<TimestampedSource<S, F>>
    where
        F: Fn(&S::Output) -> Timestamp + Send + Sync + 'static,
    {
        let name = super::fn_names::light_fn_name::<TimestampedSource<S, F>, F>(
            "Read::with_timestamps",
            None,
            std::panic::Location::caller(),
        );
        let check = self
            .check
            .and(name.as_ref().map(|_| ()).map_err(Clone::clone));
        let name = name.unwrap_or_else(|_| std::any::type_name::<TimestampedSource<S, F>>().into());
        let f = Arc::new(f);
        let shared = f.clone();
        Read {
            source: TimestampedSource {
                source: self.source,
                watermarks,
                f: Some(f),
            },
            register: Arc::new(move || {
                let f = shared.clone();
                crate::registry::register_source_named::<TimestampedSource<S, F>>(&name, move |s| {
                    s.f = Some(f.clone())
                })
            }),
            check,
        }
    }
}

impl<S: Source + Serialize + DeserializeOwned> PTransform<PBegin> for Read<S> {
    type Output = PCollection<S::Output>;
    fn expand(self, input: PBegin) -> PCollection<S::Output> {
        let p = crate::PInput::pipeline(&input).clone();
        if let Err(message) = self.check {
            p.record_error(message);
        }
        let name = (self.register)();
        let fields = serde_json::to_value(&self.source).unwrap_or_else(|e| {
            p.record_error(format!("the fields of source {name} do not serialize: {e}"));
            serde_json::Value::Null
        });
        let payload = serde_json::json!({ "source": UserFunction { name, fields: fields.into() } });
        let bounded = if self.source.is_bounded() {
            IsBounded::Bounded
        } else {
            IsBounded::Unbounded
        };
        let out = p.set_primitive(
            FunctionSpec {
                urn: urn::READ.into(),
                payload: payload.into(),
            },
            true,
            crate::pipeline::output_types::<S::Output>("main"),
            bounded,
        );
        p.pcollection(out[0])
    }
}

/// How a partition's watermark follows the event times of the records it has read
/// (see [`Read::with_timestamps`]). The watermark means "no record earlier than this
/// follows", so a record at exactly the watermark is on time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum WatermarkEstimator {
    /// The partition's records come in event-time order: its watermark is the latest
    /// event time read (Beam's `WatermarkEstimators.MonotonicallyIncreasing`, Flink's
    /// `forMonotonousTimestamps`).
    MonotonicallyIncreasing,
    /// Records come at most this many milliseconds out of order: the watermark trails
    /// the latest event time read by that much (Flink's `forBoundedOutOfOrderness`).
    BoundedOutOfOrderness {
        /// How far a record may be behind the latest one read, in milliseconds (0 or
        /// more: a plan's negative delay is refused as it is decoded).
        #[serde(deserialize_with = "non_negative_delay")]
        max_delay_ms: i64,
    },
}

fn non_negative_delay<'de, D: serde::Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    crate::plan::field::check(d, "max_delay_ms", "0 or more", |ms: &i64| *ms >= 0)
}

impl WatermarkEstimator {
    /// Records at most `max_delay` out of order (a [`Duration`](crate::Duration), or
    /// milliseconds).
    ///
    /// ```
    /// use tidewater::{Duration, WatermarkEstimator};
    /// assert_eq!(
    ///     WatermarkEstimator::bounded_out_of_orderness(Duration::from_secs(2)),
    ///     WatermarkEstimator::BoundedOutOfOrderness { max_delay_ms: 2000 }
    /// );
    /// ```
    pub fn bounded_out_of_orderness(max_delay: impl Into<crate::Duration>) -> Self {
        WatermarkEstimator::BoundedOutOfOrderness {
            max_delay_ms: max_delay.into().millis(),
        }
    }

    /// The watermark of a partition whose latest event time read is `latest`
    /// (`Timestamp::MIN` before any record): sources that carry their own event times,
    /// such as a Kafka topic's, estimate with it too, so the rule lives here once.
    ///
    /// ```
    /// use tidewater::{Timestamp, WatermarkEstimator};
    /// let e = WatermarkEstimator::BoundedOutOfOrderness { max_delay_ms: 500 };
    /// assert_eq!(e.estimate(Timestamp(2_000)), Timestamp(1_500));
    /// assert_eq!(e.estimate(Timestamp::MIN), Timestamp::MIN);
    /// ```
    pub fn estimate(self, latest: Timestamp) -> Timestamp {
        if latest <= Timestamp::MIN {
            return Timestamp::MIN;
        }
        match self {
            WatermarkEstimator::MonotonicallyIncreasing => latest,
            WatermarkEstimator::BoundedOutOfOrderness { max_delay_ms } => {
                Timestamp(latest.0.saturating_sub(max_delay_ms.max(0))).max(Timestamp::MIN)
            }
        }
    }
}

/// A source whose records get their event time from a function as they are read, and
/// whose partitions' watermarks follow those times: what [`Read::with_timestamps`]
/// reads.
#[derive(Serialize, Deserialize)]
#[serde(bound(serialize = "S: Serialize", deserialize = "S: DeserializeOwned"))]
pub struct TimestampedSource<S, F> {
    source: S,
    watermarks: WatermarkEstimator,
    /// Travels by name (the function item's type is part of this source's); set again
    /// when the plan is decoded.
    #[serde(skip)]
    f: Option<Arc<F>>,
}

/// Where a partition of a [`TimestampedSource`] stands: the inner source's position and
/// the latest event time read, which the watermark follows.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimestampedPosition<P> {
    /// The inner source's position.
    pub inner: P,
    /// The latest event time read so far.
    pub latest: Timestamp,
}

impl<S, F> Source for TimestampedSource<S, F>
where
    S: Source,
    S::Output: Element,
    F: Fn(&S::Output) -> Timestamp + Send + Sync + 'static,
{
    type Output = S::Output;
    type Position = TimestampedPosition<S::Position>;

    fn is_bounded(&self) -> bool {
        self.source.is_bounded()
    }

    fn partitions(&self, desired: usize) -> usize {
        self.source.partitions(desired)
    }

    fn try_partitions(&self, desired: usize) -> Result<usize, UserError> {
        self.source.try_partitions(desired)
    }

    fn idle_holds_watermark(&self) -> bool {
        self.source.idle_holds_watermark()
    }

    fn initial_position(&self, partition: usize, partitions: usize) -> Self::Position {
        TimestampedPosition {
            inner: self.source.initial_position(partition, partitions),
            latest: Timestamp::MIN,
        }
    }

    fn read(
        &mut self,
        partition: usize,
        partitions: usize,
        position: &mut Self::Position,
        max: usize,
        now: Timestamp,
        out: &mut Vec<(Self::Output, Timestamp)>,
    ) -> Result<ReadStatus, UserError> {
        let f = self
            .f
            .as_ref()
            .ok_or("the timestamp function of this source was not registered")?;
        let first = out.len();
        let status = self
            .source
            .read(partition, partitions, &mut position.inner, max, now, out)?;
        for (record, ts) in &mut out[first..] {
            *ts = f(record);
            if *ts < Timestamp::MIN || *ts > Timestamp::MAX {
                return Err(format!(
                    "timestamp {ts:?} of record {} is outside [{:?}, {:?}]",
                    crate::shorten(&format!("{record:?}")),
                    Timestamp::MIN,
                    Timestamp::MAX
                )
                .into());
            }
            position.latest = position.latest.max(*ts);
        }
        Ok(status)
    }

    fn watermark(&self, _: usize, _: usize, position: &Self::Position) -> Timestamp {
        self.watermarks.estimate(position.latest)
    }

    fn available(
        &self,
        partition: usize,
        partitions: usize,
        p: &Self::Position,
        now: Timestamp,
    ) -> Option<u64> {
        self.source.available(partition, partitions, &p.inner, now)
    }

    fn try_available(
        &self,
        partition: usize,
        partitions: usize,
        p: &Self::Position,
        now: Timestamp,
    ) -> Result<Option<u64>, UserError> {
        self.source
            .try_available(partition, partitions, &p.inner, now)
    }

    fn try_available_up_to(
        &self,
        partition: usize,
        partitions: usize,
        p: &Self::Position,
        now: Timestamp,
        cap: u64,
    ) -> Result<Option<u64>, UserError> {
        self.source
            .try_available_up_to(partition, partitions, &p.inner, now, cap)
    }

    fn finalize(
        &mut self,
        partition: usize,
        partitions: usize,
        p: &Self::Position,
    ) -> Result<(), UserError> {
        self.source.finalize(partition, partitions, &p.inner)
    }
}
