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
use std::collections::{BTreeMap, BTreeSet};
use tidewater::exec::TimeDomain;
use tidewater::{BoundedWindow, Timestamp};

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

/// Pending timers of one operator.
pub struct TimerService<K, N> {
    /// By firing time, per domain (event time first).
    queues: [BTreeSet<(Timestamp, K, BoundedWindow, N)>; 2],
    /// By (key, window), hashed: one lookup per timer set, however many are pending.
    of_window: FxHashMap<(K, BoundedWindow), WindowTimers<N>>,
    /// Output timestamps of pending timers, counted: the watermark hold.
    holds: BTreeMap<Timestamp, usize>,
}

impl<K, N> Default for TimerService<K, N> {
    fn default() -> Self {
        TimerService {
            queues: [BTreeSet::new(), BTreeSet::new()],
            of_window: FxHashMap::default(),
            holds: BTreeMap::new(),
        }
    }
}

impl<K: Ord + Clone + std::hash::Hash, N: Ord + Clone> TimerService<K, N> {
    /// Sets (or resets) a timer; whether it is the first pending timer of its (key,
    /// window).
    pub fn set(&mut self, t: Timer<K, N>) -> bool {
        let timers = self.of_window.entry((t.key.clone(), t.window)).or_default();
        let first = timers.is_empty();
        if let Some((at, output)) = put(timers, (t.name.clone(), t.domain), (t.at, t.output)) {
            self.queues[d(t.domain)].remove(&(at, t.key.clone(), t.window, t.name.clone()));
            release(&mut self.holds, output);
        }
        *self.holds.entry(t.output).or_default() += 1;
        self.queues[d(t.domain)].insert((t.at, t.key, t.window, t.name));
        first
    }

    /// Deletes a timer, if set.
    pub fn delete(&mut self, key: &K, window: BoundedWindow, name: &N, domain: TimeDomain) {
        let k = (key.clone(), window);
        let Some(timers) = self.of_window.get_mut(&k) else {
            return;
        };
        if let Some((at, output)) = take(timers, &(name.clone(), domain)) {
            self.queues[d(domain)].remove(&(at, key.clone(), window, name.clone()));
            release(&mut self.holds, output);
        }
        if timers.is_empty() {
            self.of_window.remove(&k);
        }
    }

    /// The earliest timer of `domain` that `now` has passed, removed.
    pub fn pop_due(&mut self, domain: TimeDomain, now: Timestamp) -> Option<Timer<K, N>> {
        if self.queues[d(domain)].first()?.0 >= now {
            return None;
        }
        let (at, key, window, name) = self.queues[d(domain)].pop_first()?;
        let k = (key, window);
        let timers = self.of_window.get_mut(&k).expect("indexed");
        let (_, output) = take(timers, &(name.clone(), domain)).expect("indexed");
        if timers.is_empty() {
            self.of_window.remove(&k);
        }
        release(&mut self.holds, output);
        let (key, window) = k;
        Some(Timer {
            key,
            window,
            name,
            domain,
            at,
            output,
        })
    }

    /// Whether a timer of `domain` is due at `now`.
    pub fn has_due(&self, domain: TimeDomain, now: Timestamp) -> bool {
        self.next(domain).is_some_and(|t| t < now)
    }

    /// The earliest pending timer of `domain`.
    pub fn next(&self, domain: TimeDomain) -> Option<Timestamp> {
        self.queues[d(domain)].first().map(|q| q.0)
    }

    /// Deletes every timer of (key, window): the window expired.
    pub fn delete_window(&mut self, key: &K, window: BoundedWindow) {
        let Some(timers) = self.of_window.remove(&(key.clone(), window)) else {
            return;
        };
        for ((name, domain), (at, output)) in timers {
            self.queues[d(domain)].remove(&(at, key.clone(), window, name));
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
            .get(&(key.clone(), window))
            .into_iter()
            .flatten()
            .map(|((name, domain), (at, output))| Timer {
                key: key.clone(),
                window,
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
        self.queues[0].len() + self.queues[1].len()
    }

    /// No pending timers.
    pub fn is_empty(&self) -> bool {
        self.queues.iter().all(BTreeSet::is_empty)
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
}
