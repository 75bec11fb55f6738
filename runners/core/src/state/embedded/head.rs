//! The entries of a keyspace under a prefix read at their head ([`Head`]: the queues
//! of timers and of units' wakes), and times as bytes that sort as the times do.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::ops::Bound;
use tidewater::exec::TimeDomain;
use tidewater::Timestamp;

/// A timestamp as 8 bytes that sort as the timestamps do.
pub(super) fn sortable(t: Timestamp) -> [u8; 8] {
    (t.millis() as u64 ^ (1 << 63)).to_be_bytes()
}

pub(super) fn from_sortable(b: &[u8]) -> Option<Timestamp> {
    let v = u64::from_be_bytes(b.get(..8)?.try_into().ok()?);
    Some(Timestamp((v ^ (1 << 63)) as i64))
}

pub(super) fn domain_byte(d: TimeDomain) -> u8 {
    match d {
        TimeDomain::EventTime => 0,
        TimeDomain::ProcessingTime => 1,
    }
}

pub(super) fn domain_of(b: u8) -> Option<TimeDomain> {
    match b {
        0 => Some(TimeDomain::EventTime),
        1 => Some(TimeDomain::ProcessingTime),
        _ => None,
    }
}

/// Entries a scan of the head reads at once.
const SCAN: usize = 256;

/// How far a [`Head`] knows its entries.
#[derive(Clone, Debug, PartialEq)]
enum Frontier {
    /// Up to this entry, included.
    To(Vec<u8>),
    /// All of them.
    End,
}

/// The entries of a keyspace under a prefix, in order, read at their head: the first
/// ones are kept in memory, read some hundreds at a time, so that a queue popped from
/// the front (removing its first entry, then asking for the next) scans the store
/// once per some hundred entries rather than once per entry (each scan merges every
/// file and memtable, and passes the tombstones of the entries removed before it).
pub(super) struct Head {
    keyspace: fjall::Keyspace,
    prefix: Vec<u8>,
    /// Every live entry up to `frontier`.
    ahead: RefCell<BTreeSet<Vec<u8>>>,
    frontier: RefCell<Frontier>,
    /// Scans of the store so far.
    scans: std::cell::Cell<u64>,
    /// Each entry is inserted once between removes (see [`Head::written_once`]).
    written_once: bool,
}

impl Head {
    /// The head of the entries under `prefix` of `keyspace`, which holds none yet.
    pub(super) fn new(keyspace: fjall::Keyspace, prefix: Vec<u8>) -> Head {
        debug_assert!(prefix.last().is_some_and(|b| *b < u8::MAX));
        Head {
            keyspace,
            prefix,
            ahead: RefCell::new(BTreeSet::new()),
            frontier: RefCell::new(Frontier::End),
            scans: std::cell::Cell::new(0),
            written_once: false,
        }
    }

    /// The head of entries each inserted once between removes, removed by a single
    /// delete (fjall's `remove_weak`: compaction drops it with the entry it deletes
    /// rather than carrying it down to the last level).
    pub(super) fn written_once(mut self) -> Head {
        self.written_once = true;
        self
    }

    fn known(&self, entry: &[u8]) -> bool {
        match &*self.frontier.borrow() {
            Frontier::To(f) => entry <= f.as_slice(),
            Frontier::End => true,
        }
    }

    pub(super) fn insert(&self, entry: Vec<u8>, value: &[u8]) -> fjall::Result<()> {
        self.keyspace.insert(entry.as_slice(), value)?;
        if self.known(&entry) {
            let mut ahead = self.ahead.borrow_mut();
            ahead.insert(entry);
            // Entries set before the frontier stay in memory until the head reaches
            // them: past twice a scan's, the last ones are left to the next scan.
            if ahead.len() > 2 * SCAN {
                while ahead.len() > SCAN {
                    ahead.pop_last();
                }
                let last = ahead.last().expect("entries kept").clone();
                *self.frontier.borrow_mut() = Frontier::To(last);
            }
        }
        Ok(())
    }

    pub(super) fn remove(&self, entry: Vec<u8>) -> fjall::Result<()> {
        if self.written_once {
            self.keyspace.remove_weak(entry.as_slice())?;
        } else {
            self.keyspace.remove(entry.as_slice())?;
        }
        self.ahead.borrow_mut().remove(&entry);
        Ok(())
    }

    /// Scans of the store so far.
    #[cfg(test)]
    pub(super) fn scans(&self) -> u64 {
        self.scans.get()
    }

    /// The first entry.
    pub(super) fn first(&self) -> fjall::Result<Option<Vec<u8>>> {
        if let Some(f) = self.ahead.borrow().first() {
            return Ok(Some(f.clone()));
        }
        let start = match &*self.frontier.borrow() {
            Frontier::End => return Ok(None),
            Frontier::To(f) => Bound::Excluded(f.clone()),
        };
        // The entries after the prefix's: its last byte one higher.
        let mut end = self.prefix.clone();
        if let Some(b) = end.last_mut() {
            *b += 1;
        }
        self.scans.set(self.scans.get() + 1);
        let mut ahead = self.ahead.borrow_mut();
        for kv in self
            .keyspace
            .range((start, Bound::Excluded(end)))
            .take(SCAN)
        {
            ahead.insert(kv.key()?.to_vec());
        }
        *self.frontier.borrow_mut() = match ahead.last() {
            Some(last) if ahead.len() == SCAN => Frontier::To(last.clone()),
            _ => Frontier::End,
        };
        Ok(ahead.first().cloned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keyspace(dir: &std::path::Path) -> fjall::Keyspace {
        let db = fjall::Database::builder(dir)
            .temporary(true)
            .open()
            .unwrap();
        db.keyspace("k", fjall::KeyspaceCreateOptions::default)
            .unwrap()
    }

    fn entry(i: u32) -> Vec<u8> {
        let mut e = vec![b'q'];
        e.extend_from_slice(&i.to_be_bytes());
        e
    }

    #[test]
    fn a_queue_popped_from_the_front_scans_once_per_scans_worth() {
        let dir = tempfile::tempdir().unwrap();
        let ks = keyspace(dir.path());
        // Another prefix's entries around it are not the head's.
        ks.insert([b'p'], []).unwrap();
        ks.insert([b'r'], []).unwrap();
        let head = Head::new(ks, vec![b'q']);
        let n = 10 * SCAN as u32;
        for i in (0..n).rev() {
            head.insert(entry(i * 2), &[]).unwrap();
        }
        // Inserted in reverse: only the first ones stayed in memory.
        assert!(head.ahead.borrow().len() <= 2 * SCAN);
        let mut popped = 0;
        while let Some(first) = head.first().unwrap() {
            assert_eq!(first, entry(popped * 2), "in order");
            head.remove(first).unwrap();
            popped += 1;
            if popped == n / 2 {
                // One set before the frontier comes first.
                head.insert(entry(popped * 2 - 1), &[]).unwrap();
                assert_eq!(head.first().unwrap(), Some(entry(popped * 2 - 1)));
                head.remove(entry(popped * 2 - 1)).unwrap();
            }
        }
        assert_eq!(popped, n);
        let scans = head.scans();
        assert!(scans <= u64::from(n) / SCAN as u64 + 2, "{scans} scans");
        // Empty and known to be: no scan more.
        assert_eq!(head.first().unwrap(), None);
        assert_eq!(head.scans(), scans);
        head.insert(entry(5), &[]).unwrap();
        assert_eq!(head.first().unwrap(), Some(entry(5)));
    }
}
