//! How a reducer's state travels in a snapshot: each (key, window) is an entry of its
//! key group's table ([`crate::delta`]), its id a [`WindowId`], its value a
//! [`WindowBody`] (written borrowed, read owned, byte for byte alike); full and delta
//! snapshots of key groups, and their restore.

use super::active::{end_of, hold_of, register_hold, WindowState, Written};
use super::cold::{ColdWindow, FrozenCold, Wake};
use super::Reducer;
use crate::delta::{decode_table, encode_delta, encode_entry, encode_table_len, entry_id};
use crate::keyed::snapshot::{Clocks, KeyedSnapshot, LaterParts, PartSink, SnapshotKind};
use crate::snapshot::{decode_part, Scope};
use crate::triggers::TimeDomain;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use tidewater::exec::{key_group_of, ExecError, KeyId};
use tidewater::{BoundedWindow, Timestamp};

/// A key group's entries in a snapshot: encoded one after another, and where each is.
type EncodedEntries = (Vec<u8>, Vec<(usize, usize)>);

/// One (key, window) of a reducer in a snapshot: the entry of a key group table (see
/// [`crate::delta`]) whose id is a [`WindowId`] and whose value is a [`WindowBody`].
#[derive(Serialize, Deserialize)]
struct WindowId {
    key: Vec<u8>,
    window: BoundedWindow,
}

/// What a snapshot holds of a (key, window).
#[derive(Serialize, Deserialize)]
struct WindowBody {
    state: WindowState,
    contents: Option<Vec<u8>>,
    timers: Vec<(TimeDomain, Timestamp)>,
}

/// A window's own timers not yet handled: (time, key, window, activation).
pub(super) type Unhandled<'a> =
    std::collections::HashSet<(Timestamp, KeyId, &'a BoundedWindow, u64)>;

/// A window as restore reads it.
pub(super) struct WindowEntry {
    pub(super) key: Vec<u8>,
    pub(super) window: BoundedWindow,
    pub(super) state: WindowState,
    pub(super) contents: Option<Vec<u8>>,
    pub(super) timers: Vec<(TimeDomain, Timestamp)>,
}

impl WindowEntry {
    /// Window `window` of key `key` from its entry's body.
    pub(super) fn decode(
        key: Vec<u8>,
        window: BoundedWindow,
        body: &[u8],
    ) -> Result<WindowEntry, ExecError> {
        let WindowBody {
            state,
            contents,
            timers,
        } = decode_part(body, "a reducer window")?;
        Ok(WindowEntry {
            key,
            window,
            state,
            contents,
            timers,
        })
    }
}

/// The id of window `w` of canonical key `key` in its key group's table.
fn window_id(key: &[u8], w: &BoundedWindow) -> Vec<u8> {
    postcard::to_allocvec(&WindowIdRef { key, window: w }).expect("snapshot parts are plain data")
}

/// A [`WindowId`] as the snapshot writes it, borrowed: the same bytes (postcard writes
/// a byte string and a sequence of bytes alike).
#[derive(Serialize)]
struct WindowIdRef<'a> {
    #[serde(serialize_with = "bytes")]
    key: &'a [u8],
    window: &'a BoundedWindow,
}

/// A [`WindowBody`] as the snapshot writes it, borrowed from the state.
#[derive(Serialize)]
struct WindowBodyRef<'a> {
    state: &'a WindowState,
    #[serde(serialize_with = "optional_bytes")]
    contents: Option<Vec<u8>>,
    timers: Vec<(TimeDomain, Timestamp)>,
}

fn bytes<S: serde::Serializer>(b: &&[u8], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_bytes(b)
}

fn optional_bytes<S: serde::Serializer>(b: &Option<Vec<u8>>, s: S) -> Result<S::Ok, S::Error> {
    match b {
        Some(b) => s.serialize_some(&BytesRef(b)),
        None => s.serialize_none(),
    }
}

/// A byte string, serialized as one.
struct BytesRef<'a>(&'a [u8]);

impl Serialize for BytesRef<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(self.0)
    }
}

/// A (key, window) of a reducer's key group part, read offline (a savepoint's reader).
pub struct WindowView {
    /// The key's canonical encoding.
    pub key: Vec<u8>,
    pub window: BoundedWindow,
    /// Panes fired so far.
    pub panes: u64,
    /// The trigger finished: later data is dropped.
    pub closed: bool,
    /// The encoded contents (buffered values or accumulator), if any.
    pub contents: Option<Vec<u8>>,
    /// Its pending timers.
    pub timers: Vec<(TimeDomain, Timestamp)>,
}

/// The windows of a key group part written by [`Reducer::snapshot_key_groups`].
pub fn decode_key_group(bytes: &[u8]) -> Result<Vec<WindowView>, ExecError> {
    Ok(decode_windows(bytes)?
        .into_iter()
        .map(|e| WindowView {
            key: e.key,
            window: e.window,
            panes: e.state.panes,
            closed: e.state.closed,
            contents: e.contents,
            timers: e.timers,
        })
        .collect())
}

/// Every window of a key group part, as restore reads it.
fn decode_windows(bytes: &[u8]) -> Result<Vec<WindowEntry>, ExecError> {
    let downstream = |e: tidewater::Error| ExecError::Downstream(Box::new(e));
    let mut out = Vec::new();
    for (id, body) in decode_table(bytes).map_err(downstream)? {
        let WindowId { key, window } = decode_part(id, "a reducer window's id")?;
        out.push(WindowEntry::decode(key, window, body)?);
    }
    Ok(out)
}

/// Adds the entry of window `w` of `key` (its snapshot entry's body `body`) to its key
/// group's entries.
fn add_window(
    groups: &mut BTreeMap<u32, EncodedEntries>,
    max_key_groups: u32,
    key: &[u8],
    w: &BoundedWindow,
    body: &[u8],
) {
    let (buf, spans) = groups.entry(key_group_of(key, max_key_groups)).or_default();
    let start = buf.len();
    encode_entry(&window_id(key, w), body, buf);
    spans.push((start, buf.len()));
}

/// Sorts the entries at `spans` of `buf` by id, so that the same state gives the same
/// bytes whatever the order they were encoded in.
fn sort_by_id(buf: &[u8], spans: &mut [(usize, usize)]) {
    spans.sort_unstable_by(|a, b| entry_id(&buf[a.0..a.1]).cmp(entry_id(&buf[b.0..b.1])));
}

/// A key group's table of the entries at `spans` of `buf`.
fn full_table(buf: &[u8], spans: &mut [(usize, usize)]) -> Vec<u8> {
    sort_by_id(buf, spans);
    let mut out = Vec::with_capacity(buf.len() + 10);
    encode_table_len(spans.len(), &mut out);
    for &(a, b) in spans.iter() {
        out.extend_from_slice(&buf[a..b]);
    }
    out
}

/// A full snapshot's key groups, ascending, to `sink`: the entries of the windows in
/// memory (`hot`, encoded when the snapshot was taken) with those of the windows in
/// the store as `frozen` holds them, read a key group at a time.
fn full_with_stored(
    hot: BTreeMap<u32, EncodedEntries>,
    frozen: &FrozenCold,
    max_key_groups: u32,
    sink: &mut PartSink<'_>,
) -> Result<(), ExecError> {
    let mut emit = |g: u32, (buf, mut spans): EncodedEntries| {
        sink(Scope::KeyGroup(g), full_table(&buf, &mut spans))
    };
    let mut hot = hot.into_iter().peekable();
    let mut current: Option<(u32, EncodedEntries)> = None;
    frozen.for_each(&mut |key, cw| {
        let g = key_group_of(key, max_key_groups);
        match current.take() {
            Some((c, entries)) if c == g => current = Some((c, entries)),
            Some((c, _)) if c > g => {
                return Err(format!(
                    "the store's windows are not in key group order ({g} after {c})"
                ))
            }
            Some((c, entries)) => emit(c, entries)?,
            None => {}
        }
        if current.is_none() {
            // The groups only memory holds before this one, then this one's.
            while let Some((h, entries)) = hot.next_if(|(h, _)| *h < g) {
                emit(h, entries)?;
            }
            let start = hot.next_if(|(h, _)| *h == g).map(|(_, e)| e);
            current = Some((g, start.unwrap_or_default()));
        }
        let (_, (buf, spans)) = current.as_mut().expect("set above");
        let start = buf.len();
        encode_entry(&window_id(key, &cw.window), &cw.body, buf);
        spans.push((start, buf.len()));
        Ok(())
    })?;
    let rest = current.into_iter().chain(hot);
    rest.into_iter()
        .try_for_each(|(g, entries)| emit(g, entries))
        .map_err(|message| {
            ExecError::Downstream(Box::new(tidewater::Error::Checkpoint { message }))
        })
}

impl Reducer {
    /// The reducer's keyed state (windows, trigger states, contents, timers) as one
    /// part per key group: with [`SnapshotKind::Full`] a table of every window of each
    /// key group that holds any; with [`SnapshotKind::Delta`], once a snapshot was
    /// taken, a delta of each key group something changed in since (the windows new or
    /// changed, and those gone). Says whether the parts are a delta.
    pub fn snapshot_key_groups(
        &mut self,
        max_key_groups: u32,
        kind: SnapshotKind,
    ) -> Result<KeyedSnapshot, ExecError> {
        let delta = kind == SnapshotKind::Delta && self.has_base && !self.removed_overflow;
        // Each key group's entries sorted by id, so that the same state gives the same
        // bytes whatever the hash map's order: encoded one after another into the
        // group's buffer, then put in order by their spans.
        let wm = self.input_watermark;
        // A window's own timer is pending when the watermark has not passed it, or in
        // a time not yet handled (a window made active by late data since the last
        // advance).
        let unhandled = self.unhandled(wm);
        let mut groups: BTreeMap<u32, EncodedEntries> = BTreeMap::new();
        let (mut id, mut body) = (Vec::new(), Vec::new());
        for ((k, w), st) in self.windows.iter() {
            if delta && st.written.get() == Written::Clean {
                continue;
            }
            st.written.set(Written::Clean);
            let key = self.state.key_bytes(*k);
            let (buf, spans) = groups.entry(key_group_of(key, max_key_groups)).or_default();
            let start = buf.len();
            self.encode_entry(key, w, *k, st, wm, &unhandled, &mut id, &mut body, buf)?;
            spans.push((start, buf.len()));
        }
        drop(unhandled);
        // The windows in the store: every one in a full snapshot, those that went there
        // changed since the last in a delta.
        let mut frozen = None;
        if let Some(cold) = self.cold.as_mut() {
            let dirty = std::mem::take(&mut cold.dirty);
            if delta {
                for ((key, w), (_, body)) in &dirty {
                    add_window(&mut groups, max_key_groups, key, w, body);
                }
            } else {
                frozen = cold.freeze();
            }
        }
        if let Some(frozen) = frozen
            .as_ref()
            .filter(|f| f.max_key_groups != max_key_groups)
        {
            // Its addresses begin with other key groups than the snapshot's, so they
            // are not in its order: gathered.
            frozen.for_each(&mut |key, cw| {
                add_window(&mut groups, max_key_groups, key, &cw.window, &cw.body);
                Ok(())
            })?;
        } else if let Some(frozen) = frozen {
            self.removed.clear();
            self.removed_overflow = false;
            self.has_base = true;
            // Read from a frozen view of the store on the writer's thread, a key group
            // at a time: a full snapshot holds the windows in memory and one key
            // group of the store's, not all of them.
            let later = LaterParts::new(move |sink| {
                full_with_stored(groups, &frozen, max_key_groups, sink)
            });
            return Ok(KeyedSnapshot {
                parts: Vec::new(),
                later: Some(later),
                delta: false,
            });
        }
        let mut deleted: BTreeMap<u32, Vec<Vec<u8>>> = BTreeMap::new();
        if delta {
            for (key, w) in &self.removed {
                deleted
                    .entry(key_group_of(key, max_key_groups))
                    .or_default()
                    .push(window_id(key, w));
            }
        }
        self.removed.clear();
        self.removed_overflow = false;
        self.has_base = true;
        let mut parts = Vec::with_capacity(groups.len() + deleted.len());
        let mut written = groups.into_iter().peekable();
        let mut gone = deleted.into_iter().peekable();
        loop {
            // The next key group with new or changed entries, deletions, or both.
            let g = match (written.peek(), gone.peek()) {
                (Some((a, _)), Some((b, _))) => *a.min(b),
                (Some((a, _)), None) => *a,
                (None, Some((b, _))) => *b,
                (None, None) => break,
            };
            let (buf, mut spans) = match written.peek() {
                Some((a, _)) if *a == g => written.next().expect("peeked").1,
                _ => Default::default(),
            };
            if !delta {
                parts.push((Scope::KeyGroup(g), full_table(&buf, &mut spans)));
                continue;
            }
            sort_by_id(&buf, &mut spans);
            let entries: Vec<&[u8]> = spans.iter().map(|&(a, b)| &buf[a..b]).collect();
            let mut ids = match gone.peek() {
                Some((b, _)) if *b == g => gone.next().expect("peeked").1,
                _ => Vec::new(),
            };
            ids.sort_unstable();
            ids.dedup();
            let ids: Vec<&[u8]> = ids.iter().map(|i| &i[..]).collect();
            parts.push((Scope::KeyGroupDelta(g), encode_delta(&ids, &entries)));
        }
        Ok(KeyedSnapshot {
            parts,
            later: None,
            delta,
        })
    }

    /// Appends to `out` the table entry of window `w` of key `k` (canonical key `key`,
    /// state `st`), with the input watermark `wm` and the window timers below it not
    /// yet handled; `id` and `body` are scratch space.
    #[allow(clippy::too_many_arguments)]
    fn encode_entry(
        &self,
        key: &[u8],
        w: &BoundedWindow,
        k: KeyId,
        st: &WindowState,
        wm: Timestamp,
        unhandled: &Unhandled<'_>,
        id: &mut Vec<u8>,
        body: &mut Vec<u8>,
        out: &mut Vec<u8>,
    ) -> Result<(), ExecError> {
        let timers = self.entry_timers(w, k, st, wm, unhandled);
        body.clear();
        self.encode_body(w, k, st, timers, body)?;
        id.clear();
        *id = postcard::to_extend(&WindowIdRef { key, window: w }, std::mem::take(id))
            .expect("snapshot parts are plain data");
        encode_entry(id, body, out);
        Ok(())
    }

    /// The pending timers of window `w` of key `k` (state `st`), as its entry has
    /// them: its own end-of-window and garbage-collection timers the watermark `wm` has
    /// not passed or that are not yet handled, and its trigger's.
    pub(super) fn entry_timers(
        &self,
        w: &BoundedWindow,
        k: KeyId,
        st: &WindowState,
        wm: Timestamp,
        unhandled: &Unhandled<'_>,
    ) -> Vec<(TimeDomain, Timestamp)> {
        let (end, gc) = (end_of(w), self.gc_time(w));
        let mut timers: Vec<(TimeDomain, Timestamp)> = [end, gc]
            .into_iter()
            .enumerate()
            .filter(|&(i, t)| {
                (i == 0 || t != end) && (t >= wm || unhandled.contains(&(t, k, w, st.serial)))
            })
            .map(|(_, t)| (TimeDomain::EventTime, t))
            .collect();
        timers.extend(
            self.timers
                .of(&k, w.clone())
                .into_iter()
                .map(|t| (t.domain, t.at)),
        );
        timers
    }

    /// Appends to `out` the body of window `w`'s entry (a [`WindowBody`]): its state,
    /// contents and `timers`.
    pub(super) fn encode_body(
        &self,
        w: &BoundedWindow,
        k: KeyId,
        st: &WindowState,
        timers: Vec<(TimeDomain, Timestamp)>,
        out: &mut Vec<u8>,
    ) -> Result<(), ExecError> {
        let value = WindowBodyRef {
            state: st,
            contents: self.state.encode_contents(k, w.clone())?,
            timers,
        };
        *out = postcard::to_extend(&value, std::mem::take(out))
            .expect("snapshot parts are plain data");
        Ok(())
    }

    /// The own timers of windows that the watermark `wm` has passed but that are not
    /// handled yet (windows made active by late data since the last advance).
    pub(super) fn unhandled(&self, wm: Timestamp) -> Unhandled<'_> {
        self.window_timers
            .range(..wm)
            .flat_map(|(t, ws)| ws.iter().map(move |(k, w, s)| (*t, *k, w, *s)))
            .collect()
    }

    /// Adds a key group written by [`Reducer::snapshot_key_groups`]; past the budget of
    /// windows in memory, the least recently touched go to the store.
    pub fn restore_key_group(&mut self, bytes: &[u8]) -> Result<(), ExecError> {
        let downstream = |e: tidewater::Error| ExecError::Downstream(Box::new(e));
        // Once the budget is full, windows go to the store as the snapshot wrote them
        // (their own timers are known exactly here, not from clocks not restored yet);
        // a key's windows are together in the table, so under a merging WindowFn a key
        // goes wholly to one side.
        let mut unit: Option<(Vec<u8>, Vec<ColdWindow>, Wake)> = None;
        let (mut to_store, mut last_key) = (false, Vec::new());
        for (id, body) in decode_table(bytes).map_err(downstream)? {
            let WindowId { key, window } = decode_part(id, "a reducer window's id")?;
            let e = WindowEntry::decode(key, window, body)?;
            self.check_trigger_state(&e)?;
            let Some(cold) = self.cold.as_mut() else {
                self.install(e, Written::New)?;
                continue;
            };
            let same_key = cold.merging() && last_key == e.key;
            if !same_key {
                last_key.clone_from(&e.key);
                if let Some((key, windows, wake)) = unit.take() {
                    let unit_window = cold.unit(&windows[0].window);
                    cold.put(&key, &unit_window, &windows, wake)?;
                }
                to_store = self.windows.len() >= cold.budget;
            }
            if !to_store {
                self.install(e, Written::New)?;
                continue;
            }
            let (_, windows, wake) =
                unit.get_or_insert_with(|| (e.key.clone(), Vec::new(), Wake::default()));
            wake.merge(Wake::of(
                hold_of(&self.strategy, &e.window, &e.state),
                &e.timers,
            ));
            windows.push(ColdWindow {
                window: e.window,
                body: body.to_vec(),
            });
        }
        if let (Some((key, windows, wake)), Some(cold)) = (unit, self.cold.as_mut()) {
            let unit_window = cold.unit(&windows[0].window);
            cold.put(&key, &unit_window, &windows, wake)?;
        }
        Ok(())
    }

    /// The trigger's methods index its state by node: a state of another shape would
    /// panic at the next element or timer.
    fn check_trigger_state(&self, e: &WindowEntry) -> Result<(), ExecError> {
        if self.trigger.is_state_for(&e.state.trigger) {
            return Ok(());
        }
        Err(ExecError::Downstream(Box::new(
            tidewater::Error::Checkpoint {
                message: format!(
                    "the trigger state of window {:?} does not fit the trigger",
                    e.window
                ),
            },
        )))
    }

    /// Makes window entry `e` (restored, or back from the store) active, standing as
    /// `written` against the snapshots.
    pub(super) fn install(&mut self, e: WindowEntry, written: Written) -> Result<(), ExecError> {
        self.check_trigger_state(&e)?;
        let k = self.state.intern_key(&e.key)?;
        if let Some(c) = &e.contents {
            self.state.restore_contents(k, e.window.clone(), c)?;
        }
        let mut st = e.state;
        self.next_serial += 1;
        st.serial = self.next_serial;
        st.written.set(written);
        st.touched = self.tick;
        register_hold(&mut self.holds, &self.strategy, k, &e.window, &st);
        self.windows.insert((k, e.window.clone()), st);
        // The window's own timers that were pending go back into their queue.
        for &(domain, at) in &e.timers {
            if self.is_window_timer(&e.window, domain, at) {
                self.push_window_timer(at, (k, e.window.clone(), self.next_serial));
            }
        }
        let mut timers = e.timers;
        self.add_timers(k, e.window, &mut timers);
        Ok(())
    }

    /// The clocks, for a snapshot.
    pub(crate) fn clocks(&self) -> Clocks {
        Clocks {
            input_watermark: self.input_watermark,
            output_watermark: self.output_watermark,
            processing_time: self.processing_time,
        }
    }

    /// Restores the clocks of one old instance (see [`Clocks::restore`]).
    pub(crate) fn restore_clocks(&mut self, c: Clocks) {
        c.restore(
            &mut self.restored_clocks,
            &mut self.input_watermark,
            &mut self.output_watermark,
            &mut self.processing_time,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    /// The borrowed forms the snapshot writes decode as the owned forms restore reads,
    /// byte for byte.
    #[test]
    fn window_entries_encode_alike_borrowed_and_owned() {
        let state = WindowState {
            serial: 7,
            trigger: postcard::from_bytes(&[0]).expect("a trigger state"),
            closed: false,
            panes: 2,
            non_speculative_panes: 1,
            last_timing: None,
            new_data: true,
            min_ts: Some(Timestamp(5)).into(),
            max_ts: Some(Timestamp(900)).into(),
            written: Cell::default(),
            registered: Cell::default(),
            touched: 0,
        };
        let window = BoundedWindow::Interval {
            start: Timestamp(0),
            end: Timestamp(1000),
        };
        let timers = vec![
            (TimeDomain::EventTime, Timestamp(999)),
            (TimeDomain::ProcessingTime, Timestamp(42)),
        ];
        for key in [&b"apple"[..], &[][..]] {
            let id = window_id(key, &window);
            let owned_id = WindowId {
                key: key.to_vec(),
                window: window.clone(),
            };
            assert_eq!(id, postcard::to_allocvec(&owned_id).unwrap());
            let back: WindowId = postcard::from_bytes(&id).unwrap();
            assert_eq!((&back.key[..], &back.window), (key, &window));
        }
        for contents in [Some(vec![1, 2, 3, 200]), None] {
            let borrowed = WindowBodyRef {
                state: &state,
                contents: contents.clone(),
                timers: timers.clone(),
            };
            let owned = WindowBody {
                state: state.clone(),
                contents: contents.clone(),
                timers: timers.clone(),
            };
            let bytes = postcard::to_allocvec(&borrowed).unwrap();
            assert_eq!(bytes, postcard::to_allocvec(&owned).unwrap());
            let back: WindowBody = postcard::from_bytes(&bytes).unwrap();
            assert_eq!(back.contents, contents);
            assert_eq!(back.timers, timers);
        }
    }
}
