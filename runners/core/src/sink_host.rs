//! The sink commit protocol, once for every runner: an instance of a sink writes each
//! epoch into its own transaction, stages it when the epoch ends, and commits it when
//! the checkpoint holding the epoch is durable (Flink's two-phase commit). Staged
//! transactions are kept in the snapshot, so that an instance restored from it
//! commits them again (commits are idempotent) and nothing staged is lost.
//!
//! The runner calls [`SinkHost::write`] with the epoch's data, [`SinkHost::end_epoch`]
//! at the checkpoint barrier (before snapshotting), [`SinkHost::commit_through`] once
//! that checkpoint is durable, and [`SinkHost::abort_open`] when the job fails. Before
//! the first write of an instance (started or restored) it calls
//! [`SinkHost::recover`], so the sink discards what earlier runs left staged. A
//! bounded job on the direct runner is one epoch, committed when the job ends.

use crate::snapshot::{decode_part, encode_part, Scope};
use crate::translate::ExecutablePlan;
use tidewater::exec::{AnyBatch, ErasedSink, ExecError};
use tidewater::plan::Json;
use tidewater::{Error, Result, Txn};

/// `e` attributed to the sink `transform`.
fn of(transform: &str, e: ExecError) -> Error {
    crate::stage::unwrap_downstream(crate::stage::attribute(e, transform))
}

/// One instance of a sink.
pub struct SinkHost {
    transform: String,
    /// The sink's configuration (its fields in the plan): recorded with the staged
    /// transactions, which belong to where they were staged.
    fields: String,
    /// The job it writes for ([`crate::job`]).
    job: String,
    sink: Box<dyn ErasedSink>,
    instance: u32,
    /// The epoch being written.
    epoch: u64,
    /// Whether the current epoch's transaction got any data.
    open: bool,
    /// Staged transactions waiting for their checkpoint to be durable.
    staged: Vec<Txn>,
}

/// What a snapshot keeps of a sink instance.
#[derive(serde::Serialize, serde::Deserialize)]
struct SinkSnapshot {
    next_epoch: u64,
    staged: Vec<Txn>,
    /// The job the transactions are of.
    job: String,
    /// The configuration of the sink that staged them (JSON).
    fields: String,
}

/// What snapshots kept of a sink instance before they recorded its configuration.
#[derive(serde::Deserialize)]
struct SinkSnapshotWithoutFields {
    next_epoch: u64,
    staged: Vec<Txn>,
    job: String,
}

/// A sink instance's part, decoded.
struct Recorded {
    next_epoch: u64,
    staged: Vec<Txn>,
    job: Option<String>,
    fields: Option<String>,
}

/// What snapshots kept of a sink instance before they recorded its job.
#[derive(serde::Deserialize)]
struct SinkSnapshotWithoutJob {
    next_epoch: u64,
    staged: Vec<Txn>,
}

/// A sink instance's part: its next epoch, staged transactions, and job and
/// configuration if recorded (newest format first: an older one is a prefix of it).
fn decode(bytes: &[u8]) -> Result<Recorded> {
    if let Ok(s) = decode_part::<SinkSnapshot>(bytes, "a sink's transactions") {
        return Ok(Recorded {
            next_epoch: s.next_epoch,
            staged: s.staged,
            job: Some(s.job),
            fields: Some(s.fields),
        });
    }
    if let Ok(s) = decode_part::<SinkSnapshotWithoutFields>(bytes, "a sink's transactions") {
        return Ok(Recorded {
            next_epoch: s.next_epoch,
            staged: s.staged,
            job: Some(s.job),
            fields: None,
        });
    }
    let s: SinkSnapshotWithoutJob =
        decode_part(bytes, "a sink's transactions").map_err(crate::stage::unwrap_downstream)?;
    Ok(Recorded {
        next_epoch: s.next_epoch,
        staged: s.staged,
        job: None,
        fields: None,
    })
}

/// The job the list parts `parts` of a sink's instances were written by, if they say.
pub fn recorded_job(parts: &[&[u8]]) -> Result<Option<String>> {
    let mut job = None;
    for bytes in parts {
        if let Some(j) = decode(bytes)?.job {
            match &job {
                Some(other) if *other != j => {
                    return Err(Error::Checkpoint {
                        message: format!(
                            "a sink's instances were checkpointed by two jobs, {other} and {j}"
                        ),
                    })
                }
                _ => job = Some(j),
            }
        }
    }
    Ok(job)
}

/// Where a run of a job starts, for [`refuse_replay`].
pub struct RunStart<'a> {
    /// The job ([`crate::job`]).
    pub job: &'a str,
    /// Whether its id was derived ([`crate::job::job_id`]: neither given nor restored).
    pub derived: bool,
    /// The first epoch it writes: 0 from the beginning, or after its restored
    /// checkpoint's.
    pub resume_epoch: u64,
    /// Where it starts, in words, for the message.
    pub origin: &'a str,
    /// `--accept-duplicates`: warn instead of refusing.
    pub accept_duplicates: bool,
}

/// Refuses a run that would write again output a sink of `plan` already committed, as
/// the sink's ledger says ([`tidewater::Sink::committed`]):
///
/// - the job committed epoch `resume_epoch` or later: restored from a checkpoint older
///   than its newest committed epoch (a fallback past a corrupt newer checkpoint, an
///   old savepoint), or run from the beginning over its own output (its checkpoint
///   directory lost or emptied);
/// - a run from the beginning with a derived id, over output that the same pipeline
///   committed as another job (the same job pointed at a new checkpoint directory).
///
/// With `accept_duplicates` the run goes on, with a warning on stderr. Called once per
/// run (per process), before any instance writes, by every runner; asks one fresh
/// instance of each sink.
pub fn refuse_replay(plan: &ExecutablePlan, run: &RunStart) -> Result<()> {
    let RunStart {
        job, resume_epoch, ..
    } = *run;
    for (node, n) in plan.nodes.iter().enumerate() {
        if !matches!(n.kind, crate::translate::NodeKind::Sink { .. }) {
            continue;
        }
        let mut host = SinkHost::new(plan, node, 0, resume_epoch, job)?;
        let committed = host
            .sink
            .committed(resume_epoch > 0)
            .map_err(|e| host.err(e))?;
        let mut problems = Vec::new();
        if let Some(own) = committed
            .iter()
            .find(|c| c.job == job && c.last_epoch >= resume_epoch)
        {
            let last = own.last_epoch;
            let span = if last == resume_epoch {
                format!("epoch {last}")
            } else {
                format!("epochs {resume_epoch} to {last}")
            };
            problems.push(format!(
                "sink '{}' already committed job {job}'s output up to epoch {last}, and this run would write from epoch {resume_epoch} on: {}. Running on would write {span} again, duplicating their output. Choose one: restore from a savepoint or checkpoint of epoch {last} or later (--from-savepoint DIR); start over into a new output (another table or directory) with a new --job-id; or pass --accept-duplicates to write them again anyway",
                n.name, run.origin
            ));
        }
        let pipeline = crate::job::pipeline_of(job);
        if run.derived && resume_epoch == 0 && pipeline.is_some() {
            for other in committed
                .iter()
                .filter(|c| c.job != job && crate::job::pipeline_of(&c.job) == pipeline)
            {
                problems.push(format!(
                    "sink '{}' already holds the output of this same pipeline run as job {} (committed up to epoch {}) with another checkpoint directory, and this run (job {job}) starts from the beginning: {}. Running on would write all of it again. Choose one: resume that job (its --checkpoint-dir, or --from-savepoint with a savepoint of it); start over into a new output (another table or directory); give this run its own --job-id to write beside it on purpose; or pass --accept-duplicates",
                    n.name, other.job, other.last_epoch, run.origin
                ));
            }
        }
        for message in problems {
            if !run.accept_duplicates {
                return Err(Error::Replay { message });
            }
            tracing::warn!("{message} (--accept-duplicates: writing them again)");
        }
    }
    Ok(())
}

impl SinkHost {
    /// Instance `instance` of the sink of plan node `node`, writing epoch `epoch` for
    /// job `job`, which the sink is told first ([`tidewater::Sink::begin_job`]).
    pub fn new(
        plan: &ExecutablePlan,
        node: usize,
        instance: u32,
        epoch: u64,
        job: &str,
    ) -> Result<Self> {
        let n = &plan.nodes[node];
        let mut host = SinkHost {
            transform: n.name.clone(),
            fields: n
                .sink_fields()
                .map(|f| f.get().to_string())
                .unwrap_or_default(),
            job: job.to_string(),
            sink: n.instantiate_sink()?,
            instance,
            epoch,
            open: false,
            staged: Vec::new(),
        };
        host.sink.begin_job(job).map_err(|e| host.err(e))?;
        Ok(host)
    }

    fn txn(&self) -> Txn {
        Txn {
            epoch: self.epoch,
            instance: self.instance,
        }
    }

    fn err(&self, e: ExecError) -> Error {
        of(&self.transform, e)
    }

    /// Writes a batch into the current epoch's transaction.
    pub fn write(&mut self, batch: Box<dyn AnyBatch>) -> Result<()> {
        let txn = self.txn();
        self.open = true;
        self.sink.write(&txn, batch).map_err(|e| self.err(e))
    }

    /// The current epoch ends (a checkpoint barrier): its transaction is staged, and
    /// the next epoch begins. Call before snapshotting, so the snapshot records it.
    pub fn end_epoch(&mut self) -> Result<()> {
        if std::mem::take(&mut self.open) {
            let txn = self.txn();
            self.sink.stage(&txn).map_err(|e| self.err(e))?;
            self.staged.push(txn);
        }
        self.epoch = self.epoch.saturating_add(1);
        Ok(())
    }

    /// Epochs before `epoch` had nothing for this instance: writing goes on at `epoch`
    /// (an engine whose epochs are its checkpoint ids keeps the two the same). Never
    /// moves back, and only between epochs.
    pub fn skip_to(&mut self, epoch: u64) {
        debug_assert!(!self.open, "skip_to inside an epoch");
        self.epoch = self.epoch.max(epoch);
    }

    /// Writing resumes at `epoch` (after a restore: the engine's epochs go on from its
    /// checkpoint, whatever epoch the instances it takes over had reached).
    pub fn resume_at(&mut self, epoch: u64) {
        debug_assert!(!self.open, "resume_at inside an epoch");
        self.epoch = epoch;
    }

    /// The checkpoint of `epoch` is durable: commits every staged transaction up to it.
    pub fn commit_through(&mut self, epoch: u64) -> Result<()> {
        let (due, later): (Vec<Txn>, Vec<Txn>) =
            self.staged.drain(..).partition(|t| t.epoch <= epoch);
        self.staged = later;
        for txn in due {
            self.sink.commit(&txn).map_err(|e| self.err(e))?;
        }
        Ok(())
    }

    /// The job failed: the open transaction is discarded.
    pub fn abort_open(&mut self) -> Result<()> {
        if std::mem::take(&mut self.open) {
            let txn = self.txn();
            self.sink.abort(&txn).map_err(|e| self.err(e))?;
        }
        Ok(())
    }

    /// The instance starts writing, one of `instances`: the sink discards what earlier
    /// runs left staged of the instances it takes over and the checkpoint did not
    /// record ([`tidewater::Recovery`]). Call once, after `new` or `restore` and
    /// `resume_at`, before the first write.
    pub fn recover(&mut self, instances: u32) -> Result<()> {
        let recovery = tidewater::Recovery {
            instance: self.instance,
            instances: instances.max(1),
            resume_epoch: self.epoch,
        };
        self.sink.recover(&recovery).map_err(|e| self.err(e))
    }

    /// The epoch being written.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The staged transactions, as a list part of this instance.
    pub fn snapshot(&self) -> Vec<(Scope, Vec<u8>)> {
        vec![(
            Scope::List(self.instance),
            encode_part(&SinkSnapshot {
                next_epoch: self.epoch,
                staged: self.staged.clone(),
                job: self.job.clone(),
                fields: self.fields.clone(),
            }),
        )]
    }

    /// Instance `instance` of job `job` restored from the list parts of a snapshot (all
    /// of those it takes over): every transaction they recorded as staged is committed
    /// (again), and writing goes on at the latest epoch any of them reached. Parts of
    /// another job are refused: their transactions are not this job's to commit.
    ///
    /// A transaction is committed where it was staged: by the sink as configured when
    /// it staged it, if the job was upgraded since with another configuration (a file
    /// sink's `--output` changed, say), so that nothing staged is lost or written twice.
    pub fn restore(
        plan: &ExecutablePlan,
        node: usize,
        instance: u32,
        parts: &[&[u8]],
        job: &str,
    ) -> Result<Self> {
        let mut host = SinkHost::new(plan, node, instance, 0, job)?;
        let n = &plan.nodes[node];
        for bytes in parts {
            let Recorded {
                next_epoch,
                staged,
                job: recorded,
                fields,
            } = decode(bytes)?;
            if let Some(other) = recorded.filter(|j| j != job) {
                return Err(Error::Checkpoint {
                    message: format!(
                        "the transactions of sink '{}' in the checkpoint are job {other}'s, and this run is job {job}",
                        host.transform
                    ),
                });
            }
            host.epoch = host.epoch.max(next_epoch);
            let mut before = match fields.filter(|f| *f != host.fields && !staged.is_empty()) {
                Some(f) => {
                    let json: Json = serde_json::from_str(&f).map_err(|e| Error::Checkpoint {
                        message: format!(
                            "the configuration of sink '{}' in the checkpoint does not decode: {e}",
                            host.transform
                        ),
                    })?;
                    let mut sink = n.instantiate_sink_as(&json)?;
                    sink.begin_job(job).map_err(|e| host.err(e))?;
                    Some(sink)
                }
                None => None,
            };
            for txn in staged {
                let sink = before.as_mut().unwrap_or(&mut host.sink);
                sink.commit(&txn).map_err(|e| of(&host.transform, e))?;
            }
        }
        Ok(host)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sink_part_records_its_job_and_configuration_and_older_parts_still_restore() {
        let staged = vec![Txn {
            epoch: 4,
            instance: 1,
        }];
        let fields = r#"{"dir":"/out/1"}"#;
        let now = encode_part(&SinkSnapshot {
            next_epoch: 5,
            staged: staged.clone(),
            job: "j1".into(),
            fields: fields.into(),
        });
        let got = |bytes: &[u8]| {
            let r = decode(bytes).unwrap();
            (r.next_epoch, r.staged, r.job, r.fields)
        };
        assert_eq!(
            got(&now),
            (5, staged.clone(), Some("j1".into()), Some(fields.into()))
        );
        #[derive(serde::Serialize)]
        struct WithoutFields {
            next_epoch: u64,
            staged: Vec<Txn>,
            job: String,
        }
        let without_fields = encode_part(&WithoutFields {
            next_epoch: 5,
            staged: staged.clone(),
            job: "j1".into(),
        });
        assert_eq!(
            got(&without_fields),
            (5, staged.clone(), Some("j1".into()), None)
        );
        #[derive(serde::Serialize)]
        struct Before {
            next_epoch: u64,
            staged: Vec<Txn>,
        }
        let before = encode_part(&Before {
            next_epoch: 5,
            staged: staged.clone(),
        });
        assert_eq!(got(&before), (5, staged, None, None));
        assert_eq!(recorded_job(&[&before, &now]).unwrap(), Some("j1".into()));
        let other = encode_part(&SinkSnapshot {
            next_epoch: 5,
            staged: Vec::new(),
            job: "j2".into(),
            fields: fields.into(),
        });
        assert_eq!(
            recorded_job(&[&now, &other]).unwrap_err().to_string(),
            "checkpoint cannot be restored: a sink's instances were checkpointed by two jobs, j1 and j2"
        );
    }
}
