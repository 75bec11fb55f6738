//! DoFn: the user function of a ParDo.

use crate::exec::{AnyBatch, BATCH_SIZE, Batch, Emit, ExecError, Phase, StepMetrics};
use crate::{BoundedWindow, Element, PaneInfo, Timestamp, UserError, WindowedValue, Windows};
use serde::{Deserialize, Serialize};
use std::marker::PhantomData;

/// The per-element function of a [`ParDo`](crate::ParDo), with Beam's lifecycle.
///
/// A DoFn is a plain struct whose fields serialize with serde: the struct travels in
/// the plan by name plus fields and is rebuilt where it runs. `setup` runs once per
/// instance, `start_bundle` / `finish_bundle` around each bundle, `process` per
/// element and `teardown` when the runner is done with the instance, also after a
/// failure.
///
/// ```
/// use serde::{Deserialize, Serialize};
/// use tidewater::{DoFn, ProcessContext, UserError};
///
/// #[derive(Serialize, Deserialize)]
/// struct SplitWords { min_len: usize }
///
/// impl DoFn for SplitWords {
///     type In = String;
///     type Out = String;
///     fn process(&mut self, line: String, ctx: &mut ProcessContext<'_, String>) -> Result<(), UserError> {
///         for w in line.split_whitespace().filter(|w| w.len() >= self.min_len) {
///             ctx.output(w.to_string());
///         }
///         Ok(())
///     }
/// }
/// ```
pub trait DoFn: Send + 'static {
    /// Input element type.
    type In: Element;
    /// Main output element type.
    type Out: Element;

    /// Once per instance, before any bundle.
    fn setup(&mut self) -> Result<(), UserError> {
        Ok(())
    }
    /// Before the first element of each bundle.
    fn start_bundle(&mut self) -> Result<(), UserError> {
        Ok(())
    }
    /// Once per element (and per window of the element).
    fn process(
        &mut self,
        element: Self::In,
        ctx: &mut ProcessContext<'_, Self::Out>,
    ) -> Result<(), UserError>;
    /// After the last element of each bundle; may output.
    fn finish_bundle(
        &mut self,
        _ctx: &mut FinishBundleContext<'_, Self::Out>,
    ) -> Result<(), UserError> {
        Ok(())
    }
    /// Once when the instance is discarded, also after a failed bundle.
    fn teardown(&mut self) -> Result<(), UserError> {
        Ok(())
    }
    /// How far before the input's timestamp `output_with_timestamp` may go, in ms
    /// (Beam's `getAllowedTimestampSkew`); 0 by default.
    fn allowed_timestamp_skew(&self) -> i64 {
        0
    }
}

/// Names an additional output of a ParDo; a DoFn keeps its tags as fields.
///
/// ```
/// let errors: tidewater::TupleTag<String> = tidewater::TupleTag::new("errors");
/// assert_eq!(errors.name(), "errors");
/// ```
#[derive(Serialize, Deserialize)]
#[serde(transparent)]
pub struct TupleTag<T> {
    name: String,
    #[serde(skip)]
    _t: PhantomData<fn() -> T>,
}

impl<T> Clone for TupleTag<T> {
    fn clone(&self) -> Self {
        TupleTag {
            name: self.name.clone(),
            _t: PhantomData,
        }
    }
}

impl<T> std::fmt::Debug for TupleTag<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TupleTag({})", self.name)
    }
}

impl<T> TupleTag<T> {
    /// A tag named `name`; `"main"` is the main output's.
    pub fn new(name: &str) -> Self {
        TupleTag {
            name: name.to_string(),
            _t: PhantomData,
        }
    }
    /// The tag's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// The name of the main output's tag.
pub const MAIN_TAG: &str = "main";

/// Where a DoFn's outputs go: a typed buffer for the main output, erased buffers for
/// tagged outputs, flushed downstream a batch at a time.
pub(crate) struct Outputs<'a, O> {
    pub(crate) main: &'a mut Vec<WindowedValue<O>>,
    pub(crate) side: &'a mut [Option<Box<dyn AnyBatch>>],
    pub(crate) tags: &'a [String],
    pub(crate) emit: &'a mut dyn Emit,
    pub(crate) failed: &'a mut Option<ExecError>,
}

impl<O: Element> Outputs<'_, O> {
    pub(crate) fn push_main(&mut self, wv: WindowedValue<O>) {
        // Once a step downstream (or this one) failed, nothing more is delivered.
        if self.failed.is_some() {
            return;
        }
        self.main.push(wv);
        if self.main.len() >= BATCH_SIZE {
            self.flush_main();
        }
    }

    pub(crate) fn flush_main(&mut self) {
        if self.main.is_empty() || self.failed.is_some() {
            self.main.clear();
            return;
        }
        let items = std::mem::replace(self.main, Vec::with_capacity(BATCH_SIZE));
        if let Err(e) = self.emit.emit(0, Box::new(Batch { items })) {
            self.failed.get_or_insert(e);
        }
    }

    pub(crate) fn push_tagged<T: Element>(&mut self, tag: &TupleTag<T>, wv: WindowedValue<T>) {
        if self.failed.is_some() {
            return;
        }
        let Some(i) = self.tags.iter().position(|t| *t == tag.name) else {
            self.fail(format!(
                "output to undeclared tag '{}'; declared: {}",
                tag.name,
                self.tags.join(", ")
            ));
            return;
        };
        if i == 0 {
            self.fail(format!(
                "the main output has tag '{MAIN_TAG}'; use output() for it"
            ));
            return;
        }
        let emit = &mut *self.emit;
        let slot = self.side[i - 1].get_or_insert_with(|| emit.empty_batch(i));
        let Some(batch) = slot.as_any_mut().downcast_mut::<Batch<T>>() else {
            let declared = slot.element_type();
            self.fail(format!(
                "output of a {} to tag '{}', which was declared with type {declared}",
                std::any::type_name::<T>(),
                tag.name
            ));
            return;
        };
        batch.items.push(wv);
        if batch.items.len() >= BATCH_SIZE {
            self.flush_side(i);
        }
    }

    pub(crate) fn flush_side(&mut self, i: usize) {
        if let Some(b) = self.side[i - 1].take()
            && !b.is_empty()
            && self.failed.is_none()
            && let Err(e) = self.emit.emit(i, b)
        {
            self.failed.get_or_insert(e);
        }
    }

    pub(crate) fn flush_all(&mut self) {
        self.flush_main();
        for i in 1..self.tags.len() {
            self.flush_side(i);
        }
    }

    fn fail(&mut self, message: String) {
        self.failed.get_or_insert(ExecError::User {
            phase: Phase::Process,
            element: None,
            message,
        });
    }
}

/// What `process` sees besides the element: its timestamp, window and pane, the
/// outputs, and the metrics.
pub struct ProcessContext<'a, O> {
    pub(crate) out: Outputs<'a, O>,
    pub(crate) timestamp: Timestamp,
    pub(crate) windows: &'a Windows,
    pub(crate) pane: PaneInfo,
    pub(crate) skew: i64,
    pub(crate) metrics: &'a mut StepMetrics,
    pub(crate) side_inputs: &'a dyn crate::SideInputReader,
}

impl<O: Element> ProcessContext<'_, O> {
    /// The value of side input `view` for the window being processed: the side input's
    /// window that holds the end of this one. The ParDo must declare it with
    /// `with_side_input(&view)`.
    pub fn side_input<T: 'static>(
        &self,
        view: &crate::PCollectionView<T>,
    ) -> Result<&T, UserError> {
        let w = self.window();
        let any = self.side_inputs.get(view.tag(), &w)?;
        any.downcast_ref::<T>().ok_or_else(|| {
            format!(
                "side input '{}' does not hold a {}",
                view.tag(),
                std::any::type_name::<T>()
            )
            .into()
        })
    }

    /// Outputs `value` to the main output with the input's timestamp and windows.
    pub fn output(&mut self, value: O) {
        let wv = WindowedValue {
            value,
            timestamp: self.timestamp,
            windows: self.windows.clone(),
            pane: self.pane,
        };
        self.out.push_main(wv);
    }

    /// Outputs with another timestamp; it may not be earlier than the input's by more
    /// than [`DoFn::allowed_timestamp_skew`].
    pub fn output_with_timestamp(&mut self, value: O, timestamp: Timestamp) {
        if !self.check_skew(timestamp) {
            return;
        }
        let wv = WindowedValue {
            value,
            timestamp,
            windows: self.windows.clone(),
            pane: self.pane,
        };
        self.out.push_main(wv);
    }

    /// Outputs `value` to the tagged output `tag`.
    pub fn output_to<T: Element>(&mut self, tag: &TupleTag<T>, value: T) {
        let wv = WindowedValue {
            value,
            timestamp: self.timestamp,
            windows: self.windows.clone(),
            pane: self.pane,
        };
        self.out.push_tagged(tag, wv);
    }

    /// The input element's timestamp.
    pub fn timestamp(&self) -> Timestamp {
        self.timestamp
    }

    /// The window the element is being processed in.
    pub fn window(&self) -> BoundedWindow {
        self.windows
            .iter()
            .next()
            .cloned()
            .unwrap_or(BoundedWindow::Global)
    }

    /// The input element's pane.
    pub fn pane(&self) -> PaneInfo {
        self.pane
    }

    /// Adds `n` to the counter `name` of this step.
    pub fn inc_counter(&mut self, name: &str, n: i64) {
        self.metrics.inc_counter(name, n);
    }

    /// Reports `value` to the distribution `name` of this step.
    pub fn update_distribution(&mut self, name: &str, value: i64) {
        self.metrics.update_distribution(name, value);
    }

    /// Sets the gauge `name` of this step to `value` (a figure that goes up and down,
    /// such as a queue's length; across workers the latest value set wins, as Beam's
    /// gauges).
    pub fn set_gauge(&mut self, name: &str, value: i64) {
        self.metrics.set_gauge(name, value);
    }

    fn check_skew(&mut self, timestamp: Timestamp) -> bool {
        if timestamp.0 < self.timestamp.0.saturating_sub(self.skew) {
            self.out.failed.get_or_insert(ExecError::User {
                phase: Phase::Process,
                element: None,
                message: format!(
                    "cannot output with timestamp {timestamp:?}: it is before the input's timestamp {:?} \
                     by more than the allowed skew of {}ms (override DoFn::allowed_timestamp_skew)",
                    self.timestamp, self.skew
                ),
            });
            return false;
        }
        true
    }
}

/// What `finish_bundle` sees: outputs need an explicit timestamp and window, since no
/// input element is current.
pub struct FinishBundleContext<'a, O> {
    pub(crate) out: Outputs<'a, O>,
    pub(crate) metrics: &'a mut StepMetrics,
}

impl<O: Element> FinishBundleContext<'_, O> {
    /// Outputs `value` at `timestamp` in `window`.
    pub fn output(&mut self, value: O, timestamp: Timestamp, window: BoundedWindow) {
        self.out.push_main(WindowedValue {
            value,
            timestamp,
            windows: Windows::One(window),
            pane: PaneInfo::NO_FIRING,
        });
    }

    /// Outputs `value` to the tagged output `tag`, at `timestamp` in `window`.
    pub fn output_to<T: Element>(
        &mut self,
        tag: &TupleTag<T>,
        value: T,
        timestamp: Timestamp,
        window: BoundedWindow,
    ) {
        self.out.push_tagged(
            tag,
            WindowedValue {
                value,
                timestamp,
                windows: Windows::One(window),
                pane: PaneInfo::NO_FIRING,
            },
        );
    }

    /// Adds `n` to the counter `name` of this step.
    pub fn inc_counter(&mut self, name: &str, n: i64) {
        self.metrics.inc_counter(name, n);
    }

    /// Reports `value` to the distribution `name` of this step.
    pub fn update_distribution(&mut self, name: &str, value: i64) {
        self.metrics.update_distribution(name, value);
    }

    /// Sets the gauge `name` of this step to `value` (a figure that goes up and down,
    /// such as a queue's length; across workers the latest value set wins, as Beam's
    /// gauges).
    pub fn set_gauge(&mut self, name: &str, value: i64) {
        self.metrics.set_gauge(name, value);
    }
}
