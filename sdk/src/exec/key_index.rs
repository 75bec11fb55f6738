use hashbrown::hash_table::{Entry, HashTable};
use std::hash::Hasher;

/// Numbers groups by the encoding of their (window, key), as GroupByKey and Combine
/// group. The encodings live back to back in one arena and the hash table holds only
/// group numbers, so a lookup touches little memory: on the hot path of a keyed
/// aggregation that is most of the cost.
///
/// ```
/// let mut index = tidewater::exec::KeyIndex::default();
/// assert_eq!(index.find_or_insert(b"a"), (0, true));
/// assert_eq!(index.find_or_insert(b"b"), (1, true));
/// assert_eq!(index.find_or_insert(b"a"), (0, false));
/// ```
#[derive(Default)]
pub struct KeyIndex {
    table: HashTable<Slot>,
    arena: Vec<u8>,
    /// Where each group's key lies in the arena, by group number ([`FREE`] once the
    /// group was removed).
    spans: Vec<(u32, u32)>,
    /// Numbers of removed groups, reused first.
    free: Vec<u32>,
    /// Arena bytes of removed groups, reclaimed by compaction.
    garbage: usize,
}

/// The span of a removed group.
const FREE: (u32, u32) = (0, u32::MAX);

/// A table entry carries 32 bits of the hash and where the key lies, so a probe
/// compares hashes without leaving the table and reads the arena only on a likely
/// match; 16 bytes, so that more of a large table stays in cache (a growing table
/// hashes its keys again from the arena).
#[derive(Clone, Copy)]
struct Slot {
    tag: u32,
    group: u32,
    start: u32,
    len: u32,
}

/// The 32 bits of `hash` a slot keeps: the low ones (hashbrown takes the bucket from
/// the low bits and its control byte from the top seven).
fn tag(hash: u64) -> u32 {
    hash as u32
}

fn hash_bytes(bytes: &[u8]) -> u64 {
    let mut h = rustc_hash::FxHasher::default();
    h.write(bytes);
    h.finish()
}

impl KeyIndex {
    /// The hash [`KeyIndex::find_or_insert_hashed`] takes for `key`.
    pub fn hash(key: &[u8]) -> u64 {
        hash_bytes(key)
    }

    /// The group number of `key`, and whether it is new.
    pub fn find_or_insert(&mut self, key: &[u8]) -> (usize, bool) {
        self.find_or_insert_hashed(hash_bytes(key), key)
    }

    /// [`KeyIndex::find_or_insert`] of `key`, whose [`KeyIndex::hash`] is `hash`.
    pub fn find_or_insert_hashed(&mut self, hash: u64, key: &[u8]) -> (usize, bool) {
        debug_assert_eq!(hash, hash_bytes(key), "the hash of another key");
        let KeyIndex {
            table,
            arena,
            spans,
            free,
            ..
        } = self;
        let t = tag(hash);
        let eq = |s: &Slot| {
            s.tag == t
                && s.len as usize == key.len()
                && super::keys::bytes_eq(
                    &arena[s.start as usize..s.start as usize + key.len()],
                    key,
                )
        };
        let rehash = |s: &Slot| hash_bytes(&arena[s.start as usize..(s.start + s.len) as usize]);
        match table.entry(hash, eq, rehash) {
            Entry::Occupied(e) => (e.get().group as usize, false),
            Entry::Vacant(e) => {
                let g = free.pop().map_or(spans.len(), |g| g as usize);
                // Tables are flushed, and removed keys reclaimed, long before 4 GiB of keys or
                // 4 billion live groups.
                let slot = Slot {
                    tag: t,
                    group: g as u32,
                    start: arena.len() as u32,
                    len: key.len() as u32,
                };
                assert!(
                    arena.len() + key.len() <= u32::MAX as usize && g < u32::MAX as usize,
                    "key index overflow: 4 GiB of live keys or 4 billion live groups"
                );
                arena.extend_from_slice(key);
                e.insert(slot);
                if g == spans.len() {
                    spans.push((slot.start, slot.len));
                } else {
                    spans[g] = (slot.start, slot.len);
                }
                (g, true)
            }
        }
    }

    /// Number of groups.
    pub fn len(&self) -> usize {
        self.spans.len() - self.free.len()
    }

    /// No groups.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Forgets group `group`: its key is no longer found, and its number is given to
    /// the next new key. The arena is compacted once most of it is garbage, so that an
    /// index of a long run holds only the keys still alive.
    ///
    /// ```
    /// let mut index = tidewater::exec::KeyIndex::default();
    /// let (a, _) = index.find_or_insert(b"a");
    /// index.find_or_insert(b"b");
    /// index.remove(a);
    /// assert_eq!(index.len(), 1);
    /// assert_eq!(index.find_or_insert(b"c"), (a, true));
    /// assert_eq!(index.find_or_insert(b"b"), (1, false));
    /// ```
    pub fn remove(&mut self, group: usize) {
        let (start, len) = self.spans[group];
        if (start, len) == FREE {
            return;
        }
        let key = &self.arena[start as usize..(start + len) as usize];
        let hash = hash_bytes(key);
        if let Ok(e) = self.table.find_entry(hash, |s| s.group as usize == group) {
            e.remove();
        }
        self.spans[group] = FREE;
        self.free.push(group as u32);
        self.garbage += len as usize;
        if self.garbage > 4096 && self.garbage * 2 > self.arena.len() {
            self.compact();
        }
    }

    /// Rewrites the arena with the live keys only.
    fn compact(&mut self) {
        let mut arena = Vec::with_capacity(self.arena.len() - self.garbage);
        for span in &mut self.spans {
            if *span == FREE {
                continue;
            }
            let (start, len) = *span;
            let new_start = arena.len() as u32;
            arena.extend_from_slice(&self.arena[start as usize..(start + len) as usize]);
            *span = (new_start, len);
        }
        for slot in self.table.iter_mut() {
            slot.start = self.spans[slot.group as usize].0;
        }
        self.arena = arena;
        self.garbage = 0;
    }

    /// The bytes of group `group`.
    ///
    /// ```
    /// let mut index = tidewater::exec::KeyIndex::default();
    /// let (g, _) = index.find_or_insert(b"key");
    /// assert_eq!(index.key(g), b"key");
    /// ```
    pub fn key(&self, group: usize) -> &[u8] {
        let (start, len) = self.spans[group];
        &self.arena[start as usize..(start + len) as usize]
    }

    /// Forgets every group.
    pub fn clear(&mut self) {
        self.table.clear();
        self.arena.clear();
        self.spans.clear();
        self.free.clear();
        self.garbage = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::KeyIndex;

    #[test]
    fn a_long_run_of_short_lived_keys_stays_small() {
        let mut index = KeyIndex::default();
        let mut live = std::collections::VecDeque::new();
        for i in 0..200_000u64 {
            let key = i.to_le_bytes();
            let (g, new) = index.find_or_insert(&key);
            assert!(new);
            live.push_back((g, key));
            if live.len() > 100 {
                let (g, key) = live.pop_front().unwrap();
                index.remove(g);
                let (again, new) = index.find_or_insert(&key);
                assert!(new, "a removed key is new again");
                index.remove(again);
            }
        }
        assert_eq!(index.len(), 100);
        assert!(
            index.spans.len() <= 102,
            "numbers are reused: {}",
            index.spans.len()
        );
        assert!(
            index.arena.len() <= 2 * 4096 + 8 * 200,
            "arena: {}",
            index.arena.len()
        );
        for (g, key) in &live {
            assert_eq!(index.find_or_insert(key), (*g, false));
            assert_eq!(index.key(*g), key);
        }
    }
}
