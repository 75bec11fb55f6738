//! What the direct runner shows of itself while it runs (`--status-addr`, `status.rs`):
//! per task (a stage's head, as the job graph draws it) the elements that reached it
//! and those its stage emitted, its input watermark (a source's own), a keyed head's
//! windows or timers and a source's partitions; the DoFns' metrics. Counting costs an
//! add per batch; the figures are published about once a second.

use super::*;
use tidewater_runners_status::{OperatorStatus, WorkerStatus};

/// How often the figures are published.
const EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// A task's counts.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct TaskFigures {
    /// Elements that reached its head.
    pub records_in: u64,
    /// Elements its stage emitted.
    pub records_out: u64,
}

/// Per stage, the node heading it.
pub(super) fn stage_heads(plan: &ExecutablePlan, graph: &StageGraph) -> Vec<Option<usize>> {
    let mut out = vec![None; graph.stages.len()];
    for head in heads(plan) {
        if let Some(s) = graph.of_head(plan, head) {
            out[s] = Some(head);
        }
    }
    out
}

fn is_source(head: &Head) -> bool {
    matches!(
        head,
        Head::Read(_) | Head::Create(_) | Head::TestStream { .. }
    )
}

impl Executor<'_> {
    /// `n` elements reached head `node`.
    pub(super) fn count_in(&mut self, node: usize, n: usize) {
        self.figures[node].records_in += n as u64;
    }

    /// The elements buffered for PCollection `pc`.
    pub(super) fn buffered(&self, pc: usize) -> usize {
        self.buffers[pc].iter().map(|b| b.len()).sum()
    }

    /// Publishes the figures to the status board, if the job serves its status and a
    /// second has passed since the last time (or `now`).
    pub(super) fn publish_status(&mut self, now: bool) {
        let Some(board) = self.options.status.clone() else {
            return;
        };
        if !now && self.published.is_some_and(|t| t.elapsed() < EVERY) {
            return;
        }
        self.published = Some(std::time::Instant::now());
        board.set_job(&self.job);
        let max_key_groups = self.max_key_groups;
        let mut records_read = 0;
        let mut operators = Vec::new();
        for i in heads(self.plan) {
            let Some(head) = self.heads[i].as_mut() else {
                continue;
            };
            let node = &self.plan.nodes[i];
            let source = is_source(head);
            let watermark = if source || node.inputs.is_empty() {
                node.outputs.first().map(|&o| self.watermarks[o])
            } else {
                node.inputs.iter().map(|&p| self.watermarks[p]).min()
            }
            .filter(|w| *w > Timestamp::MIN);
            let f = self.figures[i];
            if source {
                records_read += f.records_in;
            }
            operators.push(OperatorStatus {
                name: node.name.clone(),
                source,
                records_in: f.records_in,
                records_out: f.records_out,
                watermark_ms: watermark.map(|w| w.millis()),
                busy_ms: 0,
                throttled_ms: 0,
                drift_paused_ms: 0,
                alignment_ms: 0,
                rates: None,
                windows: head.window_report(max_key_groups),
                partitions: head.partition_report(),
            });
        }
        board.put(WorkerStatus {
            worker: 0,
            records_read,
            operators,
            checkpoints: Vec::new(),
            checkpoints_completed: 0,
            metrics: self.metrics.clone(),
            updated_at_ms: board.since_start(std::time::Instant::now()),
        });
    }
}
