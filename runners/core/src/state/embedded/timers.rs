//! A stateful DoFn's timers in the embedded store beside its cells (Flink's RocksDB
//! timer service): nothing per timer, key or window stays in memory.
//!
//! One keyspace of the process's store per operator instance (one memtable: each keyspace
//! holds up to five in memory), with three kinds of entries, told apart by their first
//! byte:
//!
//! - by id, `i[window's address][domain: u8][name]` (the window's address as a cell's,
//!   see [`super::window_prefix`]; the rest is the timer's id) → `[firing time][output
//!   timestamp]` (each 8 bytes that sort as the times do): what a set, delete or a
//!   window's expiry looks up;
//! - the queue, `q[domain][firing time][id]`: due timers are the first entries of their
//!   domain, in time order (timers due at the same time in key group, then key, order);
//! - the holds, `h[output timestamp][id]`, of the timers whose output timestamp is not
//!   their event time (an event-time timer's default): the hold is the earlier of the
//!   first hold and the first event-time timer of the queue (an event-time timer's
//!   output timestamp is never after it).
//!
//! The queue and the holds are read at their head ([`Head`]): each keeps its first
//! entries at hand, read some hundreds at a time past the tombstones of those removed
//! before them (a queue popped from the front would otherwise scan every timer it ever
//! fired until a compaction drops them, once per timer).
//!
//! Every change goes to the store at once (its memtable; durability is the
//! checkpoints'): a timer set while due timers fire is seen by the next pop.

use super::frozen::split_address;
use super::head::{domain_byte, domain_of, from_sortable, sortable, Head};
use super::store::{io_error, wait_for_flushes, Store, KEYSPACES};
use super::window_prefix;
use crate::state::timers::{FrozenTimers, KeyTimer, KeyedTimers, TimerStream};
use crate::timers::Timer;
use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tidewater::exec::TimeDomain;
use tidewater::{BoundedWindow, Timestamp};

/// Whether a timer has an entry in the holds: unless it is an event-time timer whose
/// output timestamp is its firing time, which the queue's order holds already (one
/// write and one removal fewer per timer).
fn held_apart(domain: TimeDomain, at: Timestamp, output: Timestamp) -> bool {
    domain != TimeDomain::EventTime || at != output
}

/// The first byte of an entry by id, of the queue's and of the holds'.
const BY_ID: u8 = b'i';
const QUEUE: u8 = b'q';
const HOLDS: u8 = b'h';

/// The entry of timer `id` by id.
fn by_id(id: &[u8]) -> Vec<u8> {
    let mut e = Vec::with_capacity(1 + id.len());
    e.push(BY_ID);
    e.extend_from_slice(id);
    e
}

/// The id of a timer: its window's address, its domain and its name.
fn timer_id(
    max_key_groups: u32,
    key: &[u8],
    window: &BoundedWindow,
    name: &str,
    domain: TimeDomain,
) -> Vec<u8> {
    let mut id = Vec::with_capacity(key.len() + name.len() + 32);
    window_prefix(max_key_groups, key, window, &mut id);
    id.push(domain_byte(domain));
    id.extend_from_slice(name.as_bytes());
    id
}

/// A timer's value by id decoded: (firing time, output timestamp).
fn decode_times(v: &[u8]) -> Option<(Timestamp, Timestamp)> {
    Some((from_sortable(v)?, from_sortable(v.get(8..)?)?))
}

/// A timer's id decoded: (key, window, domain, name).
fn decode_id(id: &[u8]) -> Option<(&[u8], BoundedWindow, TimeDomain, &str)> {
    let (key, window, rest) = split_address(id)?;
    let (d, name) = rest.split_first()?;
    Some((key, window, domain_of(*d)?, std::str::from_utf8(name).ok()?))
}

/// A stateful DoFn's timers in the embedded store; see the module's documentation.
pub struct EmbeddedTimers {
    store: Arc<Store>,
    keyspace: fjall::Keyspace,
    /// The queue per domain (event time first).
    queue: [Head; 2],
    holds: Head,
    /// The (domain, name)s set or restored: a window's timers are found by a point read
    /// of each (a filter in front of every file) rather than a scan.
    names: Vec<(TimeDomain, Box<str>)>,
    len: usize,
    max_key_groups: u32,
    /// The first error since the last flush, which reports it.
    failed: RefCell<Option<String>>,
}

impl EmbeddedTimers {
    /// Timers under directory `dir` (the process's store there, opened on first use),
    /// for keys hashed into `max_key_groups` key groups.
    pub fn open(dir: &Path, max_key_groups: u32) -> Result<Self, String> {
        let store = Store::open(dir)?;
        let n = KEYSPACES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let keyspace = store.keyspace(&format!("timers{n}"))?;
        Ok(EmbeddedTimers {
            store,
            queue: [
                Head::new(keyspace.clone(), vec![QUEUE, 0]),
                Head::new(keyspace.clone(), vec![QUEUE, 1]),
            ],
            holds: Head::new(keyspace.clone(), vec![HOLDS]),
            keyspace,
            names: Vec::new(),
            len: 0,
            max_key_groups,
            failed: RefCell::new(None),
        })
    }

    fn id(&self, key: &[u8], window: &BoundedWindow, name: &str, domain: TimeDomain) -> Vec<u8> {
        timer_id(self.max_key_groups, key, window, name, domain)
    }

    fn queue_entry(domain: TimeDomain, at: Timestamp, id: &[u8]) -> Vec<u8> {
        let mut e = Vec::with_capacity(10 + id.len());
        e.push(QUEUE);
        e.push(domain_byte(domain));
        e.extend_from_slice(&sortable(at));
        e.extend_from_slice(id);
        e
    }

    fn hold_entry(output: Timestamp, id: &[u8]) -> Vec<u8> {
        let mut e = Vec::with_capacity(9 + id.len());
        e.push(HOLDS);
        e.extend_from_slice(&sortable(output));
        e.extend_from_slice(id);
        e
    }

    /// Records the first error since the last flush.
    fn fail(&self, e: String) {
        self.failed.borrow_mut().get_or_insert(e);
    }

    fn io(&self, e: fjall::Error) -> String {
        io_error("cannot read or write timers", &self.store.dir, e)
    }

    fn corrupt(&self) -> String {
        format!(
            "a timer in the state store at {} does not decode",
            self.store.dir.display()
        )
    }

    /// The (firing time, output timestamp) of timer `id`, if pending.
    fn times(&self, id: &[u8]) -> Result<Option<(Timestamp, Timestamp)>, String> {
        let Some(v) = self
            .keyspace
            .get(by_id(id))
            .map_err(|e| io_error("cannot read a timer", &self.store.dir, e))?
        else {
            return Ok(None);
        };
        decode_times(&v).map(Some).ok_or_else(|| self.corrupt())
    }

    /// Removes timer `id` (pending with these times): its three entries.
    fn remove(
        &mut self,
        id: &[u8],
        domain: TimeDomain,
        (at, output): (Timestamp, Timestamp),
    ) -> fjall::Result<()> {
        self.keyspace.remove(by_id(id))?;
        self.queue[domain_byte(domain) as usize].remove(Self::queue_entry(domain, at, id))?;
        if held_apart(domain, at, output) {
            self.holds.remove(Self::hold_entry(output, id))?;
        }
        self.len -= 1;
        Ok(())
    }

    /// Deletes timer `id`, if pending.
    fn delete_id(&mut self, id: &[u8], domain: TimeDomain) {
        match self.times(id) {
            Ok(Some(times)) => {
                if let Err(e) = self.remove(id, domain, times) {
                    self.fail(self.io(e));
                }
            }
            Ok(None) => {}
            Err(e) => self.fail(e),
        }
    }

    fn set_id(&mut self, id: Vec<u8>, t: &KeyTimer) -> Result<bool, String> {
        let old = self.times(&id)?;
        if old == Some((t.at, t.output)) {
            return Ok(false);
        }
        if let Some(old) = old {
            self.remove(&id, t.domain, old).map_err(|e| self.io(e))?;
        }
        let mut times = sortable(t.at).to_vec();
        times.extend_from_slice(&sortable(t.output));
        self.keyspace
            .insert(by_id(&id), times)
            .map_err(|e| self.io(e))?;
        let d = domain_byte(t.domain) as usize;
        self.queue[d]
            .insert(Self::queue_entry(t.domain, t.at, &id), &sortable(t.output))
            .map_err(|e| self.io(e))?;
        if held_apart(t.domain, t.at, t.output) {
            self.holds
                .insert(Self::hold_entry(t.output, &id), &[])
                .map_err(|e| self.io(e))?;
        }
        self.len += 1;
        if !self
            .names
            .iter()
            .any(|(d, n)| *d == t.domain && **n == *t.name)
        {
            self.names.push((t.domain, t.name.as_str().into()));
        }
        Ok(old.is_none())
    }

    /// The first entry of `head`; an error reading it is kept for the flush.
    fn first_of(&self, head: &Head) -> Option<Vec<u8>> {
        head.first().unwrap_or_else(|e| {
            self.fail(self.io(e));
            None
        })
    }

    /// The timer of a queue entry of `domain` (pending at its time).
    fn timer_of(&self, entry: &[u8]) -> Result<(Vec<u8>, KeyTimer), String> {
        let at = entry.get(2..).and_then(from_sortable);
        let id = entry.get(10..).ok_or_else(|| self.corrupt())?;
        let (at, output) = match (at, self.times(id)?) {
            (Some(at), Some((pending, output))) if pending == at => (at, output),
            _ => return Err(self.corrupt()),
        };
        let timer = timer_at(id, at, output).ok_or_else(|| self.corrupt())?;
        Ok((id.to_vec(), timer))
    }
}

impl KeyedTimers for EmbeddedTimers {
    fn set(&mut self, t: KeyTimer) -> bool {
        let id = self.id(&t.key, &t.window, &t.name, t.domain);
        self.set_id(id, &t).unwrap_or_else(|e| {
            self.fail(e);
            true
        })
    }

    fn delete(&mut self, key: &[u8], window: &BoundedWindow, name: &str, domain: TimeDomain) {
        let id = self.id(key, window, name, domain);
        self.delete_id(&id, domain);
    }

    fn pop_due(&mut self, domain: TimeDomain, now: Timestamp) -> Option<KeyTimer> {
        let entry = self.first_of(&self.queue[domain_byte(domain) as usize])?;
        if entry
            .get(2..)
            .and_then(from_sortable)
            .is_none_or(|at| at >= now)
        {
            return None;
        }
        match self.timer_of(&entry) {
            Ok((id, t)) => match self.remove(&id, domain, (t.at, t.output)) {
                Ok(()) => Some(t),
                Err(e) => {
                    self.fail(self.io(e));
                    None
                }
            },
            Err(e) => {
                self.fail(e);
                None
            }
        }
    }

    fn next(&self, domain: TimeDomain) -> Option<Timestamp> {
        let entry = self.first_of(&self.queue[domain_byte(domain) as usize])?;
        entry.get(2..).and_then(from_sortable)
    }

    fn first(&self, domain: TimeDomain) -> Option<KeyTimer> {
        let entry = self.queue[domain_byte(domain) as usize]
            .first()
            .ok()
            .flatten()?;
        self.timer_of(&entry).ok().map(|(_, t)| t)
    }

    fn delete_window(&mut self, key: &[u8], window: &BoundedWindow) {
        for i in 0..self.names.len() {
            let (domain, name) = self.names[i].clone();
            let id = self.id(key, window, &name, domain);
            self.delete_id(&id, domain);
        }
    }

    fn earliest_output(&self) -> Option<Timestamp> {
        let apart = self
            .first_of(&self.holds)
            .and_then(|e| e.get(1..).and_then(from_sortable));
        // An event-time timer without a hold entry holds at its firing time.
        match (apart, self.next(TimeDomain::EventTime)) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn len(&self) -> usize {
        self.len
    }

    fn flush(&mut self) -> Result<(), String> {
        if let Some(e) = self.failed.get_mut().take() {
            return Err(e);
        }
        wait_for_flushes(&self.keyspace, &self.store.dir)
    }

    fn freeze_files(&self) -> Option<super::tables::KeyspaceFreeze> {
        Some(super::tables::freeze(&self.store, &self.keyspace))
    }
    fn freeze(&self) -> Box<dyn FrozenTimers> {
        Box::new(Frozen {
            snapshot: self.store.db.snapshot(),
            keyspace: self.keyspace.clone(),
            dir: self.store.dir.clone(),
            max_key_groups: self.max_key_groups,
            names: self.names.clone(),
        })
    }
}

/// The first bytes of a timers keyspace's entries of key groups `groups` (see
/// [`restore_timers`]): `from..to`.
pub fn timer_range(groups: &std::ops::Range<u32>) -> (Vec<u8>, Vec<u8>) {
    by_id_range(groups)
}

/// Every timer of key groups `groups` that `reader` holds (a checkpoint of a timers
/// keyspace, see `timers.rs`: its entries by id), to `f`.
pub fn restore_timers(
    reader: &super::tables::TableReader,
    groups: &std::ops::Range<u32>,
    f: &mut dyn FnMut(KeyTimer) -> Result<(), String>,
) -> Result<(), String> {
    let (from, to) = timer_range(groups);
    for kv in reader.range(&from, Some(&to)) {
        let (entry, times) = kv?;
        let t = timer_of_entry(&entry, &times).ok_or_else(|| {
            format!(
                "a timer in a checkpoint's tables in {} does not decode",
                reader.dir().display()
            )
        })?;
        f(t)?;
    }
    Ok(())
}

impl Drop for EmbeddedTimers {
    fn drop(&mut self) {
        if let Err(e) = self.store.db.delete_keyspace(self.keyspace.clone()) {
            tracing::debug!("cannot drop a timer keyspace: {e}");
        }
    }
}

/// The timers as of [`KeyedTimers::freeze`]: a view of the store.
struct Frozen {
    snapshot: fjall::Snapshot,
    keyspace: fjall::Keyspace,
    dir: PathBuf,
    max_key_groups: u32,
    /// Every (domain, name) a timer was set under: a window's timers are point reads.
    names: Vec<(TimeDomain, Box<str>)>,
}

/// The timer of an entry by id (`kv`) of the store at `dir`.
fn decode_entry(kv: fjall::Guard, dir: &Path) -> Result<KeyTimer, String> {
    let corrupt = || {
        format!(
            "a timer in the state store at {} does not decode",
            dir.display()
        )
    };
    let (entry, times) = kv
        .into_inner()
        .map_err(|e| io_error("cannot read timers for a snapshot", dir, e))?;
    let id = entry.get(1..).ok_or_else(corrupt)?;
    let (at, output) = decode_times(&times).ok_or_else(corrupt)?;
    timer_at(id, at, output).ok_or_else(corrupt)
}

/// The timer of entry `entry` by id (`i` then its id) holding `times`, as a
/// checkpoint's table files hold it; `None` if it does not decode.
pub(crate) fn timer_of_entry(entry: &[u8], times: &[u8]) -> Option<KeyTimer> {
    let id = entry.strip_prefix(&[BY_ID])?;
    let (at, output) = decode_times(times)?;
    timer_at(id, at, output)
}

/// The first bytes of the entries by id of the timers of key groups `groups`: the
/// range a restore from table files reads.
pub(crate) fn by_id_range(groups: &std::ops::Range<u32>) -> (Vec<u8>, Vec<u8>) {
    let bound = |g: u32| {
        let mut b = vec![BY_ID];
        b.extend_from_slice(&g.to_be_bytes());
        b
    };
    (bound(groups.start), bound(groups.end))
}

/// The timer of id `id` (a timer's address: see `timer_id`), firing at `at` with
/// output timestamp `output`; `None` if the id does not decode.
fn timer_at(id: &[u8], at: Timestamp, output: Timestamp) -> Option<KeyTimer> {
    let (key, window, domain, name) = decode_id(id)?;
    Some(Timer {
        key: key.to_vec(),
        window,
        name: name.to_string(),
        domain,
        at,
        output,
    })
}

impl FrozenTimers for Frozen {
    fn all(self: Box<Self>, max_key_groups: u32) -> TimerStream {
        use fjall::Readable;
        // The store's order is the snapshot's; the entries are read as they are asked
        // for (a store's timers may be more than memory holds).
        debug_assert_eq!(max_key_groups, self.max_key_groups);
        let dir = self.dir;
        let entries = self.snapshot.prefix(&self.keyspace, [BY_ID]);
        Box::new(entries.map(move |kv| decode_entry(kv, &dir)))
    }
    fn window(&self, key: &[u8], window: &BoundedWindow) -> Result<Vec<KeyTimer>, String> {
        use fjall::Readable;
        let mut timers = Vec::new();
        for (domain, name) in &self.names {
            let id = timer_id(self.max_key_groups, key, window, name, *domain);
            let times = self
                .snapshot
                .get(&self.keyspace, by_id(&id))
                .map_err(|e| io_error("cannot read a timer for a snapshot", &self.dir, e))?;
            if let Some(times) = times {
                let (at, output) = decode_times(&times).ok_or_else(|| {
                    format!(
                        "a timer in the state store at {} does not decode",
                        self.dir.display()
                    )
                })?;
                timers.push(Timer {
                    key: key.to_vec(),
                    window: window.clone(),
                    name: name.to_string(),
                    domain: *domain,
                    at,
                    output,
                });
            }
        }
        Ok(timers)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Firing timers from the front of the queue starts each scan for the next past
    /// the ones fired (their tombstones stay in the store until a compaction).
    #[test]
    fn a_queue_popped_from_the_front_scans_some_hundreds_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let mut e = EmbeddedTimers::open(dir.path(), 16).unwrap();
        let timer = |k: u32, at: i64| Timer {
            key: k.to_be_bytes().to_vec(),
            window: BoundedWindow::Global,
            name: "t".into(),
            domain: TimeDomain::EventTime,
            at: Timestamp(at),
            output: Timestamp(at),
        };
        for k in 0..1_000 {
            e.set(timer(k, 5));
        }
        let mut last = None;
        for _ in 0..500 {
            let entry = e.queue[0].first().unwrap().unwrap();
            let t = e.pop_due(TimeDomain::EventTime, Timestamp(6)).unwrap();
            assert_eq!(
                EmbeddedTimers::queue_entry(
                    t.domain,
                    t.at,
                    &e.id(&t.key, &t.window, &t.name, t.domain)
                ),
                entry
            );
            assert!(last.as_ref().is_none_or(|l| *l < entry));
            last = Some(entry);
        }
        // Some hundreds of timers a scan of the store.
        assert!(e.queue[0].scans() <= 3, "{} scans", e.queue[0].scans());
        // A timer set before the ones left comes first.
        e.set(timer(0, 1));
        assert_eq!(
            e.pop_due(TimeDomain::EventTime, Timestamp(6)).unwrap().at,
            Timestamp(1)
        );
        let mut left = 0;
        while e.pop_due(TimeDomain::EventTime, Timestamp(6)).is_some() {
            left += 1;
        }
        assert_eq!(left, 500);
        assert!(e.is_empty());
        assert_eq!(e.earliest_output(), None);
        assert_eq!(e.next(TimeDomain::EventTime), None);
        e.flush().unwrap();
    }
}
