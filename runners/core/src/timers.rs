//! The timer service of keyed operators (Beam's `TimerInternals`): named timers per key
//! and window in two time domains, each with a firing time and an output timestamp
//! that holds the output watermark until it fires. The group-also-by-window reducer and
//! the stateful DoFn runner both keep their timers here.
//!
//! A timer fires once its clock has passed it (strictly), earliest first; event-time
//! timers before processing-time timers. Setting a timer with the name, key, window and
//! domain of a pending one replaces it.

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use tidewater::exec::TimeDomain;
use tidewater::{BoundedWindow, Timestamp};

/// Outputs (fired timers' or panes) of one keyed operator's advance at most: a
/// watermark that passes every key's timer or window (a bounded input's end) fires
/// them in slices, each taken downstream before the next, not all into memory at once;
/// the operator then still has due work (`KeyedOperator::has_due_work`) and the engine
/// advances it again.
pub const ADVANCE_SLICE: usize = 16 * tidewater::exec::BATCH_SIZE;

/// A pending or fired timer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Timer<K, N> {
    /// The key (an operator's own key number or the encoded key).
    pub key: K,
    /// The window.
    pub window: BoundedWindow,
    /// The name (a stateful DoFn's timer id; the reducer names a timer by its time).
    pub name: N,
    /// The clock.
    pub domain: TimeDomain,
    /// When it fires.
    pub at: Timestamp,
    /// The timestamp of what it outputs; holds the output watermark.
    pub output: Timestamp,
}

/// The timers of one (key, window) — a few — sorted by (name, domain).
type WindowTimers<N> = Vec<((N, TimeDomain), (Timestamp, Timestamp))>;

/// Sets `id`'s timer in `timers`; the one it replaces.
fn put<N: Ord>(
    timers: &mut WindowTimers<N>,
    id: (N, TimeDomain),
    times: (Timestamp, Timestamp),
) -> Option<(Timestamp, Timestamp)> {
    match timers.binary_search_by(|(i, _)| i.cmp(&id)) {
        Ok(i) => Some(std::mem::replace(&mut timers[i].1, times)),
        Err(i) => {
            timers.insert(i, (id, times));
            None
        }
    }
}

/// Removes `id`'s timer from `timers`.
fn take<N: Ord>(
    timers: &mut WindowTimers<N>,
    id: &(N, TimeDomain),
) -> Option<(Timestamp, Timestamp)> {
    let i = timers.binary_search_by(|(i, _)| i.cmp(id)).ok()?;
    Some(timers.remove(i).1)
}

/// One domain's pending timers by firing time: a bucket per time, so setting a timer
/// costs a lookup among the few distinct times pending (many keys' windows end at the
/// same time) and a push. A timer reset or deleted leaves its entry behind, counted out
/// of its bucket's `live` (a bucket with none live goes at once); when a bucket comes
/// due it is sorted, so timers of one time fire in (key, window, name) order, and an
/// entry the per-window index no longer holds at that time is skipped.
struct Queue<K, N> {
    buckets: BTreeMap<Timestamp, Bucket<K, N>>,
    live: usize,
}

struct Bucket<K, N> {
    /// In descending order once `sorted` (popped from the end).
    entries: Vec<(K, BoundedWindow, N)>,
    sorted: bool,
    live: usize,
}

impl<K: Ord, N: Ord> Queue<K, N> {
    fn new() -> Self {
        Queue {
            buckets: BTreeMap::new(),
            live: 0,
        }
    }

    fn insert(&mut self, at: Timestamp, key: K, window: BoundedWindow, name: N) {
        let b = self.buckets.entry(at).or_insert_with(|| Bucket {
            entries: Vec::new(),
            sorted: true,
            live: 0,
        });
        b.sorted &= b.entries.is_empty();
        b.entries.push((key, window, name));
        b.live += 1;
        self.live += 1;
    }

    /// A timer pending at `at` is no longer (reset, deleted or fired).
    fn forget(&mut self, at: Timestamp) {
        if let Some(b) = self.buckets.get_mut(&at) {
            b.live -= 1;
            self.live -= 1;
            if b.live == 0 {
                self.buckets.remove(&at);
            }
        }
    }

    fn first(&self) -> Option<Timestamp> {
        self.buckets.keys().next().copied()
    }

    /// The next entry of the earliest bucket, if that is before `now`; its time.
    fn pop_before(&mut self, now: Timestamp) -> Option<(Timestamp, (K, BoundedWindow, N))> {
        loop {
            let mut first = self.buckets.first_entry()?;
            let at = *first.key();
            if at >= now {
                return None;
            }
            let b = first.get_mut();
            if !b.sorted {
                b.entries.sort_unstable_by(|x, y| y.cmp(x));
                b.entries.dedup();
                b.sorted = true;
            }
            match b.entries.pop() {
                Some(e) => return Some((at, e)),
                // A bucket with live timers holds their entries, so this is a guard.
                None => {
                    first.remove();
                }
            }
        }
    }
}

/// Pending timers of one operator.
pub struct TimerService<K, N> {
    /// By firing time, per domain (event time first).
    queues: [Queue<K, N>; 2],
    /// By (key, window), hashed: one lookup per timer set, however many are pending.
    of_window: FxHashMap<(K, BoundedWindow), WindowTimers<N>>,
    /// Output timestamps of pending timers, counted: the watermark hold.
    holds: BTreeMap<Timestamp, usize>,
}

impl<K: Ord, N: Ord> Default for TimerService<K, N> {
    fn default() -> Self {
        TimerService {
            queues: [Queue::new(), Queue::new()],
            of_window: FxHashMap::default(),
            holds: BTreeMap::new(),
        }
    }
}

impl<K: Ord + Clone + std::hash::Hash, N: Ord + Clone> TimerService<K, N> {
    /// Sets (or resets) a timer; whether it is the first pending timer of its (key,
    /// window).
    pub fn set(&mut self, t: Timer<K, N>) -> bool {
        // A window has a timer or two: room for one, not Vec's four.
        let timers = self
            .of_window
            .entry((t.key.clone(), t.window.clone()))
            .or_insert_with(|| Vec::with_capacity(1));
        let first = timers.is_empty();
        let q = &mut self.queues[d(t.domain)];
        match put(timers, (t.name.clone(), t.domain), (t.at, t.output)) {
            // The same timer again: nothing changes.
            Some(old) if old == (t.at, t.output) => return first,
            Some((at, output)) => {
                q.forget(at);
                release(&mut self.holds, output);
            }
            None => {}
        }
        *self.holds.entry(t.output).or_default() += 1;
        q.insert(t.at, t.key, t.window, t.name);
        first
    }

    /// Deletes a timer, if set.
    pub fn delete(&mut self, key: &K, window: BoundedWindow, name: &N, domain: TimeDomain) {
        let k = (key.clone(), window);
        let Some(timers) = self.of_window.get_mut(&k) else {
            return;
        };
        if let Some((at, output)) = take(timers, &(name.clone(), domain)) {
            self.queues[d(domain)].forget(at);
            release(&mut self.holds, output);
        }
        if timers.is_empty() {
            self.of_window.remove(&k);
        }
    }

    /// The earliest timer of `domain` that `now` has passed, removed.
    pub fn pop_due(&mut self, domain: TimeDomain, now: Timestamp) -> Option<Timer<K, N>> {
        loop {
            let (at, (key, window, name)) = self.queues[d(domain)].pop_before(now)?;
            let k = (key, window);
            let Some(timers) = self.of_window.get_mut(&k) else {
                continue;
            };
            let id = (name, domain);
            let Ok(i) = timers.binary_search_by(|(i, _)| i.cmp(&id)) else {
                continue;
            };
            if timers[i].1 .0 != at {
                continue;
            }
            let (_, output) = timers.remove(i).1;
            if timers.is_empty() {
                self.of_window.remove(&k);
            }
            self.queues[d(domain)].forget(at);
            release(&mut self.holds, output);
            let ((key, window), (name, domain)) = (k, id);
            return Some(Timer {
                key,
                window,
                name,
                domain,
                at,
                output,
            });
        }
    }

    /// Whether a timer of `domain` is due at `now`.
    pub fn has_due(&self, domain: TimeDomain, now: Timestamp) -> bool {
        self.next(domain).is_some_and(|t| t < now)
    }

    /// The earliest pending timer of `domain`.
    pub fn next(&self, domain: TimeDomain) -> Option<Timestamp> {
        self.queues[d(domain)].first()
    }

    /// The earliest pending timer of `domain`, whole (for reports: it looks among the
    /// timers due at that time for one still pending).
    pub fn first(&self, domain: TimeDomain) -> Option<Timer<K, N>> {
        let (&at, bucket) = self.queues[d(domain)].buckets.iter().next()?;
        bucket.entries.iter().find_map(|(key, window, name)| {
            let timers = self.of_window.get(&(key.clone(), window.clone()))?;
            let (_, (t, output)) = timers
                .iter()
                .find(|((n, dom), _)| n == name && *dom == domain)?;
            (*t == at).then(|| Timer {
                key: key.clone(),
                window: window.clone(),
                name: name.clone(),
                domain,
                at,
                output: *output,
            })
        })
    }

    /// Deletes every timer of (key, window): the window expired.
    pub fn delete_window(&mut self, key: &K, window: BoundedWindow) {
        let Some(timers) = self.of_window.remove(&(key.clone(), window)) else {
            return;
        };
        for ((_, domain), (at, output)) in timers {
            self.queues[d(domain)].forget(at);
            release(&mut self.holds, output);
        }
    }

    /// The earliest output timestamp of a pending timer: the watermark hold.
    pub fn earliest_output(&self) -> Option<Timestamp> {
        self.holds.keys().next().copied()
    }

    /// The timers of (key, window).
    pub fn of(&self, key: &K, window: BoundedWindow) -> Vec<Timer<K, N>> {
        self.of_window
            .get(&(key.clone(), window.clone()))
            .into_iter()
            .flatten()
            .map(|((name, domain), (at, output))| Timer {
                key: key.clone(),
                window: window.clone(),
                name: name.clone(),
                domain: *domain,
                at: *at,
                output: *output,
            })
            .collect()
    }

    /// Every (key, window) with timers, in order.
    pub fn windows(&self) -> impl Iterator<Item = &(K, BoundedWindow)> {
        let mut all: Vec<&(K, BoundedWindow)> = self.of_window.keys().collect();
        all.sort();
        all.into_iter()
    }

    /// Number of pending timers.
    pub fn len(&self) -> usize {
        self.queues[0].live + self.queues[1].live
    }

    /// No pending timers.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn release(holds: &mut BTreeMap<Timestamp, usize>, output: Timestamp) {
    if let Some(n) = holds.get_mut(&output) {
        *n -= 1;
        if *n == 0 {
            holds.remove(&output);
        }
    }
}

fn d(domain: TimeDomain) -> usize {
    match domain {
        TimeDomain::EventTime => 0,
        TimeDomain::ProcessingTime => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(key: u32, name: &str, domain: TimeDomain, at: i64, output: i64) -> Timer<u32, String> {
        Timer {
            key,
            window: BoundedWindow::Global,
            name: name.into(),
            domain,
            at: Timestamp(at),
            output: Timestamp(output),
        }
    }

    #[test]
    fn fires_in_time_order_strictly_after_and_replaces_by_name() {
        let mut s = TimerService::default();
        s.set(t(1, "a", TimeDomain::EventTime, 10, 10));
        s.set(t(2, "a", TimeDomain::EventTime, 5, 5));
        s.set(t(1, "a", TimeDomain::EventTime, 7, 3));
        s.set(t(1, "p", TimeDomain::ProcessingTime, 1, 1));
        assert_eq!(s.len(), 3);
        assert_eq!(s.earliest_output(), Some(Timestamp(1)));
        assert_eq!(s.pop_due(TimeDomain::EventTime, Timestamp(5)), None);
        assert_eq!(
            s.pop_due(TimeDomain::EventTime, Timestamp(100))
                .unwrap()
                .key,
            2
        );
        let fired = s.pop_due(TimeDomain::EventTime, Timestamp(100)).unwrap();
        assert_eq!(
            (fired.key, fired.at, fired.output),
            (1, Timestamp(7), Timestamp(3))
        );
        assert_eq!(s.pop_due(TimeDomain::EventTime, Timestamp(100)), None);
        assert!(s.has_due(TimeDomain::ProcessingTime, Timestamp(2)));
        s.delete_window(&1, BoundedWindow::Global);
        assert!(s.is_empty());
        assert_eq!(s.earliest_output(), None);
    }

    #[test]
    fn reset_and_deleted_timers_never_fire_and_one_time_fires_in_key_order() {
        let mut s = TimerService::default();
        for key in [3, 1, 2] {
            s.set(t(key, "a", TimeDomain::EventTime, 10, 10));
        }
        // Reset to another time and back, deleted, set again the same: one each.
        s.set(t(3, "a", TimeDomain::EventTime, 20, 20));
        s.set(t(3, "a", TimeDomain::EventTime, 10, 10));
        s.delete(
            &2,
            BoundedWindow::Global,
            &"a".to_string(),
            TimeDomain::EventTime,
        );
        s.set(t(1, "a", TimeDomain::EventTime, 10, 10));
        s.set(t(4, "a", TimeDomain::EventTime, 20, 20));
        s.delete(
            &4,
            BoundedWindow::Global,
            &"a".to_string(),
            TimeDomain::EventTime,
        );
        assert_eq!(s.len(), 2);
        assert_eq!(s.next(TimeDomain::EventTime), Some(Timestamp(10)));
        let mut fired = Vec::new();
        while let Some(x) = s.pop_due(TimeDomain::EventTime, Timestamp(100)) {
            fired.push((x.key, x.at));
            // A timer set while its time's bucket fires joins it, in order.
            if x.key == 1 {
                s.set(t(0, "a", TimeDomain::EventTime, 10, 10));
                s.set(t(2, "a", TimeDomain::EventTime, 10, 10));
            }
        }
        assert_eq!(
            fired,
            vec![
                (1, Timestamp(10)),
                (0, Timestamp(10)),
                (2, Timestamp(10)),
                (3, Timestamp(10))
            ]
        );
        assert!(s.is_empty());
        assert_eq!(s.next(TimeDomain::EventTime), None);
        assert_eq!(s.earliest_output(), None);
    }

    #[test]
    fn the_first_timer_is_a_pending_one_not_a_reset_ones_leftover() {
        let mut s = TimerService::default();
        assert_eq!(s.first(TimeDomain::EventTime), None);
        s.set(t(1, "a", TimeDomain::EventTime, 5, 5));
        s.set(t(2, "b", TimeDomain::EventTime, 5, 5));
        s.set(t(3, "p", TimeDomain::ProcessingTime, 2, 2));
        // Key 1's timer moves to 7: its entry at 5 stays behind, no longer pending.
        s.set(t(1, "a", TimeDomain::EventTime, 7, 7));
        assert_eq!(
            s.first(TimeDomain::EventTime),
            Some(t(2, "b", TimeDomain::EventTime, 5, 5))
        );
        assert_eq!(
            s.first(TimeDomain::ProcessingTime),
            Some(t(3, "p", TimeDomain::ProcessingTime, 2, 2))
        );
        s.delete(
            &2,
            BoundedWindow::Global,
            &"b".to_string(),
            TimeDomain::EventTime,
        );
        assert_eq!(
            s.first(TimeDomain::EventTime),
            Some(t(1, "a", TimeDomain::EventTime, 7, 7))
        );
    }
}
