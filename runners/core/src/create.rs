//! Create and Impulse, for every runner: one batch (a Create's elements, or an
//! Impulse's one `()`), in the global window; until it has gone out the output
//! watermark is the beginning of time, after it the end of time.

use crate::translate::{ExecutablePlan, NodeKind};
use tidewater::exec::AnyBatch;
use tidewater::{Error, Result, Timestamp};

/// The batch of a Create or an Impulse, until it is emitted.
pub struct InitialBatch {
    batch: Option<Box<dyn AnyBatch>>,
}

impl InitialBatch {
    /// The batch of Create or Impulse node `node`; none when it was `emitted` already
    /// (by another instance, or before a restore), so that it goes out once.
    pub fn new(plan: &ExecutablePlan, node: usize, emitted: bool) -> Result<Self> {
        Ok(InitialBatch {
            batch: match emitted {
                true => None,
                false => Some(initial_batch(plan, node)?),
            },
        })
    }

    /// The batch, once.
    pub fn take(&mut self) -> Option<Box<dyn AnyBatch>> {
        self.batch.take()
    }

    /// Whether the batch has gone out (what a snapshot records).
    pub fn emitted(&self) -> bool {
        self.batch.is_none()
    }

    /// The output watermark: the beginning of time until the batch went out, then the
    /// end of time.
    pub fn watermark(&self) -> Timestamp {
        match self.batch {
            Some(_) => Timestamp::MIN,
            None => Timestamp::MAX,
        }
    }
}

/// The one batch an Impulse (one `()`) or a Create (its elements) produces.
fn initial_batch(plan: &ExecutablePlan, node: usize) -> Result<Box<dyn AnyBatch>> {
    let n = &plan.nodes[node];
    let ty = &plan.pcollections[n.outputs[0]].element_type;
    match &n.kind {
        NodeKind::Create { elements } => ty
            .batch_from_json(elements)
            .map_err(|m| Error::InvalidPlan { message: m }),
        NodeKind::Impulse => ty
            .batch_from_json(&[tidewater::plan::Json::null()])
            .map_err(Error::Internal),
        _ => Err(Error::Internal(format!(
            "'{}' is not a Create or an Impulse",
            n.name
        ))),
    }
}
