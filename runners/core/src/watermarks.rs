//! How watermarks move, once for every runner: through the steps that hold nothing
//! back, over inputs some of which are idle, and over the senders of an engine's input
//! ([`InputClock`]) and the instances of a source ([`SourceView`]). (Steps that hold
//! the watermark compute their own: the source driver, the keyed operators, the
//! side-input runner.)

use tidewater::Timestamp;

/// A fused ParDo or WindowInto holds nothing: its outputs carry its input's watermark.
pub fn par_do_output(input: Timestamp) -> Timestamp {
    input
}

/// A Flatten's output watermark is the minimum of its inputs' (the end of time with no
/// inputs).
///
/// ```
/// use tidewater::Timestamp;
/// use tidewater_runners_core::watermarks::flatten_output;
/// assert_eq!(flatten_output([Timestamp(5), Timestamp(3)]), Timestamp(3));
/// assert_eq!(flatten_output([]), Timestamp::MAX);
/// ```
pub fn flatten_output(inputs: impl IntoIterator<Item = Timestamp>) -> Timestamp {
    inputs.into_iter().min().unwrap_or(Timestamp::MAX)
}

/// The watermark of inputs some of which may be idle (Flink's idleness: a source
/// partition with nothing to read, or a sender all of whose inputs are): the minimum
/// over the active ones, so that a quiet input does not stall every window; if all are
/// idle, the minimum over all, and the result is idle too. No inputs: the end of time,
/// active. The source driver applies it to its partitions, an engine to the senders of
/// an input, so that partitions read by several workers give the watermark one driver
/// reading all of them would.
///
/// ```
/// use tidewater::Timestamp;
/// use tidewater_runners_core::watermarks::with_idleness;
/// let t = Timestamp;
/// assert_eq!(with_idleness([(t(5), true), (t(9), false)]), (t(9), false));
/// assert_eq!(with_idleness([(t(5), true), (t(3), true)]), (t(3), true));
/// assert_eq!(with_idleness([]), (Timestamp::MAX, false));
/// ```
pub fn with_idleness(inputs: impl IntoIterator<Item = (Timestamp, bool)>) -> (Timestamp, bool) {
    let (mut active, mut idle): (Option<Timestamp>, Option<Timestamp>) = (None, None);
    for (w, is_idle) in inputs {
        let slot = if is_idle { &mut idle } else { &mut active };
        *slot = Some(slot.map_or(w, |m| m.min(w)));
    }
    match (active, idle) {
        (Some(w), _) => (w, false),
        (None, Some(w)) => (w, true),
        (None, None) => (Timestamp::MAX, false),
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
        with_idleness(
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

/// What an engine's worker has heard of one source's instances on every worker, for watermark
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
    /// idle (nothing to align to). The same combination as an input's
    /// ([`with_idleness`]).
    pub fn floor(&self) -> Option<Timestamp> {
        let (least, idle) = with_idleness(
            self.senders
                .iter()
                .map(|s| s.unwrap_or((Timestamp::MIN, false))),
        );
        (!idle).then_some(least)
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
