use super::{AnyBatch, StepMetrics};
use crate::dofn::{FinishBundleContext, Outputs, ProcessContext};
use crate::exec::catch_user;
use crate::{DoFn, Element, Windows};
use std::panic::AssertUnwindSafe;

/// Elements per batch handed downstream.
pub const BATCH_SIZE: usize = 256;

/// The step of the DoFn lifecycle that failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// `setup`.
    Setup,
    /// `start_bundle`.
    StartBundle,
    /// `process`.
    Process,
    /// `finish_bundle`.
    FinishBundle,
    /// `teardown`.
    Teardown,
    /// A sink's `write`.
    SinkWrite,
    /// A sink's `stage`.
    SinkStage,
    /// A sink's `commit`.
    SinkCommit,
    /// A sink's `abort`.
    SinkAbort,
    /// A sink's `recover`.
    SinkRecover,
}

impl Phase {
    /// The method's name.
    pub fn name(self) -> &'static str {
        match self {
            Phase::Setup => "setup",
            Phase::StartBundle => "start_bundle",
            Phase::Process => "process",
            Phase::FinishBundle => "finish_bundle",
            Phase::Teardown => "teardown",
            Phase::SinkWrite => "write",
            Phase::SinkStage => "stage",
            Phase::SinkCommit => "commit",
            Phase::SinkAbort => "abort",
            Phase::SinkRecover => "recover",
        }
    }
}

/// A failure while executing user code.
#[derive(Debug)]
pub enum ExecError {
    /// The user function of this step failed; the runner adds the transform's name.
    User {
        /// Lifecycle step.
        phase: Phase,
        /// The element's debug form or position, when there was one.
        element: Option<String>,
        /// Error or panic message.
        message: String,
    },
    /// A connector of this step lost an external system
    /// ([`crate::io::Unavailable`]); the runner adds the transform's name.
    Unavailable {
        /// Lifecycle step.
        phase: Phase,
        /// What went away.
        message: String,
    },
    /// A step downstream failed; its error is complete.
    Downstream(Box<crate::Error>),
}

/// Where a step's output batches go; implemented by the runner.
pub trait Emit {
    /// Delivers a batch of output `output` (0 is the main output, then the tagged
    /// outputs in declaration order).
    fn emit(&mut self, output: usize, batch: Box<dyn AnyBatch>) -> Result<(), ExecError>;
    /// An empty batch of the element type of output `output`.
    fn empty_batch(&self, output: usize) -> Box<dyn AnyBatch>;
}

/// A DoFn behind the erased interface a runner drives.
pub trait ErasedDoFn: Send {
    /// Name of the input element type.
    fn input_type(&self) -> &'static str;
    /// Name of the main output element type.
    fn output_type(&self) -> &'static str;
    /// `DoFn::setup`.
    fn setup(&mut self) -> Result<(), ExecError>;
    /// `DoFn::start_bundle`.
    fn start_bundle(&mut self) -> Result<(), ExecError>;
    /// `DoFn::process` on every element of `input`.
    fn process(
        &mut self,
        input: Box<dyn AnyBatch>,
        ctx: &mut InvokeContext<'_>,
    ) -> Result<(), ExecError>;
    /// `DoFn::finish_bundle`, then flushes all outputs.
    fn finish_bundle(&mut self, ctx: &mut InvokeContext<'_>) -> Result<(), ExecError>;
    /// `DoFn::teardown`.
    fn teardown(&mut self) -> Result<(), ExecError>;
}

/// What the runner lends a step for one call.
pub struct InvokeContext<'a> {
    /// Downstream.
    pub emit: &'a mut dyn Emit,
    /// This step's metrics.
    pub metrics: &'a mut StepMetrics,
    /// Output tags in output-index order; the first is the main output's.
    pub tags: &'a [String],
    /// Keep a copy of each element while it is processed so that a failure can show it
    /// (validation mode); otherwise a failure names the element's position.
    pub keep_failed_element: bool,
    /// The side inputs of this step.
    pub side_inputs: &'a dyn crate::SideInputReader,
}

/// Runs a typed [`DoFn`] behind [`ErasedDoFn`].
pub struct DoFnInvoker<F: DoFn> {
    f: F,
    main: Vec<crate::WindowedValue<F::Out>>,
    side: Vec<Option<Box<dyn AnyBatch>>>,
}

impl<F: DoFn> DoFnInvoker<F> {
    /// Wraps `f`.
    pub fn new(f: F) -> Self {
        DoFnInvoker {
            f,
            main: Vec::new(),
            side: Vec::new(),
        }
    }
}

fn panic_message(p: Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        format!("panicked: {s}")
    } else if let Some(s) = p.downcast_ref::<String>() {
        format!("panicked: {s}")
    } else {
        "panicked".to_string()
    }
}

fn call<R>(
    phase: Phase,
    element: impl FnOnce() -> Option<String>,
    f: impl FnOnce() -> Result<R, crate::UserError>,
) -> Result<R, ExecError> {
    match catch_user(AssertUnwindSafe(f)) {
        Ok(Ok(r)) => Ok(r),
        Ok(Err(e)) => Err(ExecError::User {
            phase,
            element: element(),
            message: e.to_string(),
        }),
        Err(p) => Err(ExecError::User {
            phase,
            element: element(),
            message: panic_message(p),
        }),
    }
}

impl<F: DoFn> DoFnInvoker<F> {
    /// `process` of one element in one window, unguarded: [`ErasedDoFn::process`] runs
    /// a whole batch under one panic guard (a guard per element was some 4% of a word
    /// count's time).
    #[allow(clippy::too_many_arguments)]
    fn process_in(
        &mut self,
        value: F::In,
        timestamp: crate::Timestamp,
        windows: &Windows,
        pane: crate::PaneInfo,
        ctx: &mut InvokeContext<'_>,
        failed: &mut Option<ExecError>,
    ) -> Result<(), crate::UserError> {
        let skew = self.f.allowed_timestamp_skew();
        let mut pc = ProcessContext {
            out: Outputs {
                main: &mut self.main,
                side: &mut self.side,
                tags: ctx.tags,
                emit: ctx.emit,
                failed,
            },
            timestamp,
            windows,
            pane,
            skew,
            metrics: ctx.metrics,
            side_inputs: ctx.side_inputs,
        };
        self.f.process(value, &mut pc)
    }
}

/// The element a batch's `process` is at, to name in an error: its position and, in
/// validation mode, a copy.
struct At<T> {
    index: usize,
    kept: Option<T>,
}

impl<T: std::fmt::Debug> At<T> {
    fn describe(&self) -> Option<String> {
        Some(match &self.kept {
            Some(v) => format!("{v:?}"),
            None => format!(
                "#{} of its batch (only the direct runner with validation keeps a copy to show)",
                self.index
            ),
        })
    }
}

impl<F: DoFn> ErasedDoFn for DoFnInvoker<F> {
    fn input_type(&self) -> &'static str {
        std::any::type_name::<F::In>()
    }

    fn output_type(&self) -> &'static str {
        std::any::type_name::<F::Out>()
    }

    fn setup(&mut self) -> Result<(), ExecError> {
        call(Phase::Setup, || None, || self.f.setup())
    }

    fn start_bundle(&mut self) -> Result<(), ExecError> {
        call(Phase::StartBundle, || None, || self.f.start_bundle())
    }

    fn process(
        &mut self,
        input: Box<dyn AnyBatch>,
        ctx: &mut InvokeContext<'_>,
    ) -> Result<(), ExecError> {
        let items = super::downcast_batch::<F::In>(input);
        if self.side.len() + 1 != ctx.tags.len() {
            self.side
                .resize_with(ctx.tags.len().saturating_sub(1), || None);
        }
        if self.main.capacity() == 0 {
            self.main.reserve(BATCH_SIZE);
        }
        let mut failed = None;
        let mut at = At {
            index: 0,
            kept: None,
        };
        let run = catch_user(AssertUnwindSafe(|| {
            for (index, wv) in items.into_iter().enumerate() {
                at.index = index;
                at.kept = ctx.keep_failed_element.then(|| wv.value.clone());
                let crate::WindowedValue {
                    value,
                    timestamp,
                    windows,
                    pane,
                } = wv;
                let result = match &windows {
                    Windows::One(_) => {
                        self.process_in(value, timestamp, &windows, pane, ctx, &mut failed)
                    }
                    Windows::Many(ws) => ws.iter().try_for_each(|w| {
                        self.process_in(
                            value.clone(),
                            timestamp,
                            &Windows::One(w.clone()),
                            pane,
                            ctx,
                            &mut failed,
                        )
                    }),
                };
                if let Err(e) = result {
                    return Err(ExecError::User {
                        phase: Phase::Process,
                        element: at.describe(),
                        message: e.to_string(),
                    });
                }
                if let Some(e) = failed.take() {
                    return Err(with_element(e, || at.describe()));
                }
            }
            Ok(())
        }));
        match run {
            Ok(r) => r?,
            Err(p) => {
                return Err(ExecError::User {
                    phase: Phase::Process,
                    element: at.describe(),
                    message: panic_message(p),
                });
            }
        }
        let mut out = Outputs {
            main: &mut self.main,
            side: &mut self.side,
            tags: ctx.tags,
            emit: ctx.emit,
            failed: &mut failed,
        };
        out.flush_all();
        failed.map_or(Ok(()), Err)
    }

    fn finish_bundle(&mut self, ctx: &mut InvokeContext<'_>) -> Result<(), ExecError> {
        if self.side.len() + 1 != ctx.tags.len() {
            self.side
                .resize_with(ctx.tags.len().saturating_sub(1), || None);
        }
        let mut failed = None;
        let mut fc = FinishBundleContext {
            out: Outputs {
                main: &mut self.main,
                side: &mut self.side,
                tags: ctx.tags,
                emit: ctx.emit,
                failed: &mut failed,
            },
            metrics: ctx.metrics,
        };
        call(
            Phase::FinishBundle,
            || None,
            || self.f.finish_bundle(&mut fc),
        )?;
        fc.out.flush_all();
        failed.map_or(Ok(()), Err)
    }

    fn teardown(&mut self) -> Result<(), ExecError> {
        call(Phase::Teardown, || None, || self.f.teardown())
    }
}

fn with_element(e: ExecError, describe: impl FnOnce() -> Option<String>) -> ExecError {
    match e {
        ExecError::User {
            phase,
            element: None,
            message,
        } => ExecError::User {
            phase,
            element: describe(),
            message,
        },
        other => other,
    }
}

/// Makes sure `T` can be named in a plan; used by transforms that build batches.
pub fn element_type_name<T: Element>() -> &'static str {
    std::any::type_name::<T>()
}
