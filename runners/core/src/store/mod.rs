//! The checkpoint store: snapshot files of every task on every worker, and a manifest
//! per complete checkpoint.
//!
//! Layout of a checkpoint directory:
//!
//! ```text
//! DIR/parts/n{node}-w{worker}-{first}-{last}.snap   a task's parts, in core's snapshot format
//! DIR/tables/{store}-{keyspace}-{table}.table        the embedded store's table files a
//!                                                    task's `Scope::Files` parts name
//! DIR/checkpoint-{epoch}.manifest                    a complete checkpoint (JSON)
//! DIR/offsets/b{batch}-s{source}-w{worker}.offsets   a micro-batch's source ranges
//! ```
//!
//! A task that closes epochs `first..=last` at once (nothing reached it in between, so
//! its state is the same for all of them) writes one file for the range. A file is a
//! full snapshot of the task or a delta over the task's previous file (see
//! `tidewater_runners_core::delta`); a delta's header names the files it builds on,
//! a full one and the deltas since, with their lengths and CRC-32s. When the
//! durable probe passes epoch `e`, every task on every worker has written a file whose
//! range holds `e`; the first worker then writes the manifest of `e`, listing those
//! files (and the files each builds on) with their lengths and CRC-32s, atomically (a
//! temporary file renamed into place, then the directory synced). Only a manifest makes
//! a checkpoint complete. The last [`KEEP`] manifests are kept, with the files they
//! name; and, so that a corrupt full file still leaves a checkpoint to fall back to,
//! the newest older one that builds on none of the full files the newest one does.
//!
//! A run resumed from checkpoint `c` starts at epoch `c + 1`: each worker first
//! removes its files that begin there or later, left by a run that stopped before
//! they became part of a checkpoint, so that no file of another run is taken for one
//! of this run's.
//!
//! The micro-batch runner fixes every batch's source ranges before it runs the batch:
//! each worker's source task writes them as one file per batch (the write-ahead offset
//! log, as Spark's `offsets/` directory), synced, with a CRC-32 of its contents; they
//! are kept as long as the checkpoints before them.
//!
//! Recovery reads the newest manifest whose files are all present and match their
//! checksums, and applies each delta to the files it builds on; a corrupt or missing
//! file makes it fall back to the previous one, and says so.
//!
//! A manifest records the plan's stateful parts by id (`tidewater_runners_core::compat`),
//! so that a changed pipeline restores a checkpoint whose state it can read: parts
//! matched by id, renamed to the plan's transform names, and the state of parts gone
//! from the plan dropped only when the user allows it. A checkpoint the plan cannot
//! restore is refused, never fallen back from: an older one would not restore either.

use crate::compat::{Admitted, PlanIdentity, StateId};
use crate::snapshot::{BaseRef, Snapshot};
#[cfg(test)]
use crate::source_driver::ReadRange;
use crate::state::tables::TableDir;
use blobs::Blobs;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeSet, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use tidewater::{Error, Result};

/// How many complete checkpoints are kept.
pub const KEEP: usize = 3;

/// A complete checkpoint.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// The epoch it completes.
    pub epoch: u64,
    /// The plan's hash.
    pub plan_hash: u64,
    /// The plan's stateful parts: what a changed plan restores by (absent in
    /// checkpoints written before they were recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<Vec<StateId>>,
    /// The number of key groups.
    pub max_key_groups: u32,
    /// How many workers wrote it.
    pub workers: usize,
    /// Every file, with its length and CRC-32.
    pub files: Vec<FileEntry>,
    /// The job's last checkpoint: its state when every task had finished (a bounded
    /// job's end, or a stop with a savepoint).
    #[serde(default)]
    pub last: bool,
}

/// One file of a checkpoint.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileEntry {
    /// Its name under `parts/`.
    pub name: String,
    /// Its length in bytes.
    pub len: u64,
    /// CRC-32 of its bytes.
    pub crc: u32,
    /// For a delta, the files it builds on (under `parts/`), oldest (a full one)
    /// first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub base: Vec<BaseRef>,
    /// The table files (under `tables/`) its [`Scope::Files`] parts name: the embedded
    /// store's own files, shared between checkpoints and removed once no kept
    /// checkpoint names them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tables: Vec<String>,
}

impl FileEntry {
    /// The full file it is or builds on.
    fn full(&self) -> &str {
        self.base.first().map_or(&self.name, |b| &b.name)
    }

    /// Every file it needs, the files it builds on first.
    fn files(&self) -> impl Iterator<Item = (&str, u64, u32)> {
        self.base
            .iter()
            .map(|b| (b.name.as_str(), b.len, b.crc))
            .chain(std::iter::once((self.name.as_str(), self.len, self.crc)))
    }
}

/// A restored checkpoint: every part of every file, merged.
#[derive(Clone, Debug)]
pub struct Restored {
    /// The checkpoint's manifest.
    pub manifest: Manifest,
    /// All parts (its epoch is the checkpoint's).
    pub snapshot: Snapshot,
    /// What was skipped on the way (corrupt newer checkpoints), for the user.
    pub notes: Vec<String>,
}

/// The directory of table files of the checkpoint store in `dir` (`DIR/tables`, see
/// [`crate::state::tables`]): a local directory's only.
pub fn tables_dir(dir: &Path) -> Option<TableDir> {
    (!is_object_store(dir)).then(|| TableDir(dir.join("tables")))
}

/// The first epoch a run writes: the one after the checkpoint `restored` from (0 for a
/// run from scratch).
pub fn start_epoch(restored: Option<&Restored>) -> u64 {
    restored.map_or(0, |r| r.manifest.epoch.saturating_add(1))
}

/// A checkpoint directory: local, or a prefix in an object store (see [`blobs`]).
#[derive(Clone, Debug)]
pub struct Store {
    dir: PathBuf,
    blobs: Arc<dyn Blobs>,
    /// The part files whose length and checksum the manifests written here listed: a
    /// file's contents never change under its name within a run, and on an object
    /// store each read is a download.
    checked: Arc<Mutex<HashMap<String, FileEntry>>>,
}

pub use blobs::is_object_store;

fn io_error(what: &str, path: &Path, e: std::io::Error) -> Error {
    Error::Checkpoint {
        message: format!("{what} {}: {e}", path.display()),
    }
}

/// The name of a task's file for epochs `first..=last`.
pub fn part_file_name(node: usize, worker: usize, first: u64, last: u64) -> String {
    format!("n{node}-w{worker}-{first}-{last}.snap")
}

/// What a part file's name says: node, worker, first and last epoch.
type PartId = (usize, usize, u64, u64);

fn parse_part_file_name(name: &str) -> Option<PartId> {
    let rest = name.strip_prefix('n')?.strip_suffix(".snap")?;
    let mut it = rest.split('-');
    let node = it.next()?.parse().ok()?;
    let worker = it.next()?.strip_prefix('w')?.parse().ok()?;
    let first = it.next()?.parse().ok()?;
    let last = it.next()?.parse().ok()?;
    it.next().is_none().then_some((node, worker, first, last))
}

/// The largest manifest read (64 MiB: a manifest lists one line per file).
const MAX_MANIFEST: u64 = 64 << 20;

fn manifest_name(epoch: u64) -> String {
    format!("checkpoint-{epoch:020}.manifest")
}

/// Writes `bytes` to the local file `path` atomically and durably: a temporary file,
/// synced, renamed into place, then the directory synced.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let tmp = dir.join(format!(
        ".{}.tmp",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("file")
    ));
    std::fs::File::create(&tmp)
        .and_then(|mut f| f.write_all(bytes).and_then(|()| f.sync_all()))
        .map_err(|e| io_error("cannot write", &tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| io_error("cannot rename into", path, e))?;
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

impl Store {
    /// The store in `dir` (a local directory, created if missing, or an object store's
    /// URL: see [`blobs`]).
    pub fn open(dir: &Path) -> Result<Self> {
        Ok(Store {
            dir: dir.to_path_buf(),
            blobs: blobs::open(dir)?,
            checked: Arc::default(),
        })
    }

    /// The store in `dir` if it holds one (files a checkpoint or savepoint wrote);
    /// nothing is created.
    pub fn existing(dir: &Path) -> Result<Option<Self>> {
        if !is_object_store(dir) && !dir.join("parts").is_dir() {
            return Ok(None);
        }
        let store = Store::open(dir)?;
        let written = !store.blobs.list("parts")?.is_empty() || !store.manifests()?.is_empty();
        Ok((written || !is_object_store(dir)).then_some(store))
    }

    /// Removes the store in `dir` (a savepoint left unfinished), if there is one.
    pub fn remove_all(dir: &Path) -> Result<()> {
        if !is_object_store(dir) {
            return match std::fs::remove_dir_all(dir) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(Error::Io {
                    what: "cannot remove".into(),
                    path: dir.to_path_buf(),
                    cause: e,
                }),
                _ => Ok(()),
            };
        }
        let store = Store::open(dir)?;
        for sub in ["parts", "offsets", "tables", ""] {
            for name in store.blobs.list(sub)? {
                let key = if sub.is_empty() {
                    name
                } else {
                    format!("{sub}/{name}")
                };
                store.blobs.delete(&key)?;
            }
        }
        Ok(())
    }

    /// Where the embedded store's table files go (`DIR/tables`, see
    /// [`crate::state::tables`]): in a local directory only.
    pub fn tables_dir(&self) -> Option<TableDir> {
        tables_dir(&self.dir)
    }

    /// The directory, or the object store's URL, as given.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// File `key` of the store as the user names it.
    fn show(&self, key: &str) -> String {
        self.blobs.show(key)
    }

    /// File `key`'s bytes, which must be there: a missing one is a checkpoint error.
    fn read_file(&self, key: &str, limit: u64) -> Result<Vec<u8>> {
        self.blobs
            .get(key, limit)?
            .ok_or_else(|| Error::Checkpoint {
                message: format!("cannot read {}: it is missing", self.show(key)),
            })
    }

    /// Removes worker `worker`'s files that begin at epoch `from` or later: a run
    /// resumed at `from` writes those epochs anew, and a file left by an earlier run
    /// that stopped before it became part of a checkpoint must not be taken for one of
    /// this run's (or built on). Worker 0, which writes the manifests, also removes
    /// those of `from` or later: checkpoints a restore found unusable and skipped, whose
    /// epochs this run writes anew (and whose manifests it writes only where none is).
    pub fn remove_unfinished(&self, worker: usize, from: u64) -> Result<()> {
        for (name, (_, w, first, _)) in self.part_files()? {
            if w == worker && first >= from {
                self.blobs.delete(&format!("parts/{name}"))?;
            }
        }
        if worker == 0 {
            for e in self.manifests()? {
                if e >= from {
                    self.blobs.delete(&manifest_name(e))?;
                }
            }
            self.remove_unnamed_tables()?;
        }
        Ok(())
    }

    /// Removes the table files no manifest names: put there for checkpoints a run that
    /// stopped never completed (or whose manifests were just removed). Called before
    /// this run writes any (a table goes there only with a task's snapshot, once every
    /// worker has started); nothing is removed if a manifest does not read.
    fn remove_unnamed_tables(&self) -> Result<()> {
        let Some(dir) = self.tables_dir() else {
            return Ok(());
        };
        let Ok(entries) = std::fs::read_dir(dir.path()) else {
            return Ok(());
        };
        let mut named = BTreeSet::new();
        for e in self.manifests()? {
            let Ok(m) = self.read_manifest(e) else {
                return Ok(());
            };
            named.extend(m.files.into_iter().flat_map(|f| f.tables));
        }
        for entry in entries.flatten() {
            let name = entry.file_name();
            if name.to_str().is_some_and(|n| !named.contains(n)) {
                let _ = std::fs::remove_file(entry.path());
            }
        }
        Ok(())
    }

    fn part_files(&self) -> Result<Vec<(String, PartId)>> {
        Ok(self
            .blobs
            .list("parts")?
            .into_iter()
            .filter_map(|name| parse_part_file_name(&name).map(|id| (name, id)))
            .collect())
    }

    /// The epochs of the manifests present, oldest first.
    pub fn manifests(&self) -> Result<Vec<u64>> {
        let mut out = Vec::new();
        for name in self.blobs.list("")? {
            if let Some(e) = name
                .strip_prefix("checkpoint-")
                .and_then(|r| r.strip_suffix(".manifest"))
                .and_then(|r| r.parse::<u64>().ok())
            {
                out.push(e);
            }
        }
        out.sort_unstable();
        Ok(out)
    }

    /// Checkpoint `epoch` is durable on every worker: writes its manifest over the files
    /// of `tasks` (plan nodes) × `workers`, then drops checkpoints beyond the last
    /// [`KEEP`] and the files only they named.
    pub fn complete(
        &self,
        epoch: u64,
        tasks: &[usize],
        workers: usize,
        plan: &PlanIdentity,
        max_key_groups: u32,
    ) -> Result<Manifest> {
        self.write_manifest(epoch, tasks, workers, plan, max_key_groups, false)
    }

    /// Every task has finished: writes the job's last checkpoint over the files that
    /// run to the end of time, labelled with the first epoch after all of them began
    /// (so that a job resumed from it goes on with later epochs).
    pub fn complete_last(
        &self,
        tasks: &[usize],
        workers: usize,
        plan: &PlanIdentity,
        max_key_groups: u32,
    ) -> Result<Manifest> {
        let files = self.part_files()?;
        let label = files
            .iter()
            .filter(|(_, (n, w, _, last))| *last == u64::MAX && tasks.contains(n) && *w < workers)
            .map(|(_, (_, _, first, _))| *first)
            .max()
            .unwrap_or(0)
            .max(self.manifests()?.last().map_or(0, |e| e.saturating_add(1)));
        self.write_manifest(label, tasks, workers, plan, max_key_groups, true)
    }

    /// The label of the job's last checkpoint, once written.
    pub fn last_checkpoint(&self) -> Result<Option<u64>> {
        Ok(self
            .newest_checkpoint()?
            .filter(|(_, last)| *last)
            .map(|(e, _)| e))
    }

    /// The newest complete checkpoint, and whether it is the job's last.
    pub fn newest_checkpoint(&self) -> Result<Option<(u64, bool)>> {
        match self.manifests()?.last() {
            Some(&e) => Ok(Some((e, self.read_manifest(e)?.last))),
            None => Ok(None),
        }
    }

    /// Copies checkpoint `epoch` (its manifest and files) into the store at `to`.
    pub fn copy_checkpoint(&self, epoch: u64, to: &Path) -> Result<()> {
        let target = Store::open(to)?;
        let manifest = self.read_manifest(epoch)?;
        for (name, len, _) in manifest.files.iter().flat_map(|f| f.files()) {
            let key = format!("parts/{name}");
            let bytes = self.read_file(&key, len)?;
            target.blobs.put(&key, &mut |w| w.write_all(&bytes))?;
        }
        for name in manifest.files.iter().flat_map(|f| &f.tables) {
            let key = format!("tables/{name}");
            let bytes = self.read_file(&key, u64::MAX)?;
            target.blobs.put(&key, &mut |w| w.write_all(&bytes))?;
        }
        let json = serde_json::to_vec_pretty(&manifest).expect("a manifest encodes");
        target
            .blobs
            .put(&manifest_name(epoch), &mut |w| w.write_all(&json))
    }

    fn write_manifest(
        &self,
        epoch: u64,
        tasks: &[usize],
        workers: usize,
        plan: &PlanIdentity,
        max_key_groups: u32,
        last: bool,
    ) -> Result<Manifest> {
        let files = self.part_files()?;
        let mut entries = Vec::new();
        for &node in tasks {
            for worker in 0..workers {
                let (name, _) = files
                    .iter()
                    .filter(|(_, (n, w, first, last))| {
                        *n == node && *w == worker && *first <= epoch && epoch <= *last
                    })
                    .max_by_key(|(_, (_, _, first, _))| *first)
                    .ok_or_else(|| Error::Checkpoint {
                        message: format!(
                            "checkpoint {epoch} is durable but the file of node {node} on worker {worker} is missing"
                        ),
                    })?;
                entries.push(self.checked_entry(name, plan.hash)?);
            }
        }
        let manifest = Manifest {
            epoch,
            plan_hash: plan.hash,
            state: Some(plan.state.clone()),
            max_key_groups,
            workers,
            files: entries,
            last,
        };
        let json = serde_json::to_vec_pretty(&manifest).expect("a manifest encodes");
        let key = manifest_name(epoch);
        if !self.blobs.put_new(&key, &json)? {
            return Err(Error::Checkpoint {
                message: format!(
                    "{} was written by another run while this one completed checkpoint {epoch}: is another job using {}? One job per checkpoint directory",
                    self.show(&key),
                    self.dir.display()
                ),
            });
        }
        self.collect_garbage()?;
        Ok(manifest)
    }

    /// The manifest's entry for part file `name`: its length, checksum and the files it
    /// builds on, read from the file once.
    fn checked_entry(&self, name: &str, plan_hash: u64) -> Result<FileEntry> {
        let mut checked = self.checked.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(entry) = checked.get(name) {
            return Ok(entry.clone());
        }
        // Read through once (a full snapshot may be gigabytes): its length and
        // checksum, its header, and the table files its parts name.
        let key = format!("parts/{name}");
        let (len, crc, header, tables) = self.read_through(&key, plan_hash)?;
        let entry = FileEntry {
            name: name.to_string(),
            len,
            crc,
            base: header.base,
            tables,
        };
        checked.insert(name.to_string(), entry.clone());
        Ok(entry)
    }

    /// Keeps the last [`KEEP`] manifests, the newest older one that builds on none of
    /// the full files the newest builds on (if any), and every file one of them names
    /// or that may still become part of a later checkpoint.
    fn collect_garbage(&self) -> Result<()> {
        let epochs = self.manifests()?;
        if epochs.len() <= KEEP {
            return Ok(());
        }
        let newest = self.read_manifest(*epochs.last().expect("more than KEEP"))?;
        let fulls: BTreeSet<&str> = newest.files.iter().map(|f| f.full()).collect();
        let mut keep_from = epochs.len() - KEEP;
        for i in (0..epochs.len() - 1).rev() {
            let shares = match self.read_manifest(epochs[i]) {
                Ok(m) => m.files.iter().any(|f| fulls.contains(f.full())),
                Err(_) => true,
            };
            if !shares {
                keep_from = keep_from.min(i);
                break;
            }
        }
        let (old, kept) = epochs.split_at(keep_from);
        let (mut named, mut kept_tables) = (BTreeSet::new(), BTreeSet::new());
        for &e in kept {
            for f in self.read_manifest(e)?.files {
                named.extend(f.files().map(|(n, _, _)| n.to_string()));
                kept_tables.extend(f.tables);
            }
        }
        // A table a dropped checkpoint names and no kept one does is gone from the
        // store that wrote it (a store's tables, once replaced, never come back), so
        // no checkpoint still to come names it either.
        for &e in old {
            let Ok(m) = self.read_manifest(e) else {
                continue;
            };
            for t in m.files.into_iter().flat_map(|f| f.tables) {
                if !kept_tables.contains(&t) && crate::state::tables::valid_table_name(&t) {
                    let _ = self.blobs.delete(&format!("tables/{t}"));
                }
            }
        }
        let oldest_kept = kept[0];
        for (name, (_, _, _, last)) in self.part_files()? {
            if last < oldest_kept && !named.contains(&name) {
                let _ = self.blobs.delete(&format!("parts/{name}"));
                self.checked
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(&name);
            }
        }
        for &e in old {
            let _ = self.blobs.delete(&manifest_name(e));
        }
        // Batches up to the oldest kept checkpoint are in every kept checkpoint.
        for name in self.blobs.list("offsets").unwrap_or_default() {
            if offsets_batch(&name).is_some_and(|b| b <= oldest_kept) {
                let _ = self.blobs.delete(&format!("offsets/{name}"));
            }
        }
        Ok(())
    }

    /// Checkpoint `epoch`'s manifest.
    pub fn manifest(&self, epoch: u64) -> Result<Manifest> {
        self.read_manifest(epoch)
    }

    fn read_manifest(&self, epoch: u64) -> Result<Manifest> {
        let key = manifest_name(epoch);
        let bytes = self.read_file(&key, MAX_MANIFEST)?;
        serde_json::from_slice(&bytes).map_err(|e| Error::Checkpoint {
            message: format!("the manifest {} is corrupt: {e}", self.show(&key)),
        })
    }

    /// Whether checkpoint `epoch` restores into `plan` (see
    /// [`PlanIdentity::admit`]): its manifest, and how its parts map onto the plan.
    pub fn admit(
        &self,
        epoch: u64,
        plan: &PlanIdentity,
        allow_non_restored: bool,
    ) -> Result<(Manifest, Admitted)> {
        let manifest = self.read_manifest(epoch)?;
        let admitted = self.admit_manifest(&manifest, plan, allow_non_restored)?;
        Ok((manifest, admitted))
    }

    fn admit_manifest(
        &self,
        manifest: &Manifest,
        plan: &PlanIdentity,
        allow_non_restored: bool,
    ) -> Result<Admitted> {
        let report = self.report(manifest, plan)?;
        plan.admit(
            manifest.plan_hash,
            manifest.state.as_deref(),
            &report,
            allow_non_restored,
            &format!("checkpoint {} in {}", manifest.epoch, self.dir.display()),
        )
        .map_err(|message| Error::Checkpoint { message })
    }

    /// Reads checkpoint `epoch` for `plan`, checking every file against its manifest;
    /// its parts carry the plan's transform names.
    pub fn read(
        &self,
        epoch: u64,
        plan: &PlanIdentity,
        allow_non_restored: bool,
    ) -> Result<(Manifest, Snapshot)> {
        let (manifest, admitted) = self.admit(epoch, plan, allow_non_restored)?;
        self.read_admitted(manifest, &admitted, plan)
    }

    fn read_admitted(
        &self,
        manifest: Manifest,
        admitted: &Admitted,
        plan: &PlanIdentity,
    ) -> Result<(Manifest, Snapshot)> {
        let mut all = self.read_files(&manifest, &|t| admitted.name_of(t))?;
        all.plan_hash = plan.hash;
        admitted.apply(&mut all);
        Ok((manifest, all))
    }

    /// The newest checkpoint that reads back whole, as written (not fitted to a plan),
    /// if any: what an offline reader reads. Corrupt newer ones are skipped.
    pub fn latest_as_written(&self) -> Result<Option<(Manifest, Snapshot)>> {
        for epoch in self.manifests()?.into_iter().rev() {
            match self
                .read_manifest(epoch)
                .and_then(|m| Ok((self.read_files(&m, &|t| Some(t.to_string()))?, m)))
            {
                Ok((snapshot, manifest)) => return Ok(Some((manifest, snapshot))),
                Err(Error::Checkpoint { message }) => {
                    tracing::warn!(
                        "checkpoint {epoch} is unusable ({message}); reading an older one"
                    )
                }
                Err(e) => return Err(e),
            }
        }
        Ok(None)
    }

    /// The newest checkpoint that reads back whole, if any, for `plan`; corrupt newer
    /// ones are skipped and named in the notes. A checkpoint the plan cannot restore
    /// (another pipeline, or state it cannot read) is an error.
    pub fn latest(
        &self,
        plan: &PlanIdentity,
        allow_non_restored: bool,
    ) -> Result<Option<Restored>> {
        let mut notes = Vec::new();
        let mut unusable = |epoch: u64, message: String| {
            notes.push(format!(
                "checkpoint {epoch} is unusable ({message}); falling back to an older one"
            ))
        };
        for epoch in self.manifests()?.into_iter().rev() {
            let manifest = match self.read_manifest(epoch) {
                Ok(m) => m,
                Err(Error::Checkpoint { message }) => {
                    unusable(epoch, message);
                    continue;
                }
                Err(e) => return Err(e),
            };
            // Refused, not fallen back from: an older checkpoint of the same job
            // holds the same parts.
            let admitted = self.admit_manifest(&manifest, plan, allow_non_restored)?;
            match self.read_admitted(manifest, &admitted, plan) {
                Ok((manifest, snapshot)) => {
                    return Ok(Some(Restored {
                        manifest,
                        snapshot,
                        notes,
                    }))
                }
                Err(Error::Checkpoint { message }) => unusable(epoch, message),
                Err(e) => return Err(e),
            }
        }
        if !notes.is_empty() {
            return Err(Error::Checkpoint {
                message: format!(
                    "no usable checkpoint in {}: {}",
                    self.dir.display(),
                    notes.join("; ")
                ),
            });
        }
        Ok(None)
    }
}

mod aws_profile;
pub mod blobs;
pub mod lease;
mod offsets;
use offsets::offsets_batch;
#[cfg(test)]
use offsets::offsets_prefix;
mod part_write;
mod read;
mod retyped;

#[cfg(test)]
mod table_tests;
#[cfg(test)]
mod tests;
