//! A combine's table: the accumulators of its (key, window) groups in one phase
//! (before the shuffle, after it, or whole), fed a batch at a time and flushed in
//! batches ([`GroupingTable`]).

use super::combine::{
    CombineFn, CombineOps, CombineShape, Combining, MergingAccumulators, panic_message,
};
use super::group_by_key::{Groups, append_window};
use crate::exec::catch_user;
use crate::exec::{
    AnyBatch, Batch, ExecError, GroupingOps, GroupingPhase, GroupingTable, KeyIndex, Phase,
    downcast_batch,
};
use crate::{BoundedWindow, PaneInfo, WindowedValue, Windows};
use std::marker::PhantomData;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

pub(super) struct CombineTable<S: CombineShape<F>, F: CombineFn> {
    f: Arc<F>,
    phase: GroupingPhase,
    groups: Groups<S::Key, F::Acc>,
    /// A batch's group encodings, back to back, and per (element, window) where its
    /// encoding lies and its hash (kept between batches for their allocations).
    encoded: Vec<u8>,
    spans: Vec<(usize, usize, u64)>,
    _s: PhantomData<fn() -> S>,
}

impl<S: CombineShape<F>, F: CombineFn> CombineTable<S, F> {
    /// An empty table of `phase`.
    pub(super) fn new(f: Arc<F>, phase: GroupingPhase) -> Self {
        CombineTable {
            f,
            phase,
            groups: Groups::new(),
            encoded: Vec::new(),
            spans: Vec::new(),
            _s: PhantomData,
        }
    }

    /// Runs `body` over the table under one panic guard for the whole batch; `body`
    /// keeps in `current` the group it works on (`None` while a new one is created), so
    /// that a panic is reported with the key.
    fn guarded(
        &mut self,
        body: impl FnOnce(&F, &mut Groups<S::Key, F::Acc>, &mut Option<usize>) -> Result<(), ExecError>,
    ) -> Result<(), ExecError> {
        let f = &*self.f;
        let groups = &mut self.groups;
        let mut current = None;
        let result = catch_user(AssertUnwindSafe(|| body(f, groups, &mut current)));
        match result {
            Ok(r) => r,
            // A panic in create_accumulator leaves the new key last.
            Err(p) => Err(ExecError::User {
                phase: Phase::Process,
                element: current
                    .or_else(|| groups.last_key())
                    .map(|i| format!("with key {:?}", groups.key(i))),
                message: format!("CombineFn {}", panic_message(p)),
            }),
        }
    }

    fn add_inputs(&mut self, items: Vec<WindowedValue<S::Input>>) -> Result<(), ExecError> {
        let mut encoded = std::mem::take(&mut self.encoded);
        let mut spans = std::mem::take(&mut self.spans);
        let result = self.guarded(|f, groups, current| {
            // First every (element, window)'s group encoding, then their hashes (reading
            // bytes just written stalls on the stores), then the lookups (see
            // `Groups::index_prehashed`).
            encoded.clear();
            spans.clear();
            for wv in &items {
                for w in wv.windows.iter() {
                    let start = encoded.len();
                    S::encode_key(&wv.value, &mut encoded)?;
                    append_window(&mut encoded, w);
                    spans.push((start, encoded.len(), 0));
                }
            }
            for (start, end, hash) in spans.iter_mut() {
                *hash = KeyIndex::hash(&encoded[*start..*end]);
            }
            let mut spans = spans.iter();
            let mut add = |w, k, x| {
                let &(start, end, hash) = spans.next().expect("a span per (element, window)");
                *current = None;
                let i = groups
                    .index_prehashed(&encoded[start..end], hash, w, k, || f.create_accumulator());
                *current = Some(i);
                f.add_input(groups.value_mut(i), x);
            };
            for wv in items {
                let (k, x) = S::split(wv.value);
                match wv.windows {
                    Windows::One(w) => add(w, k, x),
                    Windows::Many(ws) => {
                        for w in ws {
                            add(w, k.clone(), x.clone());
                        }
                    }
                }
            }
            Ok(())
        });
        self.encoded = encoded;
        self.spans = spans;
        result
    }

    fn merge_accumulators(
        &mut self,
        items: Vec<WindowedValue<(S::Key, F::Acc)>>,
    ) -> Result<(), ExecError> {
        self.guarded(|f, groups, current| {
            let mut merge = |w, k, other| {
                *current = None;
                let i = groups.index(w, k, || f.create_accumulator())?;
                *current = Some(i);
                f.merge_accumulators(groups.value_mut(i), other);
                Ok::<(), ExecError>(())
            };
            for wv in items {
                let (k, other) = wv.value;
                match wv.windows {
                    Windows::One(w) => merge(w, k, other)?,
                    Windows::Many(ws) => {
                        for w in ws {
                            merge(w, k.clone(), other.clone())?;
                        }
                    }
                }
            }
            Ok(())
        })
    }
}

impl<S: CombineShape<F>, F: CombineFn> GroupingTable for CombineTable<S, F> {
    fn add(&mut self, batch: Box<dyn AnyBatch>) -> Result<(), ExecError> {
        match self.phase {
            GroupingPhase::Full | GroupingPhase::Partial => {
                self.add_inputs(downcast_batch::<S::Input>(batch))
            }
            GroupingPhase::Final => {
                self.merge_accumulators(downcast_batch::<(S::Key, F::Acc)>(batch))
            }
        }
    }

    fn groups(&self) -> usize {
        self.groups.len()
    }

    fn finish(&mut self) -> Result<Box<dyn AnyBatch>, ExecError> {
        self.one_batch(crate::Timestamp::MAX)
    }

    fn finish_ended_before(
        &mut self,
        watermark: crate::Timestamp,
    ) -> Result<Box<dyn AnyBatch>, ExecError> {
        self.one_batch(watermark)
    }

    fn finish_in_batches(
        &mut self,
        watermark: crate::Timestamp,
        chunk: usize,
        out: &mut dyn FnMut(Box<dyn AnyBatch>) -> Result<(), ExecError>,
    ) -> Result<(), ExecError> {
        if watermark == crate::Timestamp::MAX {
            emit::<S, F>(&self.f, self.phase, self.groups.drain(), chunk, out)
        } else {
            let ended = self.groups.drain_ended_before(watermark)?;
            emit::<S, F>(&self.f, self.phase, ended.into_iter(), chunk, out)
        }
    }
}

impl<S: CombineShape<F>, F: CombineFn> CombineTable<S, F> {
    /// What [`GroupingTable::finish_in_batches`] emits, in one batch.
    fn one_batch(&mut self, watermark: crate::Timestamp) -> Result<Box<dyn AnyBatch>, ExecError> {
        let mut all = None;
        self.finish_in_batches(watermark, usize::MAX, &mut |b| {
            all = Some(b);
            Ok(())
        })?;
        Ok(all.unwrap_or_else(|| self.empty()))
    }

    /// An empty batch of this table's output.
    fn empty(&self) -> Box<dyn AnyBatch> {
        if self.phase == GroupingPhase::Partial {
            Box::new(Batch::<(S::Key, F::Acc)> { items: Vec::new() })
        } else {
            Box::new(Batch::<S::Output> { items: Vec::new() })
        }
    }
}

/// One output per group, handed to `out` in batches of at most `chunk` (none when
/// there are no groups): its accumulator in the partial phase, else its result.
fn emit<S: CombineShape<F>, F: CombineFn>(
    f: &F,
    phase: GroupingPhase,
    groups: impl Iterator<Item = (S::Key, BoundedWindow, F::Acc)>,
    chunk: usize,
    out: &mut dyn FnMut(Box<dyn AnyBatch>) -> Result<(), ExecError>,
) -> Result<(), ExecError> {
    let partial = phase == GroupingPhase::Partial;
    // Each batch sized once for what is left (the groups are counted), not grown.
    let mut left = groups.size_hint().0;
    fn sized<T>(left: usize, chunk: usize) -> Vec<T> {
        Vec::with_capacity(left.min(chunk))
    }
    let (mut accumulators, mut outputs) = if partial {
        (sized(left, chunk), Vec::new())
    } else {
        (Vec::new(), sized(left, chunk))
    };
    for (k, w, acc) in groups {
        if accumulators.len() >= chunk {
            let next = sized(left, chunk);
            out(Box::new(Batch {
                items: std::mem::replace(&mut accumulators, next),
            }))?;
        }
        if outputs.len() >= chunk {
            let next = sized(left, chunk);
            out(Box::new(Batch {
                items: std::mem::replace(&mut outputs, next),
            }))?;
        }
        left = left.saturating_sub(1);
        let (timestamp, windows) = (w.max_timestamp(), Windows::One(w));
        if partial {
            accumulators.push(WindowedValue {
                value: (k, acc),
                timestamp,
                windows,
                pane: PaneInfo::NO_FIRING,
            });
            continue;
        }
        let out = catch_user(AssertUnwindSafe(|| f.extract_output(acc))).map_err(|p| {
            ExecError::User {
                phase: Phase::Process,
                element: Some(format!("with key {k:?}")),
                message: format!("CombineFn extract_output {}", panic_message(p)),
            }
        })?;
        outputs.push(WindowedValue {
            value: S::join(k, out),
            timestamp,
            windows,
            pane: PaneInfo::ON_TIME_AND_ONLY_FIRING,
        });
    }
    if !accumulators.is_empty() {
        out(Box::new(Batch {
            items: accumulators,
        }))?;
    }
    if !outputs.is_empty() {
        out(Box::new(Batch { items: outputs }))?;
    }
    Ok(())
}

impl<S: CombineShape<F>, F: CombineFn> GroupingOps for CombineOps<S, F> {
    fn input_type(&self) -> &'static str {
        std::any::type_name::<S::Input>()
    }
    fn output_type(&self) -> &'static str {
        std::any::type_name::<S::Output>()
    }
    fn new_table(&self, phase: GroupingPhase) -> Box<dyn GroupingTable> {
        Box::new(CombineTable::<S, F>::new(self.f.clone(), phase))
    }
    fn liftable(&self) -> bool {
        true
    }
    fn key_ops(&self, phase: GroupingPhase) -> Arc<dyn crate::exec::KeyOps> {
        match phase {
            GroupingPhase::Final => Arc::new(crate::exec::pair_key_ops::<S::Key, F::Acc>()),
            _ => Arc::new(crate::exec::KeyedBy::<S::Input>::new(S::encode_key)),
        }
    }
    fn new_reduce_state(&self, phase: GroupingPhase) -> Box<dyn crate::exec::ReduceFnState> {
        match phase {
            GroupingPhase::Final => Box::new(super::reduce::ReduceTable::new(
                MergingAccumulators::<S, F> {
                    f: self.f.clone(),
                    _s: PhantomData,
                },
            )),
            _ => Box::new(super::reduce::ReduceTable::new(Combining::<S, F> {
                f: self.f.clone(),
                _s: PhantomData,
            })),
        }
    }
    fn empty_output(&self) -> Result<Option<Box<dyn AnyBatch>>, ExecError> {
        let f = &self.f;
        let out = catch_user(AssertUnwindSafe(|| {
            S::empty_output(|| f.extract_output(f.create_accumulator()))
        }))
        .map_err(|p| ExecError::User {
            phase: Phase::Process,
            element: None,
            message: format!(
                "CombineFn {} while computing the output for an empty input",
                panic_message(p)
            ),
        })?;
        Ok(out.map(|out| {
            Box::new(Batch {
                items: vec![WindowedValue::in_global_window(out)],
            }) as Box<dyn AnyBatch>
        }))
    }
}
