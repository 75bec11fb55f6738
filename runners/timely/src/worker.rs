//! One worker: builds the plan's dataflow out of tasks and drives it to the end, with
//! its checkpoint coordinator ([`crate::checkpoint::coordinator`]) completing
//! checkpoints and committing the sinks as they become durable.

use crate::checkpoint::coordinator::Coordinator;
use crate::checkpoint::store::Store;
use crate::epochs::FINAL_EPOCH;
use crate::metrics::OperatorFigures;
use crate::msg::Msg;
use crate::progress::{batch_figures, Progress};
use crate::task::{Decoder, Input, Route, Task, WorkerCtx};
use crate::Shared;
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tidewater::exec::{key_groups_of_worker, MetricResults};
use tidewater::{Error, Result};
use tidewater_runners_core::checkpoint::restore_sink;
use tidewater_runners_core::fusion::{heads, stage_graph, ExitKind};
use tidewater_runners_core::head::{Head, Placement};
use tidewater_runners_core::keyed::{key_ops, KeyGroups};
use tidewater_runners_core::sink_host::SinkHost;
use tidewater_runners_core::snapshot::Snapshot;
use tidewater_runners_core::stage::{FusedStage, StageOptions};
use tidewater_runners_core::translate::{ExecutablePlan, NodeKind};
use tidewater_runners_core::watermarks::{Senders, SourceView};
use timely::dataflow::channels::pact::Exchange;
use timely::dataflow::operators::generic::builder_rc::OperatorBuilder;
use timely::dataflow::operators::Probe;
use timely::dataflow::{ProbeHandle, Stream};

/// What a worker hands back.
pub struct WorkerOutput {
    /// Captures (worker 0 has them all).
    pub captures: BTreeMap<String, (String, Vec<u8>)>,
    /// Its metrics.
    pub metrics: MetricResults,
}

/// How long a worker parks when nothing is scheduled.
const PARK: Duration = Duration::from_millis(20);

/// Runs this worker's share of the job; a failure is recorded in `shared.abort`, which
/// stops every worker of this process.
pub fn worker_main(
    worker: &mut timely::worker::Worker,
    shared: &Shared,
) -> std::result::Result<WorkerOutput, ()> {
    let _logs = tracing::info_span!(
        parent: &shared.config.log_span,
        "worker",
        worker = worker.index()
    )
    .entered();
    run(worker, shared).map_err(|e| {
        shared.abort.fail(e);
        // timely steps a dataflow still installed until it completes, which a failed
        // one never does.
        for dataflow in worker.installed_dataflows() {
            worker.drop_dataflow(dataflow);
        }
    })
}

fn run(worker: &mut timely::worker::Worker, shared: &Shared) -> Result<WorkerOutput> {
    let exec = &shared.exec;
    let config = &shared.config;
    let store = match &config.checkpoint_dir {
        Some(dir) => Some(Store::open(dir)?),
        None => None,
    };
    let probe = ProbeHandle::new();
    let ctx = Rc::new(WorkerCtx {
        me: worker.index(),
        serves_status: config.status.is_some(),
        peers: worker.peers(),
        local: {
            let per = config.workers.max(1);
            let first = config.process_id * per;
            first..first + per
        },
        max_key_groups: config.max_key_groups,
        bundle_size: config.bundle_size,
        read_size: config.bundle_size,
        clock: config.clock,
        guarantee: config.guarantee,
        epoch_interval: config.epoch_interval,
        policy: Arc::clone(&config.policy),
        epochs_in_flight: config.epochs_in_flight,
        full_snapshot_every: config.full_snapshot_every as u64,
        stride: if exec
            .nodes
            .iter()
            .any(|n| matches!(n.kind, NodeKind::TestStream { .. }))
        {
            crate::epochs::TEST_STREAM_STRIDE
        } else {
            1
        },
        max_duration: config.max_duration,
        started: shared.started,
        writer: match &store {
            Some(s) => {
                // Files of epochs this run writes anew, left by a run that stopped.
                s.remove_unfinished(worker.index(), shared.start_epoch())?;
                Some(crate::checkpoint::writer::PartWriter::new(
                    s.clone(),
                    worker.index(),
                )?)
            }
            None => None,
        },
        encode_on_writer: crate::checkpoint::writer::spare_core(
            config.workers,
            &config.addresses,
            config.process_id,
        ),
        store: store.clone(),
        plan_hash: shared.plan_hash,
        identity: shared.identity.clone(),
        probe: probe.clone(),
        captures: RefCell::new(BTreeMap::new()),
        metrics: RefCell::new(MetricResults::default()),
        stopping: std::cell::Cell::new(false),
        records_read: std::cell::Cell::new(0),
        savepoint: config.savepoint_dir.is_some(),
        open_batches: RefCell::new(Vec::new()),
        state_bytes: RefCell::new(BTreeMap::new()),
        operators: RefCell::new(Vec::new()),
        in_flight: RefCell::new(Default::default()),
        checkpoints: RefCell::new(Default::default()),
        max_watermark_drift: config.max_watermark_drift,
        source_views: RefCell::new(HashMap::new()),
        committed: std::cell::Cell::new(shared.restored.as_ref().map(|r| r.manifest.epoch)),
        finished_reads: RefCell::new(Vec::new()),
    });
    // Every capture is in the result, even one that received nothing.
    if ctx.me == 0 {
        for node in &exec.nodes {
            if let NodeKind::Capture { name } = &node.kind {
                let ty = exec.pcollections[node.inputs[0]].element_type.name();
                ctx.captures
                    .borrow_mut()
                    .insert(name.clone(), (ty.to_string(), Vec::new()));
            }
        }
    }
    let serves_status = config.status.is_some();
    if config.processes > 1 {
        check_plans(worker, shared.plan_hash, serves_status)?;
    }
    // Every worker's figures reach process 0's status board (built before the job's
    // dataflow on every process, or on none: checked above).
    let mut gather = config
        .status
        .as_ref()
        .map(|board| crate::status::gather::Gather::build(worker, Arc::clone(board)));
    let dataflow = worker.next_dataflow_index();
    let built = worker.dataflow::<u64, _, _>(|scope| build(scope, exec, shared, &ctx, &probe));
    let (stateful, sinks) = match built {
        Ok(s) => s,
        Err(e) => {
            worker.drop_dataflow(dataflow);
            return Err(e);
        }
    };
    // A live progress line on a terminal, from the first worker.
    let mut progress = (ctx.me == 0 && config.progress).then(Progress::new);
    // Drive the dataflow; the coordinator completes checkpoints as they become durable
    // and commits the sinks.
    let mut coordinator = Coordinator::new(
        store,
        stateful,
        sinks,
        shared.restored.as_ref().map(|r| r.manifest.epoch),
    );
    let mut last_batch = None;
    let mut published = Instant::now();
    loop {
        coordinator.take_savepoint_request(&ctx, config);
        if shared.abort.is_set() {
            worker.drop_dataflow(dataflow);
            return Err(Error::Internal("stopped: another worker failed".into()));
        }
        let done = probe.done();
        // Every epoch before the probe's frontier is durable on every worker.
        let passed = if done {
            Some(FINAL_EPOCH)
        } else {
            probe
                .with_frontier(|f| f.first().copied())
                .and_then(|f| f.checked_sub(1))
        };
        if let Some(passed) = passed {
            batch_figures(&ctx, passed, &mut last_batch);
        }
        if coordinator.advance(passed, &ctx, config, &shared.durable)? {
            break;
        }
        if let Some(p) = progress.as_mut() {
            p.show(&ctx, coordinator.committed(), last_batch);
        }
        if published.elapsed() >= STATUS_EVERY {
            publish_status(&ctx, config, &mut gather);
            published = Instant::now();
        }
        worker.step_or_park(Some(if done { Duration::from_millis(1) } else { PARK }));
    }
    if let Some(p) = progress.as_mut() {
        p.end(ctx.records_read.get());
    }
    publish_status(&ctx, config, &mut gather);
    drop(gather);
    {
        let mut metrics = ctx.metrics.borrow_mut();
        metrics
            .step_mut(crate::metrics::ENGINE_STEP)
            .inc_counter("records_read", ctx.records_read.get() as i64);
        let (mut throttled, mut drift_paused) = (Duration::ZERO, Duration::ZERO);
        for op in ctx.operators.borrow().iter() {
            op.report(&mut metrics);
            throttled += op.throttled.get();
            drift_paused += op.drift_paused.get();
        }
        let engine = metrics.step_mut(crate::metrics::ENGINE_STEP);
        engine.inc_counter("throttled_ms", throttled.as_millis() as i64);
        if !drift_paused.is_zero() {
            engine.inc_counter(
                crate::metrics::DRIFT_PAUSED_MS,
                drift_paused.as_millis() as i64,
            );
        }
        ctx.in_flight.borrow_mut().report(&mut metrics);
        // The process's peak memory, once per process: over a cluster the merged
        // figure's max is its largest process's.
        if ctx.me == ctx.local.start {
            if let Some(kb) = tidewater::exec::peak_rss_kb() {
                metrics
                    .step_mut(crate::metrics::ENGINE_STEP)
                    .update_distribution("peak_rss_kb", kb);
            }
        }
    }
    let captures = std::mem::take(&mut *ctx.captures.borrow_mut());
    let metrics = std::mem::take(&mut *ctx.metrics.borrow_mut());
    Ok(WorkerOutput { captures, metrics })
}

/// A task with everything that can fail done, before its operator is built.
struct Prepared {
    head: usize,
    name: String,
    head_state: Head,
    inputs: Vec<Input>,
    is_source: bool,
    has_state: bool,
    fused: Option<FusedStage>,
    routes: Vec<Route>,
    sink_names: Vec<String>,
    /// Per exit that is a stream: the consumer input it feeds, and whether the route
    /// sends progress to every worker (keyed, broadcast).
    exit_streams: Vec<((usize, usize), bool)>,
}

/// Every process of a cluster must run the same plan, and build the same dataflows:
/// worker 0 gathers every worker's plan hash, and whether it serves the job's status
/// (which adds a dataflow), before anything runs and refuses to go on if one differs.
fn check_plans(
    worker: &mut timely::worker::Worker,
    plan_hash: u64,
    serves_status: bool,
) -> Result<()> {
    use timely::dataflow::operators::vec::ToStream;
    use timely::dataflow::operators::{Exchange as _, Inspect, Probe};
    let me = worker.index();
    let seen = Rc::new(RefCell::new(Vec::new()));
    let gathered = Rc::clone(&seen);
    let probe = ProbeHandle::new();
    worker.dataflow::<u64, _, _>(|scope| {
        vec![(me as u64, plan_hash, serves_status)]
            .to_stream(scope)
            .exchange(|_: &(u64, u64, bool)| 0)
            .inspect(move |x: &(u64, u64, bool)| gathered.borrow_mut().push(*x))
            .probe_with(&probe);
    });
    while !probe.done() {
        worker.step_or_park(Some(Duration::from_millis(1)));
    }
    let differing: Vec<String> = seen
        .borrow()
        .iter()
        .filter(|(_, h, _)| *h != plan_hash)
        .map(|(w, h, _)| format!("worker {w} has plan {h:016x}"))
        .collect();
    let serving: Vec<String> = seen
        .borrow()
        .iter()
        .filter(|(_, _, s)| *s != serves_status)
        .map(|(w, _, _)| format!("worker {w}"))
        .collect();
    if differing.is_empty() && !serving.is_empty() {
        return Err(Error::InvalidPlan {
            message: format!(
                "the processes of the cluster disagree on --status-addr: worker 0 {} it, {} {} (give it to every process of the job, or to none; process 0 serves the job's status)",
                if serves_status { "has" } else { "has not" },
                serving.join(", "),
                if serves_status { "not" } else { "has" },
            ),
        });
    }
    if differing.is_empty() {
        return Ok(());
    }
    Err(Error::InvalidPlan {
        message: format!(
            "the processes of the cluster run different pipelines: worker 0 has plan {plan_hash:016x}, {} (every process must run the same binary with the same arguments)",
            differing.join(", ")
        ),
    })
}

/// This worker's sinks, which only its checkpoint coordinator commits.
type Sinks = Vec<Rc<RefCell<SinkHost>>>;

/// Builds every task; returns the nodes of the tasks that write checkpoint files, and
/// this worker's sinks.
fn build(
    scope: timely::dataflow::Scope<'_, u64>,
    exec: &ExecutablePlan,
    shared: &Shared,
    ctx: &Rc<WorkerCtx>,
    probe: &ProbeHandle<u64>,
) -> Result<(Vec<usize>, Sinks)> {
    let config = &shared.config;
    let graph = stage_graph(exec, config.lift_combiners);
    let restored: Option<&Snapshot> = shared.restored.as_ref().map(|r| &r.snapshot);
    let old_workers = shared.restored.as_ref().map_or(1, |r| r.manifest.workers);
    let start_epoch = shared.start_epoch();
    let (me, peers) = (ctx.me, ctx.peers);
    let mut streams: HashMap<(usize, usize), Stream<'_, u64, Vec<Msg>>> = HashMap::new();
    // Per consumer input: the source (its head's plan node) whose task sends into it.
    let mut sent_by_source: HashMap<(usize, usize), usize> = HashMap::new();
    let mut stateful = Vec::new();
    let mut sinks = Vec::new();
    let mut prepared = Vec::new();
    let stage_options = StageOptions {
        hold_partials: true,
        validate: false,
        partial_flush_groups: config.partial_flush_groups,
    };
    for head in heads(exec) {
        let n = &exec.nodes[head];
        let name = n.name.clone();
        let stage_index = graph.of_head(exec, head);
        let stage = stage_index.map(|i| &graph.stages[i]);
        let placement = Placement {
            worker: me,
            workers: peers,
            old_workers,
            key_groups: KeyGroups {
                max: config.max_key_groups,
                owned: key_groups_of_worker(me, peers, config.max_key_groups),
            },
            source_partitions: config.source_partitions,
            state: config.state.clone(),
        };
        let head_state = Head::build(exec, &graph, head, &placement, restored)?;
        let (is_source, has_state) = (head_state.is_source(), head_state.has_state());
        // Each input port, with whom it hears from and how its data is decoded.
        let decoded = |pc: usize| Decoder::Type(exec.pcollections[pc].element_type.clone());
        let inputs: Vec<Input> = match &n.kind {
            NodeKind::Grouping { .. } | NodeKind::Stateful { .. } => {
                let decoder = if graph.lifted[head] {
                    Decoder::Keyed(key_ops(exec, head, true)?)
                } else {
                    decoded(n.inputs[0])
                };
                vec![Input::new(ctx, Senders::All, decoder)]
            }
            NodeKind::Flatten => n
                .inputs
                .iter()
                .map(|&pc| Input::new(ctx, Senders::This, decoded(pc)))
                .collect(),
            NodeKind::ParDo { .. } => n
                .inputs
                .iter()
                .enumerate()
                .map(|(i, &pc)| {
                    let senders = if i == 0 { Senders::This } else { Senders::All };
                    Input::new(ctx, senders, decoded(pc))
                })
                .collect(),
            NodeKind::Capture { .. } => vec![Input::new(ctx, Senders::All, Decoder::Raw)],
            _ => Vec::new(),
        };
        // Everything that can fail is done before any timely operator is built.
        let mut routes = Vec::new();
        let mut sink_names = Vec::new();
        let mut fused = None;
        let mut exit_streams = Vec::new();
        if let Some(stage) = stage {
            fused = Some(FusedStage::new(exec, stage, stage_options)?);
            for exit in &stage.exits {
                let port = 1 + exit_streams.len();
                let route = match &exit.kind {
                    ExitKind::Shuffle | ExitKind::PartialCombine => Route::Keyed {
                        port,
                        key_ops: key_ops(exec, exit.node, graph.lifted[exit.node])?,
                    },
                    ExitKind::SideInput => Route::Broadcast { port },
                    ExitKind::HeldMain | ExitKind::Flatten => Route::Local { port },
                    ExitKind::Capture(_) => Route::Gather { port },
                    ExitKind::Sink => {
                        let sink_name = exec.nodes[exit.node].name.clone();
                        let host = match restored {
                            Some(s) => restore_sink(
                                exec,
                                exit.node,
                                s,
                                me as u32,
                                peers as u32,
                                &config.job_id,
                            )?,
                            None => SinkHost::new(
                                exec,
                                exit.node,
                                me as u32,
                                start_epoch,
                                &config.job_id,
                            )?,
                        };
                        let host = Rc::new(RefCell::new(host));
                        host.borrow_mut().resume_at(start_epoch);
                        host.borrow_mut().recover(peers as u32)?;
                        sink_names.push(sink_name);
                        Route::Sink(host)
                    }
                };
                if !matches!(route, Route::Sink(_)) {
                    let to_all = matches!(route, Route::Keyed { .. } | Route::Broadcast { .. });
                    exit_streams.push(((exit.node, exit.input), to_all));
                }
                routes.push(route);
            }
        }
        prepared.push(Prepared {
            head,
            name,
            head_state,
            inputs,
            is_source,
            has_state,
            fused,
            routes,
            sink_names,
            exit_streams,
        });
    }
    for p in prepared {
        let Prepared {
            head,
            name,
            head_state,
            mut inputs,
            is_source,
            has_state,
            fused,
            routes,
            sink_names,
            exit_streams,
        } = p;
        // Watermark alignment: a source's view of its instances comes from the progress
        // that inputs hearing every worker receive. It exists from the start, so that a
        // source waits for every instance's first report before it runs ahead.
        for (i, input) in inputs.iter_mut().enumerate() {
            input.from_source = sent_by_source
                .get(&(head, i))
                .copied()
                .filter(|_| input.clock.hears_all());
            if let (Some(source), Some(_)) = (input.from_source, ctx.max_watermark_drift) {
                ctx.source_views
                    .borrow_mut()
                    .entry(source)
                    .or_insert_with(|| SourceView::new(peers));
            }
        }
        for route in &routes {
            if let Route::Sink(host) = route {
                sinks.push(Rc::clone(host));
            }
        }
        let mut builder = OperatorBuilder::new(name.clone(), scope);
        let mut handles = Vec::new();
        for i in 0..inputs.len() {
            let stream = streams
                .remove(&(head, i))
                .expect("every input of a head is the exit of an earlier stage");
            handles.push(builder.new_input(stream, Exchange::new(|m: &Msg| m.to as u64)));
        }
        let (control, control_stream) = builder.new_output::<Vec<Msg>>();
        let mut outputs = vec![control];
        for (key, to_all) in exit_streams {
            let (o, s) = builder.new_output::<Vec<Msg>>();
            outputs.push(o);
            streams.insert(key, s);
            // Only a route that sends progress to every worker tells each of them of
            // all the source's instances (a gather to worker 0 sends none).
            if to_all && matches!(head_state, Head::Read(_)) {
                sent_by_source.insert(key, head);
            }
        }
        let stateful_task = has_state || !sink_names.is_empty();
        if stateful_task {
            stateful.push(head);
        }
        control_stream.probe_with(probe);
        let activator = scope.activator_for(builder.operator_info().address);
        let wake = scope
            .worker()
            .sync_activator_for(builder.operator_info().address.to_vec());
        let n_outputs = outputs.len();
        let figures = Rc::new(OperatorFigures::new(&name, is_source));
        // A capture is the test harness's, not an operator of the pipeline.
        if !matches!(head_state, Head::Capture { .. }) {
            ctx.operators.borrow_mut().push(Rc::clone(&figures));
        }
        // A Read follows its runner's policy; a Create's or TestStream's first span
        // ends at the interval's next multiple on the wall clock, as every source's
        // under the streaming policy.
        let reader = matches!(head_state, Head::Read(_)).then(|| ctx.policy.reader());
        let epoch_due = crate::epochs::due(ctx.epoch_interval);
        let mut task = Task {
            node: head,
            name: name.clone(),
            sink_names,
            head: head_state,
            reader,
            stage: fused,
            routes,
            inputs,
            stateful: stateful_task,
            cur: start_epoch,
            first: start_epoch,
            deltas: 0,
            chain_bytes: Default::default(),
            pending: BTreeMap::new(),
            waiting_since: None,
            throttled_since: None,
            drift_paused_since: None,
            read_in_epoch: true,
            sent: None,
            outbox: (0..n_outputs).map(|_| Vec::new()).collect(),
            caps: Vec::new(),
            writes: std::collections::VecDeque::new(),
            to_finalize: std::collections::VecDeque::new(),
            wake,
            outputs,
            activator,
            epoch_due,
            in_band_time: tidewater::Timestamp::wall_clock(),
            figures,
            ctx: Rc::clone(ctx),
        };
        let shared_abort = Arc::clone(&shared.abort);
        builder.build(move |mut caps| {
            for cap in &mut caps {
                cap.downgrade(&start_epoch);
            }
            task.caps = caps;
            move |frontiers| {
                if shared_abort.is_set() {
                    return;
                }
                // Busy time, for the status: two clock reads per activation, only
                // while the job serves its status.
                let started = task.ctx.serves_status.then(std::time::Instant::now);
                let result = if is_source {
                    task.run_source()
                } else {
                    let mut incoming = Vec::new();
                    for (port, input) in handles.iter_mut().enumerate() {
                        input.for_each(|cap, data| {
                            let t = *cap.least().expect("messages travel under a capability");
                            incoming.extend(data.drain(..).map(|m| (t, port, m)));
                        });
                    }
                    let frontier = frontiers
                        .iter()
                        .filter_map(|f| f.frontier().first().copied())
                        .min()
                        .unwrap_or(u64::MAX);
                    task.run(incoming, frontier)
                };
                if let Some(started) = started {
                    task.figures.add_busy(started.elapsed());
                }
                if let Err(e) = result {
                    shared_abort.fail(e);
                }
            }
        });
    }
    Ok((stateful, sinks))
}

/// How often a worker publishes its figures to the status board.
const STATUS_EVERY: Duration = Duration::from_secs(1);

/// This worker's figures to process 0's status board, if the job serves its status.
fn publish_status(
    ctx: &WorkerCtx,
    config: &crate::EngineConfig,
    gather: &mut Option<crate::status::gather::Gather>,
) {
    if let (Some(board), Some(gather)) = (&config.status, gather.as_mut()) {
        gather.send(
            crate::status::worker_status(
                board,
                ctx.me,
                ctx.records_read.get(),
                &ctx.operators.borrow(),
                &ctx.checkpoints.borrow(),
                &ctx.metrics.borrow(),
            ),
            ctx.me == 0,
        );
    }
}
