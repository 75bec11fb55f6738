//! The typed per-(key, window) state behind a GroupByKey or Combine: one generic table
//! over a [`Reduction`] (buffering values, or combining them).

use crate::exec::catch_user;
use crate::exec::{
    Accept, AcceptFn, AnyBatch, Batch, ExecError, KeyId, KeyIndex, Phase, ReduceFnState,
    downcast_batch, encode_key,
};
use crate::{BoundedWindow, Element, PaneInfo, Timestamp, WindowedValue, Windows};
use rustc_hash::FxHashMap;
use std::panic::AssertUnwindSafe;

/// How a grouping folds its inputs per key and window.
pub(crate) trait Reduction: Send + Sync + 'static {
    /// Key.
    type Key: Element;
    /// An input element.
    type Input: Element;
    /// What an input adds.
    type Value: Clone;
    /// The state per key and window; it is encoded into snapshots.
    type Acc: Send + serde::Serialize + serde::de::DeserializeOwned;
    /// An output element.
    type Output: Element;
    fn split(&self, input: Self::Input) -> (Self::Key, Self::Value);
    fn create(&self) -> Self::Acc;
    fn add(&self, acc: &mut Self::Acc, v: Self::Value);
    fn merge(&self, acc: &mut Self::Acc, other: Self::Acc);
    /// The output without consuming the state (accumulating mode).
    fn output(&self, key: &Self::Key, acc: &Self::Acc) -> Self::Output;
    /// The output, consuming the state (discarding mode).
    fn take_output(&self, key: &Self::Key, acc: Self::Acc) -> Self::Output;
}

pub(crate) struct ReduceTable<R: Reduction> {
    r: R,
    index: KeyIndex,
    keys: Vec<R::Key>,
    groups: FxHashMap<(KeyId, BoundedWindow), R::Acc>,
    key_buf: Vec<u8>,
    out: Vec<WindowedValue<R::Output>>,
    /// Full batches of `out` not yet taken.
    done: Vec<Box<dyn AnyBatch>>,
}

/// Outputs per batch of [`ReduceFnState::take_output`].
const OUTPUT_BATCH: usize = 4096;

impl<R: Reduction> ReduceTable<R> {
    pub(crate) fn new(r: R) -> Self {
        ReduceTable {
            r,
            index: KeyIndex::default(),
            keys: Vec::new(),
            groups: FxHashMap::default(),
            key_buf: Vec::new(),
            out: Vec::new(),
            done: Vec::new(),
        }
    }

    /// Records the key of number `id` (new, or reused after a key was forgotten).
    fn set_key(&mut self, id: usize, key: R::Key) {
        if id == self.keys.len() {
            self.keys.push(key);
        } else {
            self.keys[id] = key;
        }
    }

    fn guarded<T>(&self, key: KeyId, what: &str, f: impl FnOnce() -> T) -> Result<T, ExecError> {
        catch_user(AssertUnwindSafe(f)).map_err(|p| {
            let message = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            ExecError::User {
                phase: Phase::Process,
                element: Some(format!("with key {}", self.key_debug(key))),
                message: format!("{what} panicked: {message}"),
            }
        })
    }

    fn add_one(
        &mut self,
        key: &R::Key,
        w: BoundedWindow,
        ts: Timestamp,
        v: R::Value,
        accept: &mut AcceptFn<'_>,
    ) -> Result<(), ExecError> {
        self.key_buf.clear();
        encode_key(key, &mut self.key_buf)?;
        let (id, new) = self.index.find_or_insert(&self.key_buf);
        if new {
            self.set_key(id, key.clone());
        }
        let id = id as KeyId;
        match accept(id, &self.key_buf, w.clone(), ts) {
            Accept::Drop => {
                if new {
                    // Late input of a key seen for the first time leaves nothing behind.
                    self.index.remove(id as usize);
                }
                return Ok(());
            }
            Accept::Take => {}
            Accept::Restore(contents) => self.restore_contents(id, w.clone(), &contents)?,
        }
        let r = &self.r;
        let acc = match self.groups.get_mut(&(id, w.clone())) {
            Some(acc) => acc,
            None => {
                let acc =
                    catch_user(AssertUnwindSafe(|| r.create())).map_err(|_| ExecError::User {
                        phase: Phase::Process,
                        element: None,
                        message: "creating an accumulator panicked".into(),
                    })?;
                self.groups.entry((id, w)).or_insert(acc)
            }
        };
        if let Err(p) = catch_user(AssertUnwindSafe(|| r.add(acc, v))) {
            let message = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            return Err(ExecError::User {
                phase: Phase::Process,
                element: Some(format!("with key {key:?}")),
                message: format!("adding an input panicked: {message}"),
            });
        }
        Ok(())
    }
}

impl<R: Reduction> ReduceFnState for ReduceTable<R> {
    fn add(
        &mut self,
        batch: Box<dyn AnyBatch>,
        accept: &mut AcceptFn<'_>,
    ) -> Result<(), ExecError> {
        for wv in downcast_batch::<R::Input>(batch) {
            let (k, v) = self.r.split(wv.value);
            match wv.windows {
                Windows::One(w) => self.add_one(&k, w, wv.timestamp, v, accept)?,
                Windows::Many(ws) => {
                    for w in ws {
                        self.add_one(&k, w, wv.timestamp, v.clone(), accept)?;
                    }
                }
            }
        }
        Ok(())
    }

    fn merge(
        &mut self,
        key: KeyId,
        from: &[BoundedWindow],
        into: BoundedWindow,
    ) -> Result<(), ExecError> {
        let mut merged: Option<R::Acc> = self.groups.remove(&(key, into.clone()));
        for w in from {
            if *w == into {
                continue;
            }
            if let Some(acc) = self.groups.remove(&(key, w.clone())) {
                merged = Some(match merged {
                    None => acc,
                    Some(mut m) => {
                        let r = &self.r;
                        self.guarded(key, "merging accumulators", || r.merge(&mut m, acc))?;
                        m
                    }
                });
            }
        }
        if let Some(m) = merged {
            self.groups.insert((key, into), m);
        }
        Ok(())
    }

    fn is_empty(&self, key: KeyId, window: BoundedWindow) -> bool {
        !self.groups.contains_key(&(key, window))
    }

    fn emit(
        &mut self,
        key: KeyId,
        window: BoundedWindow,
        timestamp: Timestamp,
        pane: PaneInfo,
        clear: bool,
    ) -> Result<(), ExecError> {
        let k = &self.keys[key as usize];
        let value = if clear {
            let acc = match self.groups.remove(&(key, window.clone())) {
                Some(acc) => acc,
                None => {
                    let r = &self.r;
                    self.guarded(key, "creating an accumulator", || r.create())?
                }
            };
            let r = &self.r;
            self.guarded(key, "extracting the output", || r.take_output(k, acc))?
        } else {
            let r = &self.r;
            match self.groups.get(&(key, window.clone())) {
                Some(acc) => self.guarded(key, "extracting the output", || r.output(k, acc))?,
                None => self.guarded(key, "extracting the output", || {
                    r.take_output(k, r.create())
                })?,
            }
        };
        if self.out.len() >= OUTPUT_BATCH {
            let full = std::mem::replace(&mut self.out, Vec::with_capacity(OUTPUT_BATCH));
            self.done.push(Box::new(Batch { items: full }));
        }
        self.out.push(WindowedValue {
            value,
            timestamp,
            windows: Windows::One(window),
            pane,
        });
        Ok(())
    }

    fn clear(&mut self, key: KeyId, window: BoundedWindow) {
        self.groups.remove(&(key, window));
    }

    fn take_output(&mut self) -> Vec<Box<dyn AnyBatch>> {
        let mut out = std::mem::take(&mut self.done);
        if !self.out.is_empty() {
            out.push(Box::new(Batch {
                items: std::mem::take(&mut self.out),
            }));
        }
        out
    }

    fn key_debug(&self, key: KeyId) -> String {
        self.keys
            .get(key as usize)
            .map(|k| format!("{k:?}"))
            .unwrap_or_else(|| format!("#{key}"))
    }

    fn key_bytes(&self, key: KeyId) -> &[u8] {
        self.index.key(key as usize)
    }

    fn encode_contents(
        &self,
        key: KeyId,
        window: BoundedWindow,
    ) -> Result<Option<Vec<u8>>, ExecError> {
        let Some(acc) = self.groups.get(&(key, window.clone())) else {
            return Ok(None);
        };
        let mut out = Vec::new();
        crate::coder::encode_into(acc, &mut out).map_err(|e| ExecError::User {
            phase: Phase::Process,
            element: Some(format!("with key {}", self.key_debug(key))),
            message: format!("the state of window {window:?} does not encode: {e}"),
        })?;
        Ok(Some(out))
    }

    fn contents_json(&self, key: KeyId, window: BoundedWindow) -> Option<serde_json::Value> {
        serde_json::to_value(self.groups.get(&(key, window))?).ok()
    }

    fn live_keys(&self) -> usize {
        self.index.len()
    }

    fn forget_key(&mut self, key: KeyId) {
        self.index.remove(key as usize);
    }

    fn intern_key(&mut self, key: &[u8]) -> Result<KeyId, ExecError> {
        let (id, new) = self.index.find_or_insert(key);
        if new {
            match crate::coder::decode::<R::Key>(key) {
                Ok(k) => self.set_key(id, k),
                Err(e) => {
                    return Err(ExecError::Downstream(Box::new(crate::Error::Checkpoint {
                        message: format!("a key in the snapshot does not decode: {e}"),
                    })));
                }
            }
        }
        Ok(id as KeyId)
    }

    fn restore_contents(
        &mut self,
        key: KeyId,
        window: BoundedWindow,
        contents: &[u8],
    ) -> Result<(), ExecError> {
        let acc: R::Acc = crate::coder::decode(contents).map_err(|e| {
            ExecError::Downstream(Box::new(crate::Error::Checkpoint {
                message: format!(
                    "the state of key {} in window {window:?} does not decode: {e}",
                    self.key_debug(key)
                ),
            }))
        })?;
        self.groups.insert((key, window), acc);
        Ok(())
    }
}
