//! Side inputs: which side window a main-input window reads, when it is ready, and the
//! runner of a ParDo with side inputs — side data kept per side window (pruned once the
//! window expires), main input held until the side windows it reads are complete, and
//! the output watermark held back for it.

use crate::keyed::snapshot::unexpected_scope;
use crate::snapshot::{decode_part, encode_part, Scope};
use crate::translate::{ExecutablePlan, NodeKind};
use crate::windowing::{gc_time, WindowAssigner};
use std::any::Any;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use tidewater::exec::{AnyBatch, ElementType, ExecError};
use tidewater::{
    BoundedWindow, Error, Result, SideInputReader, Timestamp, ViewOps, WindowFn, Windows,
};

/// Maps a main-input window to the side input's window that holds its end (Beam's
/// default `WindowMappingFn`).
#[derive(Clone)]
pub struct WindowMapper {
    assigner: Option<WindowAssigner>,
}

impl WindowMapper {
    /// The mapper into windows of `side`.
    pub fn new(side: &WindowFn, transform: &str) -> Result<Self> {
        let assigner = if *side == WindowFn::Global {
            None
        } else {
            Some(WindowAssigner::new(side, transform)?)
        };
        if assigner.as_ref().is_some_and(|a| !a.by_timestamp()) {
            return Err(tidewater::Error::InvalidPlan {
                message: format!(
                    "transform '{transform}': a side input windowed by a WindowFn that \
                     assigns windows by element cannot be read: the side window of a main \
                     input's window is found from its end timestamp alone"
                ),
            });
        }
        Ok(WindowMapper { assigner })
    }

    /// The side window for `main`.
    pub fn side_window(&self, main: &BoundedWindow) -> BoundedWindow {
        match &self.assigner {
            None => BoundedWindow::Global,
            Some(a) => a
                .assign(main.max_timestamp())
                .iter()
                .next()
                .cloned()
                .unwrap_or(BoundedWindow::Global),
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

/// One side input of a ParDo.
struct Side {
    tag: String,
    mapper: WindowMapper,
    view: Arc<dyn ViewOps>,
    element_type: Arc<dyn ElementType>,
    allowed_lateness_ms: i64,
    watermark: Timestamp,
    /// Its elements, per side window.
    data: BTreeMap<BoundedWindow, Box<dyn AnyBatch>>,
    /// Values built from `data`, per side window; a window's value is rebuilt after
    /// new data arrives for it.
    values: HashMap<BoundedWindow, Value>,
}

impl Side {
    fn value(&mut self, sw: BoundedWindow) -> Value {
        if let Some(v) = self.values.get(&sw) {
            return v.clone();
        }
        let batch = match self.data.get(&sw) {
            Some(b) => b.in_window(&sw),
            None => self.element_type.new_batch(),
        };
        let view = &self.view;
        let v = tidewater::exec::catch_user(std::panic::AssertUnwindSafe(|| view.build(batch)))
            .unwrap_or_else(|_| Err("building the side input panicked".into()));
        self.values.insert(sw, v.clone());
        v
    }
}

/// The runner of one ParDo with side inputs (Beam's `SideInputHandler` and pushback
/// runner): it holds main input until every side window it reads is complete, then
/// hands it out with the side-input values it needs.
pub struct SideInputRunner {
    transform: String,
    main_type: Arc<dyn ElementType>,
    sides: Vec<Side>,
    /// Main input waiting, grouped by its windows (so readiness is decided per set of
    /// windows, not per element).
    held: Vec<(Windows, Box<dyn AnyBatch>)>,
    main_watermark: Timestamp,
}

/// The side data of one side input in a snapshot.
#[derive(serde::Serialize, serde::Deserialize)]
struct SideSnapshot {
    watermark: Timestamp,
    windows: Vec<(BoundedWindow, Vec<u8>)>,
}

impl SideInputRunner {
    /// The runner of plan node `node`, a ParDo with side inputs.
    pub fn new(plan: &ExecutablePlan, node: usize) -> Result<Self> {
        let n = &plan.nodes[node];
        let NodeKind::ParDo { side_inputs, .. } = &n.kind else {
            return Err(Error::Internal(format!("'{}' is not a ParDo", n.name)));
        };
        let sides = side_inputs
            .iter()
            .enumerate()
            .map(|(k, (tag, view))| {
                let pc = &plan.pcollections[n.inputs[k + 1]];
                Ok(Side {
                    tag: tag.clone(),
                    mapper: WindowMapper::new(&pc.windowing.window_fn, &n.name)?,
                    view: view.clone(),
                    element_type: pc.element_type.clone(),
                    allowed_lateness_ms: pc.windowing.allowed_lateness_ms,
                    watermark: Timestamp::MIN,
                    data: BTreeMap::new(),
                    values: HashMap::new(),
                })
            })
            .collect::<Result<_>>()?;
        Ok(SideInputRunner {
            transform: n.name.clone(),
            main_type: plan.pcollections[n.inputs[0]].element_type.clone(),
            sides,
            held: Vec::new(),
            main_watermark: Timestamp::MIN,
        })
    }

    /// Adds data of node input `input` (side input `input - 1`).
    pub fn add_side(&mut self, input: usize, batch: Box<dyn AnyBatch>) {
        let side = &mut self.sides[input - 1];
        for (w, b) in batch.explode_by_window() {
            side.values.remove(&w);
            match side.data.get_mut(&w) {
                Some(all) => all.append(b),
                None => {
                    side.data.insert(w, b);
                }
            }
        }
    }

    /// Holds main input until its side windows are ready.
    pub fn add_main(&mut self, batch: Box<dyn AnyBatch>) {
        for (ws, b) in batch.group_by_windows() {
            match self.held.iter_mut().find(|(x, _)| *x == ws) {
                Some((_, all)) => all.append(b),
                None => self.held.push((ws, b)),
            }
        }
    }

    /// Moves to these watermarks (of the main input and of each side input, in node
    /// input order) and returns the main input now ready, with the side-input values
    /// it reads. Side windows that expired are dropped.
    pub fn advance(
        &mut self,
        main_watermark: Timestamp,
        side_watermarks: &[Timestamp],
    ) -> Option<(Box<dyn AnyBatch>, Arc<SideInputs>)> {
        self.main_watermark = self.main_watermark.max(main_watermark);
        for (side, wm) in self.sides.iter_mut().zip(side_watermarks) {
            side.watermark = side.watermark.max(*wm);
        }
        let sides = &self.sides;
        let is_ready = |ws: &Windows| {
            ws.iter()
                .all(|w| sides.iter().all(|s| s.mapper.is_ready(w, s.watermark)))
        };
        let (ready, held): (Vec<_>, Vec<_>) = std::mem::take(&mut self.held)
            .into_iter()
            .partition(|(ws, _)| is_ready(ws));
        self.held = held;
        if ready.is_empty() {
            self.prune();
            return None;
        }
        let mut by_tag = HashMap::new();
        for side in &mut self.sides {
            let mut values = HashMap::new();
            for w in ready.iter().flat_map(|(ws, _)| ws.iter()) {
                let sw = side.mapper.side_window(w);
                values.entry(sw.clone()).or_insert_with(|| side.value(sw));
            }
            by_tag.insert(side.tag.clone(), (side.mapper.clone(), values));
        }
        let mut all = self.main_type.new_batch();
        for (_, b) in ready {
            all.append(b);
        }
        self.prune();
        Some((all, Arc::new(SideInputs { by_tag })))
    }

    /// Drops side windows that expired for both inputs and that no held main input
    /// reads: the side input's watermark passed the window's garbage-collection time,
    /// and so did the main input's, so no main input on time can still read it (late
    /// main input then reads it empty, as in Beam once a side window's state is
    /// collected).
    fn prune(&mut self) {
        let main = self.main_watermark;
        let held = &self.held;
        for side in &mut self.sides {
            let lateness = side.allowed_lateness_ms;
            let (wm, mapper) = (side.watermark, &side.mapper);
            let (data, values) = (&mut side.data, &mut side.values);
            data.retain(|w, _| {
                let expired = wm > gc_time(w, lateness) && main > gc_time(w, lateness);
                let read = || {
                    held.iter()
                        .any(|(ws, _)| ws.iter().any(|m| mapper.side_window(m) == *w))
                };
                let keep = !expired || read();
                if !keep {
                    values.remove(w);
                }
                keep
            });
        }
    }

    /// The output watermark: the main input's, held back by held main input.
    pub fn output_watermark(&self) -> Timestamp {
        self.held
            .iter()
            .filter_map(|(_, b)| b.min_timestamp())
            .fold(self.main_watermark, Timestamp::min)
    }

    /// Side windows held (for tests of pruning).
    pub fn side_windows(&self) -> usize {
        self.sides.iter().map(|s| s.data.len()).sum()
    }

    /// The held main input (a list part any instance may take) and the side data (a
    /// broadcast part every instance holds a copy of).
    pub fn snapshot(&self, instance: u32) -> Result<Vec<(Scope, Vec<u8>)>> {
        let mut held = Vec::new();
        for (_, b) in &self.held {
            self.encode(b.as_ref(), &mut held)?;
        }
        let mut sides = Vec::new();
        for side in &self.sides {
            let mut windows = Vec::new();
            for (w, b) in &side.data {
                let mut bytes = Vec::new();
                self.encode(b.as_ref(), &mut bytes)?;
                windows.push((w.clone(), bytes));
            }
            sides.push(SideSnapshot {
                watermark: side.watermark,
                windows,
            });
        }
        Ok(vec![
            (
                Scope::List(instance),
                encode_part(&(self.main_watermark, held)),
            ),
            (Scope::Broadcast, encode_part(&sides)),
        ])
    }

    /// Adds a part written by [`SideInputRunner::snapshot`]: every list part given
    /// (held main input), and one broadcast part (the side data).
    pub fn restore(&mut self, scope: Scope, bytes: &[u8]) -> std::result::Result<(), ExecError> {
        match scope {
            Scope::List(_) => {
                let (wm, held): (Timestamp, Vec<u8>) =
                    decode_part(bytes, "main input held for side inputs")?;
                self.main_watermark = self.main_watermark.max(wm);
                let batch = self.decode(self.main_type.as_ref(), &held)?;
                self.add_main(batch);
            }
            Scope::Broadcast => {
                let sides: Vec<SideSnapshot> = decode_part(bytes, "side data")?;
                if sides.len() != self.sides.len() {
                    return Err(checkpoint(format!(
                        "'{}' has {} side inputs, its snapshot {}",
                        self.transform,
                        self.sides.len(),
                        sides.len()
                    )));
                }
                let transform = &self.transform;
                for (side, s) in self.sides.iter_mut().zip(sides) {
                    side.watermark = s.watermark;
                    side.data.clear();
                    side.values.clear();
                    for (w, bytes) in s.windows {
                        let b = side
                            .element_type
                            .decode_batch(&bytes)
                            .map_err(|e| checkpoint(format!("side data of '{transform}': {e}")))?;
                        side.data.insert(w, b);
                    }
                }
            }
            other => return Err(unexpected_scope(other, "a ParDo with side inputs")),
        }
        Ok(())
    }

    fn encode(&self, b: &dyn AnyBatch, out: &mut Vec<u8>) -> Result<()> {
        b.encode(out).map_err(|e| Error::Coder {
            transform: self.transform.clone(),
            element: "?".into(),
            message: e.to_string(),
        })
    }

    fn decode(
        &self,
        ty: &dyn ElementType,
        bytes: &[u8],
    ) -> std::result::Result<Box<dyn AnyBatch>, ExecError> {
        ty.decode_batch(bytes)
            .map_err(|e| checkpoint(format!("input held at '{}': {e}", self.transform)))
    }
}

fn checkpoint(message: String) -> ExecError {
    ExecError::Downstream(Box::new(Error::Checkpoint { message }))
}
