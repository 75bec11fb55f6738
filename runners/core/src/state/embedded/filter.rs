//! Which entries a keyspace may hold, in memory: a Bloom filter that grows in
//! generations ([`Filter`]). A "no" is certain, so a lookup of an entry the store never
//! had (a reducer's new window, when windows are in the store) reads nothing; a
//! "maybe" is wrong for under 1% of absent entries per generation.
//!
//! 10 bits per entry of a generation's capacity, 7 set per entry: some 1.25 bytes an
//! entry, 2.5 at most once the generations are counted (each twice the last). When the
//! newest generation holds its capacity, a new one takes the next entries. A Bloom
//! filter cannot forget an entry: the caller counts entries removed and, once they
//! outnumber those left, builds the filter anew from the entries left
//! ([`Filter::stale`], [`Filter::for_live`]).

/// Bits per entry of a generation's capacity.
const BITS_PER_ENTRY: usize = 10;
/// Bits set per entry.
const PROBES: u64 = 7;
/// The first generation's capacity.
const FIRST_CAPACITY: usize = 1 << 14;

/// Spreads a hash's bits (splitmix64's finaliser): the probes use all of them.
pub(super) fn mix(mut h: u64) -> u64 {
    h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

/// One generation's bits.
struct Generation {
    bits: Vec<u64>,
    /// Entries added.
    added: usize,
    capacity: usize,
}

impl Generation {
    fn new(capacity: usize) -> Generation {
        let bits = (capacity * BITS_PER_ENTRY).next_power_of_two().max(64);
        Generation {
            bits: vec![0; bits / 64],
            added: 0,
            capacity,
        }
    }

    /// The bits of `hash` (double hashing over the two halves of the hash).
    fn probes(&self, hash: u64) -> impl Iterator<Item = usize> {
        let mask = (self.bits.len() * 64 - 1) as u64;
        let (h1, h2) = (hash, hash.rotate_left(32) | 1);
        (0..PROBES).map(move |i| (h1.wrapping_add(i.wrapping_mul(h2)) & mask) as usize)
    }

    fn insert(&mut self, hash: u64) {
        for b in self.probes(hash) {
            self.bits[b / 64] |= 1 << (b % 64);
        }
        self.added += 1;
    }

    fn contains(&self, hash: u64) -> bool {
        self.probes(hash)
            .all(|b| self.bits[b / 64] & (1 << (b % 64)) != 0)
    }
}

/// A Bloom filter in generations; see the module's documentation.
pub(super) struct Filter {
    generations: Vec<Generation>,
    /// Entries removed since it was built: still "maybe".
    removed: usize,
}

impl Default for Filter {
    fn default() -> Self {
        Filter::with_capacity(FIRST_CAPACITY)
    }
}

impl Filter {
    fn with_capacity(capacity: usize) -> Filter {
        Filter {
            generations: vec![Generation::new(capacity.max(FIRST_CAPACITY))],
            removed: 0,
        }
    }

    /// Adds an entry of hash `hash` (see [`mix`]).
    pub(super) fn insert(&mut self, hash: u64) {
        let last = self.generations.last().expect("a generation");
        if last.added >= last.capacity {
            let capacity = last.capacity * 2;
            self.generations.push(Generation::new(capacity));
        }
        self.generations
            .last_mut()
            .expect("a generation")
            .insert(hash);
    }

    /// Counts an entry removed (it stays "maybe" until the filter is built anew).
    pub(super) fn remove(&mut self) {
        self.removed += 1;
    }

    /// Whether an entry of hash `hash` may have been added and not removed.
    pub(super) fn may_contain(&self, hash: u64) -> bool {
        self.generations.iter().any(|g| g.contains(hash))
    }

    /// Whether entries removed outnumber the `live` ones left (and are some thousands):
    /// time to build it anew.
    pub(super) fn stale(&self, live: usize) -> bool {
        self.removed > live.max(FIRST_CAPACITY)
    }

    /// An empty filter for `live` entries to be added (and as many again).
    pub(super) fn for_live(live: usize) -> Filter {
        Filter::with_capacity(live * 2)
    }

    /// The bytes its bits take.
    #[cfg(test)]
    fn bytes(&self) -> usize {
        self.generations.iter().map(|g| g.bits.len() * 8).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(i: u64) -> u64 {
        mix(i.wrapping_mul(0x9e37_79b9_7f4a_7c15))
    }

    #[test]
    fn entries_added_are_found_and_few_others_are() {
        let mut f = Filter::default();
        let n = 1_000_000u64;
        for i in 0..n {
            f.insert(h(i));
        }
        assert!(f.generations.len() > 1, "the filter grew");
        assert!((0..n).all(|i| f.may_contain(h(i))), "no false no");
        let wrong = (n..2 * n).filter(|i| f.may_contain(h(*i))).count();
        // Under 1% a generation; most of the filter is in the last two.
        assert!(wrong < (n as usize) / 50, "{wrong} false maybes of {n}");
        assert!(f.bytes() <= n as usize * 5 / 2, "{} bytes", f.bytes());
    }

    #[test]
    fn a_filter_built_anew_forgets_the_removed_entries() {
        let mut f = Filter::default();
        let n = 100_000u64;
        for i in 0..n {
            f.insert(h(i));
        }
        for _ in 0..n - 1_000 {
            f.remove();
        }
        assert!(f.stale(1_000));
        assert!(!f.stale(n as usize));
        let mut f = Filter::for_live(1_000);
        for i in 0..1_000 {
            f.insert(h(i));
        }
        assert!((0..1_000).all(|i| f.may_contain(h(i))), "no false no");
        let wrong = (1_000..n).filter(|i| f.may_contain(h(*i))).count();
        assert!(
            wrong < (n as usize) / 100,
            "{wrong} removed entries still maybe"
        );
        assert!(!f.stale(1_000));
    }
}
