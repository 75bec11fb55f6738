//! What travels on the engine's timely streams: encoded batches and in-band progress.
//!
//! Every edge of the dataflow carries [`Msg`]s, routed by their `to` field (timely's
//! `Exchange` pact with the target worker as the hash). A sender's progress message
//! follows every batch it sent before on the same edge (timely channels are FIFO per
//! pair of workers), so a receiver that takes the minimum over the senders it expects
//! has Beam's input watermark: no record still to come from any of them is behind it.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::sync::{Arc, Mutex};
use tidewater::exec::AnyBatch;
use tidewater::Timestamp;

/// One message on an edge of the dataflow.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Msg {
    /// The worker (global index) it goes to.
    pub to: u32,
    /// The worker it comes from.
    pub from: u32,
    /// What it carries.
    pub body: Body,
}

/// What a message carries.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Body {
    /// A batch of elements, encoded with [`tidewater::exec::AnyBatch::encode`] (for a
    /// worker of another process).
    Data(Vec<u8>),
    /// A batch for a worker of this process, handed over without encoding.
    Local(LocalBatch),
    /// The sender's output watermark and processing time: nothing it sends later on
    /// this edge is behind the watermark.
    Progress {
        /// The output watermark.
        watermark: Timestamp,
        /// The processing time (of a simulated clock; the wall clock is read locally).
        processing_time: Timestamp,
        /// The sender is idle: it reads only idle source partitions, or all its inputs
        /// are idle; its watermark then holds no receiver back while another sender is
        /// active ([`tidewater_runners_core::watermarks::with_idleness`]).
        idle: bool,
    },
}

/// A batch handed to a worker of the same process as it is: timely moves messages
/// between threads of a process without serializing them, so only the receiver takes
/// it. It cannot cross processes (serializing it is an error the engine never makes:
/// batches for other processes are encoded).
#[derive(Clone)]
pub struct LocalBatch(Arc<Mutex<Option<Box<dyn AnyBatch>>>>);

impl LocalBatch {
    /// Wraps `batch`.
    pub fn new(batch: Box<dyn AnyBatch>) -> Self {
        LocalBatch(Arc::new(Mutex::new(Some(batch))))
    }

    /// The batch, once.
    pub fn take(&self) -> Option<Box<dyn AnyBatch>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
}

impl std::fmt::Debug for LocalBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LocalBatch")
    }
}

impl PartialEq for LocalBatch {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for LocalBatch {}

impl Serialize for LocalBatch {
    fn serialize<S: Serializer>(&self, _: S) -> Result<S::Ok, S::Error> {
        Err(serde::ser::Error::custom(
            "an in-process batch cannot be sent to another process",
        ))
    }
}

impl<'de> Deserialize<'de> for LocalBatch {
    fn deserialize<D: Deserializer<'de>>(_: D) -> Result<Self, D::Error> {
        Err(serde::de::Error::custom(
            "an in-process batch cannot come from another process",
        ))
    }
}
