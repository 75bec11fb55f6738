//! Tidewater's distributed engine on timely-dataflow, shared by the native (streaming)
//! and micro-batch runners: the plan as one timely dataflow, exchange by key group,
//! epochs as timely time, in-band watermarks, a checkpoint store, recovery.
//!
//! It holds no semantic rule and no runner's policy: a runner hands it an
//! [`policy::EpochPolicy`] that decides when its sources' epochs end and what they
//! read in each. Each worker builds the plan's tasks ([`task`]): a task hosts one of
//! core's heads (`tidewater_runners_core::head::Head`: Create/Impulse, TestStream, a
//! source driver, a keyed operator, a Flatten, a side-input runner, a capture) and the
//! fused stage its output feeds; the stage's exits are the task's timely outputs,
//! routed by key group, broadcast, kept local or gathered. Epochs close when timely's
//! frontiers pass them; a task hands its state for the closed epochs to its worker's
//! snapshot writer ([`checkpoint::writer`]) and holds its control capability until the
//! file is durable, so the probe after every task passing `e` means checkpoint `e` is
//! durable everywhere; the worker's checkpoint coordinator
//! ([`checkpoint::coordinator`]) then completes it and commits the sinks.

pub mod agents;
pub mod checkpoint;
pub mod cluster;
pub mod connect;
pub mod epochs;
pub mod fault;
pub mod fleet;
pub mod frames;
pub mod handshake;
pub mod launch;
pub mod metrics;
pub mod msg;
pub mod policy;
pub use tidewater_runners_status::private_file;
mod progress;
pub mod restart;
pub mod status;
pub mod stop;
pub mod task;
pub mod tls;
mod worker;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tidewater::exec::MetricResults;
use tidewater::plan::Plan;
use tidewater::runner::{PipelineResult, PipelineState};
use tidewater::{Error, Result};
use tidewater_runners_core::translate::ExecutablePlan;

pub use checkpoint::store::{Restored, Store};
pub use tidewater_runners_core::clock::Clock;

/// What a failure may cost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Guarantee {
    /// Epochs are aligned: records of a later epoch wait until the earlier one is
    /// closed everywhere, so a restored checkpoint is a consistent cut.
    ExactlyOnce,
    /// No alignment: every record is applied on arrival; after a failure some records
    /// are applied twice.
    AtLeastOnce,
}

/// How the engine runs a job.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// Worker threads per process.
    pub workers: usize,
    /// Processes in all.
    pub processes: usize,
    /// This process's index.
    pub process_id: usize,
    /// `host:port` of every process, when there are several.
    pub addresses: Vec<String>,
    /// How long a process of several waits for the others to connect at start-up.
    pub connect_timeout: Duration,
    /// The secret a process proves it holds to join the cluster ([`handshake`]).
    pub secret: handshake::Secret,
    /// TLS on the connections between processes ([`tls`]); none: plain TCP.
    pub tls: Option<Arc<tls::Tls>>,
    /// The status board the workers publish to (`--status-addr`, [`status`]).
    pub status: Option<Arc<status::Board>>,
    /// The span of the job's log lines (its id and this process's index); each worker's
    /// lines go in a `worker` span under it.
    pub log_span: tracing::Span,
    /// How long an epoch lasts at the sources (the checkpoint or batch interval).
    pub epoch_interval: Duration,
    /// The runner's epoch policy.
    pub policy: std::sync::Arc<dyn policy::EpochPolicy>,
    /// Epochs a source may run ahead of the last complete (committed) checkpoint.
    pub epochs_in_flight: u64,
    /// Watermark alignment (Flink's): a source instance whose watermark runs more than
    /// this ahead of the slowest of its source's instances on all workers pauses until
    /// that one catches up (`None`: off). Bounds the state of event-time windows
    /// downstream when the instances read at different speeds; changes no result.
    pub max_watermark_drift: Option<Duration>,
    /// Exactly-once or at-least-once.
    pub guarantee: Guarantee,
    /// Where checkpoints go; none: no checkpoints (sinks still commit per epoch).
    pub checkpoint_dir: Option<PathBuf>,
    /// Key groups.
    pub max_key_groups: u32,
    /// Combine partially before the exchange.
    pub lift_combiners: bool,
    /// A partial-combine table holding more groups is flushed early.
    pub partial_flush_groups: usize,
    /// Largest bundle (and source read).
    pub bundle_size: usize,
    /// A task's snapshot is full at least every this many checkpoints, a delta over
    /// the previous one in between (1: always full); sooner once its deltas since the
    /// last full one outweigh it.
    pub full_snapshot_every: usize,
    /// Partitions a source is split into.
    pub source_partitions: usize,
    /// Where stateful DoFns keep their state (`--state-backend`).
    pub state: tidewater_runners_core::state::StateChoice,
    /// Where processing time comes from.
    pub clock: Clock,
    /// Stop reading sources after this long.
    pub max_duration: Option<Duration>,
    /// Show a live progress line (records/s, last durable epoch) on stderr.
    pub progress: bool,
    /// The job's id, which its sinks are told (core's `job.rs`): the restored
    /// checkpoint's, else `--job-id`, else derived from the plan and the checkpoint
    /// directory. Set once the restored checkpoint is known (`launch.rs`).
    pub job_id: String,
    /// Keep the job's last checkpoint here (a savepoint): at the end of a bounded run,
    /// or when the job is stopped (Ctrl-C, `--max-duration`), in which case sources
    /// stop where they are instead of draining, so that a job resumed from it reads
    /// on. Needs `checkpoint_dir`.
    pub savepoint_dir: Option<PathBuf>,
}

/// How long a process of several waits for the others at start-up by default.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(120);

/// How often a task's snapshot is full by default (see
/// [`EngineConfig::full_snapshot_every`]).
pub const DEFAULT_FULL_SNAPSHOT_EVERY: usize = 100;

/// The first failure of any worker; once set, every worker stops.
#[derive(Default)]
pub struct Abort {
    set: AtomicBool,
    error: Mutex<Option<Error>>,
}

impl Abort {
    /// Whether a worker failed.
    pub fn is_set(&self) -> bool {
        self.set.load(Ordering::SeqCst)
    }

    /// Records a failure (the first one wins) and stops every worker.
    pub fn fail(&self, e: Error) {
        let mut slot = self.error.lock().unwrap_or_else(|p| p.into_inner());
        if slot.is_none() {
            *slot = Some(e);
        }
        self.set.store(true, Ordering::SeqCst);
    }

    fn take(&self) -> Option<Error> {
        self.error.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

/// What every worker of a process shares.
pub struct Shared {
    /// The plan, translated once per process; every worker instantiates its own
    /// functions and state from it.
    pub exec: ExecutablePlan,
    /// How to run.
    pub config: EngineConfig,
    /// The plan's hash.
    pub plan_hash: u64,
    /// The plan's stateful parts by id.
    pub identity: Arc<tidewater_runners_core::compat::PlanIdentity>,
    /// The checkpoint restored from.
    pub restored: Option<Restored>,
    /// Failures.
    pub abort: Arc<Abort>,
    /// The latest checkpoint whose manifest worker 0 of this process wrote.
    pub durable: Mutex<Option<u64>>,
    /// When the job started.
    pub started: Instant,
}

impl Shared {
    /// The first epoch this run writes: the one after the checkpoint restored from.
    pub fn start_epoch(&self) -> u64 {
        checkpoint::store::start_epoch(self.restored.as_ref())
    }
}

/// timely's allocators for this process's workers: one thread, threads of one process,
/// or a cluster whose processes [`connect`] connected.
fn allocators(
    config: &EngineConfig,
) -> Result<(
    Vec<timely::communication::AllocatorBuilder>,
    Box<dyn std::any::Any + Send>,
)> {
    use timely::communication::Config;
    if config.processes <= 1 {
        let communication = if config.workers > 1 {
            Config::Process(config.workers)
        } else {
            Config::Thread
        };
        return communication
            .try_build()
            .map_err(|e| Error::Internal(format!("the timely engine did not start: {e}")));
    }
    let threads = config.workers.max(1);
    // Tests hold the processes above 0 back, so that strangers reach process 0 first.
    if config.process_id != 0 {
        crate::fault::delay("connect");
    }
    let sockets = connect::connect(
        &config.addresses,
        config.process_id,
        config.connect_timeout,
        &config.secret,
    )?;
    let Some(tls) = &config.tls else {
        return network(sockets, config.process_id, threads, Box::new(()));
    };
    let relay = tls::Relay::new()
        .map_err(|e| Error::Internal(format!("cannot start the TLS relay: {e}")))?;
    let me = config.process_id;
    let secured = sockets
        .into_iter()
        .enumerate()
        .map(|(peer, socket)| {
            let Some(socket) = socket else {
                return Ok(None);
            };
            let address = &config.addresses[peer];
            let side = match peer < me {
                true => tls::Side::Client {
                    host: tls::host_of(address),
                },
                false => tls::Side::Server,
            };
            relay
                .secure(tls, socket, side)
                .map(Some)
                .map_err(|why| Error::Cluster {
                    message: format!(
                        "process {me}: TLS with process {peer} at {address} failed: {why}"
                    ),
                })
        })
        .collect::<Result<Vec<_>>>()?;
    network(secured, me, threads, Box::new(relay))
}

/// timely's network threads on `sockets` (one per other process), each read through a
/// frame checker ([`frames`]); `keep` lives as long as they do.
fn network<S: timely::communication::allocator::zero_copy::stream::Stream + 'static>(
    sockets: Vec<Option<S>>,
    me: usize,
    threads: usize,
    keep: Box<dyn std::any::Any + Send>,
) -> Result<(
    Vec<timely::communication::AllocatorBuilder>,
    Box<dyn std::any::Any + Send>,
)> {
    use timely::communication::allocator::ProcessBuilder;
    use timely::communication::{AllocatorBuilder, Hooks};
    let checked = sockets
        .into_iter()
        .enumerate()
        .map(|(peer, s)| s.map(|s| frames::Checked::new(s, frames::Ends { me, peer, threads })))
        .collect();
    let hooks = Hooks::default();
    let process =
        ProcessBuilder::new_typed_vector(threads, hooks.refill.clone(), hooks.spill.clone());
    let (builders, guard) =
        timely::communication::allocator::zero_copy::initialize::initialize_networking_from_sockets(
            process, checked, me, threads, hooks,
        )
        .map_err(|e| Error::Internal(format!("cannot start the cluster's network threads: {e}")))?;
    // The guard joins the network threads when dropped, before what `keep` holds ends.
    Ok((
        builders.into_iter().map(AllocatorBuilder::Tcp).collect(),
        Box::new((guard, keep)),
    ))
}

/// Runs `plan` (translated: `exec`) on this process's workers to the end; `restored`
/// is the checkpoint to resume from (see [`Store::latest`]).
pub fn run(
    plan: &Plan,
    exec: ExecutablePlan,
    config: &EngineConfig,
    restored: Option<Restored>,
) -> Result<PipelineResult> {
    match run_engine(plan, exec, config, restored) {
        // What losing a peer set off here (workers that panicked on a closed
        // connection, guards that would not join) is said as the loss it was.
        Err(Error::Internal(m)) if config.processes > 1 => match cluster::peer_loss() {
            Some(loss) => Err(Error::Cluster {
                message: format!("process {} lost a peer: {loss}", config.process_id),
            }),
            None => Err(Error::Internal(m)),
        },
        other => other,
    }
}

fn run_engine(
    plan: &Plan,
    exec: ExecutablePlan,
    config: &EngineConfig,
    restored: Option<Restored>,
) -> Result<PipelineResult> {
    let identity = Arc::new(tidewater_runners_core::compat::PlanIdentity::of(&exec));
    let shared = Arc::new(Shared {
        exec,
        config: config.clone(),
        plan_hash: tidewater_runners_core::snapshot::plan_hash(plan),
        identity,
        restored,
        abort: Arc::new(Abort::default()),
        durable: Mutex::new(None),
        started: Instant::now(),
    });
    let worker_shared = Arc::clone(&shared);
    let (builders, guard) = allocators(config)?;
    let guards = timely::execute::execute_from(
        builders,
        guard,
        timely::WorkerConfig::default(),
        move |worker| worker::worker_main(worker, &worker_shared),
    )
    .map_err(|e| Error::Internal(format!("the timely engine did not start: {e}")))?;
    // Joined on a thread of its own: with several processes a failed worker cannot
    // wait for timely to shut down (its peers wait on it forever), so the failure is
    // returned at once and the process is expected to end.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(guards.join());
    });
    let joined = loop {
        match rx.recv_timeout(Duration::from_millis(20)) {
            Ok(joined) => break joined,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                if config.processes > 1 && shared.abort.is_set() {
                    return Err(shared
                        .abort
                        .take()
                        .unwrap_or_else(|| Error::Internal("a worker failed".into())));
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                return Err(Error::Internal(
                    "the timely engine's workers vanished".into(),
                ))
            }
        }
    };
    let mut captured = BTreeMap::new();
    let mut metrics = MetricResults::default();
    let mut failed = false;
    for r in joined {
        match r {
            Ok(Ok(out)) => {
                for (name, (ty, bytes)) in out.captures {
                    let entry = captured.entry(name).or_insert_with(|| (ty, Vec::new()));
                    entry.1.extend(bytes);
                }
                metrics.merge(&out.metrics);
            }
            Ok(Err(())) => failed = true,
            Err(panic) => {
                shared
                    .abort
                    .fail(Error::Internal(format!("a worker panicked: {panic}")));
                failed = true;
            }
        }
    }
    if failed || shared.abort.is_set() {
        return Err(shared
            .abort
            .take()
            .unwrap_or_else(|| Error::Internal("a worker failed".into())));
    }
    if let (Some(to), Some(dir), 0) = (
        &config.savepoint_dir,
        &config.checkpoint_dir,
        config.process_id,
    ) {
        let store = Store::open(dir)?;
        let last = store.last_checkpoint()?.ok_or_else(|| Error::Checkpoint {
            message: format!(
                "the job ended without a last checkpoint in {}",
                dir.display()
            ),
        })?;
        store.copy_checkpoint(last, to)?;
        if let Some(board) = &config.status {
            board.savepoint(last, to);
        }
    }
    Ok(PipelineResult {
        state: PipelineState::Done,
        metrics,
        captured,
        // Captures are gathered on process 0 (a local cluster's supervisor gets them
        // from there).
        holds_captures: config.process_id == 0,
    })
}
