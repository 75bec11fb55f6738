//! "Why hasn't my window fired?" for the status: the workers' reports (a grouping's
//! windows, a stateful DoFn's timers, a source's partitions and rates) handed to runners-core's rules
//! ([`tidewater_runners_core::explain`]) with the job graph. Nothing is decided here.

use super::JobStatus;
use serde::{Deserialize, Serialize};
use tidewater_runners_core::explain::{explain, holder, Holder, SourceInstance};
use tidewater_runners_core::job_graph::JobGraph;

/// The answer for one keyed task (a grouping or a stateful DoFn).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Why {
    /// The task (its head's transform).
    pub task: String,
    /// The worker whose report waits for the earliest event time.
    pub worker: usize,
    /// The source instance holding its input watermark back, if one does.
    pub held_by: Option<Holder>,
    /// The answer, sentence by sentence.
    pub lines: Vec<String>,
}

/// The answers for every keyed task of `status`.
pub fn of(graph: &JobGraph, status: &JobStatus) -> Vec<Why> {
    let sources: Vec<SourceInstance> = status
        .workers
        .iter()
        .flat_map(|w| {
            w.operators
                .iter()
                .filter(|o| o.source)
                .map(move |o| SourceInstance {
                    task: o.name.clone(),
                    worker: w.worker,
                    watermark_ms: o.watermark_ms,
                    reading_per_sec: o.rates.as_ref().map(|r| r.records_in),
                    paused_ms_per_sec: o.rates.as_ref().map(|r| r.drift_paused_ms),
                    partitions: o.partitions.clone(),
                })
        })
        .collect();
    let mut out = Vec::new();
    for (t, task) in graph.tasks.iter().enumerate() {
        let reports = status.workers.iter().filter_map(|w| {
            let o = w.operators.iter().find(|o| o.name == task.name)?;
            Some((w.worker, o.windows.as_ref().filter(|r| r.says_something())?))
        });
        let Some((worker, report)) = reports.min_by_key(|(_, r)| r.waits_until_ms()) else {
            continue;
        };
        let held_by = holder(graph, t, &sources);
        out.push(Why {
            task: task.name.clone(),
            worker,
            lines: explain(&task.name, worker, report, held_by.as_ref()),
            held_by,
        });
    }
    out
}
