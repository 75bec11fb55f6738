use std::sync::Arc;
use tidewater::exec::{AnyBatch, ErasedDoFn, ExecError, InvokeContext, Phase};
use tidewater::{BoundedWindow, ErasedWindowFn, Error, Result, Timestamp, WindowFn, Windows};

/// Assigns windows to timestamps for one WindowFn.
#[derive(Clone)]
pub enum WindowAssigner {
    /// The global window.
    Global,
    /// Fixed windows.
    Fixed {
        /// Size.
        size: i64,
        /// Offset.
        offset: i64,
    },
    /// Sliding windows.
    Sliding {
        /// Size.
        size: i64,
        /// Period.
        period: i64,
        /// Offset.
        offset: i64,
    },
    /// Sessions: `[ts, ts + gap)`, merged later per key.
    Sessions {
        /// Gap.
        gap: i64,
    },
    /// A registered user WindowFn (by timestamp or by element).
    Custom(Arc<dyn ErasedWindowFn>),
}

/// The window of a fixed WindowFn of `size` and `offset` that holds `t`.
fn fixed_window(t: i64, size: i64, offset: i64) -> BoundedWindow {
    let start = t - (t - offset).rem_euclid(size);
    interval(start, start.saturating_add(size))
}

/// [`fixed_window`] for a run of elements, trying the previous element's window first:
/// input mostly comes in event-time order, and that spares a division per element.
fn fixed_windows_remembering_last(size: i64, offset: i64) -> impl FnMut(Timestamp) -> Windows {
    let mut last: Option<(i64, i64)> = None;
    move |ts| {
        let t = ts.millis();
        match last {
            Some((start, end)) if start <= t && t < end => Windows::One(interval(start, end)),
            _ => {
                let w = fixed_window(t, size, offset);
                if let BoundedWindow::Interval { start, end } = &w {
                    last = Some((start.millis(), end.millis()));
                }
                Windows::One(w)
            }
        }
    }
}

fn interval(start: i64, end: i64) -> BoundedWindow {
    BoundedWindow::Interval {
        start: Timestamp(start),
        end: Timestamp(end),
    }
}

impl WindowAssigner {
    /// The assigner of `w`; a custom WindowFn is looked up in the registry.
    pub fn new(w: &WindowFn, transform: &str) -> Result<Self> {
        w.validate().map_err(|message| Error::InvalidPlan {
            message: format!("transform '{transform}': {message}"),
        })?;
        Ok(match w {
            WindowFn::Global => WindowAssigner::Global,
            WindowFn::Fixed { size_ms, offset_ms } => WindowAssigner::Fixed {
                size: *size_ms,
                offset: *offset_ms,
            },
            WindowFn::Sliding {
                size_ms,
                period_ms,
                offset_ms,
            } => WindowAssigner::Sliding {
                size: *size_ms,
                period: *period_ms,
                offset: *offset_ms,
            },
            WindowFn::Sessions { gap_ms } => WindowAssigner::Sessions { gap: *gap_ms },
            WindowFn::Custom { name, fields, .. } => {
                let factory =
                    tidewater::registry::window_fn(name).ok_or_else(|| Error::UnknownFunction {
                        kind: "WindowFn",
                        kind_snake: "window_fn",
                        name: name.clone(),
                        transform: format!("transform '{transform}'"),
                    })?;
                WindowAssigner::Custom(fields.with_deserializer(|d| factory(d)).map_err(
                    |message| Error::FunctionPayload {
                        name: name.clone(),
                        transform: transform.into(),
                        message,
                    },
                )?)
            }
        })
    }

    /// Whether it assigns windows from timestamps alone: every WindowFn but an
    /// [`ElementWindowFn`](tidewater::ElementWindowFn). Only such a WindowFn can map a
    /// main input's window to a side input's.
    pub fn by_timestamp(&self) -> bool {
        match self {
            WindowAssigner::Custom(f) => f.assign_timestamp(Timestamp(0)).is_some(),
            _ => true,
        }
    }

    /// The windows of an element at `ts`. An [`ElementWindowFn`](tidewater::ElementWindowFn)
    /// needs the element: it gives the global window here (callers check
    /// [`by_timestamp`](WindowAssigner::by_timestamp) first).
    pub fn assign(&self, ts: Timestamp) -> Windows {
        let t = ts.millis();
        match self {
            WindowAssigner::Global => Windows::One(BoundedWindow::Global),
            WindowAssigner::Fixed { size, offset } => Windows::One(fixed_window(t, *size, *offset)),
            WindowAssigner::Sliding {
                size,
                period,
                offset,
            } => {
                // Every window [start, start + size) with start = offset + k * period
                // that contains t, latest start first (as Beam lists them).
                let last_start = t - (t - offset).rem_euclid(*period);
                let mut ws = Vec::new();
                let mut start = last_start;
                while start > t - size {
                    ws.push(interval(start, start.saturating_add(*size)));
                    start -= period;
                }
                if ws.len() == 1 {
                    Windows::One(ws.pop().expect("one window"))
                } else {
                    Windows::Many(ws)
                }
            }
            WindowAssigner::Sessions { gap } => Windows::One(interval(t, t.saturating_add(*gap))),
            WindowAssigner::Custom(f) => {
                let mut ws = f.assign_timestamp(ts).unwrap_or_default();
                match ws.len() {
                    0 => Windows::Many(ws),
                    1 => Windows::One(ws.pop().expect("one")),
                    _ => Windows::Many(ws),
                }
            }
        }
    }
}

/// The operator of `Window::into`: assigns windows to every element, keeping value and
/// timestamp. Runs fused with the ParDos around it.
pub struct AssignWindowsFn {
    assigner: Option<WindowAssigner>,
    element_type: &'static str,
}

impl AssignWindowsFn {
    /// With `None`, windows are kept (a `Window::configure()`).
    pub fn new(assigner: Option<WindowAssigner>, element_type: &'static str) -> Self {
        AssignWindowsFn {
            assigner,
            element_type,
        }
    }
}

impl ErasedDoFn for AssignWindowsFn {
    fn input_type(&self) -> &'static str {
        self.element_type
    }
    fn output_type(&self) -> &'static str {
        self.element_type
    }
    fn setup(&mut self) -> std::result::Result<(), ExecError> {
        Ok(())
    }
    fn start_bundle(&mut self) -> std::result::Result<(), ExecError> {
        Ok(())
    }
    fn process(
        &mut self,
        mut input: Box<dyn AnyBatch>,
        ctx: &mut InvokeContext<'_>,
    ) -> std::result::Result<(), ExecError> {
        match &self.assigner {
            Some(WindowAssigner::Custom(f)) => {
                input = tidewater::exec::catch_user(std::panic::AssertUnwindSafe(|| {
                    f.assign_batch(input)
                }))
                .map_err(|_| ExecError::User {
                    phase: Phase::Process,
                    element: None,
                    message: "the WindowFn panicked while assigning windows".into(),
                })?
                .map_err(|message| ExecError::User {
                    phase: Phase::Process,
                    element: None,
                    message,
                })?;
            }
            Some(WindowAssigner::Fixed { size, offset }) => {
                let mut assign = fixed_windows_remembering_last(*size, *offset);
                input.assign_windows(&mut |ts, _| assign(ts))
            }
            Some(a) => input.assign_windows(&mut |ts, _| a.assign(ts)),
            None => {}
        }
        ctx.emit.emit(0, input)
    }
    fn finish_bundle(
        &mut self,
        _ctx: &mut InvokeContext<'_>,
    ) -> std::result::Result<(), ExecError> {
        Ok(())
    }
    fn teardown(&mut self) -> std::result::Result<(), ExecError> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Remembering the last window gives every element the window `assign` gives it,
    /// in order, out of order, at window bounds and at the ends of time.
    #[test]
    fn the_remembered_window_is_the_assigned_one() {
        let (min, max) = (Timestamp::MIN.0, Timestamp::MAX.0);
        let mut times: Vec<i64> = vec![min, min + 1, -1_001, -1_000, -999, -1, 0, 1];
        for s in [2i64, 3, 12, 13, 999, 1_000, 1_001, 1_003] {
            times.extend([s - 1, s, s + 1, s]);
        }
        times.extend([5, 4, 3, 2, 1, 0, max - 1, max, max - 10, 7]);
        for (size, offset) in [(10, 3), (1_000, 0), (1, 0), (7, -2)] {
            let a = WindowAssigner::Fixed { size, offset };
            let mut remembering = fixed_windows_remembering_last(size, offset);
            for &t in &times {
                let ts = Timestamp(t);
                assert_eq!(
                    remembering(ts),
                    a.assign(ts),
                    "size {size} offset {offset} at {t}"
                );
            }
        }
    }
}
