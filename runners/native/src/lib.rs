//! The native runner: the streaming policy on the timely engine (`runners/timely`).
//!
//! Records are applied as they arrive, as in Flink; sources cut epochs every
//! `--checkpoint-interval` (1 s by default) and may run `epochs_in_flight` (2) epochs
//! ahead of the durable frontier; with `--checkpoint-dir` every closed epoch is written
//! and sinks commit an epoch's output once its checkpoint is complete (two-phase
//! commit). `--guarantee=at-least-once` skips the alignment of epochs.
//!
//! Runner options (`--runner-option KEY=VALUE`): `bundle_size`, `lift_combiners`,
//! `partial_flush_groups`, `max_key_groups`, `source_partitions` (default: the number of
//! workers in all), `epochs_in_flight`.

use std::sync::Arc;
use std::time::Duration;
use tidewater::exec::DEFAULT_MAX_KEY_GROUPS;
use tidewater::runner::{register_runner, Capabilities, Feature, PipelineResult, Runner};
use tidewater::{plan::Plan, Error, PipelineOptions, Result};
use tidewater_runners_timely::{cluster, Clock, EngineConfig, Guarantee, Store};

pub use tidewater_runners_timely::cluster::CHILD_ENV as CLUSTER_CHILD_ENV;

/// The native runner.
pub struct NativeRunner;

/// The native runner's options (`--runner-option KEY=VALUE`), with their meaning.
pub const RUNNER_OPTIONS: [(&str, &str); 7] = [
    (
        "bundle_size",
        "largest bundle and source read (default 1024)",
    ),
    (
        "lift_combiners",
        "true|false: combine partially before the exchange (default true)",
    ),
    (
        "partial_flush_groups",
        "a partial-combine table holding more groups is flushed early (default 100000)",
    ),
    (
        "max_key_groups",
        "number of key groups keyed state is split into (default 128; fixed for a job's life)",
    ),
    (
        "source_partitions",
        "partitions a source is split into (default: the number of workers in all)",
    ),
    (
        "epochs_in_flight",
        "epochs a source may run ahead of the last complete checkpoint (default 2)",
    ),
    (
        "watchdog_ms",
        "--local-cluster restarts a cluster whose checkpoints stop for this long (default: 10 intervals, at least 10 s)",
    ),
];

/// The most key groups a job may have (Flink's limit on maxParallelism).
const MAX_KEY_GROUPS_LIMIT: u32 = 32_768;

impl Runner for NativeRunner {
    fn name(&self) -> &'static str {
        "native"
    }

    fn capabilities(&self) -> Capabilities {
        let features = Feature::ALL
            .into_iter()
            .filter(|f| *f != Feature::UnknownTransform);
        Capabilities::new(features, "the native runner does not implement this")
    }

    fn run(&self, plan: &Plan, options: &PipelineOptions) -> Result<PipelineResult> {
        if let Some(n) = options.engine.local_cluster {
            return local_cluster(n as usize, options);
        }
        let child = std::env::var_os(cluster::CHILD_ENV);
        if child.is_some() {
            cluster::quiet_peer_loss();
        }
        let result = self.run_here(plan, options);
        // A process of a local cluster hands its outcome to the supervisor and ends.
        if let Some(path) = child {
            cluster::finish_child(std::path::Path::new(&path), result);
        }
        result
    }
}

/// Launches `n` processes of this binary on loopback and supervises them.
fn local_cluster(n: usize, options: &PipelineOptions) -> Result<PipelineResult> {
    let e = &options.engine;
    if n < 1 || e.processes > 1 {
        return Err(invalid(
            format!("--local-cluster {n}"),
            "give the number of processes (at least 1), without --processes".into(),
        ));
    }
    let program = std::env::current_exe()
        .map_err(|err| Error::Internal(format!("cannot find this binary to launch: {err}")))?;
    let args = match &e.child_args {
        Some(a) => a.clone(),
        None => cluster::args_without_local_cluster(std::env::args().skip(1)),
    };
    let interval = e.checkpoint_interval.unwrap_or(Duration::from_secs(1));
    let watchdog = match options.runner_option("watchdog_ms") {
        None => (interval * 10).max(Duration::from_secs(10)),
        Some(v) => {
            Duration::from_millis(v.parse::<u64>().ok().filter(|n| *n > 0).ok_or_else(|| {
                invalid(
                    format!("--runner-option watchdog_ms={v}"),
                    "expected a positive number of milliseconds".into(),
                )
            })?)
        }
    };
    cluster::Supervisor {
        processes: n,
        program,
        args,
        // A savepoint is the last checkpoint, copied: without a checkpoint directory
        // the checkpoints go to a scratch one next to the savepoint.
        checkpoint_dir: checkpoint_dir(e),
        max_restarts: 20,
        watchdog,
    }
    .run()
}

impl NativeRunner {
    fn run_here(&self, plan: &Plan, options: &PipelineOptions) -> Result<PipelineResult> {
        let exec = tidewater_runners_core::translate(plan)?;
        let uses_test_stream = exec.nodes.iter().any(|n| {
            matches!(
                n.kind,
                tidewater_runners_core::translate::NodeKind::TestStream { .. }
            )
        });
        let config = engine_config(options, uses_test_stream)?;
        let restored = match &config.checkpoint_dir {
            Some(dir) => {
                let store = Store::open(dir)?;
                let restored = store.latest(tidewater_runners_core::snapshot::plan_hash(plan))?;
                if let Some(r) = &restored {
                    for note in &r.notes {
                        eprintln!("native runner: {note}");
                    }
                }
                restored
            }
            None => None,
        };
        let result = tidewater_runners_timely::run(plan, &config, restored)?;
        if config.progress {
            eprintln!("{}", summary(&result.metrics));
        }
        Ok(result)
    }
}

/// The engine's figures of a run, for people: records, checkpoints, their cost.
pub fn summary(metrics: &tidewater::exec::MetricResults) -> String {
    let step = tidewater_runners_timely::task::ENGINE_STEP;
    let counter = |name| metrics.counter(step, name).unwrap_or(0);
    let dist = |name, unit: &str| match metrics.distribution(step, name) {
        Some(d) if d.count > 0 => format!(
            "{name} avg {:.1}{unit} max {}{unit} over {}",
            d.sum as f64 / d.count as f64,
            d.max,
            d.count
        ),
        _ => format!("{name} -"),
    };
    format!(
        "native runner: {} records read; {} checkpoints ({}); {}; {}; {}; sources held back {} ms by the epochs in flight",
        counter("records_read"),
        counter("checkpoints"),
        dist("manifest_ms", "ms"),
        dist("snapshot_ms", "ms"),
        dist("snapshot_bytes", "B"),
        dist("alignment_ms", "ms"),
        counter("throttled_ms"),
    )
}

/// Where checkpoints go: `--checkpoint-dir`, or with only `--savepoint-dir` a scratch
/// directory next to the savepoint (a savepoint is the job's last checkpoint, copied).
fn checkpoint_dir(e: &tidewater::EngineOptions) -> Option<std::path::PathBuf> {
    e.checkpoint_dir.clone().or_else(|| {
        e.savepoint_dir.as_ref().map(|s| {
            let name = s.file_name().map(|n| n.to_string_lossy().into_owned());
            s.with_file_name(format!(
                ".{}.checkpoints",
                name.unwrap_or_else(|| "savepoint".into())
            ))
        })
    })
}

fn invalid(option: String, message: String) -> Error {
    Error::InvalidOption { option, message }
}

/// The engine configuration `options` ask for.
pub fn engine_config(options: &PipelineOptions, uses_test_stream: bool) -> Result<EngineConfig> {
    if let Some((key, value)) = options
        .runner_options
        .iter()
        .find(|(k, _)| !RUNNER_OPTIONS.iter().any(|(known, _)| known == k))
    {
        return Err(invalid(
            format!("--runner-option {key}={value}"),
            format!(
                "the native runner has no option '{key}'; its options are:\n{}",
                RUNNER_OPTIONS
                    .iter()
                    .map(|(k, m)| format!("  {k}: {m}"))
                    .collect::<Vec<_>>()
                    .join("\n")
            ),
        ));
    }
    let parse = |key: &str, default: usize| -> Result<usize> {
        match options.runner_option(key) {
            None => Ok(default),
            Some(v) => v.parse::<usize>().ok().filter(|n| *n > 0).ok_or_else(|| {
                invalid(
                    format!("--runner-option {key}={v}"),
                    "expected a positive integer".into(),
                )
            }),
        }
    };
    let e = &options.engine;
    let workers = e.workers as usize;
    let processes = e.processes as usize;
    if e.process_id >= e.processes {
        return Err(invalid(
            format!("--process-id {}", e.process_id),
            format!(
                "expected 0 to {} with --processes {}",
                e.processes - 1,
                e.processes
            ),
        ));
    }
    let addresses = match (&e.hosts, processes) {
        (_, 1) => Vec::new(),
        (Some(path), _) => {
            let text = std::fs::read_to_string(path).map_err(|err| {
                invalid(
                    format!("--hosts {}", path.display()),
                    format!("cannot read it: {err}"),
                )
            })?;
            let hosts: Vec<String> = text
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(String::from)
                .collect();
            if hosts.len() != processes {
                return Err(invalid(
                    format!("--hosts {}", path.display()),
                    format!(
                        "it lists {} hosts but --processes is {processes}",
                        hosts.len()
                    ),
                ));
            }
            hosts
        }
        (None, _) => (0..processes)
            .map(|i| format!("127.0.0.1:{}", 2101 + i))
            .collect(),
    };
    let max_key_groups = parse("max_key_groups", DEFAULT_MAX_KEY_GROUPS as usize)?;
    let max_key_groups = u32::try_from(max_key_groups)
        .ok()
        .filter(|m| *m <= MAX_KEY_GROUPS_LIMIT)
        .ok_or_else(|| {
            invalid(
                format!("--runner-option max_key_groups={max_key_groups}"),
                format!("at most {MAX_KEY_GROUPS_LIMIT}"),
            )
        })?;
    let lift_combiners = match options.runner_option("lift_combiners") {
        None | Some("true") => true,
        Some("false") => false,
        Some(v) => {
            return Err(invalid(
                format!("--runner-option lift_combiners={v}"),
                "expected true or false".into(),
            ))
        }
    };
    Ok(EngineConfig {
        workers,
        processes,
        process_id: e.process_id as usize,
        addresses,
        epoch_interval: e.checkpoint_interval.unwrap_or(Duration::from_secs(1)),
        epochs_in_flight: parse("epochs_in_flight", 2)? as u64,
        guarantee: if e.guarantee == "at-least-once" {
            Guarantee::AtLeastOnce
        } else {
            Guarantee::ExactlyOnce
        },
        // A savepoint is the last checkpoint, copied: without a checkpoint directory
        // the checkpoints go to a scratch one next to the savepoint.
        checkpoint_dir: checkpoint_dir(e),
        savepoint_dir: e.savepoint_dir.clone(),
        max_key_groups,
        lift_combiners,
        partial_flush_groups: parse("partial_flush_groups", 100_000)?,
        bundle_size: parse("bundle_size", 1024)?,
        source_partitions: parse("source_partitions", workers * processes)?,
        clock: if uses_test_stream {
            Clock::Simulated
        } else {
            Clock::Wall
        },
        max_duration: options.max_duration,
        // On a terminal, and not in a process of a local cluster (whose supervisor
        // owns the terminal).
        progress: {
            use std::io::IsTerminal;
            std::io::stderr().is_terminal() && std::env::var_os(cluster::CHILD_ENV).is_none()
        },
    })
}

/// Makes the runner selectable as `--runner=native`.
pub fn register() {
    register_runner(Arc::new(NativeRunner));
}
