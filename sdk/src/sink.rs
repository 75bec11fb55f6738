//! Sinks that write exactly once: a two-phase commit per epoch, as Flink's
//! `TwoPhaseCommitSinkFunction`.
//!
//! A runner cuts a job's output into **epochs** (a checkpoint interval, a micro-batch;
//! on the direct runner a bounded pipeline is one epoch). Each sink instance writes an
//! epoch's elements into a transaction ([`Txn`]: the epoch and the instance), **stages**
//! it when the epoch ends (durable, not yet visible), and **commits** it once the
//! checkpoint that contains the epoch is durable; a transaction of an epoch that will
//! be replayed is **aborted**. After a crash, the runner commits again every
//! transaction the restored checkpoint recorded as staged, so `commit` must be
//! idempotent: committing a committed transaction is a no-op. A transaction written
//! again (the same epoch replayed after a crash) starts afresh.
//!
//! A sink that keeps a **ledger** of what it committed (which job, epoch and instance,
//! recorded atomically with the data) checks a commit of a transaction that is gone
//! against it (committed before: fine; otherwise its data is lost, an error naming the
//! epoch), and tells the runner the newest epoch it committed
//! ([`Sink::committed`]), so that a job never writes a committed epoch again.

use crate::plan::{FunctionSpec, IsBounded, UserFunction, urn};
use crate::{Element, PCollection, PTransform, UserError, WindowedValue};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// A transaction of a sink: one epoch of one sink instance.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Txn {
    /// The epoch (checkpoint or batch id).
    pub epoch: u64,
    /// The sink instance (worker) that writes it.
    pub instance: u32,
}

impl Txn {
    /// A stable name for the transaction, usable in file names and database ids.
    ///
    /// ```
    /// assert_eq!(tidewater::Txn { epoch: 7, instance: 2 }.id(), "e7-i2");
    /// ```
    pub fn id(&self) -> String {
        format!("e{}-i{}", self.epoch, self.instance)
    }
}

/// What an instance of a sink takes over when it starts or is restored: passed to
/// [`Sink::recover`] before the instance writes anything.
///
/// Instance `instance` of `instances` takes over the transactions of every earlier
/// instance `i` with `i % instances == instance` (its own included): the runner has
/// already committed (again) those the restored checkpoint recorded as staged, and
/// writing resumes at epoch `resume_epoch`. Every other transaction of those instances
/// that is still staged somewhere belongs to an epoch the job will write again (or to
/// a run that never reached a checkpoint), and is to be discarded.
///
/// ```
/// let r = tidewater::Recovery { instance: 1, instances: 2, resume_epoch: 5 };
/// assert!(r.takes_over(3) && !r.takes_over(2));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Recovery {
    /// This instance.
    pub instance: u32,
    /// How many instances the sink has now.
    pub instances: u32,
    /// The first epoch this instance will write.
    pub resume_epoch: u64,
}

impl Recovery {
    /// Whether this instance takes over the transactions of instance `instance`.
    pub fn takes_over(&self, instance: u32) -> bool {
        instance % self.instances.max(1) == self.instance
    }
}

/// What a job committed through a sink, as the sink's ledger says
/// ([`Sink::committed`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Committed {
    /// The job ([`Sink::begin_job`]).
    pub job: String,
    /// The newest epoch it committed.
    pub last_epoch: u64,
}

/// A sink that writes exactly once (see the module documentation).
///
/// ```
/// use serde::{Deserialize, Serialize};
/// use tidewater::{Sink, Txn, UserError, WindowedValue};
///
/// /// Prints each epoch's lines once the epoch is committed.
/// #[derive(Serialize, Deserialize, Default)]
/// struct PrintOnCommit {
///     #[serde(skip)]
///     pending: std::collections::BTreeMap<Txn, Vec<String>>,
/// }
///
/// impl Sink for PrintOnCommit {
///     type In = String;
///     fn write(&mut self, txn: &Txn, xs: Vec<WindowedValue<String>>) -> Result<(), UserError> {
///         self.pending.entry(*txn).or_default().extend(xs.into_iter().map(|x| x.value));
///         Ok(())
///     }
///     fn stage(&mut self, _txn: &Txn) -> Result<(), UserError> { Ok(()) }
///     fn commit(&mut self, txn: &Txn) -> Result<(), UserError> {
///         for line in self.pending.remove(txn).unwrap_or_default() { println!("{line}"); }
///         Ok(())
///     }
///     fn abort(&mut self, txn: &Txn) -> Result<(), UserError> {
///         self.pending.remove(txn);
///         Ok(())
///     }
/// }
/// ```
pub trait Sink: Send + 'static {
    /// The elements written.
    type In: Element;
    /// Adds elements to transaction `txn`, opened by its first write.
    fn write(&mut self, txn: &Txn, elements: Vec<WindowedValue<Self::In>>)
    -> Result<(), UserError>;
    /// Makes `txn` durable but not yet visible: after this returns it survives a crash,
    /// and any instance can commit it knowing only its id.
    fn stage(&mut self, txn: &Txn) -> Result<(), UserError>;
    /// Makes `txn` visible. Idempotent: committing it again is a no-op.
    fn commit(&mut self, txn: &Txn) -> Result<(), UserError>;
    /// Discards `txn`, open or staged. Idempotent.
    fn abort(&mut self, txn: &Txn) -> Result<(), UserError>;
    /// The job this instance writes for, called once before anything else (before the
    /// commits of transactions a restored checkpoint recorded as staged, too). A job
    /// keeps its id across restarts, rescales and savepoints (the runner records it in
    /// its checkpoints), and two jobs have different ids: a sink that names its
    /// transactions or output with it touches only its own job's when it recovers. By
    /// default, nothing.
    fn begin_job(&mut self, _job: &str) -> Result<(), UserError> {
        Ok(())
    }
    /// Called once when the instance starts or is restored, before it writes: discard
    /// the transactions left staged by earlier runs that `recovery` says this instance
    /// takes over (see [`Recovery`]). By default, nothing: a sink whose staged
    /// transactions cost nothing while abandoned, and that `write` starts afresh.
    fn recover(&mut self, _recovery: &Recovery) -> Result<(), UserError> {
        Ok(())
    }
    /// The jobs that committed output through this sink, each with the newest epoch it
    /// committed (by any instance), as the sink's own record of its commits (its
    /// **ledger**: a table written in the same transaction as the data, committed file
    /// names) says. Called after [`Sink::begin_job`], on a fresh instance.
    ///
    /// Before a job writes, the runner asks, and refuses a run that would write again
    /// what this says is committed: a restore from an older checkpoint than the job's
    /// newest committed epoch, or a run from the beginning (a lost checkpoint
    /// directory) over output the job, or the same pipeline under another checkpoint
    /// directory, committed. By default empty: the sink keeps no record.
    ///
    /// `restoring` says whether the run restores a checkpoint (a restart): an external
    /// system out of reach is then [`Unavailable`](crate::io::Unavailable), as it would
    /// be mid-run, while at a job's first start it is the job's error (a wrong address).
    fn committed(&mut self, _restoring: bool) -> Result<Vec<Committed>, UserError> {
        Ok(Vec::new())
    }
}

/// Writes a PCollection into a [`Sink`], exactly once per epoch. See
/// [`PCollection::write_to`].
pub struct WriteToSink<S> {
    sink: S,
    uid: Option<String>,
}

impl<S: Sink + Serialize + DeserializeOwned> WriteToSink<S> {
    /// Writes into `sink`; its fields travel in the plan.
    pub fn new(sink: S) -> Self {
        WriteToSink { sink, uid: None }
    }

    /// Pins the sink's state id (what a savepoint's staged output is restored by) to
    /// `uid`, so that it survives a renamed step, as
    /// [`PCollection::with_uid`](crate::PCollection::with_uid) does for a step with an
    /// output:
    ///
    /// ```
    /// use tidewater::{Pipeline, PipelineOptions, WriteToSink};
    /// # use tidewater::{Sink, UserError, Txn};
    /// # #[derive(serde::Serialize, serde::Deserialize)]
    /// # struct Nowhere;
    /// # impl Sink for Nowhere {
    /// #     type In = i64;
    /// #     fn write(&mut self, _: &Txn, _: Vec<tidewater::WindowedValue<i64>>) -> Result<(), UserError> { Ok(()) }
    /// #     fn stage(&mut self, _: &Txn) -> Result<(), UserError> { Ok(()) }
    /// #     fn commit(&mut self, _: &Txn) -> Result<(), UserError> { Ok(()) }
    /// #     fn abort(&mut self, _: &Txn) -> Result<(), UserError> { Ok(()) }
    /// # }
    /// let p = Pipeline::new(PipelineOptions::default());
    /// p.create("Numbers", vec![1i64, 2])
    ///     .apply("Write v2", WriteToSink::new(Nowhere).with_uid("output"));
    /// let plan = p.to_plan().unwrap();
    /// assert_eq!(plan.components.transforms["Write v2"].uid.as_deref(), Some("output"));
    /// ```
    pub fn with_uid(mut self, uid: &str) -> Self {
        self.uid = Some(uid.to_string());
        self
    }
}

impl<S: Sink + Serialize + DeserializeOwned> PTransform<PCollection<S::In>> for WriteToSink<S> {
    type Output = ();
    fn expand(self, input: PCollection<S::In>) {
        let p = input.pipeline().clone();
        if let Some(uid) = &self.uid {
            p.set_current_uid(uid);
        }
        let name = crate::registry::register_sink::<S>();
        let fields = serde_json::to_value(&self.sink).unwrap_or_else(|e| {
            p.record_error(format!("the fields of {name} do not serialize: {e}"));
            serde_json::Value::Null
        });
        let payload = serde_json::json!({ "sink": UserFunction { name, fields: fields.into() } });
        p.set_primitive(
            FunctionSpec {
                urn: urn::SINK.into(),
                payload: payload.into(),
            },
            false,
            Vec::new(),
            IsBounded::Bounded,
        );
    }
}

impl<T: Element> PCollection<T> {
    /// Writes the elements into `sink`, exactly once per epoch.
    pub fn write_to<S: Sink<In = T> + Serialize + DeserializeOwned>(&self, name: &str, sink: S) {
        self.apply(name, WriteToSink::new(sink))
    }
}
