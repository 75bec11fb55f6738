//! How a stateful DoFn's state travels in a snapshot: each (key, window) holding cells
//! or timers is an entry of its key group's table ([`crate::delta`]), its id the
//! window's [`window_id`] (`[key length: u32 BE][key][window]`, the embedded store's
//! order), its value the window's cells and timers ([`Body`]). A table begins with a
//! header entry (an empty id; its value names the format), by which a key group part
//! written before 2026-12 (a [`KeyGroupState`], which never reads as a table with a
//! header) is told apart and still restores. Full and delta snapshots (a delta writes
//! the windows changed since the previous snapshot), and the reading of a part.

use crate::delta::{decode_table, encode_delta, encode_entry, encode_table_len};
use crate::keyed::snapshot::PartSink;
use crate::snapshot::{decode_part, encode_part, Scope};
use crate::state::{
    snapshot_place, split_window_id, FrozenState, FrozenTimers, KeyTimer, RestoredWindow,
};
use crate::timers::Timer;
use serde::{Deserialize, Serialize};
use tidewater::exec::{ExecError, TimeDomain};
use tidewater::{BoundedWindow, Timestamp};

/// The value of a table's header entry: the format of its entries.
const HEADER: &[u8] = b"tidewater stateful DoFn key group 1";

/// One key group of a stateful runner in a snapshot written before 2026-12.
#[derive(Default, Serialize, Deserialize)]
pub(super) struct KeyGroupState {
    pub(super) cells: Vec<u8>,
    pub(super) timers: Vec<Timer<Vec<u8>, String>>,
    /// Windows to expire (written by snapshots before 2026-11).
    pub(super) live: Vec<(Timestamp, Vec<u8>, BoundedWindow)>,
}

/// What a snapshot holds of a (key, window), as it is written.
#[derive(Serialize)]
struct BodyRef<'a> {
    /// (name, the cell encoded), by name.
    #[serde(serialize_with = "cells_as_bytes")]
    cells: &'a [(String, Vec<u8>)],
    /// By (name, domain).
    timers: Vec<TimerRef<'a>>,
}

/// Cells as (name, bytes) pairs, each cell's bytes as one run (`serialize_bytes`):
/// postcard writes a `Vec<u8>` byte by byte otherwise, the same bytes in the end (a
/// length, then the bytes) at a call per byte.
fn cells_as_bytes<S: serde::Serializer>(
    cells: &&[(String, Vec<u8>)],
    s: S,
) -> Result<S::Ok, S::Error> {
    struct Bytes<'b>(&'b [u8]);
    impl Serialize for Bytes<'_> {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            s.serialize_bytes(self.0)
        }
    }
    s.collect_seq(cells.iter().map(|(name, cell)| (name, Bytes(cell))))
}

#[derive(Serialize)]
struct TimerRef<'a> {
    name: &'a str,
    domain: TimeDomain,
    at: Timestamp,
    output: Timestamp,
}

/// What a snapshot holds of a (key, window), as it is read: [`BodyRef`]'s bytes.
#[derive(Deserialize)]
struct Body<'a> {
    #[serde(borrow)]
    cells: Vec<(&'a str, &'a [u8])>,
    #[serde(borrow)]
    timers: Vec<TimerBody<'a>>,
}

#[derive(Deserialize)]
struct TimerBody<'a> {
    name: &'a str,
    domain: TimeDomain,
    at: Timestamp,
    output: Timestamp,
}

/// A key group part, read.
pub(super) enum KeyGroupPart<'a> {
    /// A table (since 2026-12): its windows' cells, and every timer.
    Windows(Vec<RestoredWindow<'a>>, Vec<KeyTimer>),
    /// A part written before.
    Old(KeyGroupState),
}

fn corrupt(message: String) -> ExecError {
    ExecError::Downstream(Box::new(tidewater::Error::Checkpoint { message }))
}

/// The table entry of a window: its id and body.
fn encode_window(
    id: &[u8],
    cells: &[(String, Vec<u8>)],
    timers: &mut [KeyTimer],
    out: &mut Vec<u8>,
) {
    timers.sort_by(|a, b| (&a.name, a.domain).cmp(&(&b.name, b.domain)));
    let body = BodyRef {
        cells,
        timers: timers
            .iter()
            .map(|t| TimerRef {
                name: &t.name,
                domain: t.domain,
                at: t.at,
                output: t.output,
            })
            .collect(),
    };
    encode_entry(id, &encode_part(&body), out);
}

/// The header entry every table starts with.
fn header() -> Vec<u8> {
    let mut out = Vec::new();
    encode_entry(&[], HEADER, &mut out);
    out
}

/// Snapshot parts as they are written: one table per key group, its windows in order,
/// each table handed on as soon as it is whole.
struct Tables<'s, 'a> {
    emit: &'s mut PartSink<'a>,
    /// The key group being written, its entries (after the header) and their count.
    group: Option<u32>,
    entries: Vec<u8>,
    count: usize,
}

impl Tables<'_, '_> {
    /// Adds a window of key group `g`, after every window of the groups before it.
    fn add(
        &mut self,
        g: u32,
        id: &[u8],
        cells: &[(String, Vec<u8>)],
        timers: &mut [KeyTimer],
    ) -> Result<(), String> {
        if self.group != Some(g) {
            self.finish()?;
            self.group = Some(g);
            self.entries = header();
            self.count = 1;
        }
        encode_window(id, cells, timers, &mut self.entries);
        self.count += 1;
        Ok(())
    }

    fn finish(&mut self) -> Result<(), String> {
        if let Some(g) = self.group.take() {
            let mut part = Vec::with_capacity(self.entries.len() + 8);
            encode_table_len(self.count, &mut part);
            part.append(&mut self.entries);
            (self.emit)(Scope::KeyGroup(g), part)?;
        }
        Ok(())
    }
}

/// Every window with cells or timers, as one table per key group to `emit`, a key
/// group at a time: the cells' windows and the timers', both in snapshot order, merged.
pub(super) fn full_parts(
    cells: Box<dyn FrozenState>,
    timers: Box<dyn FrozenTimers>,
    max_key_groups: u32,
    emit: &mut PartSink<'_>,
) -> Result<(), String> {
    // The timers are read as the merge asks for them (a store's may be more than
    // memory holds); the first error ends them, and fails the snapshot below.
    let failed = std::cell::RefCell::new(None);
    let mut timers = timers
        .all(max_key_groups)
        .map_while(|t| t.map_err(|e| *failed.borrow_mut() = Some(e)).ok())
        .map(|t| {
            let (g, id) = snapshot_place(&t.key, &t.window, max_key_groups);
            (g, id, t)
        })
        .peekable();
    let mut tables = Tables {
        emit,
        group: None,
        entries: Vec::new(),
        count: 0,
    };
    cells.for_each_window(max_key_groups, &mut |w| {
        while let Some((g, id, mut of)) = timers_before(&mut timers, Some((w.group, &w.id))) {
            tables.add(g, &id, &[], &mut of)?;
        }
        let mut of = Vec::new();
        while let Some((_, _, t)) = timers.next_if(|(g, id, _)| *g == w.group && *id == w.id) {
            of.push(t);
        }
        if let Some(e) = failed.take() {
            return Err(e);
        }
        tables.add(w.group, &w.id, &w.cells, &mut of)
    })?;
    while let Some((g, id, mut of)) = timers_before(&mut timers, None) {
        tables.add(g, &id, &[], &mut of)?;
    }
    if let Some(e) = failed.take() {
        return Err(e);
    }
    tables.finish()
}

/// The timers of the next window of `timers` (key group, id, its timers), if it comes
/// before `until`.
fn timers_before(
    timers: &mut std::iter::Peekable<impl Iterator<Item = (u32, Vec<u8>, KeyTimer)>>,
    until: Option<(u32, &[u8])>,
) -> Option<(u32, Vec<u8>, Vec<KeyTimer>)> {
    let (g, id) = match timers.peek() {
        Some((g, id, _)) if until.is_none_or(|u| (*g, &id[..]) < u) => (*g, id.clone()),
        _ => return None,
    };
    let mut of = Vec::new();
    while let Some((_, _, t)) = timers.next_if(|(tg, tid, _)| *tg == g && *tid == id) {
        of.push(t);
    }
    Some((g, id, of))
}

/// What changed in `changed` (the windows touched since the previous snapshot): per
/// key group, the windows now empty deleted, the others written whole; a key group's
/// part to `emit` as soon as it is whole.
pub(super) fn delta_parts(
    changed: Vec<(Vec<u8>, BoundedWindow)>,
    cells: Box<dyn FrozenState>,
    timers: Box<dyn FrozenTimers>,
    max_key_groups: u32,
    emit: &mut PartSink<'_>,
) -> Result<(), String> {
    let mut placed: Vec<(u32, Vec<u8>, usize)> = changed
        .iter()
        .enumerate()
        .map(|(i, (key, window))| {
            let (g, id) = snapshot_place(key, window, max_key_groups);
            (g, id, i)
        })
        .collect();
    placed.sort_unstable();
    let (mut deleted, mut written): (Vec<Vec<u8>>, Vec<Vec<u8>>) = (Vec::new(), Vec::new());
    let mut iter = placed.into_iter().peekable();
    while let Some((g, id, i)) = iter.next() {
        let (key, window) = &changed[i];
        let c = cells.window(key, window)?;
        let mut t = timers.window(key, window)?;
        if c.is_empty() && t.is_empty() {
            deleted.push(id);
        } else {
            if written.is_empty() {
                // A key group new since the previous snapshot gets its header; one
                // left with its header only is gone (see `crate::delta`).
                written.push(header());
            }
            let mut entry = Vec::new();
            encode_window(&id, &c, &mut t, &mut entry);
            written.push(entry);
        }
        if iter.peek().is_none_or(|(next, _, _)| *next != g) {
            let d: Vec<&[u8]> = deleted.iter().map(|d| &d[..]).collect();
            let w: Vec<&[u8]> = written.iter().map(|w| &w[..]).collect();
            emit(Scope::KeyGroupDelta(g), encode_delta(&d, &w))?;
            deleted.clear();
            written.clear();
        }
    }
    Ok(())
}

/// Decodes `bytes` as a whole `T` that borrows from them.
fn decode_borrowed<'a, T: Deserialize<'a>>(bytes: &'a [u8], what: &str) -> Result<T, ExecError> {
    match postcard::take_from_bytes::<T>(bytes) {
        Ok((v, [])) => Ok(v),
        Ok((_, rest)) => Err(corrupt(format!(
            "{what} does not decode: {} bytes left over",
            rest.len()
        ))),
        Err(e) => Err(corrupt(format!("{what} does not decode: {e}"))),
    }
}

/// A key group part of a stateful runner, in either format.
pub(super) fn read_key_group(bytes: &[u8]) -> Result<KeyGroupPart<'_>, ExecError> {
    let table = decode_table(bytes)
        .ok()
        .filter(|entries| entries.first().is_some_and(|(id, _)| id.is_empty()));
    let Some(entries) = table else {
        return Ok(KeyGroupPart::Old(decode_part(
            bytes,
            "a stateful ParDo key group (neither a table nor a part of before 2026-12)",
        )?));
    };
    if entries[0].1 != HEADER {
        return Err(corrupt(format!(
            "a stateful ParDo key group of another format ({:?}); this build reads {:?}",
            String::from_utf8_lossy(entries[0].1),
            String::from_utf8_lossy(HEADER)
        )));
    }
    let mut windows = Vec::with_capacity(entries.len() - 1);
    let mut all_timers = Vec::new();
    for (id, body) in &entries[1..] {
        let (key, window) = match split_window_id(id) {
            Some((key, window, [])) => (key, window),
            _ => {
                return Err(corrupt(
                    "a stateful ParDo window's id does not decode".into(),
                ))
            }
        };
        let Body { cells, timers } = decode_borrowed(body, "a stateful ParDo window")?;
        all_timers.extend(timers.into_iter().map(|t| Timer {
            key: key.to_vec(),
            window: window.clone(),
            name: t.name.to_string(),
            domain: t.domain,
            at: t.at,
            output: t.output,
        }));
        windows.push(RestoredWindow { key, window, cells });
    }
    Ok(KeyGroupPart::Windows(windows, all_timers))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A window's cells are written as runs of bytes, the same bytes as before, when
    /// they went byte by byte (what snapshots already written hold), and read back.
    #[test]
    fn cells_written_as_runs_are_the_bytes_written_byte_by_byte() {
        #[derive(Serialize)]
        struct ByteByByte<'a> {
            cells: &'a [(String, Vec<u8>)],
            timers: Vec<TimerRef<'a>>,
        }
        let cells = vec![
            ("a".to_string(), vec![]),
            ("count".to_string(), (0..=255).collect::<Vec<u8>>()),
            ("z".to_string(), vec![7; 1_000]),
        ];
        let timers = || {
            vec![TimerRef {
                name: "t",
                domain: TimeDomain::EventTime,
                at: Timestamp(5),
                output: Timestamp(4),
            }]
        };
        let runs = encode_part(&BodyRef {
            cells: &cells,
            timers: timers(),
        });
        let old = encode_part(&ByteByByte {
            cells: &cells,
            timers: timers(),
        });
        assert_eq!(runs, old);
        let body: Body<'_> = decode_borrowed(&runs, "a body").unwrap();
        let read: Vec<(String, Vec<u8>)> = body
            .cells
            .iter()
            .map(|(n, c)| (n.to_string(), c.to_vec()))
            .collect();
        assert_eq!(read, cells);
        assert_eq!(body.timers.len(), 1);
    }
}
