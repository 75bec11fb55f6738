//! The micro-batch policy: a batch per epoch, its ranges fixed and logged before it
//! runs, results applied at its close, and when the job stops (Spark's triggers).

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tidewater::exec::AnyBatch;
use tidewater::runner::RunnerFlag;
use tidewater::{Error, PipelineOptions, Result, Timestamp};
use tidewater_runners_core::source_driver::{PlannedBatch, ReadRange};
use tidewater_runners_timely::launch::PolicyChoice;
use tidewater_runners_timely::metrics::BatchFigures;
use tidewater_runners_timely::policy::{EpochPolicy, ReadPolicy, ReadTask};
use tidewater_runners_timely::Clock;

/// When a micro-batch runs and when the job ends (Spark's trigger modes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BatchTrigger {
    /// A batch every interval, reading what arrived since the last one.
    Interval,
    /// One batch of everything available at the run's start (no record limit), then
    /// the job ends.
    Once,
    /// Batches (of at most the record limit) until every source partition reached the
    /// end taken at the run's start (Spark's `Trigger.AvailableNow`), then the job
    /// ends; a partition whose source cannot say what it has available: until a
    /// batch in which it gave less than its share of the limit.
    AvailableNow,
}

/// Micro-batches: an epoch is a batch. At its start each source fixes its ranges (and
/// logs them with checkpoints on); the batch runs to its end everywhere, and
/// watermarks and processing time advance only at its end, where triggers and timers
/// fire; the next batch starts once it is complete, at the next interval.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Batches {
    /// Records a batch reads from a source at most.
    pub max_records: Option<u64>,
    /// When batches run.
    pub trigger: BatchTrigger,
}

impl EpochPolicy for Batches {
    fn time_at_close(&self) -> bool {
        true
    }

    fn reader(&self) -> Box<dyn ReadPolicy> {
        Box::new(BatchReader {
            policy: *self,
            // The first batch is due at once.
            due: Instant::now(),
            run: None,
            run_ends_fixed: false,
            backlog: false,
        })
    }
}

/// The micro-batch runner's flags ([`tidewater::Runner::flags`]).
pub const FLAGS: [RunnerFlag; 4] = [
    RunnerFlag {
        name: "batch-interval",
        value_name: "DURATION",
        help: "The micro-batch runner's batch interval: a batch starts this long after the previous one started, or at once when that one took longer (default 500ms)",
        check: check_interval,
    },
    RunnerFlag {
        name: "max-records-per-batch",
        value_name: "N",
        help: "The micro-batch runner reads at most this many records from a source per batch (default 30000); a source with more available (a backlog, a bounded input) runs in batches of this size back to back, without waiting for the interval, so that a batch's records and the windows they open stay bounded at any input size",
        check: check_max_records,
    },
    RunnerFlag {
        name: "trigger",
        value_name: "MODE",
        help: "When the micro-batch runner runs batches, as Spark's triggers: `interval` (a batch every --batch-interval, the default), `once` (one batch of everything available at the start, then stop), `available-now` (batches of at most --max-records-per-batch until every source partition reached the end taken at the start, then stop; records arriving meanwhile are the next run's). A job stopped this way keeps its state and source positions in --checkpoint-dir",
        check: check_trigger,
    },
    tidewater_runners_timely::restart::FLAG,
];

fn interval(s: &str) -> std::result::Result<Duration, String> {
    let d = tidewater::parse_duration(s)?;
    if d.is_zero() {
        return Err("a batch interval must be positive".into());
    }
    Ok(d)
}

fn check_interval(s: &str) -> std::result::Result<(), String> {
    interval(s).map(|_| ())
}

/// Records a batch reads from a source at most, unless `--max-records-per-batch` says:
/// a bounded input of any size runs in batches of about this many, and the windows a
/// batch opens before the watermark moves at its end stay few. Measured (`bench
/// --runner microbatch --workers 2`, lines of 10 words, against one batch of the whole
/// input): the windowed word count's peak RSS 163 MB at 10M words and 171 MB at 50M
/// (was 551 and 770 MB) at 6.38M and 5.79M words/s (was 3.29M and 4.34M); the count,
/// whose partial combines are flushed once a batch, 14.8M and 13.4M words/s (was 17.4M
/// and 16.9M). That was at 100,000; at 50,000 (with partial combines and panes
/// emitted in batches of 4,096), 10M words, medians of 3: windowed peak RSS 112 -> 85 MB
/// at one worker and 178 -> 116 MB at two, at 4.20M -> 4.32M and 7.73M -> 7.87M
/// words/s; the count 8.64M -> 8.42M and 15.99M -> 15.37M words/s (a batch's partial
/// flush is the price). At 50M words, one worker: 80 MB. Then 40,000: with the release
/// profile's LTO (faster, and mimalloc keeps more of what a batch's end frees) 50,000
/// gave 98 MB in every run at one worker; 40,000 gives 73 MB at 10M words and 84 MB at
/// 50M (two workers: 101 MB at 10M), the count 10.35M -> 10.15M words/s at one worker,
/// 18.0M either way at two. Then 30,000 (records are the input's lines, ten words each;
/// `bench --batch-records N`, three runs each, 10M words): windowed at two workers
/// 94-110 MB -> 72-99 MB and 7.6-8.4M -> 8.2-9.3M words/s, at one 71-72 -> 62 MB and
/// 4.6-4.7M -> 4.8-4.9M; at 50M words 56-62 MB (one worker) and 84-91 MB (two); the
/// count 9.7M -> 9.6M words/s at one worker, 17.1M -> 16.4-16.9M at two (medians;
/// 25,000 was slower for both).
pub const DEFAULT_MAX_RECORDS: u64 = 30_000;

/// How far a source instance's watermark may run ahead of its slowest instance before
/// it reads one record a partition per batch until they catch up (the runner option
/// `max_watermark_drift_ms`; 0: off).
pub const DEFAULT_MAX_WATERMARK_DRIFT: Duration = Duration::from_secs(10);

fn max_records(s: &str) -> std::result::Result<u64, String> {
    s.parse::<u64>()
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| format!("expected a positive number of records, got '{s}'"))
}

fn check_max_records(s: &str) -> std::result::Result<(), String> {
    max_records(s).map(|_| ())
}

fn trigger(s: &str) -> std::result::Result<BatchTrigger, String> {
    match s {
        "interval" => Ok(BatchTrigger::Interval),
        "once" => Ok(BatchTrigger::Once),
        "available-now" => Ok(BatchTrigger::AvailableNow),
        other => Err(format!(
            "expected interval, once or available-now, got '{other}'"
        )),
    }
}

fn check_trigger(s: &str) -> std::result::Result<(), String> {
    trigger(s).map(|_| ())
}

/// The micro-batch policy `options` ask for (`--batch-interval`,
/// `--max-records-per-batch`, `--trigger`).
pub fn choose(options: &PipelineOptions) -> Result<PolicyChoice> {
    let e = &options.engine;
    let invalid = |option: String, message: &str| Error::InvalidOption {
        option,
        message: message.into(),
    };
    // Given through PipelineOptions in code, a value was not checked while parsing.
    let flag = |name: &str| options.runner_flags.get(name);
    let checked = |name: &str, v: &str, e: String| Error::InvalidOption {
        option: format!("--{name} {v}"),
        message: e,
    };
    if e.guarantee == "at-least-once" {
        return Err(invalid(
            "--guarantee at-least-once".into(),
            "the microbatch runner is exactly-once by batch; it has no at-least-once mode",
        ));
    }
    if e.checkpoint_interval.is_some() {
        return Err(invalid(
            "--checkpoint-interval".into(),
            "the microbatch runner checkpoints every batch; set --batch-interval",
        ));
    }
    let trigger = match flag("trigger") {
        None => BatchTrigger::Interval,
        Some(v) => trigger(v).map_err(|e| checked("trigger", v, e))?,
    };
    let interval = match flag("batch-interval") {
        None => Duration::from_millis(500),
        Some(v) => interval(v).map_err(|e| checked("batch-interval", v, e))?,
    };
    let max_watermark_drift = tidewater_runners_timely::launch::max_watermark_drift(
        options,
        Some(DEFAULT_MAX_WATERMARK_DRIFT),
    )?;
    let max_records = match flag("max-records-per-batch") {
        None => Some(DEFAULT_MAX_RECORDS),
        Some(v) => Some(max_records(v).map_err(|e| checked("max-records-per-batch", v, e))?),
    };
    Ok(PolicyChoice {
        policy: Arc::new(Batches {
            max_records,
            trigger,
        }),
        interval,
        epochs_in_flight: 1,
        max_watermark_drift,
    })
}

/// One Read task's batches.
struct BatchReader {
    policy: Batches,
    /// When the next batch is due.
    due: Instant,
    /// The batch the task is running through its stage.
    run: Option<BatchRun>,
    /// The run's end was settled: under `once` and `available-now`, each owned
    /// partition's end taken (or kept from the checkpoint taken within the run); under
    /// `interval`, any such end forgotten.
    run_ends_fixed: bool,
    /// The last batch stopped at the record limit with more available: the next one
    /// runs at once, not at the next interval (a batch is cut by size as well as by
    /// time).
    backlog: bool,
}

/// A micro-batch a source task is running through its stage.
struct BatchRun {
    /// Its reads still to run.
    queue: VecDeque<Box<dyn AnyBatch>>,
    /// A batch whose ranges were fixed (and logged) before it was read: the reads to
    /// come, one chunk per activation, so that the records in memory stay few however
    /// large the batch. `None`: the batch was read whole into `queue`.
    plan: Option<PlannedBatch>,
    /// What the write-ahead log holds for the batch, as this worker wrote it (empty
    /// when it replays a logged batch, or runs without checkpoints).
    logged: Vec<ReadRange>,
    /// The task finishes after it (the trigger stops, or a stop with a savepoint).
    stop: bool,
    /// Its figures so far.
    figures: BatchFigures,
    /// When it started.
    started: Instant,
}

impl ReadPolicy for BatchReader {
    fn activate(&mut self, task: &mut dyn ReadTask) -> Result<()> {
        if self.run.is_some() {
            return self.continue_batch(task);
        }
        self.start_batch(task)
    }
}

impl BatchReader {
    /// A batch starts once the previous one is complete everywhere and its time has
    /// come; it reads what the source's partitions have available (at most its share
    /// of the record limit), logs the ranges before anything is processed (with
    /// checkpoints on), runs them through the stage and closes: the rest of the
    /// dataflow finishes the batch.
    fn start_batch(&mut self, task: &mut dyn ReadTask) -> Result<()> {
        let trigger = self.policy.trigger;
        let stopping = task.check_stop();
        let started = Instant::now();
        if !task.previous_epochs_complete() {
            task.activate_after(Duration::from_millis(1));
            return Ok(());
        }
        if trigger == BatchTrigger::Interval && !stopping && !self.backlog && started < self.due {
            task.activate_after(self.due.saturating_duration_since(started));
            return Ok(());
        }
        let due = if self.backlog { started } else { self.due };
        self.backlog = false;
        self.due = (due + task.epoch_interval()).max(started);
        let delay_ms = started.saturating_duration_since(due).as_millis() as u64;
        if task.clock() == Clock::Wall {
            let t = Timestamp::wall_clock().max(task.in_band_time());
            task.set_processing_time(t);
        }
        // On the simulated clock a Read reads at the clock's start, all it has in one
        // batch, before the script's first event (core's clock.rs).
        let simulated = task.clock() == Clock::Simulated;
        let batch_time = task.clock().read_time(task.in_band_time());
        let cur = task.epoch();
        // The batch's processing time reaches every consumer before its records.
        task.send_progress()?;
        // A stop with a savepoint leaves the partitions where they are, so that a job
        // resumed from it reads on; otherwise the sources drain.
        let savepoint = task.stop_with_savepoint();
        let mut stop = stopping && savepoint;
        if stopping && !savepoint {
            task.driver().finish();
        }
        if !self.run_ends_fixed {
            // Spark's Trigger.AvailableNow: the end of every partition this worker
            // owns is taken once, at the start of the run (a run restored from a
            // checkpoint taken within it keeps the ends it had).
            match trigger {
                BatchTrigger::Interval => task.driver().end_run(),
                BatchTrigger::Once | BatchTrigger::AvailableNow => task
                    .driver()
                    .fix_run_ends(batch_time)
                    .map_err(|e| task.fail(e))?,
            }
            self.run_ends_fixed = true;
        }
        // A run restored after its last batch has nothing left to read.
        if trigger != BatchTrigger::Interval && task.driver().reached_run_ends() {
            stop = true;
        }
        let mut out = Vec::new();
        let mut plan = None;
        let mut logged_here = Vec::new();
        if !stop && !task.driver().is_done() {
            let logged = task.logged_ranges()?;
            // Other workers' ranges of this batch may be logged already: only a range
            // of a partition this worker reads means the batch ran before.
            let driver = task.driver();
            let replayed = logged.as_ref().is_some_and(|l| {
                l.iter()
                    .any(|r| driver.partitions().contains_key(&r.partition))
            });
            if replayed {
                tracing::info!(
                    "{}: batch {cur} runs again with the source ranges logged before the failure (worker {})",
                    task.name(),
                    task.worker()
                );
            }
            let limit = if trigger == BatchTrigger::Once || simulated {
                None
            } else if !replayed && task.ahead_of_its_source() {
                // Watermark alignment: an instance ahead of its source's slowest
                // reads one record a partition until the others catch up, so that the
                // windows it opens past theirs (held until the watermark, their
                // minimum, passes them) stay few.
                Some(1)
            } else {
                self.policy.max_records
            };
            // The ranges are fixed before the batch runs: planned from what the
            // source has available (then read as the batch runs), or read whole.
            let read_size = task.read_size();
            let planned = task
                .driver()
                .plan_batch(logged.as_deref(), limit, batch_time)
                .map_err(|e| task.fail(e))?;
            let ranges = match planned {
                Some(p) => {
                    let ranges = p.ranges();
                    plan = Some(p);
                    ranges
                }
                None => {
                    let read = task
                        .driver()
                        .read_batch(logged.as_deref(), limit, read_size, batch_time, &mut out)
                        .map_err(|e| task.fail(e))?;
                    stop = trigger_stops(trigger, read.limited);
                    self.backlog = read.limited;
                    read.ranges
                }
            };
            if task.logs() {
                let replayed = logged.as_ref().is_some_and(|l| {
                    ranges
                        .iter()
                        .all(|r| l.iter().any(|x| x.partition == r.partition))
                });
                if !replayed {
                    task.log_ranges(&ranges)?;
                    tidewater_runners_timely::fault::point("offsets");
                    logged_here = ranges;
                }
            }
        }
        let records: usize = out.iter().map(|b| b.len()).sum();
        task.count_read(records);
        task.count_batch();
        self.run = Some(BatchRun {
            queue: out.into(),
            plan,
            logged: logged_here,
            stop,
            figures: BatchFigures {
                batch: cur,
                records: records as u64,
                processing_ms: 0,
                delay_ms,
                state_bytes: 0,
            },
            started,
        });
        self.continue_batch(task)
    }

    /// Runs the next read of the batch's records through the stage and sends them on
    /// (reading the next chunk of a planned batch first); after the last, closes the
    /// batch (or finishes the task after its last batch). One read per activation, so
    /// that consumers on this worker run in between and the records in flight stay
    /// few.
    fn continue_batch(&mut self, task: &mut dyn ReadTask) -> Result<()> {
        let Some(run) = self.run.as_mut() else {
            return Ok(());
        };
        if let (true, Some(plan)) = (run.queue.is_empty(), run.plan.as_mut()) {
            if !plan.is_read() {
                let mut out = Vec::new();
                let (read_size, now) = (
                    task.read_size(),
                    task.clock().read_time(task.in_band_time()),
                );
                task.driver()
                    .read_planned(plan, read_size, now, &mut out)
                    .map_err(|e| task.fail(e))?;
                let records: usize = out.iter().map(|b| b.len()).sum();
                task.count_read(records);
                run.figures.records += records as u64;
                run.queue.extend(out);
            }
        }
        if let Some(b) = run.queue.pop_front() {
            task.run(b)?;
            task.flush();
            task.activate();
            return Ok(());
        }
        let mut run = self.run.take().expect("a batch is running");
        if let Some(plan) = run.plan.take() {
            let read = task
                .driver()
                .settle_planned(plan)
                .map_err(|e| task.fail(e))?;
            // A partition that had fewer records than it said ends the batch early:
            // the log gets the ranges read, before anything of the batch is durable.
            if !run.logged.is_empty() && run.logged != read.ranges {
                task.log_ranges(&read.ranges)?;
            }
            run.stop |= trigger_stops(self.policy.trigger, read.limited);
            self.backlog = read.limited;
        }
        // On the simulated clock the batch read everything the source has at a time
        // that never moves: nothing more will come (core's clock.rs).
        if task.clock() == Clock::Simulated {
            task.driver().finish();
        }
        let end = run.stop || task.driver().is_done();
        task.batch_read(run.figures, run.started);
        task.emit(Vec::new())?;
        if end {
            // The run is over: the next one takes its own ends.
            task.driver().end_run();
            return task.finish();
        }
        task.end_epoch()?;
        task.activate_after(Duration::from_millis(1));
        Ok(())
    }
}

/// Whether a run ends after a batch whose read found `limited` (some partition has
/// more in the run).
fn trigger_stops(trigger: BatchTrigger, limited: bool) -> bool {
    match trigger {
        BatchTrigger::Interval => false,
        BatchTrigger::Once => true,
        BatchTrigger::AvailableNow => !limited,
    }
}
