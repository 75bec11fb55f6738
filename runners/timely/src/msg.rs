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

/// Which senders an input expects progress from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Senders {
    /// Every worker (a keyed exchange, a broadcast, a gather).
    All,
    /// Only this worker (a Flatten, main input held for side inputs).
    This,
}

/// The last progress each expected sender reported on one input.
#[derive(Clone, Debug)]
pub struct InputClock {
    /// Per worker: its last (watermark, processing time); `None` until it reports.
    senders: Vec<Option<(Timestamp, Timestamp)>>,
    expects: Senders,
    me: usize,
}

impl InputClock {
    /// An input of worker `me` of `peers`, expecting progress from `expects`.
    pub fn new(expects: Senders, me: usize, peers: usize) -> Self {
        InputClock {
            senders: vec![None; peers],
            expects,
            me,
        }
    }

    /// Records a sender's progress (never backwards).
    pub fn update(&mut self, from: u32, watermark: Timestamp, processing_time: Timestamp) {
        let slot = &mut self.senders[from as usize];
        *slot = Some(match *slot {
            Some((w, p)) => (w.max(watermark), p.max(processing_time)),
            None => (watermark, processing_time),
        });
    }

    fn expected(&self) -> impl Iterator<Item = &Option<(Timestamp, Timestamp)>> {
        let me = self.me;
        let only_me = self.expects == Senders::This;
        self.senders
            .iter()
            .enumerate()
            .filter(move |(w, _)| !only_me || *w == me)
            .map(|(_, s)| s)
    }

    /// The input watermark: the minimum over the expected senders (the beginning of
    /// time until each has reported).
    pub fn watermark(&self) -> Timestamp {
        self.expected()
            .map(|s| s.map_or(Timestamp::MIN, |(w, _)| w))
            .min()
            .unwrap_or(Timestamp::MAX)
    }

    /// The input's processing time: the minimum over the expected senders (0, the
    /// simulated clock's start, until each has reported).
    pub fn processing_time(&self) -> Timestamp {
        self.expected()
            .map(|s| s.map_or(Timestamp(0), |(_, p)| p))
            .min()
            .unwrap_or(Timestamp::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_watermark_is_the_minimum_over_the_expected_senders() {
        let mut c = InputClock::new(Senders::All, 0, 3);
        assert_eq!(c.watermark(), Timestamp::MIN);
        c.update(0, Timestamp(10), Timestamp(5));
        c.update(1, Timestamp(7), Timestamp(9));
        assert_eq!(c.watermark(), Timestamp::MIN, "worker 2 has not reported");
        c.update(2, Timestamp(20), Timestamp(1));
        assert_eq!(c.watermark(), Timestamp(7));
        assert_eq!(c.processing_time(), Timestamp(1));
        c.update(1, Timestamp(3), Timestamp(3));
        assert_eq!(c.watermark(), Timestamp(7), "never backwards");

        let mut own = InputClock::new(Senders::This, 1, 3);
        own.update(1, Timestamp(4), Timestamp(4));
        assert_eq!(own.watermark(), Timestamp(4), "only this worker counts");
    }
}
