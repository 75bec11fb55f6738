//! A deterministic generator source (Beam's `GenerateSequence`, with event times).

use serde::{Deserialize, Serialize};
use tidewater::{Duration, ReadStatus, Source, Timestamp, UserError};

/// The numbers `from..to` (or from `from` on, unbounded), each with an event time that
/// advances `event_interval_ms` per number, optionally rate-limited on the processing
/// clock, with optional deterministic out-of-orderness and late records.
///
/// Given the same settings it produces the same numbers with the same timestamps at the
/// same offsets on any number of partitions: partition `p` of `n` reads `from + p`,
/// `from + p + n`, ... The position is the next offset to read (plus when reading
/// started, for the rate limit), so a reader resumes exactly where it stood.
///
/// ```
/// use tidewater::{Pipeline, Read};
/// use tidewater_transforms::GenerateSequence;
/// tidewater_runner_direct::register();
/// let p = Pipeline::new(Default::default());
/// p.apply("Numbers", Read::from(GenerateSequence::new(0, Some(100)))).capture("numbers");
/// let r = p.run().unwrap();
/// assert_eq!(r.captured_values::<u64>("numbers").unwrap(), (0..100).collect::<Vec<_>>());
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GenerateSequence {
    /// First number.
    pub from: u64,
    /// One past the last number; `None` for an unbounded sequence.
    pub to: Option<u64>,
    /// Numbers per second of processing time; `None` for as fast as possible.
    #[serde(deserialize_with = "checked::rate")]
    pub rate_per_sec: Option<f64>,
    /// Event time of `from`, in ms.
    pub start_ms: i64,
    /// Event time between consecutive numbers, in ms.
    #[serde(deserialize_with = "checked::event_interval_ms")]
    pub event_interval_ms: i64,
    /// Each number's event time is moved back by a pseudo-random amount in
    /// `[0, out_of_orderness_ms]`; the watermark accounts for it.
    #[serde(deserialize_with = "checked::out_of_orderness_ms")]
    pub out_of_orderness_ms: i64,
    /// Every `late_every`-th number (if set) is moved back by `lateness_ms`, behind the
    /// watermark: late data.
    #[serde(deserialize_with = "checked::late_every")]
    pub late_every: Option<u64>,
    /// How far late numbers are moved back, in ms.
    #[serde(deserialize_with = "checked::lateness_ms")]
    pub lateness_ms: i64,
    /// Seed of the out-of-orderness.
    pub seed: u64,
}

/// Where a partition's reader stands.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SequencePosition {
    /// The next number to read.
    pub next: u64,
    /// Processing time of the first read, for the rate limit.
    pub started_ms: Option<i64>,
}

fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl GenerateSequence {
    /// The numbers `from..to` (unbounded if `to` is `None`), 1 ms of event time apart
    /// from time 0, as fast as possible.
    pub fn new(from: u64, to: Option<u64>) -> Self {
        GenerateSequence {
            from,
            to,
            rate_per_sec: None,
            start_ms: 0,
            event_interval_ms: 1,
            out_of_orderness_ms: 0,
            late_every: None,
            lateness_ms: 0,
            seed: 0,
        }
    }

    /// At most `rate` numbers per second of processing time.
    pub fn with_rate(mut self, rate: f64) -> Self {
        self.rate_per_sec = Some(rate);
        self
    }

    /// Event time of the first number (milliseconds since the epoch) and between
    /// numbers (a [`tidewater::Duration`], or milliseconds).
    ///
    /// ```
    /// use tidewater::Duration;
    /// let g = tidewater_transforms::GenerateSequence::new(0, Some(10))
    ///     .with_event_time(1_000, Duration::from_secs(1))
    ///     .with_out_of_orderness(Duration::from_millis(200), 7)
    ///     .with_late_records(5, Duration::from_secs(3));
    /// ```
    pub fn with_event_time(mut self, start_ms: i64, interval: impl Into<Duration>) -> Self {
        self.start_ms = start_ms;
        self.event_interval_ms = interval.into().millis();
        self
    }

    /// Numbers at most `by` out of event-time order, seeded.
    pub fn with_out_of_orderness(mut self, by: impl Into<Duration>, seed: u64) -> Self {
        self.out_of_orderness_ms = by.into().millis();
        self.seed = seed;
        self
    }

    /// Every `every`-th number arrives `lateness` behind the watermark.
    pub fn with_late_records(mut self, every: u64, lateness: impl Into<Duration>) -> Self {
        self.late_every = Some(every.max(1));
        self.lateness_ms = lateness.into().millis();
        self
    }

    fn nominal_time(&self, n: u64) -> i64 {
        self.start_ms
            .saturating_add(((n - self.from) as i64).saturating_mul(self.event_interval_ms))
    }

    /// The event time of number `n`.
    pub fn event_time(&self, n: u64) -> Timestamp {
        let mut t = self.nominal_time(n);
        if self.out_of_orderness_ms > 0 {
            t -= (mix(self.seed ^ n) % (self.out_of_orderness_ms as u64 + 1)) as i64;
        }
        if self
            .late_every
            .is_some_and(|k| n > self.from && (n - self.from).is_multiple_of(k))
        {
            t -= self.lateness_ms;
        }
        Timestamp(t)
    }
}

impl Source for GenerateSequence {
    type Output = u64;
    type Position = SequencePosition;

    fn is_bounded(&self) -> bool {
        self.to.is_some()
    }

    /// A rate-limited partition is idle only until its next number is due, and that
    /// number's event time is its watermark: it keeps holding.
    fn idle_holds_watermark(&self) -> bool {
        true
    }

    fn initial_position(&self, partition: usize, _partitions: usize) -> SequencePosition {
        SequencePosition {
            next: self.from + partition as u64,
            started_ms: None,
        }
    }

    fn read(
        &mut self,
        _partition: usize,
        partitions: usize,
        pos: &mut SequencePosition,
        max: usize,
        now: Timestamp,
        out: &mut Vec<(u64, Timestamp)>,
    ) -> Result<ReadStatus, UserError> {
        let started = *pos.started_ms.get_or_insert(now.millis());
        let step = partitions as u64;
        for _ in 0..max {
            if self.to.is_some_and(|to| pos.next >= to) {
                return Ok(ReadStatus::Done);
            }
            if let Some(rate) = self.rate_per_sec {
                let k = (pos.next - self.from) / step;
                if (now.millis() as f64) < due_ms(rate, started, k, step) {
                    return Ok(ReadStatus::Idle);
                }
            }
            out.push((pos.next, self.event_time(pos.next)));
            pos.next += step;
        }
        Ok(ReadStatus::More)
    }

    fn watermark(
        &self,
        _partition: usize,
        _partitions: usize,
        pos: &SequencePosition,
    ) -> Timestamp {
        if self.to.is_some_and(|to| pos.next >= to) {
            return Timestamp::MAX;
        }
        Timestamp(self.nominal_time(pos.next) - self.out_of_orderness_ms)
    }

    /// What `read` at processing time `now` would give from `pos`: with a rate, the
    /// numbers due by `now` (by the rule `read` applies), else all that is left of a
    /// bounded sequence. Unbounded without a rate: unknown (there is no end).
    fn available(
        &self,
        _partition: usize,
        partitions: usize,
        pos: &SequencePosition,
        now: Timestamp,
    ) -> Option<u64> {
        let step = partitions.max(1) as u64;
        let left = self.to.map(|to| to.saturating_sub(pos.next).div_ceil(step));
        let Some(rate) = self.rate_per_sec else {
            return left;
        };
        // The first read starts the schedule: number 0 of the partition is due then.
        let started = pos.started_ms.unwrap_or(now.millis());
        let k = (pos.next - self.from) / step;
        let due = due_through(rate, started, step, now.millis())
            .map_or(0, |last| last.saturating_add(1).saturating_sub(k));
        Some(left.map_or(due, |left| left.min(due)))
    }
}

/// When number `k` of a partition (one of `step`) is due, in ms: `k / (rate / step)`
/// seconds after the partition's first read at `started`.
fn due_ms(rate: f64, started: i64, k: u64, step: u64) -> f64 {
    started as f64 + k as f64 * 1000.0 * step as f64 / rate
}

/// The last number of a partition due by `now` ([`due_ms`]), if any.
fn due_through(rate: f64, started: i64, step: u64, now: i64) -> Option<u64> {
    let now_f = now as f64;
    if now_f < due_ms(rate, started, 0, step) {
        return None;
    }
    // An estimate, then the exact rule `read` applies on either side of it.
    let mut k = ((now_f - started as f64) * rate / (1000.0 * step as f64)).max(0.0) as u64;
    while k > 0 && now_f < due_ms(rate, started, k, step) {
        k -= 1;
    }
    while now_f >= due_ms(rate, started, k.saturating_add(1), step) && k < u64::MAX {
        k += 1;
    }
    Some(k)
}

/// The fields of a plan's GenerateSequence that could hang or break a job, checked
/// as the plan is decoded: an error names the field and the value.
mod checked {
    use serde::Deserializer;
    use tidewater::plan::field::{check, is_rate};

    pub fn rate<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
        check(
            d,
            "rate_per_sec",
            "a positive number of records per second",
            |r: &Option<f64>| r.as_ref().is_none_or(is_rate),
        )
    }

    pub fn late_every<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
        check(d, "late_every", "at least 1", |k: &Option<u64>| {
            k.is_none_or(|k| k >= 1)
        })
    }

    macro_rules! non_negative {
        ($($name:ident),*) => {$(
            pub fn $name<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
                check(d, stringify!($name), "0 or more", |v: &i64| *v >= 0)
            }
        )*};
    }

    non_negative!(event_interval_ms, out_of_orderness_ms, lateness_ms);
}
