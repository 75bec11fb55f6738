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
    /// Where each group's key lies in the arena, by group number.
    spans: Vec<(u32, u32)>,
}

/// A table entry carries the hash and where the key lies, so a probe compares hashes
/// without leaving the table and reads the arena only on a likely match.
#[derive(Clone, Copy)]
struct Slot {
    hash: u64,
    group: u32,
    start: u32,
    len: u32,
}

fn hash_bytes(bytes: &[u8]) -> u64 {
    let mut h = rustc_hash::FxHasher::default();
    h.write(bytes);
    h.finish()
}

impl KeyIndex {
    /// The group number of `key`, and whether it is new.
    pub fn find_or_insert(&mut self, key: &[u8]) -> (usize, bool) {
        let hash = hash_bytes(key);
        let KeyIndex {
            table,
            arena,
            spans,
        } = self;
        let eq = |s: &Slot| {
            s.hash == hash
                && s.len as usize == key.len()
                && &arena[s.start as usize..s.start as usize + key.len()] == key
        };
        match table.entry(hash, eq, |s| s.hash) {
            Entry::Occupied(e) => (e.get().group as usize, false),
            Entry::Vacant(e) => {
                let g = spans.len();
                // Tables are flushed long before 4 GiB of keys or 4 billion groups.
                let slot = Slot {
                    hash,
                    group: g as u32,
                    start: arena.len() as u32,
                    len: key.len() as u32,
                };
                assert!(
                    arena.len() + key.len() <= u32::MAX as usize && g < u32::MAX as usize,
                    "grouping table overflow"
                );
                arena.extend_from_slice(key);
                e.insert(slot);
                spans.push((slot.start, slot.len));
                (g, true)
            }
        }
    }

    /// Number of groups.
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    /// No groups.
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
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
    }
}
