//! The connector runtime: one tokio runtime per process, started on first use.

use std::sync::OnceLock;
use tokio::runtime::{Builder, Runtime};

/// The process's runtime for async connectors: two worker threads named
/// `tidewater-io`, with IO and timers enabled. Connectors spawn their readers and
/// writers on it; the pipeline's own threads never run on it.
///
/// ```
/// let answer = tidewater::io::runtime().block_on(async { 6 * 7 });
/// assert_eq!(answer, 42);
/// ```
pub fn runtime() -> &'static Runtime {
    static RUNTIME: OnceLock<Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("tidewater-io")
            .enable_all()
            .build()
            .unwrap_or_else(|e| panic!("the connector runtime (tokio) does not start: {e}"))
    })
}
