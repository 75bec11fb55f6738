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
    /// Per worker: its last progress; `None` until it reports.
    senders: Vec<Option<SenderClock>>,
    expects: Senders,
    me: usize,
    /// The input watermark, never backwards.
    watermark: Timestamp,
}

/// A sender's last progress on an input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct SenderClock {
    watermark: Timestamp,
    processing_time: Timestamp,
    idle: bool,
}

impl InputClock {
    /// An input of worker `me` of `peers`, expecting progress from `expects`.
    pub fn new(expects: Senders, me: usize, peers: usize) -> Self {
        InputClock {
            senders: vec![None; peers],
            expects,
            me,
            watermark: Timestamp::MIN,
        }
    }

    /// Records a sender's progress (its watermark and processing time never go
    /// backwards) and whether it is idle.
    pub fn update(
        &mut self,
        from: u32,
        watermark: Timestamp,
        processing_time: Timestamp,
        idle: bool,
    ) {
        let slot = &mut self.senders[from as usize];
        *slot = Some(match *slot {
            Some(s) => SenderClock {
                watermark: s.watermark.max(watermark),
                processing_time: s.processing_time.max(processing_time),
                idle,
            },
            None => SenderClock {
                watermark,
                processing_time,
                idle,
            },
        });
        // A sender that turns active behind the others does not move the input back:
        // what it sends now may be late, as from an idle partition of one source.
        self.watermark = self.watermark.max(self.combined().0);
    }

    fn expected(&self) -> impl Iterator<Item = &Option<SenderClock>> {
        let me = self.me;
        let only_me = self.expects == Senders::This;
        self.senders
            .iter()
            .enumerate()
            .filter(move |(w, _)| !only_me || *w == me)
            .map(|(_, s)| s)
    }

    /// The expected senders' watermarks combined, idle ones not holding back active
    /// ones (the beginning of time, active, until each has reported), and whether all
    /// are idle.
    fn combined(&self) -> (Timestamp, bool) {
        tidewater_runners_core::watermarks::with_idleness(
            self.expected()
                .map(|s| s.map_or((Timestamp::MIN, false), |s| (s.watermark, s.idle))),
        )
    }

    /// The input watermark: the minimum over the expected senders, of the active ones
    /// where some are idle (the beginning of time until each has reported); never
    /// backwards.
    pub fn watermark(&self) -> Timestamp {
        self.watermark
    }

    /// Whether every worker's progress reaches this input (not only this worker's).
    pub fn hears_all(&self) -> bool {
        self.expects == Senders::All
    }

    /// Every expected sender is idle.
    pub fn idle(&self) -> bool {
        self.combined().1
    }

    /// The input's processing time: the minimum over the expected senders (0, the
    /// simulated clock's start, until each has reported).
    pub fn processing_time(&self) -> Timestamp {
        self.expected()
            .map(|s| s.map_or(Timestamp(0), |s| s.processing_time))
            .min()
            .unwrap_or(Timestamp::MAX)
    }
}

/// What a worker has heard of one source's instances on every worker, for watermark
/// alignment (`max_watermark_drift`): each one's last reported watermark and whether it
/// was idle, as the progress messages of the source's consumers on this worker carried
/// them on arrival, whichever epoch they were sent in (alignment of epochs holds a
/// message back from the operator, not from this view: a source that waited on the view
/// of a held message would wait for the epoch to close, and the epoch for it).
#[derive(Clone, Debug)]
pub struct SourceView {
    senders: Vec<Option<(Timestamp, bool)>>,
}

impl SourceView {
    /// A view of a source run by `peers` workers, none heard from yet.
    pub fn new(peers: usize) -> Self {
        SourceView {
            senders: vec![None; peers],
        }
    }

    /// Worker `from`'s instance reported `watermark` (never backwards) and `idle`.
    pub fn update(&mut self, from: u32, watermark: Timestamp, idle: bool) {
        if let Some(slot) = self.senders.get_mut(from as usize) {
            *slot = Some(match *slot {
                Some((w, _)) => (w.max(watermark), idle),
                None => (watermark, idle),
            });
        }
    }

    /// The least watermark of the instances that are not idle: the beginning of time
    /// while one has not reported (as an input's watermark is), `None` when all are
    /// idle (nothing to align to).
    pub fn floor(&self) -> Option<Timestamp> {
        let mut least: Option<Timestamp> = None;
        for s in &self.senders {
            let w = match *s {
                None => Timestamp::MIN,
                Some((_, true)) => continue,
                Some((w, false)) => w,
            };
            least = Some(least.map_or(w, |l| l.min(w)));
        }
        least
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_source_view_is_the_least_active_watermark_once_all_reported() {
        let t = Timestamp;
        let mut v = SourceView::new(3);
        v.update(0, t(50), false);
        v.update(1, t(10), false);
        assert_eq!(v.floor(), Some(Timestamp::MIN), "worker 2 has not reported");
        v.update(2, t(30), false);
        assert_eq!(v.floor(), Some(t(10)));
        v.update(1, t(5), false);
        assert_eq!(v.floor(), Some(t(10)), "never backwards");
        v.update(1, t(12), true);
        assert_eq!(v.floor(), Some(t(30)), "an idle instance holds back none");
        v.update(0, t(60), true);
        v.update(2, t(40), true);
        assert_eq!(v.floor(), None, "all idle");
        v.update(9, t(1), false);
        assert_eq!(v.floor(), None, "an unknown worker is ignored");
        let mut quiet = SourceView::new(2);
        quiet.update(0, t(5), true);
        assert_eq!(
            quiet.floor(),
            Some(Timestamp::MIN),
            "worker 1 may yet report"
        );
    }

    #[test]
    fn the_watermark_is_the_minimum_over_the_expected_senders() {
        let mut c = InputClock::new(Senders::All, 0, 3);
        assert_eq!(c.watermark(), Timestamp::MIN);
        c.update(0, Timestamp(10), Timestamp(5), false);
        c.update(1, Timestamp(7), Timestamp(9), false);
        assert_eq!(c.watermark(), Timestamp::MIN, "worker 2 has not reported");
        c.update(2, Timestamp(20), Timestamp(1), false);
        assert_eq!(c.watermark(), Timestamp(7));
        assert_eq!(c.processing_time(), Timestamp(1));
        c.update(1, Timestamp(3), Timestamp(3), false);
        assert_eq!(c.watermark(), Timestamp(7), "never backwards");

        let mut own = InputClock::new(Senders::This, 1, 3);
        own.update(1, Timestamp(4), Timestamp(4), false);
        assert_eq!(own.watermark(), Timestamp(4), "only this worker counts");
    }

    #[test]
    fn idle_senders_hold_back_no_active_one_and_the_watermark_never_goes_back() {
        let mut c = InputClock::new(Senders::All, 0, 3);
        let t = Timestamp;
        c.update(0, t(5), t(0), true);
        c.update(1, t(30), t(0), false);
        assert_eq!(c.watermark(), Timestamp::MIN, "worker 2 has not reported");
        c.update(2, t(20), t(0), false);
        assert_eq!(
            (c.watermark(), c.idle()),
            (t(20), false),
            "worker 0 is idle"
        );
        c.update(2, t(40), t(0), true);
        assert_eq!((c.watermark(), c.idle()), (t(30), false));
        c.update(1, t(50), t(0), true);
        assert_eq!(
            (c.watermark(), c.idle()),
            (t(30), true),
            "all idle: the minimum over all, but never backwards"
        );
        c.update(0, t(6), t(0), false);
        assert_eq!(
            (c.watermark(), c.idle()),
            (t(30), false),
            "active again, behind"
        );
        c.update(0, t(45), t(0), false);
        assert_eq!(c.watermark(), t(45));
    }
}
