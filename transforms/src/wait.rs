//! Beam's `Wait.on`: holds a PCollection back, window by window, until signals are
//! complete.

use crate::Count;
use serde::{Deserialize, Serialize};
use std::marker::PhantomData;
use tidewater::{
    DoFn, Element, PCollection, PCollectionView, PTransform, ParDo, ProcessContext, UserError,
};

/// Passes every element on once the signal PCollection is complete for the element's
/// window (Beam's `Wait.on`): a main element in window `W` waits until the signals'
/// watermark has passed the end of the signal window holding `W`'s end, as a side
/// input does (`docs/semantics.md`, "Side inputs"). With signals in the global window
/// (a bounded step's output, say) everything waits until the signals are done: "write
/// the summary only after the rows are written".
///
/// ```
/// use tidewater_transforms::Wait;
/// tidewater_runner_direct::register();
/// let p = tidewater::Pipeline::new(Default::default());
/// let written = p.create("Rows", vec![1u32, 2, 3]).map("Write", |r: u32| r * 10);
/// p.create("Summary", vec!["done".to_string()])
///     .apply("AfterRows", Wait::on(&written))
///     .capture("summary");
/// let r = p.run().unwrap();
/// assert_eq!(r.captured_values::<String>("summary").unwrap(), vec!["done"]);
/// ```
pub struct Wait;

impl Wait {
    /// Waits on `signal`.
    pub fn on<S: Element>(signal: &PCollection<S>) -> WaitOn<S> {
        WaitOn {
            signal: signal.clone(),
        }
    }
}

/// See [`Wait::on`].
pub struct WaitOn<S> {
    signal: PCollection<S>,
}

/// Reads the signals' count for the element's window (so the element waits for it),
/// then passes the element on.
#[derive(Serialize, Deserialize)]
#[serde(bound = "")]
struct PassAfter<T> {
    signals: PCollectionView<u64>,
    #[serde(skip)]
    _t: PhantomData<fn(T)>,
}

impl<T: Element> DoFn for PassAfter<T> {
    type In = T;
    type Out = T;
    fn process(&mut self, x: T, ctx: &mut ProcessContext<'_, T>) -> Result<(), UserError> {
        ctx.side_input(&self.signals)?;
        ctx.output(x);
        Ok(())
    }
}

impl<T: Element, S: Element> PTransform<PCollection<T>> for WaitOn<S> {
    type Output = PCollection<T>;
    fn expand(self, input: PCollection<T>) -> PCollection<T> {
        let signals = self
            .signal
            .apply("CountSignals", Count::globally())
            .as_singleton_with_default(0);
        input.apply(
            "PassAfterSignals",
            ParDo::of(PassAfter::<T> {
                signals,
                _t: PhantomData,
            }),
        )
    }
}
