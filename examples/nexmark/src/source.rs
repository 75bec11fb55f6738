use nexmark::config::NexmarkConfig;
use nexmark::event::Event;
use nexmark::EventGenerator;
use serde::{Deserialize, Serialize};
use tidewater::{ReadStatus, Source, Timestamp, UserError};

/// The Nexmark event stream (Person : Auction : Bid = 1 : 3 : 46), generated
/// deterministically from the event number: partition `p` of `n` reads events `p`,
/// `p + n`, ...; the position is the next event number, so a reader resumes exactly.
/// Event times follow the configured rate from `base_time_ms`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NexmarkSource {
    /// Number of events; 0 for an unbounded stream.
    pub events: u64,
    /// Events per second of event time.
    pub event_rate: usize,
    /// Event time of the first event, in ms.
    pub base_time_ms: u64,
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
        }
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

    /// Every event, in order (for oracles and tests).
    pub fn all_events(&self) -> Vec<Event> {
        EventGenerator::new(self.config())
            .take(self.events as usize)
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
        for _ in 0..max {
            if self.exhausted(pos.next) {
                return Ok(ReadStatus::Done);
            }
            let event = generator.next().ok_or("the Nexmark generator ended")?;
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
        Timestamp(
            EventGenerator::new(self.config())
                .with_offset(pos.next)
                .timestamp() as i64,
        )
    }
}
