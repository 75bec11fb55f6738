//! Side inputs: which side window a main-input window reads, when it is ready, and the
//! values per window that a ParDo's DoFn reads.

use crate::windowing::WindowAssigner;
use std::any::Any;
use std::collections::HashMap;
use std::sync::Arc;
use tidewater::exec::AnyBatch;
use tidewater::{BoundedWindow, Result, SideInputReader, Timestamp, ViewOps, WindowFn};

/// Maps a main-input window to the side input's window that holds its end (Beam's
/// default `WindowMappingFn`).
#[derive(Clone)]
pub struct WindowMapper {
    assigner: Option<WindowAssigner>,
}

impl WindowMapper {
    /// The mapper into windows of `side`.
    pub fn new(side: &WindowFn, transform: &str) -> Result<Self> {
        Ok(WindowMapper {
            assigner: if *side == WindowFn::Global {
                None
            } else {
                Some(WindowAssigner::new(side, transform)?)
            },
        })
    }

    /// The side window for `main`.
    pub fn side_window(&self, main: &BoundedWindow) -> BoundedWindow {
        match &self.assigner {
            None => BoundedWindow::Global,
            Some(a) => *a
                .assign(main.max_timestamp())
                .iter()
                .next()
                .unwrap_or(&BoundedWindow::Global),
        }
    }

    /// Whether the side window of `main` is complete: the side input's watermark has
    /// passed its end.
    pub fn is_ready(&self, main: &BoundedWindow, side_watermark: Timestamp) -> bool {
        side_watermark == Timestamp::MAX || side_watermark > self.side_window(main).max_timestamp()
    }
}

type Value = std::result::Result<Arc<dyn Any + Send + Sync>, String>;

/// The side-input values a DoFn call may read, per tag and side window.
pub struct SideInputs {
    by_tag: HashMap<String, (WindowMapper, HashMap<BoundedWindow, Value>)>,
}

impl SideInputs {
    /// Builds the values each side input has in the side windows that the elements of
    /// `main` map to. Each side input is (tag, mapper, view function, all its elements).
    pub fn build(
        sides: impl Iterator<Item = (String, WindowMapper, Arc<dyn ViewOps>, Box<dyn AnyBatch>)>,
        main: &dyn AnyBatch,
    ) -> Self {
        let main_windows = main.distinct_windows();
        let mut by_tag = HashMap::new();
        for (tag, mapper, view, all) in sides {
            let mut values = HashMap::new();
            for w in &main_windows {
                let sw = mapper.side_window(w);
                values.entry(sw).or_insert_with(|| {
                    let batch = all.in_window(&sw);
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| view.build(batch)))
                        .unwrap_or_else(|_| Err("building the side input panicked".into()))
                });
            }
            by_tag.insert(tag, (mapper, values));
        }
        SideInputs { by_tag }
    }
}

impl SideInputReader for SideInputs {
    fn get(
        &self,
        tag: &str,
        window: &BoundedWindow,
    ) -> std::result::Result<&(dyn Any + Send + Sync), String> {
        let Some((mapper, values)) = self.by_tag.get(tag) else {
            return Err(format!(
                "side input '{tag}' was not declared on this ParDo: add .with_side_input(&view)"
            ));
        };
        let sw = mapper.side_window(window);
        match values.get(&sw) {
            Some(Ok(v)) => Ok(v.as_ref()),
            Some(Err(e)) => Err(format!("side input '{tag}' in window {sw:?}: {e}")),
            None => Err(format!("side input '{tag}' has no value for window {sw:?}")),
        }
    }
}
