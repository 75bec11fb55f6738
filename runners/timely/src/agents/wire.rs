//! What a coordinator and its hosts' agents say to each other: length-prefixed postcard
//! frames over one TCP connection per agent, after the cluster's handshake
//! (`crate::handshake`, under the job's secret: a stranger can neither register as a
//! host nor hear what the coordinator asks).

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::io::{self, Read, Write};
use std::time::Duration;

/// The coordinator's index in the handshake.
pub const COORDINATOR: u64 = u64::MAX - 1;
/// An agent's index in the handshake.
pub const AGENT: u64 = u64::MAX - 2;

/// How often each side says it is there.
pub const BEAT: Duration = Duration::from_secs(1);

/// A side that said nothing for this long is lost.
pub const LOST: Duration = Duration::from_secs(5);

/// The largest frame (an outcome carries process 0's captures).
const MAX_FRAME: u32 = 256 << 20;

/// From the coordinator to an agent.
#[derive(Debug, Serialize, Deserialize)]
pub enum ToAgent {
    /// Pick a free port for attempt `attempt`'s process on this host.
    Port {
        /// The attempt.
        attempt: u64,
    },
    /// Start process `id` of `processes` of attempt `attempt`, whose cluster listens at
    /// `hosts` (one `host:port` per process, in order).
    Start {
        /// The attempt.
        attempt: u64,
        /// Processes in the attempt.
        processes: u64,
        /// This host's process index.
        id: u64,
        /// Every process's address.
        hosts: Vec<String>,
        /// Hand over the job's status, as process 0 writes it (the coordinator serves it).
        /// Told to every host: every process gathers its figures for process 0.
        status: bool,
    },
    /// End attempt `attempt`'s process.
    Kill {
        /// The attempt.
        attempt: u64,
    },
    /// Ask the process to drain.
    Drain,
    /// Ask the process to keep the next checkpoint as a savepoint.
    Savepoint,
    /// The job is over (`ok`: it succeeded): end.
    Done {
        /// Whether the job succeeded.
        ok: bool,
    },
    /// Still there.
    Beat,
}

/// From an agent to the coordinator.
#[derive(Debug, Serialize, Deserialize)]
pub enum ToCoordinator {
    /// A host registers: the address its processes listen on.
    Hello {
        /// The host's address, as peers reach it.
        host: String,
    },
    /// The port picked for an attempt.
    Port {
        /// The attempt.
        attempt: u64,
        /// The port.
        port: u16,
    },
    /// The attempt's process ended.
    Exited {
        /// The attempt.
        attempt: u64,
        /// Its exit code, if it exited.
        code: Option<i32>,
        /// How it ended.
        shown: String,
        /// Its outcome file's bytes (empty if none).
        outcome: Vec<u8>,
    },
    /// The job's status (JSON) as the attempt's process 0 last wrote it.
    Status {
        /// The attempt.
        attempt: u64,
        /// The status file's bytes.
        json: Vec<u8>,
    },
    /// Still there.
    Beat,
}

/// Sends `message` as one frame.
pub fn send<T: Serialize>(w: &mut impl Write, message: &T) -> io::Result<()> {
    let body = postcard::to_allocvec(message).map_err(io::Error::other)?;
    let mut frame = (body.len() as u32).to_be_bytes().to_vec();
    frame.extend_from_slice(&body);
    w.write_all(&frame)?;
    w.flush()
}

/// Reads one frame; a frame over the limit or that does not decode is an error.
pub fn recv<T: DeserializeOwned>(r: &mut impl Read) -> io::Result<T> {
    let mut len = [0u8; 4];
    r.read_exact(&mut len)?;
    let len = u32::from_be_bytes(len);
    if len > MAX_FRAME {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("a frame of {len} bytes, over the limit of {MAX_FRAME}"),
        ));
    }
    let mut body = vec![0u8; len as usize];
    r.read_exact(&mut body)?;
    postcard::from_bytes(&body).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}
