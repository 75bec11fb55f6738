//! The source driver: reads a source's partitions, tracks each one's position,
//! watermark, idleness and completion, and computes the source's watermark. Every
//! runner reads sources through it, so the idle-partition rule lives here once.
//!
//! Partitions are fixed when the source first starts and kept in snapshots (one
//! [`Scope::Partition`] part each), so a restored source reads exactly the partitions
//! it read before, from where it stood.

use crate::snapshot::{decode_part, encode_part, Scope};
use serde::{Deserialize, Serialize};
use tidewater::exec::{AnyBatch, ErasedSource, ExecError};
use tidewater::{ReadStatus, Timestamp};

/// Where one partition stands.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionState {
    /// The source's encoded position.
    pub position: Vec<u8>,
    /// The partition has no more records, ever.
    pub done: bool,
    /// The last read found nothing for now.
    pub idle: bool,
    /// The partition's watermark.
    pub watermark: Timestamp,
}

/// A source and its partitions.
pub struct SourceDriver {
    source: Box<dyn ErasedSource>,
    partitions: Vec<PartitionState>,
}

impl SourceDriver {
    /// Starts `source` split into (about) `desired` partitions, at their initial
    /// positions.
    pub fn start(source: Box<dyn ErasedSource>, desired: usize) -> Result<Self, ExecError> {
        let n = source.partitions(desired);
        let partitions = (0..n)
            .map(|p| {
                Ok(PartitionState {
                    position: source.initial_position(p, n)?,
                    done: false,
                    idle: false,
                    watermark: Timestamp::MIN,
                })
            })
            .collect::<Result<_, ExecError>>()?;
        Ok(SourceDriver { source, partitions })
    }

    /// Resumes `source` from the partition parts of a snapshot (all of them: their
    /// number is the number of partitions).
    pub fn restore(
        source: Box<dyn ErasedSource>,
        parts: &[(u32, &[u8])],
    ) -> Result<Self, ExecError> {
        let mut partitions: Vec<Option<PartitionState>> = vec![None; parts.len()];
        for (p, bytes) in parts {
            let slot = partitions.get_mut(*p as usize).ok_or_else(|| {
                checkpoint(format!(
                    "partition {p} of a source with {} partitions",
                    parts.len()
                ))
            })?;
            *slot = Some(decode_part(bytes, "a source partition")?);
        }
        let partitions = partitions
            .into_iter()
            .enumerate()
            .map(|(p, s)| s.ok_or_else(|| checkpoint(format!("source partition {p} is missing"))))
            .collect::<Result<_, _>>()?;
        Ok(SourceDriver { source, partitions })
    }

    /// One part per partition.
    pub fn snapshot(&self) -> Vec<(Scope, Vec<u8>)> {
        self.partitions
            .iter()
            .enumerate()
            .map(|(p, s)| (Scope::Partition(p as u32), encode_part(s)))
            .collect()
    }

    /// Reads up to `max` records from every partition that is not done; the records
    /// go to `out`. Whether any were read.
    pub fn read(
        &mut self,
        max: usize,
        now: Timestamp,
        out: &mut Vec<Box<dyn AnyBatch>>,
    ) -> Result<bool, ExecError> {
        let n = self.partitions.len();
        let mut any = false;
        for (p, st) in self.partitions.iter_mut().enumerate() {
            if st.done {
                continue;
            }
            let read = self.source.read(p, n, &mut st.position, max, now)?;
            st.idle = read.status == ReadStatus::Idle;
            st.done = read.status == ReadStatus::Done;
            st.watermark = st.watermark.max(read.watermark);
            if !read.batch.is_empty() {
                any = true;
                out.push(read.batch);
            }
        }
        Ok(any)
    }

    /// The source's watermark: the minimum over partitions that are not done; idle
    /// partitions do not hold it back unless all are idle. Once every partition is
    /// done, the end of time.
    pub fn watermark(&self) -> Timestamp {
        let live = |idle: bool| {
            self.partitions
                .iter()
                .filter(|s| !s.done && s.idle == idle)
                .map(|s| s.watermark)
                .min()
        };
        live(false).or_else(|| live(true)).unwrap_or(Timestamp::MAX)
    }

    /// Every partition is done.
    pub fn is_done(&self) -> bool {
        self.partitions.iter().all(|s| s.done)
    }

    /// Stops reading: every partition counts as done (draining at `--max-duration`,
    /// or an idle source on a simulated clock).
    pub fn finish(&mut self) {
        for s in &mut self.partitions {
            s.done = true;
        }
    }

    /// The partitions.
    pub fn partitions(&self) -> &[PartitionState] {
        &self.partitions
    }
}

fn checkpoint(message: String) -> ExecError {
    ExecError::Downstream(Box::new(tidewater::Error::Checkpoint { message }))
}
