//! Which windows of a stateful DoFn changed since its last snapshot: what a delta
//! snapshot writes (Flink's incremental checkpoints; the reducer tracks its windows
//! with `Written` the same way). Tracked in the runner, over either backend: every
//! write of a cell, every timer set, deleted or fired, and every window expired.

use hashbrown::{Equivalent, HashSet};
use std::hash::Hash;
use tidewater::BoundedWindow;

/// Past this many changed windows, and more than an eighth of the windows the state
/// holds, the next snapshot is full and nothing more is tracked: a delta reads each
/// changed window on its own (in the embedded store a point read per cell name, some
/// ten times the cost of an entry of the full snapshot's one scan) and tracking costs a
/// set insert per window, so past that share a full snapshot is the cheaper one. (On a
/// job whose every input was a new key, deltas of every change at 1 s intervals cost
/// 17-23% of its throughput, full snapshots 5-8%.)
const TRACKED_AT_LEAST: usize = 4096;

/// A delta is written while fewer than one in this many held windows changed.
const SHARE: usize = 8;

/// Past this many changed windows the next snapshot is full whatever the state holds:
/// the set of changed windows is in memory (some 80 bytes a window) even where the
/// state is not.
const TRACKED_AT_MOST: usize = 1 << 20;

/// The windows changed since the last snapshot.
#[derive(Default)]
pub(super) struct Changes {
    state: Tracking,
    /// Snapshots still to take untracked (full), after tracking overflowed.
    skips: u32,
    /// How many snapshots the last overflow skipped: doubled by each overflow in a row
    /// (up to [`MAX_SKIPS`]), so that a job whose every interval changes too much pays
    /// for tracking at few of them.
    backoff: u32,
}

/// Snapshots skipped after an overflow, at most.
const MAX_SKIPS: u32 = 16;

#[derive(Default)]
enum Tracking {
    /// No snapshot since the runner was made or restored, or one skipped: the next one
    /// is full.
    #[default]
    Untracked,
    /// Since the last snapshot, these (key, window) changed.
    Tracked(HashSet<(Box<[u8]>, BoundedWindow), rustc_hash::FxBuildHasher>),
    /// More changed than [`SHARE`] allows: the next snapshot is full.
    Overflow,
}

/// A (key, window) looked up without a copy: it hashes as the set's entries do.
#[derive(Hash)]
struct Query<'a>(&'a [u8], &'a BoundedWindow);

impl Equivalent<(Box<[u8]>, BoundedWindow)> for Query<'_> {
    fn equivalent(&self, k: &(Box<[u8]>, BoundedWindow)) -> bool {
        *self.0 == *k.0 && *self.1 == k.1
    }
}

impl Changes {
    /// (key, window) changed; `held` says how many windows the state holds now (asked
    /// only when a window is new to the set, not per write).
    #[inline]
    pub(super) fn note(
        &mut self,
        key: &[u8],
        window: &BoundedWindow,
        held: impl FnOnce() -> usize,
    ) {
        let Tracking::Tracked(set) = &mut self.state else {
            return;
        };
        if set.contains(&Query(key, window)) {
            return;
        }
        if set.len() >= TRACKED_AT_LEAST.max(held() / SHARE).min(TRACKED_AT_MOST) {
            self.state = Tracking::Overflow;
            return;
        }
        set.insert((key.into(), window.clone()));
    }

    /// A snapshot is taken: the windows changed since the previous one, if it can be a
    /// delta over it. Tracking starts afresh, unless it overflowed: then the next
    /// snapshots (one, then twice as many after each overflow in a row) are full.
    pub(super) fn restart(&mut self) -> Option<Vec<(Vec<u8>, BoundedWindow)>> {
        let (next, changed) = match std::mem::take(&mut self.state) {
            Tracking::Tracked(set) => {
                self.backoff = 0;
                let changed = set.into_iter().map(|(k, w)| (k.into_vec(), w)).collect();
                (Tracking::Tracked(HashSet::default()), Some(changed))
            }
            Tracking::Overflow => {
                self.backoff = (self.backoff * 2).clamp(1, MAX_SKIPS);
                self.skips = self.backoff;
                (Tracking::Untracked, None)
            }
            Tracking::Untracked if self.skips > 0 => {
                self.skips -= 1;
                (Tracking::Untracked, None)
            }
            Tracking::Untracked => (Tracking::Tracked(HashSet::default()), None),
        };
        self.state = next;
        changed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_is_noted_once_and_too_many_make_the_next_snapshot_full() {
        let mut c = Changes::default();
        c.note(b"k", &BoundedWindow::Global, || 1);
        assert_eq!(c.restart(), None, "nothing is tracked before a snapshot");
        c.note(b"k", &BoundedWindow::Global, || 1);
        c.note(b"k", &BoundedWindow::Global, || 1);
        c.note(b"l", &BoundedWindow::Global, || 1);
        let mut got = c.restart().unwrap();
        got.sort();
        assert_eq!(
            got,
            vec![
                (b"k".to_vec(), BoundedWindow::Global),
                (b"l".to_vec(), BoundedWindow::Global)
            ]
        );
        let overflow = |c: &mut Changes| {
            for i in 0..=TRACKED_AT_LEAST as u32 {
                c.note(&i.to_be_bytes(), &BoundedWindow::Global, || {
                    8 * TRACKED_AT_LEAST
                });
            }
            assert!(matches!(c.state, Tracking::Overflow));
        };
        overflow(&mut c);
        assert_eq!(c.restart(), None, "full");
        assert_eq!(c.restart(), None, "one skipped, full");
        c.note(b"k", &BoundedWindow::Global, || 1);
        assert_eq!(c.restart(), None, "nothing was tracked");
        overflow(&mut c);
        assert_eq!(c.restart(), None);
        assert_eq!(
            c.restart(),
            None,
            "two skipped after two overflows in a row"
        );
        assert_eq!(c.restart(), None);
        assert_eq!(c.restart(), None, "tracked again, but not before");
        c.note(b"k", &BoundedWindow::Global, || 1);
        assert_eq!(c.restart().map(|v| v.len()), Some(1));
        assert_eq!(c.backoff, 0, "a delta resets the backoff");
    }
}
