//! The micro-batch runner's write-ahead offset log (`DIR/offsets/`): each batch's
//! source ranges, fixed and synced before the batch runs, kept as long as the
//! checkpoints before them (see the store's module documentation).

use super::{Store, MAX_MANIFEST};
use crate::source_driver::ReadRange;
use serde::{Deserialize, Serialize};
use tidewater::{Error, Result};

/// One source task's ranges of one micro-batch, in the write-ahead offset log.
#[derive(Serialize, Deserialize)]
struct OffsetEntry {
    /// The source's state id.
    source: String,
    batch: u64,
    worker: usize,
    ranges: Vec<ReadRange>,
}

/// The log's files of source `source` (a state id) in batch `batch` begin so: the id
/// goes in as its hash, since an id may hold any character.
pub(super) fn offsets_prefix(batch: u64, source: &str) -> String {
    format!(
        "b{batch:020}-s{:016x}-w",
        tidewater::exec::key_hash(source.as_bytes())
    )
}

/// The batch an offsets file belongs to.
pub(super) fn offsets_batch(name: &str) -> Option<u64> {
    name.strip_prefix('b')?.split('-').next()?.parse().ok()
}

impl Store {
    /// Removes the whole write-ahead offset log: a run that restores nothing writes
    /// every batch anew. A batch logged by a run that stopped before its first
    /// checkpoint cannot run again as logged: a source's first position says nothing
    /// of what the source fixes on its first read (a generator's start time), so the
    /// next batch's logged start would not be where the replayed one ends. Nothing such
    /// a run read was committed (sinks commit only checkpointed epochs). Called by
    /// process 0 before the cluster connects, so before any worker logs a batch.
    pub fn clear_offsets(&self) -> Result<()> {
        for name in self.blobs.list("offsets")? {
            self.blobs.delete(&format!("offsets/{name}"))?;
        }
        Ok(())
    }

    /// Appends a source task's ranges of batch `batch` to the write-ahead offset log,
    /// durably, before the batch runs.
    pub fn write_offsets(
        &self,
        batch: u64,
        source: &str,
        worker: usize,
        ranges: &[ReadRange],
    ) -> Result<()> {
        let body = serde_json::to_vec(&OffsetEntry {
            source: source.to_string(),
            batch,
            worker,
            ranges: ranges.to_vec(),
        })
        .expect("an offsets entry encodes");
        let mut bytes = format!("{:08x}\n", crc32fast::hash(&body)).into_bytes();
        bytes.extend_from_slice(&body);
        let name = format!("{}{worker}.offsets", offsets_prefix(batch, source));
        self.blobs
            .put(&format!("offsets/{name}"), &mut |w| w.write_all(&bytes))
    }

    /// The ranges the write-ahead offset log holds for source `source` (its state
    /// id) in batch `batch`, from every worker that logged it; `None` if none did. A
    /// file that does not match its checksum, or that another source wrote, is an
    /// error: replaying a batch with other ranges could give other results. The log is
    /// keyed by the source's id, so a changed pipeline resumed after a failure replays
    /// the batches its sources had fixed.
    pub fn read_offsets(&self, batch: u64, source: &str) -> Result<Option<Vec<ReadRange>>> {
        let prefix = offsets_prefix(batch, source);
        let mut ranges: Option<Vec<ReadRange>> = None;
        for name in self.blobs.list("offsets")? {
            if !name.starts_with(&prefix) || !name.ends_with(".offsets") {
                continue;
            }
            let key = format!("offsets/{name}");
            let bytes = self.read_file(&key, MAX_MANIFEST)?;
            let path = self.show(&key);
            let corrupt = || Error::Checkpoint {
                message: format!(
                    "the write-ahead offset log file {path} does not match its checksum"
                ),
            };
            let (crc, body) = match bytes.iter().position(|b| *b == b'\n') {
                Some(i) => (&bytes[..i], &bytes[i + 1..]),
                None => return Err(corrupt()),
            };
            let crc = std::str::from_utf8(crc)
                .ok()
                .and_then(|c| u32::from_str_radix(c, 16).ok())
                .ok_or_else(corrupt)?;
            if crc != crc32fast::hash(body) {
                return Err(corrupt());
            }
            let entry: OffsetEntry = serde_json::from_slice(body).map_err(|_| corrupt())?;
            if entry.source != source || entry.batch != batch {
                return Err(Error::Checkpoint {
                    message: format!(
                        "{path} holds the ranges of source '{}' in batch {}, not of '{source}' in batch {batch}",
                        entry.source,
                        entry.batch
                    ),
                });
            }
            let all = ranges.get_or_insert_with(Vec::new);
            for r in entry.ranges {
                // Several old workers may have logged a partition only if it moved
                // between them; the ranges then agree (the later log replayed the
                // earlier one).
                if !all.iter().any(|a| a.partition == r.partition) {
                    all.push(r);
                }
            }
        }
        Ok(ranges)
    }
}
