//! Units of a reducer's windows in the embedded store ([`EmbeddedUnits`]): opaque
//! values at (key, window) addresses that a reducer puts there when they leave memory
//! and takes back whole, each with a *wake* per time domain (when it must come back),
//! kept in time order in the store. Nothing per unit stays in memory but a few bits of
//! a filter ([`super::filter`]), so that looking up a unit the store never had reads
//! nothing.
//!
//! One keyspace of the process's store per operator instance, two kinds of entries:
//!
//! - `u[address]` (the address of (key, window) as a cell's, [`super::window_prefix`])
//!   → `[wakes present: u8][event wake][processing wake][hold][value]`
//!   (each 8 bytes that sort as the times do, zero when absent);
//! - three queues, `q[queue][time][address]`, read at their head ([`Head`]): the
//!   wakes per time domain ([`domain_byte`]) and the holds (queue 2), so that the
//!   earliest hold in the store is known without taking anything out.
//!
//! A put writes its entries, a take reads the unit's once and removes its entries:
//! no entry is read to write one. Each entry is written once between removes (a unit
//! is put only when it is not there), so a remove is a single delete (fjall's
//! `remove_weak`), which compaction drops together with the entry it deletes.

use super::filter::{mix, Filter};
use super::frozen::decode_window_prefix;
use super::head::{domain_byte, from_sortable, sortable, Head};
use super::store::{io_error, wait_for_flushes, Store, KEYSPACES};
use super::window_prefix;
use std::cell::RefCell;
use std::hash::{BuildHasher, Hasher};
use std::path::Path;
use std::sync::Arc;
use tidewater::exec::TimeDomain;
use tidewater::{BoundedWindow, Timestamp};

const UNIT: u8 = b'u';
const QUEUE: u8 = b'q';
/// Queues: a wake per time domain, then the holds.
const QUEUES: usize = 3;
/// The queue of the units' holds.
const HOLDS: usize = 2;
/// A unit's value starts after its flags, two wakes and its hold.
const HEADER: usize = 1 + 8 * QUEUES;

/// What [`EmbeddedUnits::for_each`] calls with each unit: (key, window, value).
pub type UnitVisitor<'a> = dyn FnMut(&[u8], BoundedWindow, &[u8]) -> Result<(), String> + 'a;

/// A unit's wakes, by [`domain_byte`], then its hold.
pub type Wakes = [Option<Timestamp>; QUEUES];

/// Units of a reducer's windows in the embedded store; see the module's documentation.
pub struct EmbeddedUnits {
    store: Arc<Store>,
    keyspace: fjall::Keyspace,
    /// The wake queue per domain (event time first), then the holds'.
    queue: [Head; QUEUES],
    filter: Filter,
    /// Times the filter was built anew.
    rebuilds: usize,
    max_key_groups: u32,
    units: usize,
    /// The first error of a read that cannot return one, reported by the next flush.
    failed: RefCell<Option<String>>,
    /// A unit's address; reused from call to call.
    scratch: Vec<u8>,
}

impl EmbeddedUnits {
    /// Units under directory `dir` (the process's store there, opened on first use),
    /// for keys hashed into `max_key_groups` key groups.
    pub fn open(dir: &Path, max_key_groups: u32) -> Result<Self, String> {
        let store = Store::open(dir)?;
        let n = KEYSPACES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let keyspace = store.units_keyspace(&format!("units{n}"))?;
        Ok(EmbeddedUnits {
            store,
            queue: [
                Head::new(keyspace.clone(), vec![QUEUE, 0]).written_once(),
                Head::new(keyspace.clone(), vec![QUEUE, 1]).written_once(),
                Head::new(keyspace.clone(), vec![QUEUE, HOLDS as u8]).written_once(),
            ],
            keyspace,
            filter: Filter::default(),
            rebuilds: 0,
            max_key_groups,
            units: 0,
            failed: RefCell::new(None),
            scratch: Vec::new(),
        })
    }

    /// Units in the store.
    pub fn len(&self) -> usize {
        self.units
    }

    /// Whether the store holds no unit.
    pub fn is_empty(&self) -> bool {
        self.units == 0
    }

    fn io(&self, e: fjall::Error) -> String {
        io_error(
            "cannot read or write a grouping's windows",
            &self.store.dir,
            e,
        )
    }

    /// The entry of unit (key, window) into `scratch`, and its hash.
    fn address(&mut self, key: &[u8], window: &BoundedWindow) -> u64 {
        let mut a = std::mem::take(&mut self.scratch);
        window_prefix(self.max_key_groups, key, window, &mut a);
        a.insert(0, UNIT);
        let hash = hash_of(&a);
        self.scratch = a;
        hash
    }

    /// Builds the filter anew from the units in the store (entries removed outnumber
    /// them: see [`Filter::stale`]). Called only before a put: the filter grows only
    /// with puts, and a filter that still answers "maybe" for units taken is right, only
    /// slower for them. A store emptying at a bounded input's end (takes, no puts) is
    /// not scanned whole again and again as it empties.
    fn rebuild_filter(&mut self) -> Result<(), String> {
        let mut filter = Filter::for_live(self.units);
        for kv in self.keyspace.prefix([UNIT]) {
            filter.insert(hash_of(&kv.key().map_err(|e| self.io(e))?));
        }
        self.filter = filter;
        self.rebuilds += 1;
        tracing::debug!(units = self.units, dir = %self.store.dir.display(), "units filter rebuilt");
        Ok(())
    }

    fn queue_entry(queue: usize, at: Timestamp, unit_entry: &[u8]) -> Vec<u8> {
        let mut e = Vec::with_capacity(10 + unit_entry.len());
        e.push(QUEUE);
        e.push(queue as u8);
        e.extend_from_slice(&sortable(at));
        e.extend_from_slice(&unit_entry[1..]);
        e
    }

    /// Puts unit (key, window) in the store with `value`, to come back at `wakes`. The
    /// unit must not be there already.
    pub fn put(
        &mut self,
        key: &[u8],
        window: &BoundedWindow,
        wakes: Wakes,
        value: &[u8],
    ) -> Result<(), String> {
        if self.filter.stale(self.units) {
            self.rebuild_filter()?;
        }
        let hash = self.address(key, window);
        self.filter.insert(hash);
        let mut v = Vec::with_capacity(HEADER + value.len());
        v.push(
            wakes
                .iter()
                .enumerate()
                .fold(0, |f, (i, w)| f | (w.is_some() as u8) << i),
        );
        for w in wakes {
            v.extend_from_slice(&w.map_or([0; 8], sortable));
        }
        v.extend_from_slice(value);
        let entry = &self.scratch;
        self.keyspace
            .insert(entry.as_slice(), v)
            .map_err(|e| self.io(e))?;
        for (queue, at) in wakes.into_iter().enumerate() {
            if let Some(at) = at {
                self.queue[queue]
                    .insert(Self::queue_entry(queue, at, entry), &[])
                    .map_err(|e| self.io(e))?;
            }
        }
        self.units += 1;
        Ok(())
    }

    /// Takes unit (key, window) out of the store: its value, if it is there.
    pub fn take(&mut self, key: &[u8], window: &BoundedWindow) -> Result<Option<Vec<u8>>, String> {
        if self.units == 0 {
            return Ok(None);
        }
        let hash = self.address(key, window);
        if !self.filter.may_contain(hash) {
            return Ok(None);
        }
        let entry = &self.scratch;
        let Some(v) = self.keyspace.get(entry).map_err(|e| self.io(e))? else {
            return Ok(None);
        };
        let corrupt = || {
            format!(
                "a unit of windows in the state store at {} does not decode",
                self.store.dir.display()
            )
        };
        let header = v.get(..HEADER).ok_or_else(corrupt)?;
        let flags = header[0];
        // A unit is put only when it is not in the store: its entry is written once
        // between removes.
        self.keyspace
            .remove_weak(entry.as_slice())
            .map_err(|e| self.io(e))?;
        for queue in 0..QUEUES {
            if flags & (1 << queue) != 0 {
                let at = from_sortable(&header[1 + 8 * queue..]).ok_or_else(corrupt)?;
                self.queue[queue]
                    .remove(Self::queue_entry(queue, at, entry))
                    .map_err(|e| self.io(e))?;
            }
        }
        self.filter.remove();
        self.units -= 1;
        Ok(Some(v[HEADER..].to_vec()))
    }

    /// The first entry of a queue: (time, address).
    fn first(&self, queue: usize) -> Option<Vec<u8>> {
        if self.units == 0 {
            return None;
        }
        match self.queue[queue].first() {
            Ok(f) => f,
            Err(e) => {
                self.failed.borrow_mut().get_or_insert(self.io(e));
                None
            }
        }
    }

    /// The earliest wake in `domain`.
    pub fn next(&self, domain: TimeDomain) -> Option<Timestamp> {
        self.first(domain_byte(domain) as usize)
            .and_then(|e| e.get(2..).and_then(from_sortable))
    }

    /// The earliest hold of a unit in the store.
    pub fn earliest_hold(&self) -> Option<Timestamp> {
        self.first(HOLDS)
            .and_then(|e| e.get(2..).and_then(from_sortable))
    }

    /// The unit whose wake in `domain` is earliest, if that is before `now` (it stays
    /// in the store: [`EmbeddedUnits::take`] it).
    pub fn first_due(
        &self,
        domain: TimeDomain,
        now: Timestamp,
    ) -> Result<Option<(Vec<u8>, BoundedWindow)>, String> {
        let Some(entry) = self.first(domain_byte(domain) as usize) else {
            return Ok(None);
        };
        let at = entry.get(2..).and_then(from_sortable);
        if at.is_none_or(|at| at >= now) {
            return Ok(None);
        }
        let (key, window) = entry
            .get(10..)
            .and_then(decode_window_prefix)
            .ok_or_else(|| {
                format!(
                    "a unit's wake in the state store at {} does not decode",
                    self.store.dir.display()
                )
            })?;
        Ok(Some((key.to_vec(), window)))
    }

    /// The end of a bundle: an error since the last one, or a wait while the store's
    /// memtables are more than it lets wait (see [`wait_for_flushes`]).
    pub fn flush(&mut self) -> Result<(), String> {
        if let Some(e) = self.failed.get_mut().take() {
            return Err(e);
        }
        wait_for_flushes(&self.keyspace, &self.store.dir)
    }

    /// Every unit (key, window, value) to `f`, in the store's order, from a consistent
    /// view of it.
    pub fn for_each(&self, f: &mut UnitVisitor<'_>) -> Result<(), String> {
        self.freeze().for_each(f)
    }

    /// The units as they are now, to read on another thread while this goes on.
    pub fn freeze(&self) -> FrozenUnits {
        FrozenUnits {
            snapshot: self.store.db.snapshot(),
            keyspace: self.keyspace.clone(),
            dir: self.store.dir.clone(),
        }
    }
}

/// Units as of [`EmbeddedUnits::freeze`]: a view of the store.
pub struct FrozenUnits {
    snapshot: fjall::Snapshot,
    keyspace: fjall::Keyspace,
    dir: std::path::PathBuf,
}

impl FrozenUnits {
    /// Every unit (key, window, value) to `f`, in the store's order: by key group
    /// (an address begins with it), then key and window.
    pub fn for_each(&self, f: &mut UnitVisitor<'_>) -> Result<(), String> {
        use fjall::Readable;
        for kv in self.snapshot.prefix(&self.keyspace, [UNIT]) {
            let (entry, v) = kv
                .into_inner()
                .map_err(|e| io_error("cannot read a grouping's windows", &self.dir, e))?;
            let (key, window) = entry
                .get(1..)
                .and_then(decode_window_prefix)
                .filter(|_| v.len() >= HEADER)
                .ok_or_else(|| {
                    format!(
                        "a unit of windows in the state store at {} does not decode",
                        self.dir.display()
                    )
                })?;
            f(key, window, &v[HEADER..])?;
        }
        Ok(())
    }
}

/// The hash of a unit's entry, for the filter.
fn hash_of(entry: &[u8]) -> u64 {
    let mut h = rustc_hash::FxBuildHasher.build_hasher();
    h.write(entry);
    mix(h.finish())
}

impl Drop for EmbeddedUnits {
    fn drop(&mut self) {
        if let Err(e) = self.store.db.delete_keyspace(self.keyspace.clone()) {
            tracing::debug!("cannot drop a keyspace of units: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(start: i64) -> BoundedWindow {
        BoundedWindow::Interval {
            start: Timestamp(start),
            end: Timestamp(start + 10),
        }
    }

    #[test]
    fn units_come_back_whole_once_and_wake_in_time_order() {
        let dir = tempfile::tempdir().unwrap();
        let mut u = EmbeddedUnits::open(dir.path(), 16).unwrap();
        assert_eq!(u.take(b"a", &w(0)).unwrap(), None);
        u.put(
            b"a",
            &w(0),
            [Some(Timestamp(30)), None, Some(Timestamp(30))],
            b"one",
        )
        .unwrap();
        u.put(
            b"b",
            &w(0),
            [Some(Timestamp(20)), Some(Timestamp(5)), Some(Timestamp(25))],
            b"two",
        )
        .unwrap();
        u.put(b"a", &w(10), [None, Some(Timestamp(3)), None], b"three")
            .unwrap();
        assert_eq!(u.len(), 3);
        assert_eq!(u.next(TimeDomain::EventTime), Some(Timestamp(20)));
        assert_eq!(u.next(TimeDomain::ProcessingTime), Some(Timestamp(3)));
        assert_eq!(u.earliest_hold(), Some(Timestamp(25)));
        assert_eq!(
            u.first_due(TimeDomain::EventTime, Timestamp(20)).unwrap(),
            None
        );
        assert_eq!(
            u.first_due(TimeDomain::EventTime, Timestamp(21)).unwrap(),
            Some((b"b".to_vec(), w(0)))
        );
        let mut all = Vec::new();
        u.for_each(&mut |k, win, v| {
            all.push((k.to_vec(), win, v.to_vec()));
            Ok(())
        })
        .unwrap();
        all.sort_by(|a, b| a.2.cmp(&b.2));
        assert_eq!(
            all,
            vec![
                (b"a".to_vec(), w(0), b"one".to_vec()),
                (b"a".to_vec(), w(10), b"three".to_vec()),
                (b"b".to_vec(), w(0), b"two".to_vec()),
            ]
        );
        // Taking "b" takes its wakes in both domains, and its hold.
        assert_eq!(u.take(b"b", &w(0)).unwrap(), Some(b"two".to_vec()));
        assert_eq!(u.take(b"b", &w(0)).unwrap(), None);
        assert_eq!(u.next(TimeDomain::EventTime), Some(Timestamp(30)));
        assert_eq!(u.earliest_hold(), Some(Timestamp(30)));
        assert_eq!(u.next(TimeDomain::ProcessingTime), Some(Timestamp(3)));
        assert_eq!(u.take(b"a", &w(10)).unwrap(), Some(b"three".to_vec()));
        assert_eq!(u.next(TimeDomain::ProcessingTime), None);
        // Back in, with another wake: the old one is gone.
        u.put(b"b", &w(0), [Some(Timestamp(40)), None, None], b"two'")
            .unwrap();
        assert_eq!(u.next(TimeDomain::EventTime), Some(Timestamp(30)));
        assert_eq!(u.take(b"a", &w(0)).unwrap(), Some(b"one".to_vec()));
        assert_eq!(u.next(TimeDomain::EventTime), Some(Timestamp(40)));
        assert_eq!(u.take(b"b", &w(0)).unwrap(), Some(b"two'".to_vec()));
        assert!(u.is_empty());
        assert_eq!(u.next(TimeDomain::EventTime), None);
        assert_eq!(u.earliest_hold(), None);
        u.flush().unwrap();
    }

    #[test]
    fn many_units_out_and_back_leave_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let mut u = EmbeddedUnits::open(dir.path(), 128).unwrap();
        let n = 50_000u32;
        for i in 0..n {
            let at = Timestamp(i64::from(i % 977));
            u.put(
                &i.to_be_bytes(),
                &BoundedWindow::Global,
                [Some(at), None, Some(at)],
                &i.to_le_bytes(),
            )
            .unwrap();
        }
        // Due in wake order; each taken once.
        let mut last = Timestamp::MIN;
        let mut seen = 0;
        while let Some((k, win)) = u.first_due(TimeDomain::EventTime, Timestamp::MAX).unwrap() {
            let i = u32::from_be_bytes(k.as_slice().try_into().unwrap());
            let at = Timestamp(i64::from(i % 977));
            assert!(at >= last, "wakes in order");
            last = at;
            assert_eq!(u.take(&k, &win).unwrap(), Some(i.to_le_bytes().to_vec()));
            seen += 1;
        }
        assert_eq!(seen, n);
        assert!(u.is_empty());
        // Emptying the store scanned nothing: the filter still answers "maybe".
        assert_eq!(u.rebuilds, 0);
        assert_eq!(
            u.take(&7u32.to_be_bytes(), &BoundedWindow::Global).unwrap(),
            None
        );
        // The next put builds it anew from what is left (nothing): the units taken are
        // "not there" again without a read, but for the filter's false positives.
        u.put(b"new", &BoundedWindow::Global, [None; QUEUES], b"v")
            .unwrap();
        assert_eq!(u.rebuilds, 1);
        let maybe = (0..n)
            .filter(|i| {
                let hash = u.address(&i.to_be_bytes(), &BoundedWindow::Global);
                u.filter.may_contain(hash)
            })
            .count();
        assert!(
            maybe < n as usize / 50,
            "{maybe} of {n} taken units still maybe"
        );
        assert_eq!(
            u.take(b"new", &BoundedWindow::Global).unwrap(),
            Some(b"v".to_vec())
        );
    }
}
