//! Async sinks and their bridge to the sink commit protocol.

use super::{BridgeOptions, Failure, block_on_timeout, runtime};
use crate::{Committed, Element, Recovery, Sink, Txn, UserError, WindowedValue};
use async_trait::async_trait;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::sync::{Arc, Mutex};
use tokio::sync::{mpsc, oneshot};

/// A sink that does IO (a database, a broker), with the same two-phase protocol as
/// [`Sink`], in async methods that run on the connector runtime. [`SinkBridge`] makes
/// it a [`Sink`], driven by core's sink commit protocol (`runners/core/src/sink_host.rs`)
/// like any other:
///
/// - `write` adds a batch to the epoch's transaction `txn` (one per epoch and
///   instance); the pipeline does not wait for it: the batch joins a bounded queue
///   ([`BridgeOptions::capacity`] batches), and only a full queue makes the pipeline
///   wait. A failed write fails the next call of the instance.
/// - `stage` at the end of the epoch (the checkpoint barrier, the micro-batch's end):
///   the transaction is durable but not visible (PostgreSQL's `PREPARE TRANSACTION`).
///   The pipeline waits for it.
/// - `commit` once the checkpoint holding the epoch is durable, idempotent; `abort` when
///   the epoch will be written again, idempotent.
/// - `recover` before the first write of an instance, after a start or a restore: it
///   discards what earlier runs left staged (see [`Recovery`]).
///
/// Calls of one instance run one at a time, in order, on one task.
///
/// ```
/// use async_trait::async_trait;
/// use serde::{Deserialize, Serialize};
/// use tidewater::io::{AsyncSink, SinkBridge};
/// use tidewater::{Txn, UserError, WindowedValue};
///
/// /// Counts what it commits.
/// #[derive(Serialize, Deserialize, Default)]
/// struct CountCommitted {
///     #[serde(skip)]
///     pending: std::collections::BTreeMap<Txn, usize>,
/// }
///
/// #[async_trait]
/// impl AsyncSink for CountCommitted {
///     type In = u64;
///     async fn write(&mut self, txn: &Txn, xs: Vec<WindowedValue<u64>>) -> Result<(), UserError> {
///         *self.pending.entry(*txn).or_default() += xs.len();
///         Ok(())
///     }
///     async fn stage(&mut self, _txn: &Txn) -> Result<(), UserError> { Ok(()) }
///     async fn commit(&mut self, txn: &Txn) -> Result<(), UserError> {
///         println!("{} records", self.pending.remove(txn).unwrap_or(0));
///         Ok(())
///     }
///     async fn abort(&mut self, txn: &Txn) -> Result<(), UserError> {
///         self.pending.remove(txn);
///         Ok(())
///     }
/// }
///
/// tidewater_runner_direct::register();
/// let p = tidewater::Pipeline::new(Default::default());
/// p.create("Numbers", (0..10u64).collect())
///     .write_to("Count", SinkBridge::new(CountCommitted::default()));
/// p.run().unwrap();
/// ```
#[async_trait]
pub trait AsyncSink: Send + 'static {
    /// The elements written.
    type In: Element;
    /// Adds elements to transaction `txn`, opened by its first write.
    async fn write(
        &mut self,
        txn: &Txn,
        elements: Vec<WindowedValue<Self::In>>,
    ) -> Result<(), UserError>;
    /// Makes `txn` durable but not yet visible: after this returns it survives a crash,
    /// and any instance can commit it knowing only its id.
    async fn stage(&mut self, txn: &Txn) -> Result<(), UserError>;
    /// Makes `txn` visible. Idempotent: committing it again is a no-op.
    async fn commit(&mut self, txn: &Txn) -> Result<(), UserError>;
    /// Discards `txn`, open or staged. Idempotent.
    async fn abort(&mut self, txn: &Txn) -> Result<(), UserError>;
    /// The job this instance writes for (see [`Sink::begin_job`](crate::Sink::begin_job)):
    /// called once, before anything else, and not on the connector runtime (keep it to
    /// remembering the id). By default, nothing.
    fn begin_job(&mut self, _job: &str) -> Result<(), UserError> {
        Ok(())
    }
    /// Discards what earlier runs left staged (see [`Recovery`]). By default, nothing.
    async fn recover(&mut self, _recovery: &Recovery) -> Result<(), UserError> {
        Ok(())
    }
    /// The jobs that committed through the sink, as its ledger says (see
    /// [`Sink::committed`](crate::Sink::committed)). By default none.
    async fn committed(&mut self, _restoring: bool) -> Result<Vec<Committed>, UserError> {
        Ok(Vec::new())
    }
    /// How the bridge moves this sink's batches. By default, [`BridgeOptions::default`].
    fn bridge_options(&self) -> BridgeOptions {
        BridgeOptions::default()
    }
}

/// A step the pipeline waits for.
enum Step {
    Stage(Txn),
    Commit(Txn),
    Abort(Txn),
    Recover(Recovery),
    Committed(bool),
}

impl Step {
    fn describe(&self) -> String {
        match self {
            Step::Stage(t) => format!("stage transaction {}", t.id()),
            Step::Commit(t) => format!("commit transaction {}", t.id()),
            Step::Abort(t) => format!("abort transaction {}", t.id()),
            Step::Recover(r) => format!("recover instance {} of {}", r.instance, r.instances),
            Step::Committed(_) => "read what jobs committed".to_string(),
        }
    }
}

enum Op<T> {
    Write(Txn, Vec<WindowedValue<T>>),
    /// A step and where its answer goes (the jobs for [`Step::Committed`]).
    Step(Step, oneshot::Sender<Result<Vec<Committed>, Failure>>),
}

struct Running<T> {
    tx: mpsc::Sender<Op<T>>,
    /// The first failed write, reported by the next call.
    failed: Arc<Mutex<Option<Failure>>>,
}

enum State<S: AsyncSink> {
    /// Not started: the plan's fields.
    Ready(S),
    /// Its task owns the sink.
    Running(Running<S::In>),
}

/// An [`AsyncSink`] as a [`Sink`]: write to it with
/// `pcollection.write_to(name, SinkBridge::new(s))`. Its plan fields are those of the
/// async sink. The sink moves onto a task of the connector runtime at its first call.
pub struct SinkBridge<S: AsyncSink> {
    state: State<S>,
    options: BridgeOptions,
}

impl<S: AsyncSink> SinkBridge<S> {
    /// Bridges `sink`.
    pub fn new(sink: S) -> Self {
        let options = sink.bridge_options();
        SinkBridge {
            state: State::Ready(sink),
            options,
        }
    }

    fn running(&mut self) -> &Running<S::In> {
        if let State::Ready(_) = self.state {
            let (tx, rx) = mpsc::channel(self.options.capacity.max(1));
            let failed = Arc::new(Mutex::new(None));
            let running = State::Running(Running {
                tx,
                failed: Arc::clone(&failed),
            });
            let State::Ready(sink) = std::mem::replace(&mut self.state, running) else {
                unreachable!("checked above")
            };
            runtime().spawn(serve(sink, rx, failed));
        }
        match &self.state {
            State::Running(r) => r,
            State::Ready(_) => unreachable!("started above"),
        }
    }

    fn failure(running: &Running<S::In>) -> Option<Failure> {
        running
            .failed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn step(&mut self, step: Step) -> Result<Vec<Committed>, UserError> {
        let timeout = self.options.timeout;
        let what = step.describe();
        let running = self.running();
        let tx = running.tx.clone();
        let (reply, answer) = oneshot::channel();
        block_on_timeout(
            timeout,
            || format!("the sink, asked to {what},"),
            async move {
                tx.send(Op::Step(step, reply))
                    .await
                    .map_err(|_| "the sink's task has stopped (it panicked)")?;
                answer
                    .await
                    .map_err(|_| "the sink's task stopped before answering (it panicked)")?
                    .map_err(Failure::into_error)
            },
        )
    }
}

/// The task that owns a sink: runs its calls in order.
async fn serve<S: AsyncSink>(
    mut sink: S,
    mut rx: mpsc::Receiver<Op<S::In>>,
    failed: Arc<Mutex<Option<Failure>>>,
) {
    let mut failure: Option<Failure> = None;
    while let Some(op) = rx.recv().await {
        match op {
            Op::Write(txn, xs) => {
                if failure.is_none()
                    && let Err(e) = sink.write(&txn, xs).await
                {
                    let f = Failure::of(&e, |e| {
                        format!("writing transaction {} failed: {e}", txn.id())
                    });
                    *failed.lock().unwrap_or_else(|e| e.into_inner()) = Some(f.clone());
                    failure = Some(f);
                }
            }
            Op::Step(step, reply) => {
                let result = match (&failure, step) {
                    // An abort is tried even after a failed write: it cleans up.
                    (_, Step::Abort(txn)) => sink.abort(&txn).await.map(|()| Vec::new()),
                    (Some(f), _) => {
                        let _ = reply.send(Err(f.clone()));
                        continue;
                    }
                    (None, Step::Stage(txn)) => sink.stage(&txn).await.map(|()| Vec::new()),
                    (None, Step::Commit(txn)) => sink.commit(&txn).await.map(|()| Vec::new()),
                    (None, Step::Recover(r)) => sink.recover(&r).await.map(|()| Vec::new()),
                    (None, Step::Committed(restoring)) => sink.committed(restoring).await,
                };
                let _ = reply.send(result.map_err(|e| Failure::of(&e, |e| e.to_string())));
            }
        }
    }
}

impl<S: AsyncSink + Serialize> Serialize for SinkBridge<S> {
    fn serialize<Z: Serializer>(&self, serializer: Z) -> Result<Z::Ok, Z::Error> {
        match &self.state {
            State::Ready(sink) => sink.serialize(serializer),
            State::Running(_) => Err(serde::ser::Error::custom(
                "a sink that has started writing cannot be serialized",
            )),
        }
    }
}

impl<'de, S: AsyncSink + Deserialize<'de>> Deserialize<'de> for SinkBridge<S> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        S::deserialize(deserializer).map(SinkBridge::new)
    }
}

impl<S: AsyncSink> Sink for SinkBridge<S> {
    type In = S::In;

    fn write(&mut self, txn: &Txn, elements: Vec<WindowedValue<S::In>>) -> Result<(), UserError> {
        let timeout = self.options.timeout;
        let running = self.running();
        if let Some(f) = Self::failure(running) {
            return Err(f.into_error());
        }
        let op = Op::Write(*txn, elements);
        let op = match running.tx.try_send(op) {
            Ok(()) => return Ok(()),
            Err(mpsc::error::TrySendError::Closed(_)) => {
                return Err("the sink's task has stopped (it panicked)".into());
            }
            Err(mpsc::error::TrySendError::Full(op)) => op,
        };
        // The queue is full: the pipeline waits for the sink (backpressure).
        let tx = running.tx.clone();
        block_on_timeout(
            timeout,
            || {
                format!(
                    "the sink (its write queue full with transaction {})",
                    txn.id()
                )
            },
            async move {
                tx.send(op)
                    .await
                    .map_err(|_| UserError::from("the sink's task has stopped (it panicked)"))
            },
        )
    }

    fn stage(&mut self, txn: &Txn) -> Result<(), UserError> {
        self.step(Step::Stage(*txn)).map(drop)
    }

    fn commit(&mut self, txn: &Txn) -> Result<(), UserError> {
        self.step(Step::Commit(*txn)).map(drop)
    }

    fn abort(&mut self, txn: &Txn) -> Result<(), UserError> {
        self.step(Step::Abort(*txn)).map(drop)
    }

    fn begin_job(&mut self, job: &str) -> Result<(), UserError> {
        match &mut self.state {
            State::Ready(sink) => sink.begin_job(job),
            State::Running(_) => Err(format!(
                "the sink was told its job ({job}) after it had started writing"
            )
            .into()),
        }
    }

    fn recover(&mut self, recovery: &Recovery) -> Result<(), UserError> {
        self.step(Step::Recover(*recovery)).map(drop)
    }

    fn committed(&mut self, restoring: bool) -> Result<Vec<Committed>, UserError> {
        self.step(Step::Committed(restoring))
    }
}
