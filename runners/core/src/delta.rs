//! Delta snapshots (Flink's incremental checkpoints): a keyed operator whose state
//! mostly stays as it was between two checkpoints writes, per key group, only what
//! changed since its previous snapshot, and a restore applies the chain of deltas to
//! the full snapshot they build on.
//!
//! A key group that can be written as a delta is a **table**: entries, each an id and
//! a value (both byte strings, the operator's encoding), sorted by id, ids unique. A
//! [`Scope::KeyGroupDelta`] part holds the ids deleted and the entries written (new or
//! changed) since the previous snapshot; applying it to the group's table deletes,
//! then writes. A delta snapshot describes everything else in full: its non-keyed
//! parts replace the previous ones, a [`Scope::KeyGroup`] part in it replaces that key
//! group, and a key group it does not mention is unchanged.
//!
//! A table may begin with a **header**: an entry with an empty id, whose value names
//! the format of the others (an operator that changed its format tells its old parts
//! apart by it). A delta never deletes it; a table left with its header only is gone,
//! as a full snapshot writes no part for an empty key group.
//!
//! Encoding (postcard): a table is a sequence of (id, value) byte-string pairs; a
//! delta is (a sequence of deleted ids, a table of written entries).

use crate::snapshot::{Part, Scope};
use serde::Serialize;
use std::collections::BTreeMap;
use tidewater::{Error, Result};

/// The entries of a table: (id, value), borrowed from its bytes.
pub type Entries<'a> = Vec<(&'a [u8], &'a [u8])>;

fn corrupt(message: String) -> Error {
    Error::Checkpoint { message }
}

/// A byte string, serialized as one.
struct Bytes<'a>(&'a [u8]);

impl Serialize for Bytes<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_bytes(self.0)
    }
}

/// Appends one table entry (`id`, `value`) to `out`, as it appears in a table.
pub fn encode_entry(id: &[u8], value: &[u8], out: &mut Vec<u8>) {
    let mut v = std::mem::take(out);
    v = postcard::to_extend(&(Bytes(id), Bytes(value)), v).expect("byte strings encode");
    *out = v;
}

/// The id of an entry written by [`encode_entry`].
pub fn entry_id(entry: &[u8]) -> &[u8] {
    // The id's length (a LEB128 varint, as postcard writes it), then the id: read by
    // hand, since a snapshot sorts every key group's entries by it.
    let (mut len, mut shift, mut i) = (0usize, 0, 0);
    loop {
        let b = entry[i];
        len |= usize::from(b & 0x7f) << shift;
        i += 1;
        if b & 0x80 == 0 {
            break;
        }
        shift += 7;
    }
    &entry[i..i + len]
}

/// Appends the length prefix of a table of `n` entries (then come the entries).
pub fn encode_table_len(n: usize, out: &mut Vec<u8>) {
    let mut v = std::mem::take(out);
    v = postcard::to_extend(&n, v).expect("a length encodes");
    *out = v;
}

/// A table of `entries` (id, value), in the order given (sorted by id, for a table).
pub fn encode_table<'a>(entries: impl ExactSizeIterator<Item = (&'a [u8], &'a [u8])>) -> Vec<u8> {
    let mut out = Vec::new();
    encode_table_len(entries.len(), &mut out);
    for (id, value) in entries {
        encode_entry(id, value, &mut out);
    }
    out
}

/// A delta part: the ids deleted (sorted) and the entries written, each as written
/// by [`encode_entry`], sorted by id.
pub fn encode_delta(deleted: &[&[u8]], written: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 + written.iter().map(|e| e.len()).sum::<usize>());
    encode_table_len(deleted.len(), &mut out);
    for id in deleted {
        out = postcard::to_extend(&Bytes(id), out).expect("byte strings encode");
    }
    encode_table_len(written.len(), &mut out);
    for e in written {
        out.extend_from_slice(e);
    }
    out
}

/// The entries of a table, checked to be sorted by id with no id twice.
pub fn decode_table(bytes: &[u8]) -> Result<Entries<'_>> {
    let (entries, rest) = postcard::take_from_bytes::<Vec<(&[u8], &[u8])>>(bytes)
        .map_err(|e| corrupt(format!("a key group table does not decode: {e}")))?;
    if !rest.is_empty() {
        return Err(corrupt(format!(
            "{} unexpected bytes after a key group table",
            rest.len()
        )));
    }
    sorted(entries.iter().map(|(id, _)| *id), "a key group table")?;
    Ok(entries)
}

/// The ids deleted and the entries written by a delta part, checked.
pub fn decode_delta(bytes: &[u8]) -> Result<(Vec<&[u8]>, Entries<'_>)> {
    let ((deleted, written), rest) =
        postcard::take_from_bytes::<(Vec<&[u8]>, Vec<(&[u8], &[u8])>)>(bytes)
            .map_err(|e| corrupt(format!("a key group delta does not decode: {e}")))?;
    if !rest.is_empty() {
        return Err(corrupt(format!(
            "{} unexpected bytes after a key group delta",
            rest.len()
        )));
    }
    sorted(
        deleted.iter().copied(),
        "the deletions of a key group delta",
    )?;
    sorted(written.iter().map(|(id, _)| *id), "a key group delta")?;
    Ok((deleted, written))
}

fn sorted<'a>(ids: impl Iterator<Item = &'a [u8]>, what: &str) -> Result<()> {
    let mut prev: Option<&[u8]> = None;
    for id in ids {
        if prev.is_some_and(|p| p >= id) {
            return Err(corrupt(format!(
                "{what} is not sorted by id, or holds an id twice"
            )));
        }
        prev = Some(id);
    }
    Ok(())
}

/// `table` (or an empty one) with `delta` applied; `None` if nothing is left.
pub fn apply_to_table(table: Option<&[u8]>, delta: &[u8]) -> Result<Option<Vec<u8>>> {
    let mut entries: BTreeMap<&[u8], &[u8]> = match table {
        Some(t) => decode_table(t)?.into_iter().collect(),
        None => BTreeMap::new(),
    };
    let (deleted, written) = decode_delta(delta)?;
    for id in deleted {
        entries.remove(id);
    }
    entries.extend(written);
    if entries.keys().all(|id| id.is_empty()) {
        return Ok(None);
    }
    Ok(Some(encode_table(entries.into_iter())))
}

/// The parts of a snapshot rebuilt from `base` (the parts of the snapshot a delta
/// builds on, itself full or already rebuilt) and `delta` (the delta snapshot's
/// parts). The result is in the order a full snapshot of the same state has: per
/// transform, in the order they first appear in `delta` then `base`, its key groups
/// ascending, then its other parts in `delta`'s order.
pub fn apply_delta(base: Vec<Part>, delta: Vec<Part>) -> Result<Vec<Part>> {
    let mut order: Vec<String> = Vec::new();
    let mut groups: BTreeMap<(String, u32), Vec<u8>> = BTreeMap::new();
    let mut others: BTreeMap<String, Vec<Part>> = BTreeMap::new();
    let note = |order: &mut Vec<String>, t: &str| {
        if !order.iter().any(|o| o == t) {
            order.push(t.to_string());
        }
    };
    for p in &delta {
        note(&mut order, &p.transform);
    }
    for p in base {
        match p.scope {
            Scope::KeyGroup(g) => {
                note(&mut order, &p.transform);
                if groups.insert((p.transform.clone(), g), p.bytes).is_some() {
                    return Err(corrupt(format!(
                        "key group {g} of '{}' is in a snapshot twice",
                        p.transform
                    )));
                }
            }
            Scope::KeyGroupDelta(g) => {
                return Err(corrupt(format!(
                    "a delta of key group {g} of '{}' has no snapshot to apply to",
                    p.transform
                )))
            }
            // Replaced by the delta's.
            _ => {}
        }
    }
    for p in delta {
        match p.scope {
            Scope::KeyGroup(g) => {
                groups.insert((p.transform, g), p.bytes);
            }
            Scope::KeyGroupDelta(g) => {
                let key = (p.transform, g);
                let applied = apply_to_table(groups.get(&key).map(|b| &b[..]), &p.bytes).map_err(
                    |e| match e {
                        Error::Checkpoint { message } => {
                            corrupt(format!("key group {g} of '{}': {message}", key.0))
                        }
                        other => other,
                    },
                )?;
                match applied {
                    Some(bytes) => groups.insert(key, bytes),
                    None => groups.remove(&key),
                };
            }
            _ => others.entry(p.transform.clone()).or_default().push(p),
        }
    }
    let mut out = Vec::with_capacity(groups.len() + others.len());
    for t in order {
        let keyed: Vec<u32> = groups
            .range((t.clone(), 0)..=(t.clone(), u32::MAX))
            .map(|((_, g), _)| *g)
            .collect();
        for g in keyed {
            let bytes = groups.remove(&(t.clone(), g)).expect("listed");
            out.push(Part {
                transform: t.clone(),
                scope: Scope::KeyGroup(g),
                bytes,
            });
        }
        out.extend(others.remove(&t).unwrap_or_default());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(entries: &[(&[u8], &[u8])]) -> Vec<u8> {
        encode_table(entries.iter().copied())
    }

    fn entry(id: &[u8], v: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        encode_entry(id, v, &mut out);
        out
    }

    fn part(t: &str, scope: Scope, bytes: Vec<u8>) -> Part {
        Part {
            transform: t.into(),
            scope,
            bytes,
        }
    }

    #[test]
    fn an_entry_knows_its_id_and_a_table_reads_back() {
        let e = entry(b"key-1", b"value");
        assert_eq!(entry_id(&e), b"key-1");
        let long = vec![7u8; 300];
        assert_eq!(entry_id(&entry(&long, b"v")), &long[..]);
        let t = table(&[(b"a", b"1"), (b"b", b"")]);
        assert_eq!(
            decode_table(&t).unwrap(),
            vec![(&b"a"[..], &b"1"[..]), (&b"b"[..], &b""[..])]
        );
        let unsorted = table(&[(b"b", b"1"), (b"a", b"2")]);
        assert!(decode_table(&unsorted).is_err());
        let twice = table(&[(b"a", b"1"), (b"a", b"2")]);
        assert!(decode_table(&twice).is_err());
    }

    #[test]
    fn a_delta_deletes_then_writes() {
        let base = table(&[(b"a", b"1"), (b"b", b"2"), (b"c", b"3")]);
        // b is deleted, c is deleted and written again (a window expired and opened
        // anew), d is new.
        let (c, d) = (entry(b"c", b"30"), entry(b"d", b"4"));
        let delta = encode_delta(&[b"b", b"c"], &[&c, &d]);
        let applied = apply_to_table(Some(&base), &delta).unwrap().unwrap();
        assert_eq!(applied, table(&[(b"a", b"1"), (b"c", b"30"), (b"d", b"4")]));
        // Deleting everything leaves nothing; a delta onto nothing is a table.
        let all = encode_delta(&[b"a", b"c", b"d"], &[]);
        assert_eq!(apply_to_table(Some(&applied), &all).unwrap(), None);
        assert_eq!(
            apply_to_table(None, &encode_delta(&[], &[&d])).unwrap(),
            Some(table(&[(b"d", b"4")]))
        );
    }

    #[test]
    fn a_table_left_with_its_header_only_is_gone() {
        let base = table(&[(b"", b"format 1"), (b"a", b"1")]);
        let gone = encode_delta(&[b"a"], &[]);
        assert_eq!(apply_to_table(Some(&base), &gone).unwrap(), None);
        // A group new since the base comes with its header; deletions leave it.
        let new = encode_delta(&[], &[&entry(b"", b"format 1"), &entry(b"b", b"2")]);
        let t = apply_to_table(None, &new).unwrap().unwrap();
        assert_eq!(t, table(&[(b"", b"format 1"), (b"b", b"2")]));
        let kept = encode_delta(&[b"a"], &[]);
        assert_eq!(apply_to_table(Some(&t), &kept).unwrap(), Some(t));
    }

    #[test]
    fn a_delta_snapshot_replaces_the_non_keyed_parts_and_updates_the_key_groups() {
        let base = vec![
            part("G", Scope::KeyGroup(1), table(&[(b"a", b"1")])),
            part("G", Scope::KeyGroup(5), table(&[(b"x", b"9")])),
            part("G", Scope::KeyGroup(7), table(&[(b"q", b"0")])),
            part("G", Scope::Union(0), vec![1]),
            part("Sink", Scope::List(0), vec![2]),
        ];
        let delta = vec![
            // Group 1 changes, group 5 is emptied, group 3 is new, group 7 stays.
            part(
                "G",
                Scope::KeyGroupDelta(1),
                encode_delta(&[], &[&entry(b"b", b"2")]),
            ),
            part(
                "G",
                Scope::KeyGroupDelta(3),
                encode_delta(&[], &[&entry(b"n", b"")]),
            ),
            part("G", Scope::KeyGroupDelta(5), encode_delta(&[b"x"], &[])),
            part("G", Scope::Union(0), vec![3]),
        ];
        let got = apply_delta(base, delta).unwrap();
        assert_eq!(
            got,
            vec![
                part(
                    "G",
                    Scope::KeyGroup(1),
                    table(&[(b"a", b"1"), (b"b", b"2")])
                ),
                part("G", Scope::KeyGroup(3), table(&[(b"n", b"")])),
                part("G", Scope::KeyGroup(7), table(&[(b"q", b"0")])),
                part("G", Scope::Union(0), vec![3]),
            ],
            "the sink's staged list of the base is gone: the delta says it has none"
        );
    }

    #[test]
    fn a_corrupt_delta_or_a_delta_without_a_base_is_a_checkpoint_error() {
        let base = vec![part("G", Scope::KeyGroup(1), table(&[(b"a", b"1")]))];
        let bad = vec![part("G", Scope::KeyGroupDelta(1), vec![9, 9, 9])];
        let e = apply_delta(base.clone(), bad).unwrap_err();
        assert!(e.to_string().contains("key group 1 of 'G'"), "{e}");
        let stray = vec![part("G", Scope::KeyGroupDelta(2), encode_delta(&[], &[]))];
        assert!(matches!(
            apply_delta(stray, Vec::new()),
            Err(Error::Checkpoint { .. })
        ));
    }
}
