//! Key group parts a restored snapshot leaves in the files they were read from, read
//! one at a time when the task owning a key group restores it: a state larger than
//! memory is restored within it. The store checks every file whole before a run
//! starts (`tidewater_runners_core::store`); a part is checked again when read.

use super::{Part, Scope, Snapshot};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use tidewater::Result;

/// Key group parts held elsewhere than in memory.
pub trait StoredGroups: Send + Sync + std::fmt::Debug {
    /// The transforms with key groups held, in the order they were first met.
    fn transforms(&self) -> Vec<String>;

    /// The key groups of `transform` held, ascending.
    fn groups_of(&self, transform: &str) -> Vec<u32>;

    /// Key group `g` of `transform`, read and brought up to date (the deltas on it
    /// applied): once for every file of the checkpoint holding it (once, unless
    /// the checkpoint is corrupt); none if deltas emptied it.
    fn read(&self, transform: &str, g: u32) -> Result<Vec<Vec<u8>>>;

    /// Where the table files its [`Scope::Files`] parts name are, if anywhere.
    fn tables_dir(&self) -> Option<crate::state::tables::TableDir> {
        None
    }
}

/// A snapshot's stored key groups, if any.
#[derive(Clone, Default)]
pub struct Stored(Option<Arc<dyn StoredGroups>>);

impl Stored {
    /// Key groups held by `groups`.
    pub fn new(groups: Arc<dyn StoredGroups>) -> Self {
        Stored(Some(groups))
    }

    /// Where the table files of the snapshot's [`Scope::Files`] parts are: the
    /// directory of tables of the checkpoint it was read from.
    pub fn tables_dir(&self) -> Option<crate::state::tables::TableDir> {
        self.0.as_ref().and_then(|s| s.tables_dir())
    }

    /// Whether no key group is held elsewhere.
    pub fn is_empty(&self) -> bool {
        self.0.as_ref().is_none_or(|s| s.transforms().is_empty())
    }

    fn groups_of(&self, transform: &str) -> Vec<u32> {
        self.0
            .as_ref()
            .map_or(Vec::new(), |s| s.groups_of(transform))
    }
}

impl std::fmt::Debug for Stored {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            None => f.write_str("Stored(none)"),
            Some(s) => s.fmt(f),
        }
    }
}

/// The same stored groups (not the same bytes: they are compared where they are
/// read).
impl PartialEq for Stored {
    fn eq(&self, other: &Self) -> bool {
        match (&self.0, &other.0) {
            (None, None) => true,
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

impl Eq for Stored {}

impl Snapshot {
    /// Hands `f` every part of `transform` whose scope `want` takes, by scope (key
    /// groups ascending first; several parts of one scope in their order), the key
    /// groups held elsewhere read one at a time, so that only one is in memory.
    pub fn for_each_part_of(
        &self,
        transform: &str,
        want: &dyn Fn(Scope) -> bool,
        f: &mut dyn FnMut(Scope, &[u8]) -> Result<()>,
    ) -> Result<()> {
        let memory = self.parts_of(transform);
        let stored: BTreeSet<u32> = self
            .stored
            .groups_of(transform)
            .into_iter()
            .filter(|&g| want(Scope::KeyGroup(g)))
            .collect();
        let mut scopes: BTreeSet<Scope> = memory.keys().copied().filter(|&s| want(s)).collect();
        scopes.extend(stored.iter().map(|&g| Scope::KeyGroup(g)));
        for scope in scopes {
            for bytes in memory.get(&scope).into_iter().flatten() {
                f(scope, bytes)?;
            }
            if let (Scope::KeyGroup(g), Some(held)) = (scope, &self.stored.0) {
                if stored.contains(&g) {
                    for bytes in held.read(transform, g)? {
                        f(scope, &bytes)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// This snapshot with every part in memory: per transform (those with stored key
    /// groups first, each in the order first met), its key groups ascending, then its other parts in their order. For
    /// tools and tests; a restore reads the key groups one at a time
    /// ([`Snapshot::for_each_part_of`]).
    pub fn materialized(&self) -> Result<Snapshot> {
        let mut order: Vec<String> = Vec::new();
        let stored = self
            .stored
            .0
            .as_ref()
            .map_or(Vec::new(), |s| s.transforms());
        for t in stored
            .into_iter()
            .chain(self.parts.iter().map(|p| p.transform.clone()))
        {
            if !order.contains(&t) {
                order.push(t);
            }
        }
        let mut parts = Vec::new();
        for t in order {
            let mut others = Vec::new();
            let mut groups: BTreeMap<u32, Vec<Vec<u8>>> = BTreeMap::new();
            for p in self.parts.iter().filter(|p| p.transform == t) {
                match p.scope {
                    Scope::KeyGroup(g) => groups.entry(g).or_default().push(p.bytes.clone()),
                    _ => others.push(p.clone()),
                }
            }
            if let Some(held) = &self.stored.0 {
                for g in held.groups_of(&t) {
                    groups.entry(g).or_default().extend(held.read(&t, g)?);
                }
            }
            for (g, all) in groups {
                parts.extend(all.into_iter().map(|bytes| Part {
                    transform: t.clone(),
                    scope: Scope::KeyGroup(g),
                    bytes,
                }));
            }
            parts.extend(others);
        }
        Ok(Snapshot {
            parts,
            stored: Stored::default(),
            ..self.clone()
        })
    }
}
