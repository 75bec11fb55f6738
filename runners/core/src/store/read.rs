//! Reading a checkpoint to restore it without holding its key groups: every file is
//! read through once, checked against the manifest's length and checksum and every
//! part against its own, before anything is restored (a corrupt file makes the store
//! fall back to an older checkpoint); the parts that are not key groups (watermarks,
//! source positions, side data) are kept in memory, and each key group is left in the
//! files, where the task that owns it reads it when it restores: its part in the full
//! file, and each delta on it applied in turn ([`crate::delta`]). A restore holds one
//! key group at a time, not the state.

use super::{parse_part_file_name, FileEntry, Manifest, Store};
use crate::delta::apply_to_table;
use crate::snapshot::StoredGroups;
use crate::snapshot::{check_part, Part, PartInfo, Scope, Snapshot, SnapshotReader, Stored};
use std::collections::BTreeMap;
use std::io::Read;
use std::sync::Arc;
use tidewater::{Error, Result};

/// A part left in a file.
#[derive(Debug)]
struct Piece {
    /// The file's key in the store.
    file: Arc<str>,
    info: PartInfo,
}

/// A key group as one task's files hold it: its part (none if it is new since the
/// full file), then the deltas on it, oldest first.
type Chain = Vec<Piece>;

/// Each key group's chain in one task's files, by (transform, key group).
type Held = BTreeMap<(String, u32), Chain>;

/// The key groups of a checkpoint, left in its files.
#[derive(Debug)]
struct FileGroups {
    store: Store,
    epoch: u64,
    /// Transforms in the order first met.
    order: Vec<String>,
    /// Per transform (the plan's name) and key group, its chain in every file chain
    /// holding it (one, unless the checkpoint is corrupt).
    groups: BTreeMap<(String, u32), Vec<Chain>>,
}

impl StoredGroups for FileGroups {
    fn transforms(&self) -> Vec<String> {
        self.order.clone()
    }

    fn groups_of(&self, transform: &str) -> Vec<u32> {
        let t = transform.to_string();
        self.groups
            .range((t.clone(), 0)..=(t, u32::MAX))
            .map(|((_, g), _)| *g)
            .collect()
    }

    fn tables_dir(&self) -> Option<crate::state::tables::TableDir> {
        self.store.tables_dir()
    }

    fn read(&self, transform: &str, g: u32) -> Result<Vec<Vec<u8>>> {
        let Some(chains) = self.groups.get(&(transform.to_string(), g)) else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for chain in chains {
            let mut table: Option<Vec<u8>> = None;
            for piece in chain {
                let path = self.store.show(&piece.file);
                let in_file = |e: Error| match e {
                    Error::Checkpoint { message } => Error::Checkpoint {
                        message: format!(
                            "{path} (checkpoint {}): key group {g} of '{transform}': {message}",
                            self.epoch
                        ),
                    },
                    other => other,
                };
                let bytes =
                    self.store
                        .blobs
                        .read_range(&piece.file, piece.info.offset, piece.info.len)?;
                check_part(&piece.info, &bytes).map_err(in_file)?;
                table = match piece.info.scope {
                    Scope::KeyGroupDelta(_) => {
                        apply_to_table(table.as_deref(), &bytes).map_err(in_file)?
                    }
                    _ => Some(bytes),
                };
            }
            out.extend(table);
        }
        Ok(out)
    }
}

/// A reader that hashes and counts what passes, and keeps the error it failed with.
struct Hashed<R> {
    r: R,
    crc: crc32fast::Hasher,
    len: u64,
    failed: Option<std::io::Error>,
}

impl<R: Read> Read for Hashed<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.r.read(buf).inspect_err(|e| {
            if e.kind() != std::io::ErrorKind::Interrupted {
                self.failed = Some(std::io::Error::new(e.kind(), e.to_string()));
            }
        })?;
        self.crc.update(&buf[..n]);
        self.len += n as u64;
        Ok(n)
    }
}

/// What reading a file through gives: its header, and each part with its bytes
/// where kept.
type Scanned = (Snapshot, Vec<(PartInfo, Option<Vec<u8>>)>);

/// The table files the [`Scope::Files`] parts `bytes` name.
pub(super) fn table_names(bytes: &[u8]) -> Result<Vec<String>> {
    let keyspaces = crate::state::tables::decode_files_part(bytes)
        .map_err(|message| Error::Checkpoint { message })?;
    Ok(keyspaces
        .into_iter()
        .flat_map(|k| k.tables)
        .map(|t| t.name)
        .collect())
}

impl Store {
    /// Reads file `key` through: its length and CRC-32, its header, and the names of
    /// the table files its parts name (sorted, once each).
    pub(super) fn read_through(
        &self,
        key: &str,
        plan_hash: u64,
    ) -> Result<(u64, u32, Snapshot, Vec<String>)> {
        let Some(r) = self.blobs.open(key)? else {
            return Err(Error::Checkpoint {
                message: format!("cannot read {}: it is missing", self.show(key)),
            });
        };
        let mut hashed = Hashed {
            r,
            crc: crc32fast::Hasher::new(),
            len: 0,
            failed: None,
        };
        let read = (|| {
            let mut reader = SnapshotReader::new(&mut hashed, plan_hash)?;
            let mut tables = std::collections::BTreeSet::new();
            let files = |_: &str, scope: Scope| matches!(scope, Scope::Files(_));
            while let Some((_, bytes)) = reader.next_part(&files)? {
                if let Some(bytes) = bytes {
                    tables.extend(table_names(&bytes)?);
                }
            }
            Ok((reader.header().clone(), tables.into_iter().collect()))
        })();
        if let Some(e) = hashed.failed.take() {
            return Err(self.blobs.read_error(key, e));
        }
        let (header, tables) = read.map_err(|e: Error| match e {
            Error::Checkpoint { message } => Error::Checkpoint {
                message: format!("{}: {message}", self.show(key)),
            },
            other => other,
        })?;
        Ok((hashed.len, hashed.crc.finalize(), header, tables))
    }

    /// Checks every table file the [`Scope::Files`] parts among `parts` name (its
    /// length and checksum), as a restore reads them: a corrupt or missing one makes
    /// the checkpoint unusable.
    fn check_tables(&self, parts: &[Part], epoch: u64) -> Result<()> {
        let files: Vec<&Part> = parts
            .iter()
            .filter(|p| matches!(p.scope, Scope::Files(_)))
            .collect();
        if files.is_empty() {
            return Ok(());
        }
        let Some(dir) = self.tables_dir() else {
            return Err(Error::Checkpoint {
                message: format!(
                    "checkpoint {epoch} names table files, which only a local checkpoint directory holds"
                ),
            });
        };
        for p in files {
            let keyspaces = crate::state::tables::decode_files_part(&p.bytes)
                .map_err(|message| Error::Checkpoint { message })?;
            for t in keyspaces.iter().flat_map(|k| &k.tables) {
                crate::state::tables::check_table(dir.path(), t).map_err(|message| {
                    Error::Checkpoint {
                        message: format!("checkpoint {epoch}: {message}"),
                    }
                })?;
            }
        }
        Ok(())
    }

    /// Checkpoint `manifest` with its key groups left in its files, each file read
    /// through and checked against the manifest first; `name_of` gives the plan's
    /// name of a transform's key groups (`None`: not restored).
    pub(super) fn read_files(
        &self,
        manifest: &Manifest,
        name_of: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Snapshot> {
        let mut files = FileGroups {
            store: self.clone(),
            epoch: manifest.epoch,
            order: Vec::new(),
            groups: BTreeMap::new(),
        };
        let mut parts = Vec::new();
        for f in &manifest.files {
            let (held, others) = self.read_chain(manifest, f)?;
            parts.extend(others);
            for ((transform, g), chain) in held {
                let Some(name) = name_of(&transform) else {
                    continue;
                };
                if !files.order.contains(&name) {
                    files.order.push(name.clone());
                }
                files.groups.entry((name, g)).or_default().push(chain);
            }
        }
        self.check_tables(&parts, manifest.epoch)?;
        Ok(Snapshot {
            plan_hash: manifest.plan_hash,
            max_key_groups: manifest.max_key_groups,
            epoch: manifest.epoch,
            base: Vec::new(),
            parts,
            stored: Stored::new(Arc::new(files)),
        })
    }

    /// One task's files (a full one, then the deltas since): where each key group's
    /// chain is, and the other parts of the last file (a delta replaces them).
    fn read_chain(&self, manifest: &Manifest, f: &FileEntry) -> Result<(Held, Vec<Part>)> {
        let epoch = manifest.epoch;
        let names: Vec<(&str, u64, u32)> = f.files().collect();
        let mut held = Held::new();
        let mut others = Vec::new();
        for (i, &(name, len, crc)) in names.iter().enumerate() {
            // A manifest is read from disk: it may name only a part file under
            // `parts/` (not `../x` or `/dev/zero`), whose length it states.
            if parse_part_file_name(name).is_none() {
                return Err(Error::Checkpoint {
                    message: format!(
                        "checkpoint {epoch}'s manifest names '{name}', which is not a part file's name"
                    ),
                });
            }
            let key: Arc<str> = format!("parts/{name}").into();
            let path = self.show(&key);
            let last = i + 1 == names.len();
            let keep = |_: &str, scope: Scope| {
                last && !matches!(scope, Scope::KeyGroup(_) | Scope::KeyGroupDelta(_))
            };
            let (header, scanned) = self.scan(&key, len, crc, manifest, &keep)?;
            if header.base[..] != f.base[..i] {
                return Err(Error::Checkpoint {
                    message: format!(
                        "{path} does not build on the files checkpoint {epoch} names before it"
                    ),
                });
            }
            for (info, bytes) in scanned {
                let piece = |info| Piece {
                    file: key.clone(),
                    info,
                };
                match info.scope {
                    Scope::KeyGroup(g) => {
                        let k = (info.transform.clone(), g);
                        if i == 0 && held.contains_key(&k) {
                            return Err(Error::Checkpoint {
                                message: format!(
                                    "{path}: key group {g} of '{}' is in a snapshot twice",
                                    k.0
                                ),
                            });
                        }
                        // A key group a delta writes whole replaces the chain.
                        held.insert(k, vec![piece(info)]);
                    }
                    Scope::KeyGroupDelta(g) if i == 0 => {
                        return Err(Error::Checkpoint {
                            message: format!(
                            "{path}: a delta of key group {g} of '{}' has no snapshot to apply to",
                            info.transform
                        ),
                        })
                    }
                    Scope::KeyGroupDelta(g) => held
                        .entry((info.transform.clone(), g))
                        .or_default()
                        .push(piece(info)),
                    scope => others.extend(bytes.map(|bytes| Part {
                        transform: info.transform,
                        scope,
                        bytes,
                    })),
                }
            }
        }
        Ok((held, others))
    }

    /// Reads file `key` through: its header and parts (the bytes of those `keep`
    /// takes), checked against the length and checksum `manifest` lists. A file that
    /// does not match them says so, whatever else its first wrong byte makes of it.
    fn scan(
        &self,
        key: &str,
        len: u64,
        crc: u32,
        manifest: &Manifest,
        keep: &dyn Fn(&str, Scope) -> bool,
    ) -> Result<Scanned> {
        let path = self.show(key);
        let Some(r) = self.blobs.open(key)? else {
            return Err(Error::Checkpoint {
                message: format!("cannot read {path}: it is missing"),
            });
        };
        // No more than one byte past its stated length is read.
        let mut hashed = Hashed {
            r: r.take(len.saturating_add(1)),
            crc: crc32fast::Hasher::new(),
            len: 0,
            failed: None,
        };
        let read = (|| {
            let mut reader = SnapshotReader::new(&mut hashed, manifest.plan_hash)?;
            let mut parts = Vec::new();
            while let Some(part) = reader.next_part(keep)? {
                parts.push(part);
            }
            Ok((reader.header().clone(), parts))
        })();
        if read.is_err() && hashed.failed.is_none() {
            let _ = std::io::copy(&mut hashed, &mut std::io::sink());
        }
        if let Some(e) = hashed.failed.take() {
            return Err(self.blobs.read_error(key, e));
        }
        if hashed.len != len || hashed.crc.clone().finalize() != crc {
            return Err(Error::Checkpoint {
                message: format!(
                    "{path} does not match its checksum in checkpoint {}",
                    manifest.epoch
                ),
            });
        }
        read.map_err(|e: Error| match e {
            Error::Checkpoint { message } => Error::Checkpoint {
                message: format!("{path}: {message}"),
            },
            other => other,
        })
    }
}
