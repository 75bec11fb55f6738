//! Windowing: WindowFns and the windowing strategy of a PCollection.
//!
//! The WindowFns and the strategy are plain data that travel in the plan; assigning
//! and merging windows happens in `tidewater-runners-core`, once for every runner.

use crate::exec::ErasedWindowFn;
use crate::{BoundedWindow, Duration, Element, Timestamp, Trigger};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// A user-defined WindowFn that assigns windows by timestamp, registered by name like a
/// DoFn. Its windows are intervals ([`BoundedWindow`]) or of a type of the user's own
/// ([`WindowType`](crate::WindowType)). To see the element itself, implement
/// [`ElementWindowFn`].
///
/// ```
/// use serde::{Deserialize, Serialize};
/// use tidewater::{BoundedWindow, CustomWindowFn, Timestamp};
/// /// Windows of one "day" of 1000 ms, starting at 0.
/// #[derive(Serialize, Deserialize)]
/// struct Days;
/// impl CustomWindowFn for Days {
///     type Window = BoundedWindow;
///     fn assign(&self, ts: Timestamp) -> Vec<BoundedWindow> {
///         let start = ts.millis().div_euclid(1000) * 1000;
///         vec![BoundedWindow::Interval { start: Timestamp(start), end: Timestamp(start + 1000) }]
///     }
/// }
/// ```
pub trait CustomWindowFn: Send + Sync + 'static {
    /// The type of the windows it assigns.
    type Window: crate::WindowType;
    /// The windows of an element with timestamp `ts`.
    fn assign(&self, ts: Timestamp) -> Vec<Self::Window>;
    /// Whether windows of one key must be merged (like sessions).
    fn is_merging(&self) -> bool {
        false
    }
    /// For a merging WindowFn: which windows merge into which. `windows` are the
    /// active windows of one key; each returned pair is (windows merged, result).
    fn merge(&self, _windows: &[Self::Window]) -> Vec<(Vec<Self::Window>, Self::Window)> {
        Vec::new()
    }
}

/// A user-defined WindowFn that sees each element, not only its timestamp (Beam's
/// `WindowFn.assignWindows(AssignContext)`): Nexmark Q9's per-auction windows read the
/// auction's expiry from the element. It applies to a PCollection of `T` only (a
/// construction error otherwise); [`WindowFn::by_element`] puts it into the plan.
///
/// ```
/// use serde::{Deserialize, Serialize};
/// use tidewater::{BoundedWindow, ElementWindowFn, Timestamp};
/// /// Each (name, lifetime in ms) lives in a window from its timestamp for its lifetime.
/// #[derive(Serialize, Deserialize)]
/// struct Lifetime;
/// impl ElementWindowFn<(String, i64)> for Lifetime {
///     type Window = BoundedWindow;
///     fn assign(&self, e: &(String, i64), ts: Timestamp) -> Vec<BoundedWindow> {
///         vec![BoundedWindow::Interval { start: ts, end: Timestamp(ts.millis() + e.1) }]
///     }
/// }
/// ```
pub trait ElementWindowFn<T>: Send + Sync + 'static {
    /// The type of the windows it assigns.
    type Window: crate::WindowType;
    /// The windows of `element`, whose timestamp is `ts`.
    fn assign(&self, element: &T, ts: Timestamp) -> Vec<Self::Window>;
    /// Whether windows of one key must be merged (like sessions).
    fn is_merging(&self) -> bool {
        false
    }
    /// For a merging WindowFn: which of one key's active windows merge into which;
    /// each returned pair is (windows merged, result).
    fn merge(&self, _windows: &[Self::Window]) -> Vec<(Vec<Self::Window>, Self::Window)> {
        Vec::new()
    }
}

/// Decodes `windows` as `W`, merges them with `merge` and encodes the result.
fn merge_typed<W: crate::WindowType>(
    windows: &[BoundedWindow],
    merge: impl FnOnce(&[W]) -> Vec<(Vec<W>, W)>,
) -> Result<Vec<(Vec<BoundedWindow>, BoundedWindow)>, String> {
    let typed = windows
        .iter()
        .map(|w| {
            W::from_bounded(w).ok_or_else(|| {
                format!(
                    "window {w:?} is not a {} (the windows of the WindowFn merging it)",
                    std::any::type_name::<W>()
                )
            })
        })
        .collect::<Result<Vec<W>, String>>()?;
    Ok(merge(&typed)
        .into_iter()
        .map(|(from, to)| {
            (
                from.into_iter()
                    .map(|w| w.into_bounded_among(windows))
                    .collect(),
                to.into_bounded_among(windows),
            )
        })
        .collect())
}

fn windows_of<W: crate::WindowType>(ws: Vec<W>) -> crate::Windows {
    let mut ws: Vec<BoundedWindow> = ws.into_iter().map(W::into_bounded).collect();
    if ws.len() == 1 {
        crate::Windows::One(ws.pop().expect("one window"))
    } else {
        crate::Windows::Many(ws)
    }
}

/// A [`CustomWindowFn`] as runners call it.
pub(crate) struct ByTimestamp<F>(pub(crate) F);

impl<F: CustomWindowFn> ErasedWindowFn for ByTimestamp<F> {
    fn assign_batch(
        &self,
        mut batch: Box<dyn crate::exec::AnyBatch>,
    ) -> Result<Box<dyn crate::exec::AnyBatch>, String> {
        batch.assign_windows(&mut |ts, _| windows_of(self.0.assign(ts)));
        Ok(batch)
    }
    fn assign_timestamp(&self, ts: Timestamp) -> Option<Vec<BoundedWindow>> {
        Some(
            self.0
                .assign(ts)
                .into_iter()
                .map(crate::WindowType::into_bounded)
                .collect(),
        )
    }
    fn is_merging(&self) -> bool {
        self.0.is_merging()
    }
    fn merge(
        &self,
        windows: &[BoundedWindow],
    ) -> Result<Vec<(Vec<BoundedWindow>, BoundedWindow)>, String> {
        merge_typed(windows, |ws| self.0.merge(ws))
    }
}

/// An [`ElementWindowFn`] as runners call it.
pub(crate) struct ByElement<T, F>(pub(crate) F, pub(crate) std::marker::PhantomData<fn(T)>);

impl<T: crate::Element, F: ElementWindowFn<T>> ErasedWindowFn for ByElement<T, F> {
    fn assign_batch(
        &self,
        batch: Box<dyn crate::exec::AnyBatch>,
    ) -> Result<Box<dyn crate::exec::AnyBatch>, String> {
        let name = batch.element_type();
        let b = batch
            .into_any()
            .downcast::<crate::exec::Batch<T>>()
            .map_err(|_| {
                format!(
                    "the WindowFn assigns windows to {} but got a batch of {name}",
                    std::any::type_name::<T>()
                )
            })?;
        let mut b = *b;
        for wv in &mut b.items {
            wv.windows = windows_of(self.0.assign(&wv.value, wv.timestamp));
        }
        Ok(Box::new(b))
    }
    fn assign_timestamp(&self, _ts: Timestamp) -> Option<Vec<BoundedWindow>> {
        None
    }
    fn is_merging(&self) -> bool {
        self.0.is_merging()
    }
    fn merge(
        &self,
        windows: &[BoundedWindow],
    ) -> Result<Vec<(Vec<BoundedWindow>, BoundedWindow)>, String> {
        merge_typed(windows, |ws| self.0.merge(ws))
    }
}

/// How elements are assigned to windows (Beam's WindowFns).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WindowFn {
    /// Everything in the one global window.
    Global,
    /// Fixed (tumbling) windows `[offset + k * size, offset + (k+1) * size)`.
    Fixed {
        /// Window size in ms.
        size_ms: i64,
        /// Offset in ms.
        offset_ms: i64,
    },
    /// Sliding windows of `size` every `period`.
    Sliding {
        /// Window size in ms.
        size_ms: i64,
        /// Distance between window starts in ms.
        period_ms: i64,
        /// Offset in ms.
        offset_ms: i64,
    },
    /// Per-key sessions: `[ts, ts + gap)` per element, overlapping ones merged.
    Sessions {
        /// The gap in ms.
        gap_ms: i64,
    },
    /// A registered [`CustomWindowFn`] or [`ElementWindowFn`].
    Custom {
        /// Registered name.
        name: String,
        /// Its fields.
        fields: crate::plan::Json,
        /// Whether it merges.
        merging: bool,
        /// For an [`ElementWindowFn`]: the element type it applies to.
        element_type: Option<String>,
    },
}

impl WindowFn {
    /// Fixed windows of `size` ([`Duration`], or milliseconds).
    ///
    /// ```
    /// use tidewater::{Duration, WindowFn};
    /// assert_eq!(
    ///     WindowFn::fixed(Duration::from_secs(10)),
    ///     WindowFn::Fixed { size_ms: 10_000, offset_ms: 0 }
    /// );
    /// ```
    pub fn fixed(size: impl Into<Duration>) -> WindowFn {
        WindowFn::Fixed {
            size_ms: size.into().millis(),
            offset_ms: 0,
        }
    }

    /// Sliding windows of `size` every `period`.
    ///
    /// ```
    /// use tidewater::{Duration, WindowFn};
    /// let w = WindowFn::sliding(Duration::from_secs(10), std::time::Duration::from_secs(5));
    /// assert_eq!(w, WindowFn::Sliding { size_ms: 10_000, period_ms: 5_000, offset_ms: 0 });
    /// ```
    pub fn sliding(size: impl Into<Duration>, period: impl Into<Duration>) -> WindowFn {
        WindowFn::Sliding {
            size_ms: size.into().millis(),
            period_ms: period.into().millis(),
            offset_ms: 0,
        }
    }

    /// Session windows with `gap`.
    ///
    /// ```
    /// use tidewater::{Duration, WindowFn};
    /// assert_eq!(WindowFn::sessions(Duration::from_minutes(1)), WindowFn::Sessions { gap_ms: 60_000 });
    /// ```
    pub fn sessions(gap: impl Into<Duration>) -> WindowFn {
        WindowFn::Sessions {
            gap_ms: gap.into().millis(),
        }
    }

    /// A registered user WindowFn.
    ///
    /// ```
    /// # use serde::{Deserialize, Serialize};
    /// # use tidewater::{BoundedWindow, CustomWindowFn, Timestamp, WindowFn};
    /// #[derive(Serialize, Deserialize)]
    /// struct Everything;
    /// impl CustomWindowFn for Everything {
    ///     type Window = BoundedWindow;
    ///     fn assign(&self, _ts: Timestamp) -> Vec<BoundedWindow> { vec![BoundedWindow::Global] }
    /// }
    /// assert!(!WindowFn::custom(Everything).is_merging());
    /// ```
    pub fn custom<W: CustomWindowFn + Serialize + serde::de::DeserializeOwned>(w: W) -> WindowFn {
        let name = register_window_fn::<W>();
        WindowFn::Custom {
            name,
            merging: w.is_merging(),
            fields: crate::plan::Json::of(&w).unwrap_or_default(),
            element_type: None,
        }
    }

    /// A registered user WindowFn that sees the elements, of type `T`: `Window::into`
    /// it on a PCollection of another type is a construction error.
    ///
    /// ```
    /// # use serde::{Deserialize, Serialize};
    /// # use tidewater::{BoundedWindow, ElementWindowFn, Timestamp, Window, WindowFn};
    /// #[derive(Serialize, Deserialize)]
    /// struct UntilValue;
    /// impl ElementWindowFn<i64> for UntilValue {
    ///     type Window = BoundedWindow;
    ///     fn assign(&self, x: &i64, ts: Timestamp) -> Vec<BoundedWindow> {
    ///         vec![BoundedWindow::Interval { start: ts, end: Timestamp(*x) }]
    ///     }
    /// }
    /// let p = tidewater::Pipeline::new(Default::default());
    /// p.create("Xs", vec![5i64, 9]).apply("Until", Window::into(WindowFn::by_element(UntilValue)));
    /// assert!(p.construction_errors().is_empty());
    /// p.create("Ys", vec![1u8]).apply("Wrong", Window::into(WindowFn::by_element(UntilValue)));
    /// assert!(p.construction_errors()[0].contains("applies to elements of type i64"));
    /// ```
    pub fn by_element<T: crate::Element, W>(w: W) -> WindowFn
    where
        W: ElementWindowFn<T> + Serialize + serde::de::DeserializeOwned,
    {
        let name = register_element_window_fn::<T, W>();
        WindowFn::Custom {
            name,
            merging: w.is_merging(),
            fields: crate::plan::Json::of(&w).unwrap_or_default(),
            element_type: Some(std::any::type_name::<T>().to_string()),
        }
    }

    /// Sets the offset of fixed or sliding windows.
    ///
    /// ```
    /// use tidewater::{Duration, WindowFn};
    /// let w = WindowFn::fixed(Duration::from_secs(10)).with_offset(Duration::from_secs(2));
    /// assert_eq!(w, WindowFn::Fixed { size_ms: 10_000, offset_ms: 2_000 });
    /// ```
    pub fn with_offset(self, offset: impl Into<Duration>) -> WindowFn {
        let offset = offset.into().millis();
        match self {
            WindowFn::Fixed { size_ms, .. } => WindowFn::Fixed {
                size_ms,
                offset_ms: offset,
            },
            WindowFn::Sliding {
                size_ms, period_ms, ..
            } => WindowFn::Sliding {
                size_ms,
                period_ms,
                offset_ms: offset,
            },
            other => other,
        }
    }

    /// Whether windows must be merged per key.
    pub fn is_merging(&self) -> bool {
        match self {
            WindowFn::Sessions { .. } => true,
            WindowFn::Custom { merging, .. } => *merging,
            _ => false,
        }
    }

    /// Checks sizes and gaps; the error says which parameter is wrong.
    pub fn validate(&self) -> Result<(), String> {
        match self {
            WindowFn::Fixed { size_ms, offset_ms } => {
                if *size_ms <= 0 {
                    return Err(format!(
                        "fixed windows need a positive size, got {size_ms} ms"
                    ));
                }
                if *offset_ms < 0 || offset_ms >= size_ms {
                    return Err(format!(
                        "fixed windows need an offset in [0, {size_ms}), got {offset_ms} ms"
                    ));
                }
                Ok(())
            }
            WindowFn::Sliding {
                size_ms,
                period_ms,
                offset_ms,
            } => {
                if *size_ms <= 0 {
                    return Err(format!(
                        "sliding windows need a positive size, got {size_ms} ms"
                    ));
                }
                if *period_ms <= 0 {
                    return Err(format!(
                        "sliding windows need a positive period, got {period_ms} ms"
                    ));
                }
                if *offset_ms < 0 || offset_ms >= period_ms {
                    return Err(format!(
                        "sliding windows need an offset in [0, {period_ms}), got {offset_ms} ms"
                    ));
                }
                Ok(())
            }
            WindowFn::Sessions { gap_ms } if *gap_ms <= 0 => Err(format!(
                "session windows need a positive gap, got {gap_ms} ms"
            )),
            _ => Ok(()),
        }
    }
}

/// Whether a trigger's panes accumulate or discard what earlier panes emitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum AccumulationMode {
    /// Each pane holds only what arrived since the previous pane.
    Discarding,
    /// Each pane holds everything so far.
    Accumulating,
}

/// The timestamp of a grouping's output (Beam's `TimestampCombiner`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum TimestampCombiner {
    /// The end of the window (its max timestamp).
    EndOfWindow,
    /// The earliest input timestamp in the pane.
    EarliestInPane,
    /// The latest input timestamp in the pane.
    LatestInPane,
}

/// Whether a final pane is emitted at window expiry even if empty.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ClosingBehavior {
    /// Only if the pane has new elements.
    EmitIfNonempty,
    /// Always.
    EmitAlways,
}

/// Whether the on-time pane is emitted even if empty.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum OnTimeBehavior {
    /// Always.
    FireAlways,
    /// Only if the pane has new elements.
    FireIfNonempty,
}

/// How a PCollection is windowed and when groupings of it fire.
///
/// ```
/// let ws = tidewater::WindowingStrategy::global();
/// assert_eq!(ws.allowed_lateness_ms, 0);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WindowingStrategy {
    /// The WindowFn.
    pub window_fn: WindowFn,
    /// The trigger.
    pub trigger: Trigger,
    /// Accumulating or discarding panes.
    pub accumulation_mode: AccumulationMode,
    /// How late data may be before it is dropped, in ms.
    pub allowed_lateness_ms: i64,
    /// Output timestamps of groupings.
    pub timestamp_combiner: TimestampCombiner,
    /// Final pane at expiry.
    pub closing_behavior: ClosingBehavior,
    /// On-time pane when empty.
    pub on_time_behavior: OnTimeBehavior,
}

impl WindowingStrategy {
    /// The global window with the default trigger.
    pub fn global() -> Self {
        WindowingStrategy {
            window_fn: WindowFn::Global,
            trigger: Trigger::Default,
            accumulation_mode: AccumulationMode::Discarding,
            allowed_lateness_ms: 0,
            timestamp_combiner: TimestampCombiner::EndOfWindow,
            closing_behavior: ClosingBehavior::EmitIfNonempty,
            on_time_behavior: OnTimeBehavior::FireAlways,
        }
    }
}

/// Registers a user WindowFn whose fields deserialize with serde, under its type name.
/// [`WindowFn::custom`](crate::WindowFn::custom) does this.
pub fn register_window_fn<W: CustomWindowFn + DeserializeOwned>() -> String {
    let name = std::any::type_name::<W>().to_string();
    let factory: crate::registry::WindowFnFactory = Arc::new(|fields| {
        let w: W = erased_serde::deserialize(fields).map_err(crate::registry::fields_error)?;
        Ok(Arc::new(ByTimestamp(w)) as Arc<dyn ErasedWindowFn>)
    });
    crate::registry::add_window_fn::<W>(&name, factory);
    name
}

/// Registers a user WindowFn that sees elements of type `T`, under its type name (one
/// `W` applied to two element types is a name collision, reported as for DoFns).
/// [`WindowFn::by_element`](crate::WindowFn::by_element) does this;
/// `register!(WindowFn W for T)` does it at link time.
pub fn register_element_window_fn<T: Element, W: ElementWindowFn<T> + DeserializeOwned>() -> String
{
    let name = std::any::type_name::<W>().to_string();
    let factory: crate::registry::WindowFnFactory = Arc::new(|fields| {
        let w: W = erased_serde::deserialize(fields).map_err(crate::registry::fields_error)?;
        Ok(Arc::new(ByElement::<T, W>(w, std::marker::PhantomData)) as Arc<dyn ErasedWindowFn>)
    });
    crate::registry::add_window_fn::<ByElement<T, W>>(&name, factory);
    crate::registry::register_element_type::<T>();
    name
}
