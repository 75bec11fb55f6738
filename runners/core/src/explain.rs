//! "Why hasn't my window fired?": the rules that turn what the parts of a running job
//! report into an answer. The facts come from the parts themselves: a grouping's
//! [`WindowReport`] (its oldest open window and what that window's trigger waits for,
//! asked of the trigger state machine; its input watermark; what it dropped as late),
//! and each source instance's partitions ([`PartitionReport`], from its
//! [`SourceDriver`]). Here they are combined: which upstream source holds the
//! watermark back, in what state it is, and what the user can do. An engine's status
//! server and `tidewater explain` show the result; nothing re-derives it.

use crate::job_graph::JobGraph;
use crate::keyed::reduce::{PendingTimer, TimersReport, WindowReport};
use crate::source_driver::SourceDriver;
use crate::triggers::{show, Wait};
use serde::{Deserialize, Serialize};
use tidewater::Timestamp;

/// One partition of a source instance, as its driver stands.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PartitionReport {
    /// The partition.
    pub partition: u32,
    /// Its position, as the source's position type shows it.
    pub position: String,
    /// Its watermark, in ms (`None`: the beginning of time).
    pub watermark_ms: Option<i64>,
    /// Its last read found nothing to read.
    pub idle: bool,
    /// It has nothing more to read.
    pub done: bool,
}

/// What a source instance's driver reports about its partitions.
pub fn partitions_of(driver: &SourceDriver) -> Vec<PartitionReport> {
    driver
        .partitions()
        .iter()
        .map(|(&p, st)| PartitionReport {
            partition: p,
            position: driver.describe_position(&st.position),
            watermark_ms: (st.watermark > Timestamp::MIN).then(|| st.watermark.millis()),
            idle: st.idle,
            done: st.done,
        })
        .collect()
}

/// A source instance (a source task on one worker), as the status shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct SourceInstance {
    /// The source task's name (its head's transform).
    pub task: String,
    /// The worker.
    pub worker: usize,
    /// Its watermark, in ms (`None`: none yet).
    pub watermark_ms: Option<i64>,
    /// Records it read per second lately, if known.
    pub reading_per_sec: Option<f64>,
    /// Milliseconds per second it was paused by watermark alignment lately.
    pub paused_ms_per_sec: Option<f64>,
    /// Its partitions.
    pub partitions: Vec<PartitionReport>,
}

/// The state of the source instance that holds a watermark back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HolderState {
    /// It has not reported a watermark yet.
    NoWatermarkYet,
    /// It read nothing lately.
    Idle,
    /// Watermark alignment pauses it (it runs ahead of its slower instances).
    PausedByAlignment,
    /// It reads, but its event time is behind.
    Reading,
}

/// The source instance (and partition) holding an operator's input watermark back.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Holder {
    /// The source task.
    pub source: String,
    /// Its worker.
    pub worker: usize,
    /// The partition with the least watermark, when the instance reports partitions.
    pub partition: Option<u32>,
    /// Its watermark, in ms.
    pub watermark_ms: Option<i64>,
    /// Its state.
    pub state: HolderState,
}

/// The source tasks upstream of task `task` in `graph` (indices), nearest first.
pub fn upstream_sources(graph: &JobGraph, task: usize) -> Vec<usize> {
    let mut seen = vec![false; graph.tasks.len()];
    let mut todo = vec![task];
    let mut out = Vec::new();
    while let Some(t) = todo.pop() {
        for e in graph.edges.iter().filter(|e| e.to == t) {
            if !std::mem::replace(&mut seen[e.from], true) {
                if graph.edges.iter().any(|x| x.to == e.from) {
                    todo.push(e.from);
                } else {
                    out.push(e.from);
                }
            }
        }
    }
    out
}

/// The instance of a source upstream of `task` with the least watermark: the one that
/// holds the task's input watermark (every keyed input hears from every worker). A
/// finished instance (watermark at the end of time) holds nothing.
pub fn holder(graph: &JobGraph, task: usize, sources: &[SourceInstance]) -> Option<Holder> {
    let names: Vec<&str> = upstream_sources(graph, task)
        .into_iter()
        .map(|t| graph.tasks[t].name.as_str())
        .collect();
    let least = sources
        .iter()
        .filter(|s| names.contains(&s.task.as_str()))
        .filter(|s| s.watermark_ms != Some(Timestamp::MAX.millis()))
        .min_by_key(|s| s.watermark_ms.unwrap_or(i64::MIN))?;
    let partition = least
        .partitions
        .iter()
        .filter(|p| !p.done)
        .min_by_key(|p| p.watermark_ms.unwrap_or(i64::MIN));
    // Reading lately decides over the last read's finding nothing (a rate-limited
    // source finds nothing between its records).
    let state = if least.watermark_ms.is_none() {
        HolderState::NoWatermarkYet
    } else if least.paused_ms_per_sec.is_some_and(|p| p > 0.0) {
        HolderState::PausedByAlignment
    } else if least.reading_per_sec.is_some_and(|r| r > 0.0) {
        HolderState::Reading
    } else if least.reading_per_sec == Some(0.0) || partition.is_some_and(|p| p.idle) {
        HolderState::Idle
    } else {
        HolderState::Reading
    };
    Some(Holder {
        source: least.task.clone(),
        worker: least.worker,
        partition: partition.map(|p| p.partition),
        watermark_ms: least.watermark_ms,
        state,
    })
}

fn at(ms: Option<i64>) -> String {
    ms.map_or("the beginning of time".to_string(), |m| {
        show(Timestamp::from_millis(m))
    })
}

/// Whether `wait` includes the watermark passing `t`, and which `t`.
fn watermark_wait(wait: &Wait) -> Option<Timestamp> {
    match wait {
        Wait::Watermark(t) => Some(*t),
        Wait::Any(ws) | Wait::All(ws) => ws.iter().find_map(watermark_wait),
        _ => None,
    }
}

/// The answer for a keyed task `task` on `worker` (a grouping, or a stateful DoFn
/// when the report has timers): sentences, most important first.
pub fn explain(
    task: &str,
    worker: usize,
    report: &WindowReport,
    holder: Option<&Holder>,
) -> Vec<String> {
    let mut lines = Vec::new();
    let input = report.input_watermark_ms;
    if let Some(timers) = &report.timers {
        explain_timers(task, worker, report, timers, holder, &mut lines);
    } else {
        match &report.oldest {
            None => lines.push(format!(
                "{task} (worker {worker}): no window holds input back: every window that received input has fired ({} open, input watermark {}).",
                report.open_windows,
                at(input)
            )),
            Some(w) => {
                lines.push(format!(
                    "{task} (worker {worker}): the oldest window still holding input, {} of key {}{}, has emitted {} pane{}; its trigger waits for {}.",
                    w.window,
                    w.key,
                    key_group(w.key_group),
                    w.panes,
                    if w.panes == 1 { "" } else { "s" },
                    w.waiting_for
                ));
                if let Some(t) = watermark_wait(&w.waiting_for) {
                    watermark_lines(input, t, holder, "the window fires once it passes the window's end", &mut lines);
                }
                if w.waiting_for == Wait::Never {
                    lines.push(format!(
                        "It is emitted when it expires, once the watermark passes {} (its end plus the allowed lateness).",
                        show(Timestamp::from_millis(w.expires_ms))
                    ));
                }
            }
        }
    }
    if report.dropped_late + report.dropped_closed > 0 {
        let mut s = format!(
            "{} element{} dropped as late (its window had expired: its end plus the allowed lateness, {} ms, was behind the watermark)",
            report.dropped_late,
            if report.dropped_late == 1 { " was" } else { "s were" },
            report.allowed_lateness_ms
        );
        if report.dropped_closed > 0 {
            s.push_str(&format!(
                " and {} into windows whose trigger had finished",
                report.dropped_closed
            ));
        }
        if let Some(d) = &report.last_dropped {
            s.push_str(&format!(
                "; the last, at {} for window {}, when the watermark was {}",
                show(Timestamp::from_millis(d.timestamp_ms)),
                d.window,
                at(d.watermark_ms)
            ));
        }
        s.push('.');
        lines.push(s);
    }
    lines
}

fn key_group(g: Option<u32>) -> String {
    g.map_or(String::new(), |g| format!(", key group {g}"))
}

/// What the input watermark still has to pass (`t`), and who holds it back.
fn watermark_lines(
    input: Option<i64>,
    t: Timestamp,
    holder: Option<&Holder>,
    then: &str,
    lines: &mut Vec<String>,
) {
    let short = input.map_or(String::new(), |i| {
        format!(", {} ms short", t.millis().saturating_sub(i).max(0))
    });
    lines.push(format!("The input watermark is {}{short}.", at(input)));
    match holder {
        // Every source upstream is past `t` already: the watermark is on its way
        // (epochs in flight, alignment).
        Some(h) if h.watermark_ms.is_some_and(|w| w > t.millis()) => lines.push(format!(
            "Every source upstream is past it (the least, {} on worker {}, at {}): the watermark is on its way, behind the records and epochs in flight.",
            h.source,
            h.worker,
            at(h.watermark_ms)
        )),
        Some(h) => lines.push(held_by(h, then)),
        None => {}
    }
}

/// A stateful DoFn's answer: its output waits for its timers.
fn explain_timers(
    task: &str,
    worker: usize,
    report: &WindowReport,
    timers: &TimersReport,
    holder: Option<&Holder>,
    lines: &mut Vec<String>,
) {
    let windows = format!(
        "{} window{}",
        report.open_windows,
        if report.open_windows == 1 { "" } else { "s" }
    );
    let describe = |t: &PendingTimer| {
        format!(
            "'{}' of key {}{}, in {}",
            t.name,
            t.key,
            key_group(t.key_group),
            t.window
        )
    };
    let pending = format!(
        "{task} (worker {worker}): {} timer{} pending in {windows}",
        timers.pending,
        if timers.pending == 1 { "" } else { "s" }
    );
    match &timers.next_event_time {
        Some(t) => {
            lines.push(format!(
                "{pending}; the earliest event-time timer, {}, fires when the input watermark passes {}.",
                describe(t),
                show(Timestamp::from_millis(t.at_ms))
            ));
            watermark_lines(
                report.input_watermark_ms,
                Timestamp::from_millis(t.at_ms),
                holder,
                "the timer fires once it passes the timer's time",
                lines,
            );
        }
        None if timers.next_processing_time.is_some() => {
            lines.push(format!("{pending}; none waits for the watermark."))
        }
        None => lines.push(format!(
            "{pending}: it emits only as elements arrive, and its windows' state goes when they expire (their end plus the allowed lateness, {} ms). Input watermark {}.",
            report.allowed_lateness_ms,
            at(report.input_watermark_ms)
        )),
    }
    if let Some(t) = &timers.next_processing_time {
        let due = t.at_ms.saturating_sub(timers.processing_time_ms);
        lines.push(format!(
            "The earliest processing-time timer, {}, fires at {} ({}).",
            describe(t),
            show(Timestamp::from_millis(t.at_ms)),
            if due > 0 {
                format!("in {due} ms")
            } else {
                "due now".to_string()
            }
        ));
    }
}

/// Who holds the watermark, and what to do about it; `then`: what happens once it
/// moves on.
fn held_by(h: &Holder, then: &str) -> String {
    let partition = h
        .partition
        .map_or(String::new(), |p| format!(", partition {p}"));
    let who = format!(
        "It is held back by source {} on worker {}{partition}, at {}",
        h.source,
        h.worker,
        at(h.watermark_ms)
    );
    match h.state {
        HolderState::NoWatermarkYet => format!("{who}: it has not reported a watermark yet."),
        HolderState::Idle => format!(
            "{who}: it is idle, reading nothing, and holds every window after its watermark until it reads again or declares itself idle (a source whose idle partitions should not hold the watermark: Source::idle_holds_watermark false, Kafka's with_idle_after_ms)."
        ),
        HolderState::PausedByAlignment => format!(
            "{who}: watermark alignment pauses it (max_watermark_drift_ms) while its slower instances catch up."
        ),
        HolderState::Reading => format!(
            "{who}: it is reading, but its event time is behind; {then}."
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job_graph::{GraphEdge, GraphTask};
    use crate::keyed::reduce::{DroppedElement, OpenWindow};

    fn graph() -> JobGraph {
        let task = |name: &str, kind: &str| GraphTask {
            name: name.into(),
            kind: kind.into(),
            fused: Vec::new(),
            sinks: Vec::new(),
        };
        let edge = |from, to| GraphEdge {
            from,
            to,
            how: "by key".into(),
        };
        JobGraph {
            tasks: vec![
                task("A", "Read"),
                task("B", "Read"),
                task("Both", "Flatten"),
                task("Count", "Combine"),
            ],
            edges: vec![edge(0, 2), edge(1, 2), edge(2, 3)],
        }
    }

    fn source(
        task: &str,
        worker: usize,
        wm: Option<i64>,
        reading: f64,
        paused: f64,
    ) -> SourceInstance {
        SourceInstance {
            task: task.into(),
            worker,
            watermark_ms: wm,
            reading_per_sec: Some(reading),
            paused_ms_per_sec: Some(paused),
            partitions: Vec::new(),
        }
    }

    #[test]
    fn the_least_watermark_upstream_holds_and_its_state_is_named() {
        let g = graph();
        assert_eq!(upstream_sources(&g, 3).len(), 2);
        let done = Timestamp::MAX.millis();
        let sources = [
            source("A", 0, Some(5_000), 100.0, 0.0),
            source("A", 1, Some(done), 0.0, 0.0),
            source("B", 1, Some(2_000), 0.0, 0.0),
        ];
        let h = holder(&g, 3, &sources).unwrap();
        assert_eq!((h.source.as_str(), h.worker), ("B", 1));
        assert_eq!(h.state, HolderState::Idle);
        let sources = [source("A", 0, Some(1_000), 100.0, 40.0)];
        assert_eq!(
            holder(&g, 3, &sources).unwrap().state,
            HolderState::PausedByAlignment
        );
        let mut reading = source("A", 0, Some(1_000), 100.0, 0.0);
        assert_eq!(
            holder(&g, 3, &[reading.clone()]).unwrap().state,
            HolderState::Reading
        );
        // Between the records of a rate-limited source its last read finds nothing: it
        // reads all the same.
        reading.partitions.push(PartitionReport {
            partition: 0,
            position: "0".into(),
            watermark_ms: Some(1_000),
            idle: true,
            done: false,
        });
        assert_eq!(
            holder(&g, 3, &[reading]).unwrap().state,
            HolderState::Reading
        );
        let sources = [source("A", 0, None, 0.0, 0.0)];
        assert_eq!(
            holder(&g, 3, &sources).unwrap().state,
            HolderState::NoWatermarkYet
        );
        // Nothing upstream of a source; a finished source holds nothing.
        assert_eq!(holder(&g, 0, &sources), None);
        assert_eq!(holder(&g, 3, &[source("A", 0, Some(done), 0.0, 0.0)]), None);
    }

    /// An element at 500 ms dropped late when the watermark was 3000 ms.
    fn late_at_500() -> DroppedElement {
        DroppedElement {
            timestamp_ms: 500,
            window: "[0 ms, 1000 ms)".into(),
            reason: "late".into(),
            watermark_ms: Some(3_000),
        }
    }

    #[test]
    fn the_answer_names_the_window_the_wait_the_holder_and_the_drops() {
        let report = WindowReport {
            input_watermark_ms: Some(4_000),
            output_watermark_ms: Some(0),
            open_windows: 3,
            oldest: Some(OpenWindow {
                key: "\"k\"".into(),
                key_group: Some(7),
                window: "[0 ms, 10000 ms)".into(),
                end_ms: 9_999,
                expires_ms: 9_999,
                panes: 1,
                waiting_for: Wait::Watermark(Timestamp(9_999)),
            }),
            dropped_late: 2,
            dropped_closed: 0,
            last_dropped: Some(late_at_500()),
            allowed_lateness_ms: 0,
            timers: None,
        };
        let h = Holder {
            source: "B".into(),
            worker: 1,
            partition: Some(3),
            watermark_ms: Some(4_000),
            state: HolderState::Reading,
        };
        let ahead = Holder {
            watermark_ms: Some(12_000),
            ..h.clone()
        };
        assert_eq!(
            explain("Count", 0, &report, Some(&ahead))[2],
            "Every source upstream is past it (the least, B on worker 1, at 12000 ms): the watermark is on its way, behind the records and epochs in flight."
        );
        assert_eq!(
            explain("Count", 0, &report, Some(&h)),
            [
                "Count (worker 0): the oldest window still holding input, [0 ms, 10000 ms) of key \"k\", key group 7, has emitted 1 pane; its trigger waits for the watermark to pass 9999 ms.",
                "The input watermark is 4000 ms, 5999 ms short.",
                "It is held back by source B on worker 1, partition 3, at 4000 ms: it is reading, but its event time is behind; the window fires once it passes the window's end.",
                "2 elements were dropped as late (its window had expired: its end plus the allowed lateness, 0 ms, was behind the watermark); the last, at 500 ms for window [0 ms, 1000 ms), when the watermark was 3000 ms.",
            ]
        );
    }

    #[test]
    fn a_stateful_dofns_answer_names_its_earliest_timers_and_the_holder() {
        let timer = |name: &str, at_ms| PendingTimer {
            name: name.into(),
            key: "\"user-3\"".into(),
            key_group: Some(12),
            window: "the global window".into(),
            at_ms,
        };
        let mut report = WindowReport {
            input_watermark_ms: Some(4_000),
            output_watermark_ms: Some(4_000),
            open_windows: 2,
            oldest: None,
            dropped_late: 1,
            dropped_closed: 0,
            last_dropped: Some(late_at_500()),
            allowed_lateness_ms: 0,
            timers: Some(TimersReport {
                pending: 3,
                next_event_time: Some(timer("flush", 9_000)),
                next_processing_time: Some(timer("expire", 20_500)),
                processing_time_ms: 20_000,
            }),
        };
        let h = Holder {
            source: "Clicks".into(),
            worker: 1,
            partition: None,
            watermark_ms: Some(4_000),
            state: HolderState::Reading,
        };
        assert_eq!(
            explain("Sessions", 0, &report, Some(&h)),
            [
                "Sessions (worker 0): 3 timers pending in 2 windows; the earliest event-time timer, 'flush' of key \"user-3\", key group 12, in the global window, fires when the input watermark passes 9000 ms.",
                "The input watermark is 4000 ms, 5000 ms short.",
                "It is held back by source Clicks on worker 1, at 4000 ms: it is reading, but its event time is behind; the timer fires once it passes the timer's time.",
                "The earliest processing-time timer, 'expire' of key \"user-3\", key group 12, in the global window, fires at 20500 ms (in 500 ms).",
                "1 element was dropped as late (its window had expired: its end plus the allowed lateness, 0 ms, was behind the watermark); the last, at 500 ms for window [0 ms, 1000 ms), when the watermark was 3000 ms.",
            ]
        );
        // Of a task's instances, the one whose earliest event-time timer comes first
        // is shown.
        assert_eq!(report.waits_until_ms(), 9_000);
        assert!(report.says_something());
        report.timers = Some(TimersReport {
            pending: 0,
            next_event_time: None,
            next_processing_time: None,
            processing_time_ms: 20_000,
        });
        report.dropped_late = 0;
        assert_eq!(
            explain("Sessions", 0, &report, Some(&h)),
            ["Sessions (worker 0): 0 timers pending in 2 windows: it emits only as elements arrive, and its windows' state goes when they expire (their end plus the allowed lateness, 0 ms). Input watermark 4000 ms."]
        );
        // Waiting for nothing, it is left out of the answers.
        assert_eq!(report.waits_until_ms(), i64::MAX);
        assert!(!report.says_something());
    }
}
