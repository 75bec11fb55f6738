//! What a runner on the engine does with a plan and the command line, shared by the
//! native and the micro-batch runner: the flags and `--runner-option`s every engine
//! runner takes, `--local-cluster`, restoring from the checkpoint directory, the
//! summary printed at the end. A runner adds only its policy ([`EngineRunner`]).

use crate::restart::RestartStrategy;
use crate::{cluster, Clock, EngineConfig, Guarantee};
use std::time::Duration;
use tidewater::exec::DEFAULT_MAX_KEY_GROUPS;
use tidewater::runner::PipelineResult;
use tidewater::{plan::Plan, Error, PipelineOptions, Result};
use tidewater_runners_core::compat::PlanIdentity;
use tidewater_runners_core::translate::ExecutablePlan;

mod summary;
mod supervisors;

pub use summary::summary;

/// A runner on the engine: its name, its own options and its policy.
pub struct EngineRunner {
    /// `--runner=NAME`.
    pub name: &'static str,
    /// Options beyond [`COMMON_OPTIONS`], with their meaning.
    pub options: &'static [(&'static str, &'static str)],
    /// The policy, the epoch interval and the epochs in flight `options` ask for.
    pub policy: fn(&PipelineOptions) -> Result<PolicyChoice>,
}

/// What a runner's policy sets.
pub struct PolicyChoice {
    /// Streaming or micro-batches.
    pub policy: std::sync::Arc<dyn crate::policy::EpochPolicy>,
    /// The checkpoint or batch interval.
    pub interval: Duration,
    /// Epochs a source may run ahead of the last complete (committed) checkpoint.
    pub epochs_in_flight: u64,
    /// Watermark alignment: how far a source instance's watermark may run ahead of its
    /// source's slowest instance (`None`: off).
    pub max_watermark_drift: Option<Duration>,
}

/// The runner option `max_watermark_drift_ms` (watermark alignment), the one rule for
/// every runner on the engine: a whole number of milliseconds, `0` off, absent the
/// runner's `default`.
pub fn max_watermark_drift(
    options: &tidewater::PipelineOptions,
    default: Option<Duration>,
) -> Result<Option<Duration>> {
    match options.runner_option("max_watermark_drift_ms") {
        None => Ok(default),
        Some(v) => match v.parse::<u64>() {
            Ok(0) => Ok(None),
            Ok(ms) => Ok(Some(Duration::from_millis(ms))),
            Err(_) => Err(invalid(
                format!("--runner-option max_watermark_drift_ms={v}"),
                "expected a whole number of milliseconds (0: off)".into(),
            )),
        },
    }
}

/// The options (`--runner-option KEY=VALUE`) of every runner on the engine.
pub const COMMON_OPTIONS: [(&str, &str); 9] = [
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
        "full_snapshot_every",
        "a task's checkpoint is full at least every N checkpoints, a delta of what changed in between (default 10; 1: always full)",
    ),
    (
        "state_snapshots",
        "files|parts: with --state-backend=fjall and a local checkpoint directory, a stateful ParDo's checkpoints are the store's own files, shared between checkpoints (files, the default; Flink's incremental RocksDB checkpoints), or its cells copied into the checkpoint (parts)",
    ),
    (
        "connect_timeout_ms",
        "a process of several gives up when the others have not connected within this long at start-up (default 120000)",
    ),
    (
        "watchdog_ms",
        "--local-cluster restarts a cluster whose checkpoints stop for this long (default: 10 intervals, at least 60 s: longer than a connector's own timeouts, so that a slow external system fails with its own message)",
    ),
];

/// The shortest default watchdog: longer than the connectors' own timeouts (the
/// PostgreSQL sink's statements and connections: 10 s; a sink call: 20 to 30 s), so
/// that a process waiting on a slow external system fails with the system's message
/// (and is restarted for it) before the supervisor would call it hung and kill it
/// without one.
const DEFAULT_WATCHDOG: Duration = Duration::from_secs(60);

/// The most key groups a job may have (Flink's limit on maxParallelism).
const MAX_KEY_GROUPS_LIMIT: u32 = 32_768;

impl EngineRunner {
    /// Runs `plan` as `options` ask: here, or on a local cluster this process
    /// supervises, or as one process of such a cluster.
    pub fn run(&self, plan: &Plan, options: &PipelineOptions) -> Result<PipelineResult> {
        // Says what a run would restore, or what a savepoint holds, and ends.
        tidewater_runners_core::restore::answer_if_asked(plan, &options.engine)?;
        if let Some(n) = options.engine.local_cluster {
            return self.local_cluster(n as usize, plan, options);
        }
        if let Some(address) = &options.engine.coordinate {
            return self.coordinate(address, plan, options);
        }
        if let Some(address) = &options.engine.coordinator {
            return self.agent(address, options);
        }
        let child = std::env::var_os(cluster::CHILD_ENV);
        if child.is_none()
            && options
                .runner_flags
                .get(crate::restart::FLAG.name)
                .is_some()
        {
            return Err(invalid(
                "--restart-strategy".into(),
                "it says how --local-cluster's supervisor restarts a job; a single process is not restarted (a job of --processes is restarted by whatever started it)".into(),
            ));
        }
        if child.is_some() {
            cluster::exit_with_supervisor();
            cluster::quiet_peer_loss(true);
        } else if options.engine.processes > 1 {
            cluster::quiet_peer_loss(false);
        }
        let result = self.run_here(plan, options);
        // A process of a local cluster hands its outcome to the supervisor and ends.
        if let Some(path) = child {
            cluster::finish_child(std::path::Path::new(&path), result);
        }
        result
    }

    fn run_here(&self, plan: &Plan, options: &PipelineOptions) -> Result<PipelineResult> {
        let exec = tidewater_runners_core::translate(plan)?;
        let mut config = self.config(options, Clock::for_plan(&exec))?;
        refuse_unaligned_script(&exec, &config)?;
        // The status server first: its URL is the job's first line. Every process
        // gathers its workers' figures in process 0, which serves them (or, in a local
        // cluster, hands them to the supervisor).
        let child = std::env::var_os(cluster::CHILD_ENV).is_some();
        let for_supervisor = std::env::var_os(crate::status::supervised::STATUS_FILE_ENV)
            .filter(|_| child)
            .map(std::path::PathBuf::from);
        let board = (options.engine.status_addr.is_some() && !child || for_supervisor.is_some())
            .then(|| {
                std::sync::Arc::new(crate::status::Board::new(
                    self.name,
                    config.workers * config.processes,
                    config.processes,
                ))
            });
        config.status = board.clone();
        let server = match (&board, &options.engine.status_addr) {
            (Some(board), Some(addr)) if config.process_id == 0 && !child => {
                let graph =
                    tidewater_runners_core::job_graph::of_exec(&exec, config.lift_combiners);
                let control = crate::status::control::of(&options.engine, &config, plan, false)?;
                Some(crate::status::server::serve(
                    addr,
                    board.clone(),
                    graph,
                    control,
                )?)
            }
            _ => None,
        };
        let _writer = match (&board, for_supervisor) {
            (Some(board), Some(file)) if config.process_id == 0 => Some(
                crate::status::supervised::write_for_supervisor(board.clone(), file),
            ),
            _ => None,
        };
        // One job per checkpoint directory: a local cluster's supervisor holds it for its
        // processes; otherwise this process, or process 0 of several.
        let _lock = match &config.checkpoint_dir {
            Some(dir)
                if config.process_id == 0 && std::env::var_os(cluster::CHILD_ENV).is_none() =>
            {
                Some(crate::checkpoint::lock::lock(dir)?)
            }
            _ => None,
        };
        let identity = PlanIdentity::of(&exec);
        let (restored, origin) = crate::checkpoint::restore::restore_point(
            &identity,
            config.checkpoint_dir.as_deref(),
            options.engine.from_savepoint.as_deref(),
            options.engine.allow_non_restored_state,
        )?;
        if let Some(r) = &restored {
            for note in &r.notes {
                tracing::warn!("{} runner: {note}", self.name);
            }
        }
        config.job_id = job_of(options, &exec, &config, restored.as_ref())?;
        config.log_span = tracing::info_span!(
            "job",
            job = %config.job_id,
            process = config.process_id
        );
        let _logs = config.log_span.clone().entered();
        if let Some(board) = &board {
            board.set_job(&config.job_id);
        }
        // Every process checks before its workers write anything: a process whose
        // sinks write files sees its own.
        let start_epoch = crate::checkpoint::store::start_epoch(restored.as_ref());
        tidewater_runners_core::sink_host::refuse_replay(
            &exec,
            &tidewater_runners_core::sink_host::RunStart {
                job: &config.job_id,
                derived: options.job_id.is_none() && restored.is_none(),
                resume_epoch: start_epoch,
                origin: &origin,
                accept_duplicates: options.accept_duplicates,
            },
        )?;
        // A run from the beginning plans every batch anew (see `Store::clear_offsets`).
        if let (None, Some(dir), 0) = (&restored, &config.checkpoint_dir, config.process_id) {
            crate::checkpoint::store::Store::open(dir)?.clear_offsets()?;
        }
        let result = crate::run(plan, exec, &config, restored);
        if let Some(board) = &board {
            board.end(result.as_ref().err().map(|e| e.to_string()));
        }
        if let (Some(server), Some(linger)) = (server, options.engine.status_linger) {
            std::thread::sleep(linger);
            drop(server);
        }
        let result = result?;
        // A local cluster's supervisor prints the figures of all its processes.
        if config.progress && !in_local_cluster() {
            eprintln!("{}", summary(self.name, &result.metrics));
        }
        Ok(result)
    }

    /// The engine configuration `options` ask for.
    pub fn config(&self, options: &PipelineOptions, clock: Clock) -> Result<EngineConfig> {
        let known = || COMMON_OPTIONS.iter().chain(self.options.iter());
        if let Some((key, value)) = options
            .runner_options
            .iter()
            .find(|(k, _)| !known().any(|(option, _)| option == k))
        {
            return Err(invalid(
                format!("--runner-option {key}={value}"),
                format!(
                    "the {} runner has no option '{key}'; its options are:\n{}",
                    self.name,
                    known()
                        .map(|(k, m)| format!("  {k}: {m}"))
                        .collect::<Vec<_>>()
                        .join("\n")
                ),
            ));
        }
        let parse = |key: &str, default: usize| -> Result<usize> {
            match options.runner_option(key) {
                None => Ok(default),
                Some(v) => parse_positive(key, v),
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
        let state = tidewater_runners_core::state::StateChoice::of(options);
        let state = match (options.runner_option("state_snapshots"), checkpoint_dir(e)) {
            (Some("parts"), _) | (_, None) => state,
            (None | Some("files"), Some(dir)) => {
                match tidewater_runners_core::store::tables_dir(&dir) {
                    Some(tables) => state.with_tables(tables),
                    // An object store holds no table files: the cells go into parts.
                    None => state,
                }
            }
            (Some(v), _) => {
                return Err(invalid(
                    format!("--runner-option state_snapshots={v}"),
                    "expected files or parts".into(),
                ))
            }
        };
        let choice = (self.policy)(options)?;
        Ok(EngineConfig {
            workers,
            processes,
            process_id: e.process_id as usize,
            secret: cluster_secret(e, &addresses)?,
            tls: tls_of(e)?,
            status: None,
            log_span: tracing::Span::none(),
            addresses,
            connect_timeout: Duration::from_millis(parse(
                "connect_timeout_ms",
                crate::DEFAULT_CONNECT_TIMEOUT.as_millis() as usize,
            )? as u64),
            epoch_interval: choice.interval,
            policy: choice.policy,
            epochs_in_flight: choice.epochs_in_flight,
            max_watermark_drift: choice.max_watermark_drift,
            guarantee: if e.guarantee == "at-least-once" {
                Guarantee::AtLeastOnce
            } else {
                Guarantee::ExactlyOnce
            },
            checkpoint_dir: checkpoint_dir(e),
            savepoint_dir: match &e.savepoint_dir {
                // Made now: a directory that cannot be made fails the job at its start,
                // not after it has run to the end.
                Some(dir) if tidewater_runners_core::store::is_object_store(dir) => {
                    Some(dir.clone())
                }
                Some(dir) => {
                    std::fs::create_dir_all(dir).map_err(|err| {
                        invalid(
                            format!("--savepoint-dir {}", dir.display()),
                            format!("cannot create it: {err}"),
                        )
                    })?;
                    Some(dir.clone())
                }
                None => None,
            },
            max_key_groups,
            lift_combiners,
            partial_flush_groups: parse("partial_flush_groups", 100_000)?,
            bundle_size: parse("bundle_size", 1024)?,
            full_snapshot_every: parse("full_snapshot_every", crate::DEFAULT_FULL_SNAPSHOT_EVERY)?,
            source_partitions: parse("source_partitions", workers * processes)?,
            state,
            clock,
            max_duration: options.max_duration,
            // On a terminal; of a local cluster's processes (which share the
            // supervisor's terminal) only the first shows it.
            progress: stderr_is_terminal() && (!in_local_cluster() || e.process_id == 0),
            job_id: String::new(),
        })
    }
}

/// The secret the processes of a cluster prove they hold ([`crate::handshake`]):
/// `--cluster-secret-file`, else [`handshake::SECRET_ENV`] (a local cluster's
/// supervisor sets it), else none on loopback; a cluster with a routable address is
/// refused without one.
fn cluster_secret(
    e: &tidewater::EngineOptions,
    addresses: &[String],
) -> Result<crate::handshake::Secret> {
    use crate::handshake::{Secret, SECRET_ENV};
    if addresses.is_empty() {
        return Ok(Secret::none());
    }
    if let Some(path) = &e.cluster_secret_file {
        let option = format!("--cluster-secret-file {}", path.display());
        let text = crate::private_file::read_owner_only(path, &option)?;
        return Secret::parse(&text).map_err(|m| invalid(option, m));
    }
    if let Ok(text) = std::env::var(SECRET_ENV) {
        return Secret::parse(&text).map_err(|m| invalid(SECRET_ENV.to_string(), m));
    }
    let loopback = |a: &String| {
        a.rsplit_once(':').is_some_and(|(host, _)| {
            let host = host.trim_start_matches('[').trim_end_matches(']');
            host == "localhost"
                || host
                    .parse::<std::net::IpAddr>()
                    .is_ok_and(|ip| ip.is_loopback())
        })
    };
    if let Some(routable) = addresses.iter().find(|a| !loopback(a)) {
        return Err(invalid(
            "--hosts".to_string(),
            format!(
                "{routable} is not on loopback, and a cluster across hosts needs a secret its processes prove they hold: give every process --cluster-secret-file FILE (readable by its owner only) or the environment variable {SECRET_ENV}"
            ),
        ));
    }
    Ok(Secret::none())
}

/// TLS between the processes, when `--tls-cert`, `--tls-key` and `--tls-ca` are given
/// (clap requires all three together); their files are read now, so a wrong one fails
/// the job at its start.
fn tls_of(e: &tidewater::EngineOptions) -> Result<Option<std::sync::Arc<crate::tls::Tls>>> {
    let (Some(cert), Some(key), Some(ca)) = (&e.tls_cert, &e.tls_key, &e.tls_ca) else {
        return Ok(None);
    };
    crate::tls::Tls::load(cert, key, ca)
        .map(|t| Some(std::sync::Arc::new(t)))
        .map_err(|(option, message)| invalid(option, message))
}

/// The job's id (core's `job.rs`): the restored checkpoint's, else `--job-id`, else
/// derived from the plan and the canonical checkpoint directory, which every process of
/// the job computes alike.
fn job_of(
    options: &PipelineOptions,
    exec: &ExecutablePlan,
    config: &EngineConfig,
    restored: Option<&crate::checkpoint::store::Restored>,
) -> Result<String> {
    let recorded = match restored {
        Some(r) => tidewater_runners_core::checkpoint::restored_job(exec, &r.snapshot)?,
        None => None,
    };
    let place = match &config.checkpoint_dir {
        Some(dir) => std::fs::canonicalize(dir)
            .unwrap_or_else(|_| dir.clone())
            .display()
            .to_string(),
        None => String::new(),
    };
    tidewater_runners_core::job::job_id(options.job_id.as_deref(), recorded, exec.plan_hash, &place)
}

/// The strategy `--restart-strategy` names, or the default (exponential delay).
fn restart_strategy(options: &PipelineOptions) -> Result<RestartStrategy> {
    match options.runner_flags.get(crate::restart::FLAG.name) {
        None => Ok(RestartStrategy::default()),
        Some(spec) => RestartStrategy::parse(spec)
            .map_err(|message| invalid(format!("--restart-strategy {spec}"), message)),
    }
}

/// Refuses `--guarantee at-least-once` for a plan that replays a TestStream: without
/// aligned epochs the script's events could overtake each other (and a Read's data
/// beside them), and the result would differ from every other runner's (core's
/// `clock.rs`).
fn refuse_unaligned_script(plan: &ExecutablePlan, config: &EngineConfig) -> Result<()> {
    if config.guarantee == Guarantee::AtLeastOnce && Clock::needs_aligned_epochs(plan) {
        return Err(invalid(
            "--guarantee at-least-once".into(),
            "this pipeline replays a TestStream, whose script is applied in order (after \
             any source beside it is read out) only with aligned epochs: run it with \
             --guarantee exactly-once"
                .into(),
        ));
    }
    Ok(())
}

fn stderr_is_terminal() -> bool {
    use std::io::IsTerminal;
    std::io::stderr().is_terminal()
}

/// This process is one of a local cluster's, started by its supervisor.
fn in_local_cluster() -> bool {
    std::env::var_os(cluster::CHILD_ENV).is_some()
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

fn parse_positive(key: &str, v: &str) -> Result<usize> {
    v.parse::<usize>().ok().filter(|n| *n > 0).ok_or_else(|| {
        invalid(
            format!("--runner-option {key}={v}"),
            "expected a positive integer".into(),
        )
    })
}

fn invalid(option: String, message: String) -> Error {
    Error::InvalidOption { option, message }
}
