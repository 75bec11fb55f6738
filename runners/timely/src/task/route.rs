//! Where a task's stage output goes: its exits' routes (to one worker, by key, to all,
//! or gathered), encoded for other processes and handed over as is within one.

use super::*;

pub(super) fn taken_twice() -> Error {
    Error::Internal("an in-process batch was delivered twice".into())
}

pub(super) fn attribute(e: ExecError, transform: &str) -> Error {
    tidewater_runners_core::stage::unwrap_downstream(tidewater_runners_core::stage::attribute(
        e, transform,
    ))
}

/// Routes a running stage's exits into the outbox and the sinks.
pub(super) struct Router<'a> {
    pub(super) routes: &'a [Route],
    pub(super) outbox: &'a mut [Vec<Msg>],
    pub(super) ctx: &'a WorkerCtx,
    pub(super) transform: &'a str,
    pub(super) figures: &'a OperatorFigures,
}

pub(super) fn encode(batch: &dyn AnyBatch, transform: &str) -> Result<Vec<u8>> {
    let mut bytes = Vec::new();
    batch.encode(&mut bytes).map_err(|e| Error::Coder {
        transform: transform.to_string(),
        element: "?".into(),
        message: e.to_string(),
    })?;
    Ok(bytes)
}

impl Router<'_> {
    /// A message carrying `batch` to worker `to`: as it is within this process,
    /// encoded for another one.
    fn data(&self, to: usize, batch: Box<dyn AnyBatch>) -> Result<Msg> {
        let body = if self.ctx.local.contains(&to) {
            Body::Local(LocalBatch::new(batch))
        } else {
            Body::Data(encode(batch.as_ref(), self.transform)?)
        };
        Ok(Msg {
            to: to as u32,
            from: self.ctx.me as u32,
            body,
        })
    }
}

impl StageOutput for Router<'_> {
    fn emit(&mut self, exit: usize, batch: Box<dyn AnyBatch>) -> Result<()> {
        self.figures.add_out(batch.len());
        match &self.routes[exit] {
            Route::Keyed { port, key_ops } => {
                let (max, peers) = (self.ctx.max_key_groups, self.ctx.peers);
                let parts = if peers == 1 {
                    vec![batch]
                } else {
                    key_ops
                        .split_by(batch, peers, &mut |h| {
                            key_group_worker(key_group(h, max), max, peers)
                        })
                        .map_err(|e| attribute(e, self.transform))?
                };
                for (to, part) in parts.into_iter().enumerate() {
                    if !part.is_empty() {
                        let msg = self.data(to, part)?;
                        self.outbox[*port].push(msg);
                    }
                }
            }
            Route::Broadcast { port } => {
                // Side inputs: encoded once, a copy for every worker.
                let bytes = encode(batch.as_ref(), self.transform)?;
                for to in 0..self.ctx.peers {
                    self.outbox[*port].push(Msg {
                        to: to as u32,
                        from: self.ctx.me as u32,
                        body: Body::Data(bytes.clone()),
                    });
                }
            }
            Route::Local { port } => {
                let msg = self.data(self.ctx.me, batch)?;
                self.outbox[*port].push(msg);
            }
            Route::Gather { port } => {
                let msg = self.data(0, batch)?;
                self.outbox[*port].push(msg);
            }
            Route::Sink(host) => host.borrow_mut().write(batch)?,
        }
        Ok(())
    }
}
