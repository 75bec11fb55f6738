//! How a side input's view is built in a window (the registry builds one from a plan's
//! fields).

use super::AnyBatch;
use std::any::Any;
use std::sync::Arc;

/// Builds a view's value from the side input's elements in one window.
pub trait ViewOps: Send + Sync {
    /// The value for a window whose elements are `batch`.
    fn build(&self, batch: Box<dyn AnyBatch>) -> Result<Arc<dyn Any + Send + Sync>, String>;
}
