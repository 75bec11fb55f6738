use super::{AnyBatch, Batch, ExecError, Phase};
use crate::exec::catch_user;
use crate::{ReadStatus, Source, Timestamp, WindowedValue, coder};
use std::panic::AssertUnwindSafe;

/// One read of a partition.
pub struct SourceRead {
    /// The records, in the global window.
    pub batch: Box<dyn AnyBatch>,
    /// What the read found.
    pub status: ReadStatus,
    /// The partition's watermark after the read.
    pub watermark: Timestamp,
}

/// A [`Source`] behind the erased interface runners drive; positions are encoded bytes,
/// so a runner can snapshot them without knowing their type.
pub trait ErasedSource: Send {
    /// Name of the record type.
    fn output_type(&self) -> &'static str;
    /// Whether the source is finite.
    fn is_bounded(&self) -> bool;
    /// How many partitions to read, given a desired number.
    fn partitions(&self, desired: usize) -> Result<usize, ExecError>;
    /// The encoded initial position of a partition.
    fn initial_position(&self, partition: usize, partitions: usize) -> Result<Vec<u8>, ExecError>;
    /// Records ready at the encoded `position` at processing time `now`, if the
    /// source knows; with `cap`, an answer of at most it
    /// ([`Source::try_available_up_to`]).
    fn available(
        &self,
        partition: usize,
        partitions: usize,
        position: &[u8],
        now: Timestamp,
        cap: Option<u64>,
    ) -> Result<Option<u64>, ExecError>;
    /// The checkpoint holding the encoded `position` is durable.
    fn finalize(
        &mut self,
        partition: usize,
        partitions: usize,
        position: &[u8],
    ) -> Result<(), ExecError>;
    /// Whether an idle partition's watermark still holds
    /// ([`Source::idle_holds_watermark`]).
    fn idle_holds_watermark(&self) -> bool {
        false
    }
    /// The encoded `position` as its type's `Debug` shows it (for a job's status), or
    /// a note that it does not decode.
    fn describe_position(&self, _position: &[u8]) -> String {
        "?".to_string()
    }
    /// Reads up to `max` records from the encoded `position`, updating it.
    fn read(
        &mut self,
        partition: usize,
        partitions: usize,
        position: &mut Vec<u8>,
        max: usize,
        now: Timestamp,
    ) -> Result<SourceRead, ExecError>;
}

/// Runs a typed [`Source`] behind [`ErasedSource`].
pub struct SourceInvoker<S: Source>(pub S);

fn user_error(message: String) -> ExecError {
    ExecError::User {
        phase: Phase::Process,
        element: None,
        message,
    }
}

impl<S: Source> ErasedSource for SourceInvoker<S> {
    fn output_type(&self) -> &'static str {
        std::any::type_name::<S::Output>()
    }
    fn describe_position(&self, position: &[u8]) -> String {
        match coder::decode::<S::Position>(position) {
            Ok(p) => {
                let mut s = format!("{p:?}");
                if s.len() > 200 {
                    let mut cut = 200;
                    while !s.is_char_boundary(cut) {
                        cut -= 1;
                    }
                    s.truncate(cut);
                    s.push('…');
                }
                s
            }
            Err(e) => format!("(does not decode: {e})"),
        }
    }
    fn is_bounded(&self) -> bool {
        self.0.is_bounded()
    }
    fn idle_holds_watermark(&self) -> bool {
        self.0.idle_holds_watermark()
    }
    fn partitions(&self, desired: usize) -> Result<usize, ExecError> {
        let s = &self.0;
        match catch_user(AssertUnwindSafe(|| s.try_partitions(desired))) {
            Ok(Ok(n)) => Ok(n.max(1)),
            Ok(Err(e)) => Err(user_error(format!(
                "finding the source's partitions failed: {e}"
            ))),
            Err(_) => Err(user_error(
                "finding the source's partitions panicked".to_string(),
            )),
        }
    }
    fn initial_position(&self, partition: usize, partitions: usize) -> Result<Vec<u8>, ExecError> {
        let p = self.0.initial_position(partition, partitions);
        let mut bytes = Vec::new();
        coder::encode_into(&p, &mut bytes)
            .map_err(|e| user_error(format!("source position does not encode: {e}")))?;
        Ok(bytes)
    }
    fn available(
        &self,
        partition: usize,
        partitions: usize,
        position: &[u8],
        now: Timestamp,
        cap: Option<u64>,
    ) -> Result<Option<u64>, ExecError> {
        let pos: S::Position = coder::decode(position)
            .map_err(|e| user_error(format!("source position does not decode: {e}")))?;
        let s = &self.0;
        match catch_user(AssertUnwindSafe(|| match cap {
            Some(cap) => s.try_available_up_to(partition, partitions, &pos, now, cap),
            None => s.try_available(partition, partitions, &pos, now),
        })) {
            Ok(Ok(n)) => Ok(n),
            Ok(Err(e)) if e.is::<crate::io::Unavailable>() => Err(ExecError::Unavailable {
                phase: Phase::Process,
                message: format!(
                    "asking partition {partition} at {pos:?} what is available failed: {e}"
                ),
            }),
            Ok(Err(e)) => Err(user_error(format!(
                "asking partition {partition} at {pos:?} what is available failed: {e}"
            ))),
            Err(_) => Err(user_error(format!(
                "asking partition {partition} at {pos:?} what is available panicked"
            ))),
        }
    }
    fn finalize(
        &mut self,
        partition: usize,
        partitions: usize,
        position: &[u8],
    ) -> Result<(), ExecError> {
        let pos: S::Position = coder::decode(position)
            .map_err(|e| user_error(format!("source position does not decode: {e}")))?;
        let s = &mut self.0;
        match catch_user(AssertUnwindSafe(|| s.finalize(partition, partitions, &pos))) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) if e.is::<crate::io::Unavailable>() => Err(ExecError::Unavailable {
                phase: Phase::Process,
                message: format!("finalizing partition {partition} at {pos:?} failed: {e}"),
            }),
            Ok(Err(e)) => Err(user_error(format!(
                "finalizing partition {partition} at {pos:?} failed: {e}"
            ))),
            Err(_) => Err(user_error(format!(
                "finalizing partition {partition} at {pos:?} panicked"
            ))),
        }
    }
    fn read(
        &mut self,
        partition: usize,
        partitions: usize,
        position: &mut Vec<u8>,
        max: usize,
        now: Timestamp,
    ) -> Result<SourceRead, ExecError> {
        let mut pos: S::Position = coder::decode(position)
            .map_err(|e| user_error(format!("source position does not decode: {e}")))?;
        let mut out = Vec::new();
        let src = &mut self.0;
        let status = match catch_user(AssertUnwindSafe(|| {
            src.read(partition, partitions, &mut pos, max, now, &mut out)
        })) {
            Ok(Ok(s)) => s,
            Ok(Err(e)) if e.is::<crate::io::Unavailable>() => {
                return Err(ExecError::Unavailable {
                    phase: Phase::Process,
                    message: format!("reading partition {partition} at {pos:?} failed: {e}"),
                });
            }
            Ok(Err(e)) => {
                return Err(user_error(format!(
                    "reading partition {partition} at {pos:?} failed: {e}"
                )));
            }
            Err(_) => {
                return Err(user_error(format!(
                    "reading partition {partition} at {pos:?} panicked"
                )));
            }
        };
        let watermark = self.0.watermark(partition, partitions, &pos);
        position.clear();
        coder::encode_into(&pos, position)
            .map_err(|e| user_error(format!("source position does not encode: {e}")))?;
        let items = out
            .into_iter()
            .map(|(value, ts)| WindowedValue {
                timestamp: ts,
                ..WindowedValue::in_global_window(value)
            })
            .collect();
        Ok(SourceRead {
            batch: Box::new(Batch { items }),
            status,
            watermark,
        })
    }
}
