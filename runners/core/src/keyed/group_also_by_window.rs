//! GroupByKey and Combine as a keyed operator: the reducer, plus Combine.globally's
//! default output.

use crate::keyed::operator::{KeyGroups, KeyedOperator};
use crate::keyed::reduce::{Reducer, WindowReport};
use crate::keyed::snapshot::{unexpected_scope, Clocks, KeyedSnapshot, SnapshotKind};
use crate::snapshot::{decode_part, encode_part, Scope};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use tidewater::exec::{key_group_of, AnyBatch, ExecError, GroupingOps, StepMetrics, BATCH_SIZE};
use tidewater::Timestamp;

/// GroupByKey and Combine: the reducer, and Combine.globally's default output.
pub struct GroupAlsoByWindow {
    reducer: Reducer,
    ops: Arc<dyn GroupingOps>,
    /// The input is in the global window (where Combine.globally has a default).
    global: bool,
    /// This instance owns the key group of Combine.globally's key.
    owns_default: bool,
    flags: DefaultFlags,
    metrics: StepMetrics,
    output: Vec<Box<dyn AnyBatch>>,
    /// The job's key groups (for the reports' keys).
    max_key_groups: u32,
}

/// Whether any input arrived, and whether Combine.globally's default went out.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
struct DefaultFlags {
    received: bool,
    defaulted: bool,
}

impl KeyedOperator for GroupAlsoByWindow {
    fn process(
        &mut self,
        batch: Box<dyn AnyBatch>,
        processing_time: Timestamp,
    ) -> std::result::Result<(), ExecError> {
        self.flags.received = true;
        self.reducer.set_processing_time(processing_time);
        for chunk in batch.into_chunks(&mut std::iter::repeat(BATCH_SIZE)) {
            self.reducer.process(chunk, &mut self.metrics)?;
        }
        self.collect();
        Ok(())
    }

    fn advance(
        &mut self,
        input_watermark: Timestamp,
        processing_time: Timestamp,
    ) -> std::result::Result<(), ExecError> {
        self.reducer.advance(input_watermark, processing_time)?;
        self.collect();
        // Combine.globally of an empty input outputs the combine of nothing, once the
        // input is complete (Beam's `insertDefault`).
        if input_watermark == Timestamp::MAX
            && self.global
            && self.owns_default
            && !self.flags.received
            && !self.flags.defaulted
        {
            self.flags.defaulted = true;
            if let Some(default) = self.ops.empty_output()? {
                self.output.push(default);
            }
        }
        Ok(())
    }

    fn has_due_work(&self, input_watermark: Timestamp, processing_time: Timestamp) -> bool {
        input_watermark > self.reducer.input_watermark()
            || self
                .reducer
                .has_due_timers(input_watermark, processing_time)
    }

    fn input_watermark(&self) -> Timestamp {
        self.reducer.input_watermark()
    }

    fn output_watermark(&self) -> Timestamp {
        self.reducer.output_watermark()
    }

    fn next_wakeup(&self) -> Option<Timestamp> {
        self.reducer.next_processing_timer()
    }

    fn take_output(&mut self) -> Vec<Box<dyn AnyBatch>> {
        std::mem::take(&mut self.output)
    }

    fn live_keys(&self) -> usize {
        self.reducer.live_keys()
    }

    fn report(&mut self, _max_key_groups: u32) -> Option<WindowReport> {
        Some(self.reducer.report(Some(self.max_key_groups)))
    }

    fn take_metrics(&mut self) -> StepMetrics {
        std::mem::take(&mut self.metrics)
    }

    fn snapshot(
        &mut self,
        max_key_groups: u32,
        instance: u32,
        kind: SnapshotKind,
    ) -> std::result::Result<KeyedSnapshot, ExecError> {
        let mut snapshot = self.reducer.snapshot_key_groups(max_key_groups, kind)?;
        snapshot.parts.push((
            Scope::Union(instance),
            encode_part(&(self.reducer.clocks(), self.flags)),
        ));
        Ok(snapshot)
    }

    fn restore(&mut self, scope: Scope, bytes: &[u8]) -> std::result::Result<(), ExecError> {
        match scope {
            Scope::KeyGroup(_) => self.reducer.restore_key_group(bytes),
            Scope::Union(_) => {
                let (clocks, flags): (Clocks, DefaultFlags) =
                    decode_part(bytes, "grouping clocks")?;
                self.reducer.restore_clocks(clocks);
                // Whether input arrived or the default went out anywhere.
                self.flags.received |= flags.received;
                self.flags.defaulted |= flags.defaulted;
                Ok(())
            }
            other => Err(unexpected_scope(other, "a grouping")),
        }
    }
}

impl GroupAlsoByWindow {
    /// The operator of an instance owning `key_groups`, over `reducer`; `global`: its
    /// input is in the global window, where Combine.globally has a default output.
    pub fn new(
        reducer: Reducer,
        ops: Arc<dyn GroupingOps>,
        global: bool,
        key_groups: &KeyGroups,
    ) -> Self {
        // Combine.globally's single key is `()`, whose encoding is empty: the instance
        // owning its key group emits the default.
        let owns_default = key_groups
            .owned
            .contains(&key_group_of(&[], key_groups.max));
        GroupAlsoByWindow {
            reducer,
            ops,
            global,
            owns_default,
            flags: DefaultFlags::default(),
            metrics: StepMetrics::default(),
            output: Vec::new(),
            max_key_groups: key_groups.max,
        }
    }

    fn collect(&mut self) {
        let out = self.reducer.take_output();
        self.output
            .extend(out.into_iter().filter(|b| !b.is_empty()));
    }
}
