//! Epochs (timely time) and the checkpoints that close them.
//!
//! Epochs order what different workers send: under exactly-once a task applies epoch
//! `e` only after every message of the epochs before it. A checkpoint is taken at the
//! last epoch of a *span* of `stride` epochs (`e + 1` a multiple of the stride), so
//! that which epochs are checkpoints is a function of the epoch alone, the same on
//! every task of every process, with nothing exchanged.
//!
//! Without a TestStream the stride is 1: every epoch is a checkpoint, and sources cut
//! one every checkpoint interval. A TestStream puts each of its events in an epoch of
//! its own, so that they are applied everywhere in script order; its epochs are steps
//! of one span (at most [`TEST_STREAM_STRIDE`]) and its checkpoints follow the
//! checkpoint interval, like any other source's, rather than one per event.

/// The epoch a task's last range ends at when it finishes: every later checkpoint
/// finds its final state there.
pub const FINAL_EPOCH: u64 = u64::MAX;

/// Epochs per span in a pipeline with a TestStream: the most events between two
/// checkpoints (a TestStream with more in one interval starts a new span early).
pub const TEST_STREAM_STRIDE: u64 = 1 << 20;

/// The first epoch of the span after the one holding `e`.
pub fn next_span(e: u64, stride: u64) -> u64 {
    (e / stride).saturating_add(1).saturating_mul(stride)
}

/// The epoch a source moves to from `e`: the next one within its span for a scripted
/// step (when there is room), or the next span's first.
pub fn next_epoch(e: u64, stride: u64, step: bool) -> u64 {
    if step && !(e + 1).is_multiple_of(stride) {
        e + 1
    } else {
        next_span(e, stride)
    }
}

/// When the epoch current at wall-clock time `now` (since the Unix epoch) ends under a
/// checkpoint `interval`: the next multiple of the interval. Every source of every
/// worker and process so ends its epoch at the same instant, up to the hosts' clock
/// offset and how soon each source runs after it, as Flink's coordinator injects a
/// checkpoint's barriers at all sources at once. A source that ended its epoch one
/// interval after its own last switch would drift apart from the others by however late
/// each was, and exactly-once alignment holds a keyed operator's input from the
/// earliest source for as long as the sources' switches are apart: a latency stall at
/// every checkpoint.
pub fn epoch_end(now: std::time::Duration, interval: std::time::Duration) -> std::time::Duration {
    let i = interval.as_nanos().max(1);
    let end = (now.as_nanos() / i + 1) * i;
    std::time::Duration::from_nanos(u64::try_from(end).unwrap_or(u64::MAX))
}

/// When the epoch current now ends under `interval` ([`epoch_end`] on the wall
/// clock), as an instant.
pub fn due(interval: std::time::Duration) -> std::time::Instant {
    let now = std::time::Instant::now();
    match std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        Ok(wall) => now + (epoch_end(wall, interval) - wall),
        Err(_) => now + interval,
    }
}

/// Whether closing epochs `first..=last` at once closes a checkpoint: whether the
/// range holds the last epoch of a span (the end of time always does).
pub fn closes_checkpoint(first: u64, last: u64, stride: u64) -> bool {
    last == FINAL_EPOCH || (last + 1) / stride > first / stride
}

/// The newest checkpoint among the epochs up to `passed`: the last epoch of the last
/// span that ends there or before.
pub fn checkpoint_through(passed: u64, stride: u64) -> Option<u64> {
    if passed == FINAL_EPOCH {
        return Some(FINAL_EPOCH);
    }
    ((passed + 1) / stride).checked_mul(stride)?.checked_sub(1)
}

/// Whether epoch `e` must wait before being read: at most `k` checkpoints may be in
/// flight, so `e`'s span may start only once every span up to `k` before it is
/// complete (`pending_before(t)`: whether some epoch before `t` is not complete yet).
pub fn held_back(e: u64, stride: u64, k: u64, pending_before: impl Fn(u64) -> bool) -> bool {
    let span = e / stride;
    let k = k.max(1);
    span >= k && pending_before((span + 1 - k) * stride)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epochs_end_at_multiples_of_the_interval_whenever_a_source_asks() {
        use std::time::Duration;
        let s = Duration::from_secs(1);
        let at = |ms: u64| Duration::from_millis(ms);
        // Two workers that ask 3 ms and 997 ms into the same second end together.
        assert_eq!(epoch_end(at(1_700_000_000_003), s), at(1_700_000_001_000));
        assert_eq!(epoch_end(at(1_700_000_000_997), s), at(1_700_000_001_000));
        // Exactly on a boundary: the next one (an epoch lasts).
        assert_eq!(epoch_end(at(1_700_000_001_000), s), at(1_700_000_002_000));
        assert_eq!(epoch_end(at(1234), at(250)), at(1250));
        // A zero interval ends at the next nanosecond rather than dividing by zero.
        assert_eq!(
            epoch_end(Duration::from_nanos(5), Duration::ZERO),
            Duration::from_nanos(6)
        );
    }

    #[test]
    fn with_stride_one_every_epoch_is_a_checkpoint() {
        assert_eq!(next_epoch(4, 1, true), 5);
        assert_eq!(next_epoch(4, 1, false), 5);
        assert!(closes_checkpoint(4, 4, 1));
        assert_eq!(checkpoint_through(0, 1), Some(0));
        assert_eq!(checkpoint_through(7, 1), Some(7));
        // Epoch e waits until e - k is durable: the probe is past it.
        let probe = |frontier: u64| move |t: u64| frontier < t;
        assert!(
            !held_back(1, 1, 2, probe(0)),
            "the first k epochs never wait"
        );
        assert!(held_back(2, 1, 2, probe(0)));
        assert!(!held_back(2, 1, 2, probe(1)));
        assert!(held_back(5, 1, 2, probe(3)));
        assert!(!held_back(5, 1, 2, probe(4)));
    }

    #[test]
    fn steps_stay_in_their_span_and_checkpoints_close_spans() {
        let s = 8;
        assert_eq!(next_epoch(0, s, true), 1);
        assert_eq!(next_epoch(6, s, true), 7);
        assert_eq!(next_epoch(7, s, true), 8, "a full span starts the next one");
        assert_eq!(
            next_epoch(3, s, false),
            8,
            "an interval's cut starts the next span"
        );
        assert_eq!(next_epoch(8, s, false), 16);
        assert!(!closes_checkpoint(0, 6, s));
        assert!(closes_checkpoint(0, 7, s));
        assert!(closes_checkpoint(5, 12, s));
        assert!(!closes_checkpoint(8, 14, s));
        assert!(closes_checkpoint(9, FINAL_EPOCH, s));
        assert_eq!(checkpoint_through(6, s), None);
        assert_eq!(checkpoint_through(7, s), Some(7));
        assert_eq!(checkpoint_through(14, s), Some(7));
        assert_eq!(checkpoint_through(15, s), Some(15));
        assert_eq!(checkpoint_through(FINAL_EPOCH, s), Some(FINAL_EPOCH));
        // Steps of the span in flight never wait; the next span waits for the span k
        // before it.
        let probe = |frontier: u64| move |t: u64| frontier < t;
        assert!(
            !held_back(13, s, 1, probe(9)),
            "span 1 needs span 0 durable"
        );
        assert!(held_back(16, s, 1, probe(15)));
        assert!(!held_back(16, s, 1, probe(16)));
        assert!(!held_back(16, s, 2, probe(8)));
        assert!(held_back(16, s, 2, probe(7)));
    }
}
