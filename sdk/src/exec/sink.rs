use super::{AnyBatch, ExecError, Phase, downcast_batch};
use crate::exec::catch_user;
use crate::{Recovery, Sink, Txn};
use std::panic::AssertUnwindSafe;

/// A [`Sink`] behind the erased interface runners drive.
pub trait ErasedSink: Send {
    /// Name of the element type written.
    fn input_type(&self) -> &'static str;
    /// See [`Sink::write`].
    fn write(&mut self, txn: &Txn, batch: Box<dyn AnyBatch>) -> Result<(), ExecError>;
    /// See [`Sink::stage`].
    fn stage(&mut self, txn: &Txn) -> Result<(), ExecError>;
    /// See [`Sink::commit`].
    fn commit(&mut self, txn: &Txn) -> Result<(), ExecError>;
    /// See [`Sink::abort`].
    fn abort(&mut self, txn: &Txn) -> Result<(), ExecError>;
    /// See [`Sink::recover`].
    fn recover(&mut self, recovery: &Recovery) -> Result<(), ExecError>;
    /// See [`Sink::begin_job`].
    fn begin_job(&mut self, job: &str) -> Result<(), ExecError>;
    /// See [`Sink::committed`].
    fn committed(&mut self, restoring: bool) -> Result<Vec<crate::Committed>, ExecError>;
}

/// Runs a typed [`Sink`] behind [`ErasedSink`], turning errors and panics into
/// [`ExecError`]s that name the transaction.
pub struct SinkInvoker<S: Sink>(pub S);

fn call(
    phase: Phase,
    txn: &Txn,
    f: impl FnOnce() -> Result<(), crate::UserError>,
) -> Result<(), ExecError> {
    call_on(phase, &format!("transaction {}", txn.id()), f)
}

/// [`call`] of a step that `what` names in errors.
fn call_on<R>(
    phase: Phase,
    what: &str,
    f: impl FnOnce() -> Result<R, crate::UserError>,
) -> Result<R, ExecError> {
    let message = match catch_user(AssertUnwindSafe(f)) {
        Ok(Ok(r)) => return Ok(r),
        Ok(Err(e)) if e.is::<crate::io::Unavailable>() => {
            return Err(ExecError::Unavailable {
                phase,
                message: format!("{what}: {e}"),
            });
        }
        Ok(Err(e)) => e.to_string(),
        Err(p) => format!(
            "panicked: {}",
            p.downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default()
        ),
    };
    Err(ExecError::User {
        phase,
        element: None,
        message: format!("{what}: {message}"),
    })
}

impl<S: Sink> ErasedSink for SinkInvoker<S> {
    fn input_type(&self) -> &'static str {
        std::any::type_name::<S::In>()
    }
    fn write(&mut self, txn: &Txn, batch: Box<dyn AnyBatch>) -> Result<(), ExecError> {
        let items = downcast_batch::<S::In>(batch);
        let s = &mut self.0;
        call(Phase::SinkWrite, txn, || s.write(txn, items))
    }
    fn stage(&mut self, txn: &Txn) -> Result<(), ExecError> {
        let s = &mut self.0;
        call(Phase::SinkStage, txn, || s.stage(txn))
    }
    fn commit(&mut self, txn: &Txn) -> Result<(), ExecError> {
        let s = &mut self.0;
        call(Phase::SinkCommit, txn, || s.commit(txn))
    }
    fn abort(&mut self, txn: &Txn) -> Result<(), ExecError> {
        let s = &mut self.0;
        call(Phase::SinkAbort, txn, || s.abort(txn))
    }
    fn recover(&mut self, recovery: &Recovery) -> Result<(), ExecError> {
        let s = &mut self.0;
        let txn = Txn {
            epoch: recovery.resume_epoch,
            instance: recovery.instance,
        };
        call(Phase::SinkRecover, &txn, || s.recover(recovery))
    }
    fn begin_job(&mut self, job: &str) -> Result<(), ExecError> {
        let s = &mut self.0;
        call_on(Phase::SinkRecover, &format!("job {job}"), || {
            s.begin_job(job)
        })
    }
    fn committed(&mut self, restoring: bool) -> Result<Vec<crate::Committed>, ExecError> {
        let s = &mut self.0;
        call_on(Phase::SinkRecover, "reading what jobs committed", || {
            s.committed(restoring)
        })
    }
}
