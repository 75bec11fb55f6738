//! The status server (`--status-addr ADDR`): axum on the process's connector runtime
//! (`tidewater::io::runtime()`), serving a [`StatusSource`] (a process's board, or a local cluster's
//! supervisor: `supervised.rs`):
//!
//! - `GET /`: the job's page (static HTML and script, from this binary: `page.html`),
//!   which loads the two below and refreshes every second;
//! - `GET /api/graph`: the job's tasks and the channels between them as JSON
//!   ([`JobGraph`]);
//! - `GET /api/job`: the job's status as JSON ([`super::JobStatus`]);
//! - `POST /api/savepoint`, `/api/stop`, `/api/cancel`: control, to whoever holds the
//!   job's token ([`super::control`]);
//! - `GET /metrics`: the same figures in Prometheus' text exposition format
//!   (prometheus-client), named `tidewater_*` with the labels `job`, `stage` (the
//!   transform heading an operator) and `worker`.
//!
//! It binds before the job starts, so a port in use fails the job at once, naming the
//! address; the job's first line gives its URL.

use super::{JobState, JobStatus, StatusSource};
use axum::extract::State;
use axum::http::header;
use axum::response::Html;
use axum::routing::get;
use axum::{Json, Router};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::net::SocketAddr;
use std::sync::Arc;
use tidewater::{Error, Result};
use tidewater_runners_core::job_graph::JobGraph;

/// A running status server; dropped, it stops.
pub struct StatusServer {
    /// Where it listens.
    pub addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Drop for StatusServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// Starts serving `source` (a process's board, or a local cluster's supervisor) at
/// `addr` (`host:port`; port 0 picks a free one).
pub fn start(
    addr: &str,
    source: Arc<dyn StatusSource>,
    graph: JobGraph,
    control: Arc<super::control::Control>,
) -> Result<StatusServer> {
    let invalid = |message: String| Error::InvalidOption {
        option: format!("--status-addr {addr}"),
        message,
    };
    let listener = std::net::TcpListener::bind(addr)
        .map_err(|e| invalid(format!("cannot listen there: {e}")))?;
    let bound = listener
        .local_addr()
        .map_err(|e| invalid(format!("cannot listen there: {e}")))?;
    listener
        .set_nonblocking(true)
        .map_err(|e| invalid(format!("cannot listen there: {e}")))?;
    let runtime = tidewater::io::runtime();
    let listener = {
        let _entered = runtime.enter();
        tokio::net::TcpListener::from_std(listener)
            .map_err(|e| invalid(format!("cannot listen there: {e}")))?
    };
    let graph = Arc::new(graph);
    let graph_for_why = Arc::clone(&graph);
    let app = Router::new()
        .route("/", get(|| async { Html(PAGE) }))
        .route(
            "/api/graph",
            get(move || async move { Json(graph.as_ref().clone()) }),
        )
        .route("/api/job", get(move |s| job(s, graph_for_why.clone())))
        .route("/metrics", get(metrics))
        .with_state(source)
        .merge(super::control::routes(control));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    runtime.spawn(async move {
        let served = axum::serve(listener, app)
            .with_graceful_shutdown(async {
                let _ = stopped.await;
            })
            .await;
        if let Err(e) = served {
            tracing::error!("status server: {e}");
        }
    });
    Ok(StatusServer {
        addr: bound,
        stop: Some(stop),
    })
}

/// Starts serving (see [`start`]) and says where: the job's first line.
pub fn serve(
    addr: &str,
    source: Arc<dyn StatusSource>,
    graph: JobGraph,
    control: super::control::Control,
) -> Result<StatusServer> {
    let server = start(addr, source, graph, Arc::new(control))?;
    eprintln!(
        "status: http://{}/ (the job's page), /api/job (JSON) and /metrics (Prometheus)",
        server.addr
    );
    Ok(server)
}

/// The job's page.
const PAGE: &str = include_str!("page.html");

async fn job(State(source): State<Arc<dyn StatusSource>>, graph: Arc<JobGraph>) -> Json<JobStatus> {
    let mut status = source.status();
    status.why = super::why::of(&graph, &status);
    Json(status)
}

async fn metrics(State(source): State<Arc<dyn StatusSource>>) -> impl axum::response::IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        exposition(&source.status()),
    )
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StageLabels {
    job: String,
    stage: String,
    worker: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WorkerLabels {
    job: String,
    worker: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct MetricLabels {
    job: String,
    step: String,
    metric: String,
    worker: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PartitionLabels {
    job: String,
    source: String,
    partition: String,
    worker: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct JobLabels {
    job: String,
}

/// `status` in the OpenMetrics text format (what Prometheus scrapes).
pub fn exposition(status: &JobStatus) -> String {
    let mut registry = Registry::with_prefix("tidewater");
    let stage_counter = |registry: &mut Registry, name: &str, help: &str| {
        let f = Family::<StageLabels, Counter>::default();
        registry.register(name, help, f.clone());
        f
    };
    let records_in = stage_counter(
        &mut registry,
        "records_in",
        "Elements that reached an operator",
    );
    let records_out = stage_counter(&mut registry, "records_out", "Elements an operator emitted");
    let busy = stage_counter(
        &mut registry,
        "busy_milliseconds",
        "Time an operator's activations took (processing, reading, writing)",
    );
    let throttled = stage_counter(
        &mut registry,
        "throttled_milliseconds",
        "Time a source was held back by the epochs in flight",
    );
    let drift_paused = stage_counter(
        &mut registry,
        "drift_paused_milliseconds",
        "Time a source waited for its slower instances (watermark alignment)",
    );
    let alignment = stage_counter(
        &mut registry,
        "alignment_milliseconds",
        "Time messages of a later epoch waited for the current one to close",
    );
    let watermark = Family::<StageLabels, Gauge>::default();
    registry.register(
        "watermark_milliseconds",
        "An operator's input watermark (a source's own), in ms since the epoch",
        watermark.clone(),
    );
    let partition_watermark = Family::<PartitionLabels, Gauge>::default();
    registry.register(
        "source_partition_watermark_milliseconds",
        "A source partition's watermark, in ms since the epoch",
        partition_watermark.clone(),
    );
    let partition_idle = Family::<PartitionLabels, Gauge>::default();
    registry.register(
        "source_partition_idle",
        "1 if a source partition's last read found nothing (2 once it is done), else 0",
        partition_idle.clone(),
    );
    let records_read = Family::<WorkerLabels, Counter>::default();
    registry.register(
        "records_read",
        "Records a worker's sources read",
        records_read.clone(),
    );
    let checkpoints = Family::<JobLabels, Counter>::default();
    registry.register(
        "checkpoints",
        "Checkpoints completed (as worker 0 saw them)",
        checkpoints.clone(),
    );
    let last_ms = Family::<JobLabels, Gauge>::default();
    registry.register(
        "last_checkpoint_duration_milliseconds",
        "The newest checkpoint's duration, from its epoch's end at the sources to its manifest",
        last_ms.clone(),
    );
    let last_bytes = Family::<JobLabels, Gauge>::default();
    registry.register(
        "last_checkpoint_size_bytes",
        "The bytes of the files the newest checkpoint's manifest names",
        last_bytes.clone(),
    );
    let restarts = Family::<JobLabels, Counter>::default();
    registry.register(
        "restarts",
        "Restarts of a local cluster by its supervisor (the figures of the processes start again at each)",
        restarts.clone(),
    );
    let running = Family::<JobLabels, Gauge>::default();
    registry.register(
        "job_running",
        "1 while the job runs, 0 once it ended",
        running.clone(),
    );
    // Metrics of DoFns and sinks (a counter may go down, as Beam's: a gauge), and the
    // engine's distributions under the step `(engine)`.
    let user_counter = Family::<MetricLabels, Gauge>::default();
    registry.register(
        "metric_counter",
        "A counter of a step (ctx.inc_counter in a DoFn), per worker",
        user_counter.clone(),
    );
    let distribution = |registry: &mut Registry, part: &str| {
        let f = Family::<MetricLabels, Gauge>::default();
        registry.register(
            format!("metric_distribution_{part}"),
            format!("The {part} of a distribution of a step, per worker"),
            f.clone(),
        );
        f
    };
    let gauge = Family::<MetricLabels, Gauge>::default();
    registry.register(
        "metric_gauge",
        "A gauge of a step (ctx.set_gauge in a DoFn): its latest value, per worker",
        gauge.clone(),
    );
    let (d_sum, d_count, d_min, d_max) = (
        distribution(&mut registry, "sum"),
        distribution(&mut registry, "count"),
        distribution(&mut registry, "min"),
        distribution(&mut registry, "max"),
    );
    let job = JobLabels {
        job: status.job.clone(),
    };
    running
        .get_or_create(&job)
        .set(i64::from(status.state == JobState::Running));
    restarts.get_or_create(&job).inc_by(status.restarts_total);
    for w in &status.workers {
        let worker = w.worker.to_string();
        records_read
            .get_or_create(&WorkerLabels {
                job: status.job.clone(),
                worker: worker.clone(),
            })
            .inc_by(w.records_read);
        for o in &w.operators {
            let labels = StageLabels {
                job: status.job.clone(),
                stage: o.name.clone(),
                worker: worker.clone(),
            };
            records_in.get_or_create(&labels).inc_by(o.records_in);
            records_out.get_or_create(&labels).inc_by(o.records_out);
            busy.get_or_create(&labels).inc_by(o.busy_ms);
            throttled.get_or_create(&labels).inc_by(o.throttled_ms);
            drift_paused
                .get_or_create(&labels)
                .inc_by(o.drift_paused_ms);
            alignment.get_or_create(&labels).inc_by(o.alignment_ms);
            if let Some(ms) = o.watermark_ms {
                watermark.get_or_create(&labels).set(ms);
            }
            for p in &o.partitions {
                let l = PartitionLabels {
                    job: status.job.clone(),
                    source: o.name.clone(),
                    partition: p.partition.to_string(),
                    worker: worker.clone(),
                };
                if let Some(ms) = p.watermark_ms {
                    partition_watermark.get_or_create(&l).set(ms);
                }
                partition_idle
                    .get_or_create(&l)
                    .set(if p.done { 2 } else { i64::from(p.idle) });
            }
        }
        for (step, m) in &w.metrics.steps {
            let labels = |metric: &str| MetricLabels {
                job: status.job.clone(),
                step: step.clone(),
                metric: metric.to_string(),
                worker: worker.clone(),
            };
            for (name, n) in &m.counters {
                user_counter.get_or_create(&labels(name)).set(*n);
            }
            for (name, g) in &m.gauges {
                gauge.get_or_create(&labels(name)).set(g.value);
            }
            for (name, d) in &m.distributions {
                let l = labels(name);
                d_sum.get_or_create(&l).set(d.sum);
                d_count.get_or_create(&l).set(d.count);
                d_min.get_or_create(&l).set(d.min);
                d_max.get_or_create(&l).set(d.max);
            }
        }
        if w.worker == 0 {
            checkpoints
                .get_or_create(&job)
                .inc_by(w.checkpoints_completed);
            if let Some(c) = w.checkpoints.last() {
                if let Some(ms) = c.duration_ms {
                    last_ms.get_or_create(&job).set(ms as i64);
                }
                if let Some(b) = c.bytes {
                    last_bytes.get_or_create(&job).set(b as i64);
                }
            }
        }
    }
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry)
        .expect("writing to a String does not fail");
    text
}
