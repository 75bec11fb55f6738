//! Moving the reducer's windows between memory and the store ([`super::cold`]): the
//! least recently touched go out once more than the budget are in memory; a window
//! comes back at its next input ([`page_in`], during `process`) or when its wake comes
//! due ([`Reducer::page_in_due`], in time order with the timers in memory).

use super::active::{hold_of, Written};
use super::cold::{Cold, ColdWindow, Wake};
use super::wire::WindowEntry;
use super::Reducer;
use crate::triggers::TimeDomain;
use rustc_hash::FxHashMap;
use tidewater::exec::{ExecError, KeyId};
use tidewater::{BoundedWindow, Timestamp};

/// Windows taken from the store during a `process`, by encoded key: installed once the
/// batch is added (their contents, if an input came for them, already in the typed
/// state: `contents` is then `None`).
pub(super) type Paged = FxHashMap<Vec<u8>, Vec<WindowEntry>>;

/// Window `w` of encoded key `key`, if it is in the store or already taken from it in
/// this batch (`paged`): taken out with its unit.
pub(super) fn page_in<'a>(
    cold: &mut Cold,
    paged: &'a mut Paged,
    key: &[u8],
    w: &BoundedWindow,
) -> Result<Option<&'a mut WindowEntry>, ExecError> {
    if cold.is_empty() && paged.is_empty() {
        return Ok(None);
    }
    let known = paged
        .get(key)
        .is_some_and(|ws| ws.iter().any(|e| e.window == *w));
    // Under a merging WindowFn the unit is the key: taken once, with every window.
    let unit_taken = cold.merging() && paged.contains_key(key);
    if !known && !unit_taken {
        if let Some(ws) = cold.take(key, &cold.unit(w))? {
            let list = paged.entry(key.to_vec()).or_default();
            for cw in ws {
                list.push(WindowEntry::decode(key.to_vec(), cw.window, &cw.body)?);
            }
        }
    }
    Ok(paged
        .get_mut(key)
        .and_then(|ws| ws.iter_mut().find(|e| e.window == *w)))
}

impl Reducer {
    /// How a window back from the store stands against the snapshots: as it went, if
    /// it went changed since the last snapshot; otherwise as that snapshot wrote it.
    fn standing(&mut self, key: &[u8], w: &BoundedWindow) -> Written {
        let Some(cold) = self.cold.as_mut() else {
            return Written::New;
        };
        if cold.dirty.is_empty() {
            return Written::Clean;
        }
        match cold.dirty.remove(&(key.to_vec(), w.clone())) {
            Some((written, _)) => written,
            None => Written::Clean,
        }
    }

    /// Makes the windows taken from the store in a `process` active.
    pub(super) fn install_paged(&mut self, paged: Paged) -> Result<(), ExecError> {
        for (_, ws) in paged {
            for e in ws {
                let written = self.standing(&e.key, &e.window);
                self.install(e, written)?;
            }
        }
        Ok(())
    }

    /// Makes the windows of a unit of key `key` taken from the store active.
    pub(super) fn install_unit(
        &mut self,
        key: &[u8],
        ws: Vec<ColdWindow>,
    ) -> Result<(), ExecError> {
        for cw in ws {
            let e = WindowEntry::decode(key.to_vec(), cw.window, &cw.body)?;
            let written = self.standing(key, &e.window);
            self.install(e, written)?;
        }
        Ok(())
    }

    /// Brings back from the store the unit whose wake comes first, if it is due and
    /// earlier than the earliest due timer in memory (event time before processing
    /// time, as `advance` fires them); says whether one came. At a tie the timers in
    /// memory go first (timers due at the same time fire in no particular order): a
    /// bounded input's end, where every window is due at once, brings them back one by
    /// one as those in memory fired and expired, not all at once.
    pub(super) fn page_in_due(&mut self) -> Result<bool, ExecError> {
        let Some(cold) = self.cold.as_ref() else {
            return Ok(false);
        };
        if cold.is_empty() {
            return Ok(false);
        }
        let (wm, pt) = (self.input_watermark, self.processing_time);
        let hot_event = [
            self.window_timers.first_key_value().map(|(t, _)| *t),
            self.timers.next(TimeDomain::EventTime),
        ]
        .into_iter()
        .flatten()
        .filter(|t| *t < wm)
        .min();
        let domain = match cold.next(TimeDomain::EventTime).filter(|t| *t < wm) {
            Some(c) if hot_event.is_none_or(|h| c < h) => TimeDomain::EventTime,
            _ if hot_event.is_some() => return Ok(false),
            _ => {
                let hot = self
                    .timers
                    .next(TimeDomain::ProcessingTime)
                    .filter(|t| *t < pt);
                match cold.next(TimeDomain::ProcessingTime).filter(|t| *t < pt) {
                    Some(c) if hot.is_none_or(|h| c < h) => TimeDomain::ProcessingTime,
                    _ => return Ok(false),
                }
            }
        };
        let now = if domain == TimeDomain::EventTime {
            wm
        } else {
            pt
        };
        let Some(cold) = self.cold.as_mut() else {
            return Ok(false);
        };
        let Some((key, ws)) = cold.take_due(domain, now)? else {
            return Ok(false);
        };
        self.install_unit(&key, ws)?;
        Ok(true)
    }

    /// Whether the store holds a unit whose wake is due at these times.
    pub(super) fn cold_due(&self, watermark: Timestamp, processing_time: Timestamp) -> bool {
        self.cold.as_ref().is_some_and(|c| {
            c.next(TimeDomain::EventTime).is_some_and(|t| t < watermark)
                || c.next(TimeDomain::ProcessingTime)
                    .is_some_and(|t| t < processing_time)
        })
    }

    /// Past the budget of windows in memory, puts the least recently touched units
    /// whose windows have nothing due in the store, down to three quarters of it.
    pub(super) fn evict(&mut self) -> Result<(), ExecError> {
        let Some(cold) = self.cold.as_ref() else {
            return Ok(());
        };
        if self.windows.len() <= cold.budget {
            return Ok(());
        }
        let target = cold.budget * 3 / 4;
        let merging = self.windows.merging;
        let (wm, pt) = (self.input_watermark, self.processing_time);
        // Each unit's latest touch, and whether every window of it may go.
        let mut units: FxHashMap<(KeyId, BoundedWindow), (u32, bool)> = FxHashMap::default();
        {
            let unhandled = self.unhandled(wm);
            for ((k, w), st) in self.windows.iter() {
                let wake = self.wake_of(*k, w, st, &unhandled);
                let may_go =
                    wake.event.is_none_or(|t| t >= wm) && wake.processing.is_none_or(|t| t >= pt);
                let unit = if merging {
                    BoundedWindow::Global
                } else {
                    w.clone()
                };
                let e = units.entry((*k, unit)).or_insert((st.touched, true));
                e.0 = e.0.max(st.touched);
                e.1 &= may_go;
            }
        }
        let mut candidates: Vec<(u32, KeyId, BoundedWindow)> = units
            .into_iter()
            .filter(|(_, (_, may_go))| *may_go)
            .map(|((k, unit), (touched, _))| (touched, k, unit))
            .collect();
        candidates.sort_unstable_by_key(|c| c.0);
        for (_, k, unit) in candidates {
            if self.windows.len() <= target {
                break;
            }
            self.evict_unit(k, &unit)?;
        }
        // The queue of windows' own timers keeps only those of windows in memory.
        let windows = &self.windows;
        self.window_timers.retain(|_, ws| {
            ws.retain(|(k, w, serial)| {
                windows
                    .get(&(*k, w.clone()))
                    .is_some_and(|st| st.serial == *serial)
            });
            !ws.is_empty()
        });
        Ok(())
    }

    /// When window `w` of key `k` (state `st`) must come back from the store: the
    /// earliest of its hold and its pending timers.
    fn wake_of(
        &self,
        k: KeyId,
        w: &BoundedWindow,
        st: &super::active::WindowState,
        unhandled: &super::wire::Unhandled<'_>,
    ) -> Wake {
        let timers = self.entry_timers(w, k, st, self.input_watermark, unhandled);
        Wake::of(hold_of(&self.strategy, w, st), &timers)
    }

    /// Puts unit `unit` of key `k` (its one window, or under a merging WindowFn every
    /// window of the key) in the store.
    fn evict_unit(&mut self, k: KeyId, unit: &BoundedWindow) -> Result<(), ExecError> {
        let windows = if self.windows.merging {
            self.windows.of_key(k)
        } else {
            vec![unit.clone()]
        };
        let key = self.state.key_bytes(k).to_vec();
        let track = self.has_base && !self.removed_overflow;
        let unhandled = super::wire::Unhandled::default();
        let mut wake = Wake::default();
        let mut cold_windows = Vec::with_capacity(windows.len());
        let mut dirty = Vec::new();
        for w in windows {
            let st = &self.windows[&(k, w.clone())];
            let timers = self.entry_timers(&w, k, st, self.input_watermark, &unhandled);
            wake.merge(Wake::of(hold_of(&self.strategy, &w, st), &timers));
            let mut body = Vec::new();
            self.encode_body(&w, k, st, timers, &mut body)?;
            if track && st.written.get() != Written::Clean {
                dirty.push((w.clone(), st.written.get(), body.clone()));
            }
            self.state.clear(k, w.clone());
            self.timers.delete_window(&k, w.clone());
            self.windows.remove(&(k, w.clone()));
            cold_windows.push(ColdWindow { window: w, body });
        }
        if !self.windows.has_key(k) {
            self.state.forget_key(k);
        }
        let cold = self.cold.as_mut().expect("a store to evict to");
        cold.put(&key, unit, &cold_windows, wake)?;
        for (w, written, body) in dirty {
            cold.dirty.insert((key.clone(), w), (written, body));
        }
        // Too many changed windows in the store to keep for the next delta: it is a
        // full snapshot instead.
        if cold.dirty.len() > cold.budget.max(4096) {
            cold.dirty = FxHashMap::default();
            self.removed_overflow = true;
            self.removed = Vec::new();
        }
        Ok(())
    }
}
