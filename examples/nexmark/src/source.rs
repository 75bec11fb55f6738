use nexmark::config::NexmarkConfig;
use nexmark::event::Event;
use nexmark::EventGenerator;
use serde::{Deserialize, Serialize};
use tidewater::{ReadStatus, Source, Timestamp, UserError};

/// The Nexmark event stream (Person : Auction : Bid = 1 : 3 : 46), generated
/// deterministically from the event number: partition `p` of `n` reads events `p`,
/// `p + n`, ...; the position is the next event number, so a reader resumes exactly.
/// Event times follow the configured rate from `base_time_ms`.
///
/// Optionally the stream is out of order: with `out_of_order_ms` > 0 each event's time
/// (its `date_time`, which is also its timestamp) moves back by a seeded pseudo-random
/// amount in `[0, out_of_order_ms]`, and the watermark is lowered by that bound, so no
/// event is late. With `late_every` set, every `late_every`-th event (event numbers
/// `k, 2k, ...`) moves back a further `lateness_ms`: behind the watermark when
/// `lateness_ms > out_of_order_ms` (and the time does not saturate at 0); a late event
/// always starts a read, after the watermark it is behind was reported. The shift
/// depends only on the event number and the seed, so [`NexmarkSource::all_events`]
/// carries the same times on any partitioning.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NexmarkSource {
    /// Number of events; 0 for an unbounded stream.
    pub events: u64,
    /// Events per second of event time.
    pub event_rate: usize,
    /// Event time of the first event, in ms.
    pub base_time_ms: u64,
    /// Bound of the out-of-orderness, in ms; 0 for an in-order stream.
    #[serde(default)]
    pub out_of_order_ms: u64,
    /// Every `late_every`-th event is late, if set.
    #[serde(default)]
    pub late_every: Option<u64>,
    /// How far a late event moves back, beyond its out-of-orderness, in ms.
    #[serde(default)]
    pub lateness_ms: u64,
    /// Seed of the out-of-orderness.
    #[serde(default)]
    pub seed: u64,
}

/// Where a partition's reader stands.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NexmarkPosition {
    /// The next event number to read.
    pub next: u64,
}

impl NexmarkSource {
    /// `events` events at `event_rate` per second of event time from time 0.
    pub fn new(events: u64, event_rate: usize) -> Self {
        NexmarkSource {
            events,
            event_rate,
            base_time_ms: 0,
            out_of_order_ms: 0,
            late_every: None,
            lateness_ms: 0,
            seed: 0,
        }
    }

    /// Event times from `base_time_ms` instead of 0 (Beam's `baseTime`).
    ///
    /// ```
    /// let s = tidewater_nexmark::NexmarkSource::new(10, 1_000).with_base_time(3_600_000);
    /// assert_eq!(s.base_time_ms, 3_600_000);
    /// ```
    pub fn with_base_time(mut self, base_time_ms: u64) -> Self {
        self.base_time_ms = base_time_ms;
        self
    }

    /// Each event's time moved back by a seeded amount in `[0, bound_ms]`; the
    /// watermark trails by `bound_ms`.
    pub fn with_out_of_order(mut self, bound_ms: u64, seed: u64) -> Self {
        self.out_of_order_ms = bound_ms;
        self.seed = seed;
        self
    }

    /// Every `every`-th event moved back a further `lateness_ms`: late data when
    /// `lateness_ms` exceeds the out-of-orderness bound.
    pub fn with_late_events(mut self, every: u64, lateness_ms: u64) -> Self {
        self.late_every = Some(every.max(1));
        self.lateness_ms = lateness_ms;
        self
    }

    /// Whether event `n` is one of the late ones.
    pub fn is_late(&self, n: u64) -> bool {
        self.late_every
            .is_some_and(|k| n > 0 && n.is_multiple_of(k) && self.lateness_ms > 0)
    }

    /// The event time of event `n`, whose generated (in-order) time is `nominal_ms`.
    fn shifted_time(&self, n: u64, nominal_ms: u64) -> u64 {
        let mut t = nominal_ms;
        if self.out_of_order_ms > 0 {
            t = t.saturating_sub(mix(self.seed ^ n) % (self.out_of_order_ms + 1));
        }
        if self.is_late(n) {
            t = t.saturating_sub(self.lateness_ms);
        }
        t
    }

    /// Event `n` as generated (`event`), with its time shifted.
    fn shift(&self, n: u64, mut event: Event) -> Event {
        let t = self.shifted_time(n, event.timestamp());
        match &mut event {
            Event::Person(p) => p.date_time = t,
            Event::Auction(a) => a.date_time = t,
            Event::Bid(b) => b.date_time = t,
        }
        event
    }

    /// The generator configuration: the standard one with a fixed rate and base time.
    pub fn config(&self) -> NexmarkConfig {
        NexmarkConfig {
            base_time: self.base_time_ms,
            first_rate: self.event_rate.max(1),
            next_rate: self.event_rate.max(1),
            rate_shape: nexmark::config::RateShape::Square,
            ..Default::default()
        }
    }

    /// Every event, in order of event number, with the times the source gives them
    /// (for oracles and tests).
    pub fn all_events(&self) -> Vec<Event> {
        EventGenerator::new(self.config())
            .take(self.events as usize)
            .zip(0u64..)
            .map(|(e, n)| self.shift(n, e))
            .collect()
    }

    /// [`NexmarkSource::all_events`] without the late ones: what a windowed query sees
    /// when its windows have expired before their late events arrive.
    pub fn on_time_events(&self) -> Vec<Event> {
        self.all_events()
            .into_iter()
            .zip(0u64..)
            .filter(|(_, n)| !self.is_late(*n))
            .map(|(e, _)| e)
            .collect()
    }

    fn exhausted(&self, next: u64) -> bool {
        self.events > 0 && next >= self.events
    }
}

impl Source for NexmarkSource {
    type Output = Event;
    type Position = NexmarkPosition;

    fn is_bounded(&self) -> bool {
        self.events > 0
    }

    fn initial_position(&self, partition: usize, _partitions: usize) -> NexmarkPosition {
        NexmarkPosition {
            next: partition as u64,
        }
    }

    fn read(
        &mut self,
        _p: usize,
        partitions: usize,
        pos: &mut NexmarkPosition,
        max: usize,
        _now: Timestamp,
        out: &mut Vec<(Event, Timestamp)>,
    ) -> Result<ReadStatus, UserError> {
        let step = partitions as u64;
        let mut generator = EventGenerator::new(self.config())
            .with_offset(pos.next)
            .with_step(step);
        for read in 0..max {
            if self.exhausted(pos.next) {
                return Ok(ReadStatus::Done);
            }
            // A late event starts a read of its own: it arrives after the watermark
            // that it is behind has been reported.
            if read > 0 && self.is_late(pos.next) {
                return Ok(ReadStatus::More);
            }
            let event = generator.next().ok_or("the Nexmark generator ended")?;
            let event = self.shift(pos.next, event);
            let ts = Timestamp(event.timestamp() as i64);
            out.push((event, ts));
            pos.next += step;
        }
        Ok(if self.exhausted(pos.next) {
            ReadStatus::Done
        } else {
            ReadStatus::More
        })
    }

    fn watermark(&self, _p: usize, _partitions: usize, pos: &NexmarkPosition) -> Timestamp {
        if self.exhausted(pos.next) {
            return Timestamp::MAX;
        }
        let next = EventGenerator::new(self.config())
            .with_offset(pos.next)
            .timestamp() as i64;
        Timestamp(next - self.out_of_order_ms as i64)
    }
}

/// SplitMix64's finalizer: a well-mixed hash of `z`.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}
