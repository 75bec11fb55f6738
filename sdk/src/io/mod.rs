//! Connectors that wait on the outside world — files being tailed, databases,
//! brokers — written as `async` code on one tokio runtime per process, and bridged to
//! the synchronous, batched hot path.
//!
//! A connector implements [`AsyncSource`] or [`AsyncSink`] (traits with
//! `#[async_trait]` methods) and is read or written through its bridge,
//! [`SourceBridge`] or [`SinkBridge`], which is an ordinary [`Source`](crate::Source)
//! or [`Sink`](crate::Sink): runners drive it through core's source driver and sink
//! commit protocol like any other, and the rules of both stay where they are. Between
//! the two sides sits a bounded channel per partition (source) or per instance (sink):
//!
//! - a source's reader runs ahead of the pipeline by at most
//!   [`BridgeOptions::capacity`] chunks, then waits until the pipeline takes them;
//! - a sink's writes queue up to [`BridgeOptions::capacity`] batches; past that the
//!   worker that writes waits, so a slow database throttles the pipeline instead of
//!   filling memory.
//!
//! Nothing per record crosses the bridge: a source hands over chunks of up to
//! [`BridgeOptions::chunk`] records, a sink takes the batches the runner writes. Every
//! wait on the other side is bounded by [`BridgeOptions::timeout`]: an IO that does
//! not answer fails the pipeline with an error naming what did not answer, it never
//! hangs a worker.

mod runtime;
mod sink;
mod source;

pub use runtime::runtime;
pub use sink::{AsyncSink, SinkBridge};
pub use source::{AsyncSource, AsyncSourceReader, BridgePosition, SourceBridge};

/// The error a connector returns when the external system it talks to went away
/// mid-run (a connection lost, a server restarting): the runner reports it as
/// [`Error::Unavailable`](crate::Error::Unavailable), and a local cluster's supervisor
/// restarts the job from its last checkpoint instead of failing it. Not for a
/// configuration that can never work (a wrong URL, a missing table): those are plain
/// errors, and fail the job.
///
/// ```
/// let e: tidewater::UserError = tidewater::io::Unavailable("the connection was lost".into()).into();
/// assert!(e.is::<tidewater::io::Unavailable>());
/// assert_eq!(e.to_string(), "the connection was lost");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unavailable(pub String);

impl std::fmt::Display for Unavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Unavailable {}

/// How a bridge moves data between an async connector and the synchronous pipeline.
///
/// ```
/// use std::time::Duration;
/// let options = tidewater::io::BridgeOptions {
///     timeout: Duration::from_secs(5),
///     ..Default::default()
/// };
/// assert_eq!(options.capacity, 4);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BridgeOptions {
    /// How many records a source's reader is asked for at once (one chunk).
    pub chunk: usize,
    /// How many chunks (source) or written batches (sink) may wait in the channel.
    pub capacity: usize,
    /// The longest the pipeline waits for the connector to answer: a source reader's
    /// next chunk, a sink's stage, commit or abort, room in a full write queue.
    pub timeout: std::time::Duration,
}

impl Default for BridgeOptions {
    fn default() -> Self {
        BridgeOptions {
            chunk: 1024,
            capacity: 4,
            timeout: std::time::Duration::from_secs(30),
        }
    }
}

/// A connector's error as it crosses back to the pipeline: its message, and whether it is
/// an [`Unavailable`] (which the runner treats as recoverable).
#[derive(Clone)]
pub(crate) struct Failure {
    pub(crate) message: String,
    pub(crate) unavailable: bool,
}

impl Failure {
    pub(crate) fn of(
        e: &crate::UserError,
        context: impl FnOnce(&crate::UserError) -> String,
    ) -> Self {
        Failure {
            message: context(e),
            unavailable: e.is::<Unavailable>(),
        }
    }

    pub(crate) fn into_error(self) -> crate::UserError {
        if self.unavailable {
            Unavailable(self.message).into()
        } else {
            self.message.into()
        }
    }
}

/// Runs `fut` on the connector runtime from a pipeline thread, for at most `timeout`;
/// `what` names what did not answer in the error.
pub(crate) fn block_on_timeout<T>(
    timeout: std::time::Duration,
    what: impl FnOnce() -> String,
    fut: impl std::future::Future<Output = Result<T, crate::UserError>>,
) -> Result<T, crate::UserError> {
    runtime()
        .block_on(async { tokio::time::timeout(timeout, fut).await })
        .map_err(|_| Unavailable(format!("{} did not answer within {timeout:?}", what())))?
}
