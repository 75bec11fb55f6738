use super::fn_names::light_fn_name;
use super::functions::params_par_do;
use crate::plan::{FunctionSpec, IsBounded, urn};
use crate::{
    AccumulationMode, ClosingBehavior, Element, OnTimeBehavior, PCollection, PTransform, Timestamp,
    TimestampCombiner, Trigger, WindowFn,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::marker::PhantomData;
use std::panic::Location;

/// Windows a PCollection and configures when groupings of it fire (Beam's `Window`).
///
/// ```
/// use tidewater::{Trigger, Window, WindowFn};
/// fn event_time(x: &i64) -> tidewater::Timestamp { tidewater::Timestamp(*x) }
/// let p = tidewater::Pipeline::new(Default::default());
/// let windowed = p.create("Xs", vec![1i64, 15])
///     .with_timestamps("Stamp", event_time)
///     .apply("Fixed10", Window::into(WindowFn::fixed(10))
///         .triggering(Trigger::after_watermark().with_late_firings(Trigger::after_count(1)))
///         .with_allowed_lateness(5)
///         .accumulating_fired_panes());
/// assert!(p.construction_errors().is_empty());
/// ```
#[derive(Clone, Debug, Default)]
pub struct Window {
    window_fn: Option<WindowFn>,
    trigger: Option<Trigger>,
    allowed_lateness_ms: Option<i64>,
    accumulation_mode: Option<AccumulationMode>,
    timestamp_combiner: Option<TimestampCombiner>,
    closing_behavior: Option<ClosingBehavior>,
    on_time_behavior: Option<OnTimeBehavior>,
}

impl Window {
    /// Assigns windows with `window_fn`.
    pub fn into(window_fn: WindowFn) -> Window {
        Window {
            window_fn: Some(window_fn),
            ..Default::default()
        }
    }

    /// Keeps the windows; only changes the trigger or other settings.
    pub fn configure() -> Window {
        Window::default()
    }

    /// Sets the trigger.
    pub fn triggering(mut self, trigger: impl Into<Trigger>) -> Window {
        self.trigger = Some(trigger.into());
        self
    }

    /// Sets the allowed lateness ([`Duration`](crate::Duration), or milliseconds).
    ///
    /// ```
    /// use tidewater::{Duration, Window, WindowFn};
    /// let w = Window::into(WindowFn::fixed(Duration::from_secs(10)))
    ///     .with_allowed_lateness(Duration::from_secs(5));
    /// ```
    pub fn with_allowed_lateness(mut self, lateness: impl Into<crate::Duration>) -> Window {
        self.allowed_lateness_ms = Some(lateness.into().millis());
        self
    }

    /// Each pane holds only what arrived since the previous one.
    pub fn discarding_fired_panes(mut self) -> Window {
        self.accumulation_mode = Some(AccumulationMode::Discarding);
        self
    }

    /// Each pane holds everything so far.
    pub fn accumulating_fired_panes(mut self) -> Window {
        self.accumulation_mode = Some(AccumulationMode::Accumulating);
        self
    }

    /// Sets the output timestamp of groupings.
    pub fn with_timestamp_combiner(mut self, tc: TimestampCombiner) -> Window {
        self.timestamp_combiner = Some(tc);
        self
    }

    /// Sets whether a final pane is emitted at expiry even if empty.
    pub fn with_closing_behavior(mut self, b: ClosingBehavior) -> Window {
        self.closing_behavior = Some(b);
        self
    }

    /// Sets whether the on-time pane is emitted even if empty.
    pub fn with_on_time_behavior(mut self, b: OnTimeBehavior) -> Window {
        self.on_time_behavior = Some(b);
        self
    }
}

impl<T: Element> PTransform<PCollection<T>> for Window {
    type Output = PCollection<T>;
    fn expand(self, input: PCollection<T>) -> PCollection<T> {
        let p = input.pipeline().clone();
        let mut w = p.windowing_of(input.id);
        if let Some(f) = &self.window_fn {
            if let Err(m) = f.validate() {
                p.record_error(m);
            }
            if let WindowFn::Custom {
                name,
                element_type: Some(t),
                ..
            } = f
                && t != std::any::type_name::<T>()
            {
                p.record_error(format!(
                    "WindowFn {name} applies to elements of type {t}, not to the {} of \
                         the PCollection it windows",
                    std::any::type_name::<T>()
                ));
            }
            w.window_fn = f.clone();
        }
        if let Some(t) = self.trigger {
            if let Err(m) = t.validate() {
                p.record_error(m);
            }
            w.trigger = t;
        }
        if let Some(ms) = self.allowed_lateness_ms {
            if ms < 0 {
                p.record_error(format!(
                    "allowed lateness must not be negative, got {ms} ms"
                ));
            }
            w.allowed_lateness_ms = ms;
        }
        w.accumulation_mode = self.accumulation_mode.unwrap_or(w.accumulation_mode);
        w.timestamp_combiner = self.timestamp_combiner.unwrap_or(w.timestamp_combiner);
        w.closing_behavior = self.closing_behavior.unwrap_or(w.closing_behavior);
        w.on_time_behavior = self.on_time_behavior.unwrap_or(w.on_time_behavior);
        let payload = match &self.window_fn {
            Some(f) => serde_json::json!({ "window_fn": crate::plan::window_fn_to_spec(f) }),
            None => serde_json::Value::Null,
        };
        let spec = FunctionSpec {
            urn: urn::WINDOW_INTO.into(),
            payload: payload.into(),
        };
        let bounded: IsBounded = p.is_bounded(&[input.id]);
        let out = p.set_primitive_windowed(
            spec,
            self.window_fn.is_some(),
            crate::pipeline::output_types::<T>("main"),
            bounded,
            w,
        );
        p.pcollection(out[0])
    }
}

/// The DoFn of [`PCollection::with_timestamps`] and [`WithTimestamps`].
pub struct WithTimestampsFn<F, T> {
    f: std::sync::Arc<F>,
    skew_ms: i64,
    _t: std::marker::PhantomData<fn(T)>,
}

impl<F, T> Clone for WithTimestampsFn<F, T> {
    fn clone(&self) -> Self {
        WithTimestampsFn {
            f: self.f.clone(),
            skew_ms: self.skew_ms,
            _t: std::marker::PhantomData,
        }
    }
}

impl<F: Fn(&T) -> Timestamp + Send + Sync + 'static, T: Element> crate::DoFn
    for WithTimestampsFn<F, T>
{
    type In = T;
    type Out = T;
    fn process(
        &mut self,
        x: T,
        ctx: &mut crate::ProcessContext<'_, T>,
    ) -> Result<(), crate::UserError> {
        let ts = (self.f)(&x);
        stamp(x, ts, ctx)
    }
    fn allowed_timestamp_skew(&self) -> i64 {
        self.skew_ms
    }
}

/// Outputs `x` at `ts`, a timestamp a function gave: one outside the representable
/// range is the user's error.
pub(crate) fn stamp<T: Element>(
    x: T,
    ts: Timestamp,
    ctx: &mut crate::ProcessContext<'_, T>,
) -> Result<(), crate::UserError> {
    if ts < Timestamp::MIN || ts > Timestamp::MAX {
        return Err(format!(
            "timestamp {ts:?} is outside [{:?}, {:?}]",
            Timestamp::MIN,
            Timestamp::MAX
        )
        .into());
    }
    ctx.output_with_timestamp(x, ts);
    Ok(())
}

/// The DoFn of [`PCollection::with_timestamps_with`].
///
/// ```
/// let p = tidewater::Pipeline::new(Default::default());
/// let _ = p.create("Xs", vec![2i64])
///     .with_timestamps_with("Secs", 1000i64, |unit: &i64, x: &i64| tidewater::Timestamp(x * unit));
/// let plan = serde_json::to_string(&p.to_plan().unwrap()).unwrap();
/// assert!(plan.contains("WithTimestampsWithFn"));
/// ```
pub struct WithTimestampsWithFn<F, P, T> {
    pub(crate) f: std::sync::Arc<F>,
    pub(crate) params: std::sync::Arc<P>,
    pub(crate) _t: std::marker::PhantomData<fn(T)>,
}

impl<F, P, T> Clone for WithTimestampsWithFn<F, P, T> {
    fn clone(&self) -> Self {
        WithTimestampsWithFn {
            f: self.f.clone(),
            params: self.params.clone(),
            _t: std::marker::PhantomData,
        }
    }
}

impl<F, P, T> crate::DoFn for WithTimestampsWithFn<F, P, T>
where
    F: Fn(&P, &T) -> Timestamp + Send + Sync + 'static,
    P: Send + Sync + 'static,
    T: Element,
{
    type In = T;
    type Out = T;
    fn process(
        &mut self,
        x: T,
        ctx: &mut crate::ProcessContext<'_, T>,
    ) -> Result<(), crate::UserError> {
        let ts = (self.f)(&self.params, &x);
        stamp(x, ts, ctx)
    }
}

/// Sets every element's timestamp to `f(&element)` (Beam's `WithTimestamps`), with
/// an allowed skew: how far before the element's current timestamp the new one may
/// go (none by default; moving an element further back fails the pipeline, since
/// the element may already be late for the watermark that its old timestamp held).
/// `f` is a named `fn` item or a closure that captures nothing.
/// [`PCollection::with_timestamps`] is the shorthand without skew.
///
/// ```
/// use tidewater::{Duration, Timestamp, WithTimestamps};
/// tidewater_runner_direct::register();
/// let p = tidewater::Pipeline::new(Default::default());
/// // Stamped at 10 s, then moved back by up to 5 s.
/// p.apply("Xs", tidewater::Create::timestamped(vec![(7i64, Timestamp::from_millis(10_000))]))
///     .apply(
///         "Back",
///         WithTimestamps::of(|x: &i64| Timestamp::from_millis(x * 1000))
///             .with_allowed_timestamp_skew(Duration::from_secs(5)),
///     )
///     .capture("xs");
/// let xs = p.run().unwrap().captured::<i64>("xs").unwrap();
/// assert_eq!(xs[0].timestamp, Timestamp::from_millis(7_000));
/// ```
pub struct WithTimestamps<F> {
    f: F,
    skew_ms: i64,
    site: &'static std::panic::Location<'static>,
}

impl WithTimestamps<()> {
    /// Timestamps from `f`, with no skew allowed.
    #[track_caller]
    pub fn of<T, F: Fn(&T) -> Timestamp + Send + Sync + 'static>(f: F) -> WithTimestamps<F> {
        WithTimestamps {
            f,
            skew_ms: 0,
            site: std::panic::Location::caller(),
        }
    }
}

impl<F> WithTimestamps<F> {
    /// How far before the element's current timestamp the new one may go (Beam's
    /// `withAllowedTimestampSkew`); a [`Duration`](crate::Duration) or milliseconds.
    ///
    /// ```
    /// use tidewater::{Duration, Timestamp, WithTimestamps};
    /// let stamp = WithTimestamps::of(|x: &i64| Timestamp::from_millis(*x))
    ///     .with_allowed_timestamp_skew(Duration::from_minutes(1));
    /// ```
    pub fn with_allowed_timestamp_skew(mut self, skew: impl Into<crate::Duration>) -> Self {
        self.skew_ms = skew.into().millis();
        self
    }
}

impl<T: Element, F: Fn(&T) -> Timestamp + Send + Sync + 'static> PTransform<PCollection<T>>
    for WithTimestamps<F>
{
    type Output = PCollection<T>;
    fn expand(self, input: PCollection<T>) -> PCollection<T> {
        let mut name = super::fn_names::light_fn_name::<WithTimestampsFn<F, T>, F>(
            "with_timestamps",
            Some("with_timestamps_with"),
            self.site,
        );
        let skew_ms = self.skew_ms;
        if skew_ms < 0 {
            name = Err(format!(
                "the allowed timestamp skew must not be negative, got {skew_ms} ms"
            ));
        }
        let f = std::sync::Arc::new(self.f);
        // The skew travels in the fields, only when there is one (older plans have none).
        let fields = if skew_ms == 0 {
            crate::plan::Json::null()
        } else {
            serde_json::json!({ "allowed_timestamp_skew_ms": skew_ms }).into()
        };
        let transform = super::functions::FunctionParDo::with_fields(name, fields, move |fields| {
            #[derive(serde::Deserialize)]
            #[serde(deny_unknown_fields)]
            struct Fields {
                allowed_timestamp_skew_ms: i64,
            }
            let skew_ms = match erased_serde::deserialize::<Option<Fields>>(fields) {
                Ok(None) => 0,
                Ok(Some(Fields {
                    allowed_timestamp_skew_ms: s,
                })) if s >= 0 => s,
                Ok(Some(Fields {
                    allowed_timestamp_skew_ms: s,
                })) => {
                    return Err(format!(
                        "allowed_timestamp_skew_ms must be a non-negative integer, got {s}"
                    ));
                }
                Err(e) => {
                    return Err(format!(
                        "expected {{\"allowed_timestamp_skew_ms\": <a non-negative integer>}}: {}",
                        crate::plan::without_position(e.to_string())
                    ));
                }
            };
            Ok(WithTimestampsFn {
                f: f.clone(),
                skew_ms,
                _t: std::marker::PhantomData,
            })
        });
        transform.expand(input)
    }
}

impl<T: Element> PCollection<T> {
    /// Sets every element's timestamp to `f(&element)` (Beam's `WithTimestamps`); `f` is
    /// a named `fn` item or a closure that captures nothing. The new timestamp may not
    /// be earlier than the element's current one: [`WithTimestamps`] allows a skew.
    ///
    /// ```
    /// fn at(x: &i64) -> tidewater::Timestamp { tidewater::Timestamp(*x * 1000) }
    /// let p = tidewater::Pipeline::new(Default::default());
    /// let xs = p.create("Xs", vec![1i64]);
    /// let stamped = xs.with_timestamps("Stamp", at);
    /// let again = xs.with_timestamps("Millis", |x: &i64| tidewater::Timestamp(*x));
    /// ```
    #[track_caller]
    pub fn with_timestamps<F: Fn(&T) -> Timestamp + Send + Sync + 'static>(
        &self,
        name: &str,
        f: F,
    ) -> PCollection<T> {
        let site = std::panic::Location::caller();
        self.apply(
            name,
            WithTimestamps {
                f,
                skew_ms: 0,
                site,
            },
        )
    }

    /// [`with_timestamps`](PCollection::with_timestamps) with parameters that travel
    /// in the plan: `f(&params, &x)` (see [`PCollection::map_with`]).
    ///
    /// ```
    /// use tidewater::Timestamp;
    /// tidewater_runner_direct::register();
    /// let p = tidewater::Pipeline::new(Default::default());
    /// p.create("Secs", vec![3i64])
    ///     .with_timestamps_with("Stamp", 1000i64, |unit: &i64, x: &i64| Timestamp(x * unit))
    ///     .capture("xs");
    /// let xs = p.run().unwrap().captured::<i64>("xs").unwrap();
    /// assert_eq!(xs[0].timestamp, Timestamp(3000));
    /// ```
    #[track_caller]
    pub fn with_timestamps_with<P, F>(&self, name: &str, params: P, f: F) -> PCollection<T>
    where
        P: Serialize + DeserializeOwned + Send + Sync + 'static,
        F: Fn(&P, &T) -> crate::Timestamp + Send + Sync + 'static,
    {
        let fn_name = light_fn_name::<WithTimestampsWithFn<F, P, T>, F>(
            "with_timestamps_with",
            None,
            Location::caller(),
        );
        let make = |f, params| WithTimestampsWithFn {
            f,
            params,
            _t: PhantomData,
        };
        self.apply(
            name,
            params_par_do("with_timestamps_with", fn_name, &params, f, make),
        )
    }
}
