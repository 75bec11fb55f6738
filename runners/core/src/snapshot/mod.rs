//! The runner-neutral snapshot format: what every runner writes at a checkpoint and
//! reads back on recovery, so that a snapshot taken by one runner, at one parallelism,
//! restores in another.
//!
//! A snapshot is a set of independent **parts**. Each part belongs to one transform
//! (by its unique name in the plan) and has a [`Scope`] that says how it is
//! redistributed on restore:
//!
//! - [`Scope::KeyGroup`]: keyed state of one key group (windows, trigger states,
//!   accumulators, state cells, timers). It goes to whichever worker owns the key group
//!   at restore time, so the number of workers may change.
//! - [`Scope::Union`]: a small per-instance record (watermarks, clocks) that every new
//!   instance receives from every old one (Flink's union list state); operators take
//!   the minimum watermark.
//! - [`Scope::Broadcast`]: state every instance holds a full copy of (side-input data);
//!   one copy is restored by every instance.
//! - [`Scope::List`]: non-keyed elements (main input held for side inputs, in-flight
//!   data) that may go to any instance (Flink's operator list state).
//! - [`Scope::Partition`]: a source partition's position and watermark.
//! - [`Scope::KeyGroupDelta`]: what changed in a key group since the instance's
//!   previous snapshot, in a delta snapshot (see [`crate::delta`]); a store applies
//!   the chain before anything is restored.
//! - [`Scope::Files`]: an old instance's keyed state as the table files of the embedded
//!   store that kept it (Flink's incremental RocksDB checkpoints), which the
//!   checkpoint's directory of tables holds; each new instance reads its key groups
//!   from every old instance's.
//!
//! A snapshot is full, or a delta over the snapshots it names in [`Snapshot::base`]
//! (a full one, then the deltas on it, oldest first), which a store reads first.
//!
//! Encoding, version 4: the magic `TWSNAP`, the version (u16 big-endian), the CRC-32 of
//! the header (u32 big-endian), a postcard header (plan hash, maximum key groups,
//! epoch, the snapshots it builds on), then the parts, each a byte `1`, a postcard part
//! header (transform, scope, length, CRC-32 of transform, scope and bytes) and its
//! bytes, and last a byte `0` and the number of parts (u64 big-endian). The count comes
//! last so that a snapshot is written part by part as its parts are encoded
//! ([`SnapshotWriter`]), never whole in memory; a file cut short has no end and is
//! refused. Version 3 (read too) had the part count in the header and no byte before a
//! part; version 2 had no deltas; version 1 had no end of a run in a source
//! partition's part. A part can also be encoded alone ([`Part::encode`]).
//!
//! A snapshot of another plan, another format version, a truncated snapshot or a part
//! whose checksum does not match is refused with [`Error::Checkpoint`], never restored.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use tidewater::exec::key_hash;
use tidewater::plan::Plan;
use tidewater::{Error, Result};

mod read;
pub use read::{check_part, PartInfo, SnapshotReader};
pub mod stored;
pub use stored::{Stored, StoredGroups};

/// The snapshot format version this build writes (it reads this one and the one
/// before, [`V3`]).
pub const FORMAT_VERSION: u16 = 4;

/// The version before [`FORMAT_VERSION`]: its part count is in its header.
const V3: u16 = 3;

/// Before each part in version 4.
const PART_FOLLOWS: u8 = 1;
/// After the last part in version 4, before the part count.
const END: u8 = 0;

const MAGIC: &[u8; 6] = b"TWSNAP";

/// How a part is redistributed on restore (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Scope {
    /// Keyed state of one key group.
    KeyGroup(u32),
    /// Per-instance scalars every new instance receives from every old instance.
    Union(u32),
    /// A full copy held by every instance; one copy is restored everywhere.
    Broadcast,
    /// Non-keyed elements of one old instance; any new instance may take them.
    List(u32),
    /// A source partition.
    Partition(u32),
    /// The changes to a key group since the instance's previous snapshot.
    KeyGroupDelta(u32),
    /// Keyed state of one old instance as the table files of the store that kept it
    /// (`state::tables`), in the checkpoint's directory of tables: every new instance
    /// reads its own key groups from every old instance's.
    Files(u32),
}

/// A snapshot a delta snapshot builds on, as the store that wrote it names it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BaseRef {
    /// The store's name for it (a file name).
    pub name: String,
    /// Its length in bytes.
    pub len: u64,
    /// The CRC-32 of its bytes.
    pub crc: u32,
}

/// One part of a snapshot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Part {
    /// The transform's unique name in the plan.
    pub transform: String,
    /// How the part is redistributed.
    pub scope: Scope,
    /// The part's bytes, in the format of the operator that wrote it.
    pub bytes: Vec<u8>,
}

#[derive(Serialize, Deserialize)]
struct Header {
    plan_hash: u64,
    max_key_groups: u32,
    epoch: u64,
    base: Vec<BaseRef>,
}

/// A version 3 header: the part count in it.
#[derive(Deserialize)]
struct HeaderV3 {
    plan_hash: u64,
    max_key_groups: u32,
    epoch: u64,
    base: Vec<BaseRef>,
    parts: u64,
}

#[derive(Serialize, Deserialize)]
struct PartHeader {
    transform: String,
    scope: Scope,
    len: u64,
    /// CRC-32 of the transform name, the scope and the bytes.
    crc: u32,
}

fn part_crc(transform: &str, scope: Scope, body: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&postcard::to_allocvec(&(transform, scope)).expect("part ids encode"));
    h.update(body);
    h.finalize()
}

/// A consistent snapshot of a whole pipeline at one epoch (checkpoint id, batch id).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// [`plan_hash`] of the plan it was taken from.
    pub plan_hash: u64,
    /// The number of key groups keyed state was split into.
    pub max_key_groups: u32,
    /// The epoch (checkpoint or batch id) it completes.
    pub epoch: u64,
    /// Empty for a full snapshot; for a delta, the snapshots it applies to, oldest (a
    /// full one) first.
    pub base: Vec<BaseRef>,
    /// The parts, in the order they were added.
    pub parts: Vec<Part>,
    /// Key group parts of a restored snapshot left in its files (see [`stored`]): a
    /// restore reads them with [`Snapshot::for_each_part_of`].
    pub stored: Stored,
}

/// The hash that ties a snapshot to its plan: the fixed key hash of the plan's JSON.
pub fn plan_hash(plan: &Plan) -> u64 {
    key_hash(tidewater::plan::encode(plan).as_bytes())
}

fn corrupt(message: String) -> Error {
    Error::Checkpoint { message }
}

impl Part {
    /// The part alone, with its header and checksum.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend(self.header());
        out.extend_from_slice(&self.bytes);
    }

    /// The part's header: it precedes the bytes.
    fn header(&self) -> Vec<u8> {
        let header = PartHeader {
            transform: self.transform.clone(),
            scope: self.scope,
            len: self.bytes.len() as u64,
            crc: part_crc(&self.transform, self.scope, &self.bytes),
        };
        postcard::to_allocvec(&header).expect("part headers encode")
    }
}

impl Snapshot {
    /// The whole snapshot as bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out =
            Vec::with_capacity(64 + self.parts.iter().map(|p| p.bytes.len() + 32).sum::<usize>());
        self.write_to(&mut out).expect("a Vec takes every write");
        out
    }

    /// Writes the bytes [`Snapshot::encode`] gives to `w`, part by part, without
    /// gathering them in memory first.
    pub fn write_to(&self, w: &mut dyn std::io::Write) -> std::io::Result<()> {
        debug_assert!(
            self.stored.is_empty(),
            "a restored snapshot is written after it is materialized"
        );
        let mut out = self.begin(w)?;
        for p in &self.parts {
            out.part(p)?;
        }
        out.finish()
    }

    /// Writes this snapshot's header to `w` (not its parts): the parts follow through
    /// the writer returned, as they come.
    pub fn begin<'w>(&self, w: &'w mut dyn std::io::Write) -> std::io::Result<SnapshotWriter<'w>> {
        w.write_all(MAGIC)?;
        w.write_all(&FORMAT_VERSION.to_be_bytes())?;
        let header = Header {
            plan_hash: self.plan_hash,
            max_key_groups: self.max_key_groups,
            epoch: self.epoch,
            base: self.base.clone(),
        };
        let header = postcard::to_allocvec(&header).expect("headers encode");
        w.write_all(&crc32fast::hash(&header).to_be_bytes())?;
        w.write_all(&header)?;
        Ok(SnapshotWriter { w, parts: 0 })
    }

    /// Reads a snapshot's header alone (no parts), checked as [`Snapshot::decode`]
    /// checks it.
    pub fn decode_header(bytes: &[u8], plan_hash: u64) -> Result<Snapshot> {
        Ok(SnapshotReader::new(bytes, plan_hash)?.header().clone())
    }

    /// Reads a snapshot, refusing one of another plan than `plan_hash`, another
    /// version, or with any corrupt or truncated part.
    pub fn decode(bytes: &[u8], plan_hash: u64) -> Result<Snapshot> {
        let mut reader = SnapshotReader::new(bytes, plan_hash)?;
        let mut parts = Vec::new();
        while let Some((info, bytes)) = reader.next_part(&|_, _| true)? {
            parts.push(Part {
                transform: info.transform,
                scope: info.scope,
                bytes: bytes.expect("every part kept"),
            });
        }
        Ok(Snapshot {
            parts,
            ..reader.header().clone()
        })
    }

    /// The parts of `transform` in memory, by scope; several parts with one scope (a
    /// union or a broadcast written by several instances) keep their order. Key
    /// groups a restore left in their files are not among them: a keyed step's
    /// restore reads them with [`Snapshot::for_each_part_of`].
    pub fn parts_of(&self, transform: &str) -> BTreeMap<Scope, Vec<&[u8]>> {
        let mut out: BTreeMap<Scope, Vec<&[u8]>> = BTreeMap::new();
        for p in self.parts.iter().filter(|p| p.transform == transform) {
            out.entry(p.scope).or_default().push(&p.bytes);
        }
        out
    }
}

/// Writes a snapshot's parts as they come, after its header ([`Snapshot::begin`]);
/// [`SnapshotWriter::finish`] ends it.
pub struct SnapshotWriter<'w> {
    w: &'w mut dyn std::io::Write,
    parts: u64,
}

impl SnapshotWriter<'_> {
    /// Writes part `p`.
    pub fn part(&mut self, p: &Part) -> std::io::Result<()> {
        self.w.write_all(&[PART_FOLLOWS])?;
        self.w.write_all(&p.header())?;
        self.w.write_all(&p.bytes)?;
        self.parts += 1;
        Ok(())
    }

    /// Ends the snapshot: a file without its end is refused as truncated.
    pub fn finish(self) -> std::io::Result<()> {
        self.w.write_all(&[END])?;
        self.w.write_all(&self.parts.to_be_bytes())
    }
}

/// Encodes the contents of a snapshot part (postcard). With [`decode_part`], the one
/// place the snapshot format chooses the binary encoding of operator and state parts:
/// keyed operators, the stateful runner and the state backends all go through them.
pub fn encode_part<T: Serialize>(v: &T) -> Vec<u8> {
    postcard::to_allocvec(v).expect("snapshot parts are plain data")
}

/// Decodes the contents of a snapshot part; corruption is a checkpoint error.
pub fn decode_part<T: serde::de::DeserializeOwned>(
    bytes: &[u8],
    what: &str,
) -> std::result::Result<T, tidewater::exec::ExecError> {
    decode_part_or_message(bytes, what).map_err(|message| {
        tidewater::exec::ExecError::Downstream(Box::new(Error::Checkpoint { message }))
    })
}

/// [`decode_part`] for a caller that reports corruption as a message (a state backend).
pub fn decode_part_or_message<T: serde::de::DeserializeOwned>(
    bytes: &[u8],
    what: &str,
) -> std::result::Result<T, String> {
    tidewater::coder::decode(bytes).map_err(|e| format!("{what} does not decode: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Snapshot {
        Snapshot {
            plan_hash: 42,
            max_key_groups: 128,
            epoch: 7,
            base: vec![BaseRef {
                name: "n1-w0-3-3.snap".into(),
                len: 100,
                crc: 5,
            }],
            parts: vec![
                Part {
                    transform: "Count".into(),
                    scope: Scope::KeyGroup(3),
                    bytes: vec![1, 2, 3],
                },
                Part {
                    transform: "Count".into(),
                    scope: Scope::Union(0),
                    bytes: vec![9; 40],
                },
            ],
            stored: Default::default(),
        }
    }

    #[test]
    fn round_trips() {
        let s = sample();
        assert_eq!(Snapshot::decode(&s.encode(), 42).unwrap(), s);
    }

    #[test]
    fn every_truncation_and_every_flipped_byte_is_a_checkpoint_error() {
        let bytes = sample().encode();
        for n in 0..bytes.len() {
            let e = Snapshot::decode(&bytes[..n], 42).unwrap_err();
            assert!(
                matches!(e, Error::Checkpoint { .. }),
                "truncated at {n}: {e}"
            );
        }
        for i in 0..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 0x40;
            let e = Snapshot::decode(&b, 42).unwrap_err();
            assert!(matches!(e, Error::Checkpoint { .. }), "byte {i}: {e}");
        }
    }

    /// A snapshot written by a build before version 4 (the part count in its header)
    /// is read as it was: a savepoint outlives the build that wrote it.
    #[test]
    fn a_version_3_snapshot_is_read() {
        #[derive(Serialize)]
        struct HeaderV3<'a> {
            plan_hash: u64,
            max_key_groups: u32,
            epoch: u64,
            base: &'a [BaseRef],
            parts: u64,
        }
        let s = sample();
        let mut v3 = MAGIC.to_vec();
        v3.extend(V3.to_be_bytes());
        let header = postcard::to_allocvec(&HeaderV3 {
            plan_hash: s.plan_hash,
            max_key_groups: s.max_key_groups,
            epoch: s.epoch,
            base: &s.base,
            parts: s.parts.len() as u64,
        })
        .unwrap();
        v3.extend(crc32fast::hash(&header).to_be_bytes());
        v3.extend(header);
        for p in &s.parts {
            p.encode(&mut v3);
        }
        assert_eq!(Snapshot::decode(&v3, 42).unwrap(), s);
        let e = Snapshot::decode(&v3[..v3.len() - 1], 42).unwrap_err();
        assert!(e.to_string().contains("truncated"), "{e}");
    }

    /// Parts written one by one after the header make the same bytes as the whole
    /// snapshot's; a file whose end was not written is refused.
    #[test]
    fn parts_written_as_they_come_make_the_same_snapshot() {
        let s = sample();
        let header_only = Snapshot {
            parts: Vec::new(),
            ..s.clone()
        };
        let mut bytes = Vec::new();
        let mut w = header_only.begin(&mut bytes).unwrap();
        for p in &s.parts {
            w.part(p).unwrap();
        }
        w.finish().unwrap();
        assert_eq!(bytes, s.encode());
        let mut unfinished = Vec::new();
        let mut w = header_only.begin(&mut unfinished).unwrap();
        w.part(&s.parts[0]).unwrap();
        let e = Snapshot::decode(&unfinished, 42).unwrap_err();
        insta::assert_snapshot!(e.to_string(), @"checkpoint cannot be restored: the snapshot is truncated after 1 part: its end is missing");
    }

    #[test]
    fn another_plan_is_refused_with_a_clear_message() {
        let e = Snapshot::decode(&sample().encode(), 43).unwrap_err();
        insta::assert_snapshot!(e.to_string(), @"checkpoint cannot be restored: the snapshot was taken from another plan (plan hash 000000000000002a, this plan 000000000000002b); a pipeline resumes only from its own snapshots");
    }
}
