//! The reducer's windows beyond memory (`--state-backend fjall`): the reducer keeps at
//! most a budget of windows in memory (its hot tier: the structures of `mod.rs`, where
//! every rule runs) and puts the least recently touched ones in the embedded store
//! (this cold tier), each as its snapshot entry's body, so that what a window is in the
//! store, in a snapshot and in memory is one encoding.
//!
//! A window goes to the store only when nothing in it is due: its watermark hold and
//! its event-time timers are not before the input watermark, its processing-time
//! timers not before the processing time. It comes back before anything of it is used:
//! at its next input (the typed state takes its contents back before adding the input,
//! [`tidewater::exec::Accept::Restore`]), and when its earliest timer or hold comes
//! due (a *wake* timer in the store, per unit, at the earliest of them). So the output
//! watermark, computed over the windows in memory, is exact: every window in the store
//! holds at or after the input watermark, which bounds it anyway.
//!
//! The unit that moves is a (key, window) under a non-merging WindowFn, and a key with
//! all its windows under a merging one (merging needs every window of the key; Beam
//! keeps a key's merging window set in one value state too): one cell per unit, at
//! (key, window) or (key, the global window).

use super::active::Written;
use crate::state::{decode_cell, CellContents, KeyTimer, KeyedTimers, StateBackend, StateChoice};
use crate::triggers::TimeDomain;
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use tidewater::exec::ExecError;
use tidewater::{BoundedWindow, Timestamp};

/// The cell a unit's windows are in.
const CELL: &str = "reducer windows";
/// The name of a unit's wake timers (one per time domain).
const WAKE: &str = "wake";

/// Windows kept in memory per reducer by default before the least recently touched go
/// to the store (about 350 bytes each for a windowed count: some 23 MB).
pub const HOT_WINDOWS: usize = 65_536;

/// A window in the store: its snapshot entry's body ([`super::wire`]'s `WindowBody`).
#[derive(Serialize, Deserialize)]
pub(super) struct ColdWindow {
    pub(super) window: BoundedWindow,
    pub(super) body: Vec<u8>,
}

/// When a unit in the store must come back: the earliest of its windows' holds and
/// event-time timers, and of their processing-time timers.
#[derive(Clone, Copy, Default, Debug)]
pub(super) struct Wake {
    pub(super) event: Option<Timestamp>,
    pub(super) processing: Option<Timestamp>,
}

impl Wake {
    /// The wake of a window holding at `hold` with pending `timers`.
    pub(super) fn of(hold: Option<Timestamp>, timers: &[(TimeDomain, Timestamp)]) -> Wake {
        let mut wake = Wake::default();
        if let Some(h) = hold {
            wake.add(TimeDomain::EventTime, h);
        }
        for &(domain, at) in timers {
            wake.add(domain, at);
        }
        wake
    }

    /// The earlier of this wake and `other`, per domain.
    pub(super) fn merge(&mut self, other: Wake) {
        for (domain, at) in [
            (TimeDomain::EventTime, other.event),
            (TimeDomain::ProcessingTime, other.processing),
        ] {
            if let Some(at) = at {
                self.add(domain, at);
            }
        }
    }

    pub(super) fn add(&mut self, domain: TimeDomain, at: Timestamp) {
        let slot = match domain {
            TimeDomain::EventTime => &mut self.event,
            TimeDomain::ProcessingTime => &mut self.processing,
        };
        *slot = Some(slot.map_or(at, |t| t.min(at)));
    }
}

/// The reducer's windows in the store, with what snapshots need to know of them.
pub(super) struct Cold {
    /// The store, opened when the first unit goes there (most groupings never pass
    /// their budget, and a store's keyspaces cost to make and to drop).
    store: Option<Store>,
    /// What opens it.
    choice: StateChoice,
    max_key_groups: u32,
    allowed_lateness_ms: i64,
    /// Windows the reducer keeps in memory before some go to the store.
    pub(super) budget: usize,
    merging: bool,
    /// Units and windows in the store.
    units: usize,
    windows: usize,
    /// Windows that went to the store changed since the last snapshot (with how they
    /// stood: new or changed, and their body): the next delta writes them, and a
    /// window coming back takes its standing from here (otherwise it is as the last
    /// snapshot wrote it).
    pub(super) dirty: FxHashMap<(Vec<u8>, BoundedWindow), (Written, Vec<u8>)>,
}

/// The store's cells (a unit's windows) and timers (its wakes).
struct Store {
    cells: Box<dyn StateBackend>,
    timers: Box<dyn KeyedTimers>,
}

fn failed(message: String) -> ExecError {
    ExecError::Downstream(Box::new(tidewater::Error::Checkpoint {
        message: format!("the state backend failed (a grouping's windows): {message}"),
    }))
}

impl Cold {
    /// The store of `state`'s kind for a reducer, or none (state in memory).
    pub(super) fn open(
        state: &StateChoice,
        max_key_groups: u32,
        merging: bool,
        allowed_lateness_ms: i64,
    ) -> tidewater::Result<Option<Cold>> {
        let StateChoice::Embedded { hot_windows, .. } = state else {
            return Ok(None);
        };
        Ok(Some(Cold {
            store: None,
            choice: state.clone(),
            max_key_groups,
            allowed_lateness_ms,
            budget: (*hot_windows).max(1),
            merging,
            units: 0,
            windows: 0,
            dirty: FxHashMap::default(),
        }))
    }

    /// Whether the store holds no window.
    pub(super) fn is_empty(&self) -> bool {
        self.units == 0
    }

    /// Windows in the store.
    pub(super) fn windows(&self) -> usize {
        self.windows
    }

    /// Whether a unit is a key with all its windows (a merging WindowFn's).
    pub(super) fn merging(&self) -> bool {
        self.merging
    }

    /// The unit window `w` moves in.
    pub(super) fn unit(&self, w: &BoundedWindow) -> BoundedWindow {
        if self.merging {
            BoundedWindow::Global
        } else {
            w.clone()
        }
    }

    /// Puts unit (key, unit) in the store: its windows and when it must come back.
    pub(super) fn put(
        &mut self,
        key: &[u8],
        unit: &BoundedWindow,
        windows: &[ColdWindow],
        wake: Wake,
    ) -> Result<(), ExecError> {
        let value = postcard::to_allocvec(windows).expect("windows encode");
        let store = self.store()?;
        store.cells.put(key, unit, CELL, &value);
        for (domain, at) in [
            (TimeDomain::EventTime, wake.event),
            (TimeDomain::ProcessingTime, wake.processing),
        ] {
            if let Some(at) = at {
                store.timers.set(KeyTimer {
                    key: key.to_vec(),
                    window: unit.clone(),
                    name: WAKE.into(),
                    domain,
                    at,
                    output: at,
                });
            }
        }
        self.units += 1;
        self.windows += windows.len();
        Ok(())
    }

    /// The store, opened on first use.
    fn store(&mut self) -> Result<&mut Store, ExecError> {
        if self.store.is_none() {
            let open = |e: tidewater::Error| failed(e.to_string());
            // The store's windows expire as the reducer's: a unit comes back (its wake
            // is at its garbage-collection time at the latest) before its cells could.
            self.store = Some(Store {
                cells: self
                    .choice
                    .backend(self.max_key_groups, self.allowed_lateness_ms)
                    .map_err(open)?,
                timers: self.choice.timers(self.max_key_groups).map_err(open)?,
            });
        }
        Ok(self.store.as_mut().expect("opened"))
    }

    /// Takes unit (key, unit) out of the store, if it is there.
    pub(super) fn take(
        &mut self,
        key: &[u8],
        unit: &BoundedWindow,
    ) -> Result<Option<Vec<ColdWindow>>, ExecError> {
        let Some(store) = self.store.as_mut().filter(|_| self.units > 0) else {
            return Ok(None);
        };
        let Some(cell) = store.cells.get(key, unit, CELL) else {
            return Ok(None);
        };
        let windows: Vec<ColdWindow> = postcard::from_bytes(&cell)
            .map_err(|e| failed(format!("a unit of windows does not decode: {e}")))?;
        store.cells.clear_window(key, unit);
        store.timers.delete_window(key, unit);
        self.units -= 1;
        self.windows -= windows.len();
        Ok(Some(windows))
    }

    /// The unit whose wake in `domain` is earliest and before `now`, with that wake
    /// (taken out of the store: [`Cold::take`] it next).
    pub(super) fn pop_due(
        &mut self,
        domain: TimeDomain,
        now: Timestamp,
    ) -> Option<(Vec<u8>, BoundedWindow)> {
        let store = self.store.as_mut().filter(|_| self.units > 0)?;
        store.timers.pop_due(domain, now).map(|t| (t.key, t.window))
    }

    /// The earliest wake in `domain`.
    pub(super) fn next(&self, domain: TimeDomain) -> Option<Timestamp> {
        let store = self.store.as_ref().filter(|_| self.units > 0)?;
        store.timers.next(domain)
    }

    /// Drops the store's record of units that were there and whose windows have
    /// expired by `watermark` (none is there still: each came back at its wake).
    pub(super) fn expire(&mut self, watermark: Timestamp) {
        if let Some(store) = self.store.as_mut() {
            store.cells.expire(watermark, &mut |_, _| {});
        }
    }

    /// The end of a bundle: errors of the store since the last one.
    pub(super) fn flush(&mut self) -> Result<(), ExecError> {
        let Some(store) = self.store.as_mut() else {
            return Ok(());
        };
        store.cells.flush().map_err(failed)?;
        store.timers.flush().map_err(failed)
    }

    /// Every window in the store, as (encoded key, window, body), to `f` (in no
    /// particular order): a full snapshot's.
    pub(super) fn for_each(
        &mut self,
        max_key_groups: u32,
        f: &mut dyn FnMut(&[u8], ColdWindow),
    ) -> Result<(), ExecError> {
        let Some(store) = self.store.as_mut().filter(|_| self.units > 0) else {
            return Ok(());
        };
        store.cells.sync().map_err(failed)?;
        let frozen = store.cells.freeze();
        frozen
            .for_each_window(max_key_groups, &mut |unit| {
                for (name, cell) in &unit.cells {
                    if name != CELL {
                        continue;
                    }
                    let windows: Vec<ColdWindow> = match decode_cell(cell)? {
                        CellContents::Value(v) => postcard::from_bytes(&v)
                            .map_err(|e| format!("a unit of windows does not decode: {e}"))?,
                        _ => return Err("a unit of windows is not a value".into()),
                    };
                    for w in windows {
                        f(&unit.key, w);
                    }
                }
                Ok(())
            })
            .map_err(failed)
    }
}
