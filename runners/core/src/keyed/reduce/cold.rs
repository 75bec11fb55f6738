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
//! due (a *wake* per unit and time domain, at the earliest of them). So the output
//! watermark is computed over the windows in memory and the earliest wake in the store
//! (a window there holds at or after its wake); once an advance has brought back every
//! window due, that wake is not before the input watermark, and the output watermark is
//! exact.
//!
//! The unit that moves is a (key, window) under a non-merging WindowFn, and a key with
//! all its windows under a merging one (merging needs every window of the key; Beam
//! keeps a key's merging window set in one value state too): one entry of
//! [`EmbeddedUnits`] per unit, at (key, window) or (key, the global window).

use super::active::Written;
use crate::state::{EmbeddedUnits, FrozenUnits, StateChoice};
use crate::triggers::TimeDomain;
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use tidewater::exec::ExecError;
use tidewater::{BoundedWindow, Timestamp};

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
/// event-time timers, and of their processing-time timers; and where it holds the
/// output watermark (its windows' earliest hold).
#[derive(Clone, Copy, Default, Debug)]
pub(super) struct Wake {
    pub(super) event: Option<Timestamp>,
    pub(super) processing: Option<Timestamp>,
    pub(super) hold: Option<Timestamp>,
}

impl Wake {
    /// The wake of a window holding at `hold` with pending `timers`.
    pub(super) fn of(hold: Option<Timestamp>, timers: &[(TimeDomain, Timestamp)]) -> Wake {
        let mut wake = Wake {
            hold,
            ..Wake::default()
        };
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
        self.hold = match (self.hold, other.hold) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }

    /// The wakes as the store keeps them (event time, processing time, hold).
    fn by_queue(self) -> crate::state::Wakes {
        [self.event, self.processing, self.hold]
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
    store: Option<EmbeddedUnits>,
    /// What opens it.
    choice: StateChoice,
    max_key_groups: u32,
    /// Windows the reducer keeps in memory before some go to the store.
    pub(super) budget: usize,
    merging: bool,
    /// Windows in the store.
    windows: usize,
    /// Windows that went to the store changed since the last snapshot (with how they
    /// stood: new or changed, and their body): the next delta writes them, and a
    /// window coming back takes its standing from here (otherwise it is as the last
    /// snapshot wrote it).
    pub(super) dirty: FxHashMap<(Vec<u8>, BoundedWindow), (Written, Vec<u8>)>,
}

/// A unit taken out of the store: its encoded key and its windows.
pub(super) type TakenUnit = (Vec<u8>, Vec<ColdWindow>);

fn failed(message: String) -> ExecError {
    ExecError::Downstream(Box::new(tidewater::Error::Checkpoint {
        message: format!("the state backend failed (a grouping's windows): {message}"),
    }))
}

fn decode(value: &[u8]) -> Result<Vec<ColdWindow>, String> {
    postcard::from_bytes(value).map_err(|e| format!("a unit of windows does not decode: {e}"))
}

impl Cold {
    /// The store of `state`'s kind for a reducer, or none (state in memory).
    pub(super) fn open(
        state: &StateChoice,
        max_key_groups: u32,
        merging: bool,
    ) -> tidewater::Result<Option<Cold>> {
        let StateChoice::Embedded { hot_windows, .. } = state else {
            return Ok(None);
        };
        Ok(Some(Cold {
            store: None,
            choice: state.clone(),
            max_key_groups,
            budget: (*hot_windows).max(1),
            merging,
            windows: 0,
            dirty: FxHashMap::default(),
        }))
    }

    /// Whether the store holds no window.
    pub(super) fn is_empty(&self) -> bool {
        self.store.as_ref().is_none_or(|s| s.is_empty())
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
        if self.store.is_none() {
            let units = self.choice.units(self.max_key_groups);
            self.store = units.map_err(|e| failed(e.to_string()))?;
        }
        let store = self.store.as_mut().expect("a store: opened above");
        store
            .put(key, unit, wake.by_queue(), &value)
            .map_err(failed)?;
        self.windows += windows.len();
        Ok(())
    }

    /// Takes unit (key, unit) out of the store, if it is there.
    pub(super) fn take(
        &mut self,
        key: &[u8],
        unit: &BoundedWindow,
    ) -> Result<Option<Vec<ColdWindow>>, ExecError> {
        let Some(store) = self.store.as_mut() else {
            return Ok(None);
        };
        let Some(value) = store.take(key, unit).map_err(failed)? else {
            return Ok(None);
        };
        let windows = decode(&value).map_err(failed)?;
        self.windows -= windows.len();
        Ok(Some(windows))
    }

    /// Takes out the unit whose wake in `domain` is earliest, if it is before `now`:
    /// its key and windows.
    pub(super) fn take_due(
        &mut self,
        domain: TimeDomain,
        now: Timestamp,
    ) -> Result<Option<TakenUnit>, ExecError> {
        let Some(store) = self.store.as_ref() else {
            return Ok(None);
        };
        let Some((key, unit)) = store.first_due(domain, now).map_err(failed)? else {
            return Ok(None);
        };
        match self.take(&key, &unit)? {
            Some(windows) => Ok(Some((key, windows))),
            None => Err(failed(format!(
                "a unit's wake is in the store without its windows (window {unit:?})"
            ))),
        }
    }

    /// The earliest wake in `domain`.
    pub(super) fn next(&self, domain: TimeDomain) -> Option<Timestamp> {
        self.store.as_ref()?.next(domain)
    }

    /// The earliest hold of a window in the store.
    pub(super) fn earliest_hold(&self) -> Option<Timestamp> {
        self.store.as_ref()?.earliest_hold()
    }

    /// The end of a bundle: errors of the store since the last one.
    pub(super) fn flush(&mut self) -> Result<(), ExecError> {
        match self.store.as_mut() {
            Some(store) => store.flush().map_err(failed),
            None => Ok(()),
        }
    }

    /// The windows in the store as they are now, to read on another thread while the
    /// reducer goes on; `None` if no window ever went there.
    pub(super) fn freeze(&self) -> Option<FrozenCold> {
        Some(FrozenCold {
            units: self.store.as_ref()?.freeze(),
            max_key_groups: self.max_key_groups,
        })
    }
}

/// What [`FrozenCold::for_each`] calls with each window: (encoded key, window).
pub(super) type ColdVisitor<'a> = dyn FnMut(&[u8], ColdWindow) -> Result<(), String> + 'a;

/// The windows in the store as of [`Cold::freeze`].
pub(super) struct FrozenCold {
    units: FrozenUnits,
    /// The key groups their addresses begin with.
    pub(super) max_key_groups: u32,
}

impl FrozenCold {
    /// Every window, as (encoded key, window, body), to `f`, by key group ascending: a
    /// full snapshot's.
    pub(super) fn for_each(&self, f: &mut ColdVisitor<'_>) -> Result<(), ExecError> {
        self.units
            .for_each(&mut |key, _, value| {
                for w in decode(value)? {
                    f(key, w)?;
                }
                Ok(())
            })
            .map_err(failed)
    }
}
