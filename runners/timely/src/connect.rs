//! Connecting the processes of a cluster to one another.
//!
//! timely's own start-up (`timely_communication::networking::create_sockets`) polls
//! for connections once a second: every cluster start, and so every recovery restart,
//! waited about a second with nothing to do, and it waits forever for a process that
//! never comes, and it takes whoever says a number for a peer. This connects the same
//! way (process `i` connects to every process below it and accepts the connections of
//! every process above it), through an authenticated handshake
//! ([`crate::handshake`]), polling every few milliseconds, and gives up with an error
//! naming the missing process after a deadline. The sockets are then handed to timely
//! (`initialize_networking_from_sockets`), which runs its send and receive threads on
//! them as it would on its own.

use crate::handshake::{self, Secret};
use std::io;
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};
use tidewater::{Error, Result};

/// How long a process waits between attempts to connect or accept.
const POLL: Duration = Duration::from_millis(5);

/// Whether this process could not listen on its address because another socket held it
/// ([`connect`]): a local cluster's supervisor picks free ports and releases them before
/// its processes bind them, and another program may take one in between. The process
/// then exits as one that lost an external system
/// ([`crate::cluster::UNAVAILABLE`]): the supervisor restarts the cluster on fresh
/// ports (under the restart policy: an address that stays taken ends the job after its
/// failures, with this message).
static ADDRESS_TAKEN: AtomicBool = AtomicBool::new(false);

/// Whether [`connect`] found this process's address taken by another socket.
pub fn address_taken() -> bool {
    ADDRESS_TAKEN.load(Ordering::SeqCst)
}

/// Connects process `me` of `addresses.len()` to all the others; the result has a
/// stream to each other process, in order, and `None` at `me` (timely's layout). Every
/// connection passes the handshake under `secret` first ([`crate::handshake`]); one
/// that does not (a stranger, garbage, silence, an index that is not a peer's) is
/// dropped with a line naming its address, and the process goes on waiting for its
/// peers.
///
/// Fails when `addresses[me]` cannot be bound, or when some process has not connected
/// (or could not be connected to) within `timeout`.
pub fn connect(
    addresses: &[String],
    me: usize,
    timeout: Duration,
    secret: &Secret,
) -> Result<Vec<Option<TcpStream>>> {
    let n = addresses.len();
    if me >= n {
        return Err(Error::Internal(format!(
            "process {me} of a cluster of {n} addresses: no address of its own"
        )));
    }
    let deadline = Instant::now() + timeout;
    let own = &addresses[me];
    let listener = TcpListener::bind(own).map_err(|e| {
        if e.kind() == io::ErrorKind::AddrInUse {
            ADDRESS_TAKEN.store(true, Ordering::SeqCst);
        }
        Error::Cluster {
            message: format!("process {me} cannot listen on its address {own}: {e}"),
        }
    })?;
    listener
        .set_nonblocking(true)
        .map_err(|e| Error::Internal(format!("process {me}: {e}")))?;
    // Accepting runs beside connecting: a process connects downwards while the ones
    // above it connect to it, and neither may wait for the other.
    let key = secret.clone();
    let accepting = std::thread::Builder::new()
        .name("tidewater:accept".into())
        .spawn(move || accept_above(&listener, me, n, deadline, &key))
        .map_err(|e| Error::Internal(format!("process {me}: cannot start a thread: {e}")))?;
    let below = connect_below(addresses, me, deadline, secret);
    let above = accepting
        .join()
        .map_err(|_| Error::Internal(format!("process {me}: its accepting thread panicked")))?;
    let mut out = below?;
    out.push(None);
    out.extend(above?.into_iter().map(Some));
    Ok(out)
}

/// Connects to every process below `me` and passes the handshake with it, retrying
/// until `deadline` (something else may answer at its address for a while: a process
/// of an earlier attempt, or of another job).
fn connect_below(
    addresses: &[String],
    me: usize,
    deadline: Instant,
    secret: &Secret,
) -> Result<Vec<Option<TcpStream>>> {
    let mut out = Vec::with_capacity(me);
    for (index, address) in addresses.iter().enumerate().take(me) {
        let stream = loop {
            let why = match TcpStream::connect(address.as_str()) {
                Ok(mut s) => match handshake::connect(&mut s, secret, me as u64, index as u64) {
                    Ok(()) => break s,
                    Err(why) => why.to_string(),
                },
                Err(e) => e.to_string(),
            };
            if Instant::now() >= deadline {
                return Err(Error::Cluster {
                    message: format!(
                        "process {me} could not connect to process {index} at {address}: {why} (gave up after waiting)"
                    ),
                });
            }
            std::thread::sleep(POLL);
        };
        out.push(Some(stream));
    }
    Ok(out)
}

/// Puts a peer that passed the handshake in its slot, unless one is there already.
fn place(
    slots: &mut [Option<TcpStream>],
    me: usize,
    (from, index, stream): (std::net::SocketAddr, u64, TcpStream),
) {
    let slot = &mut slots[(index - me as u64 - 1) as usize];
    if slot.is_some() {
        tracing::warn!(
            "process {me}: dropped a connection from {from}: process {index} has connected already"
        );
    } else {
        *slot = Some(stream);
    }
}

/// Handshakes under way at once at most; a connection beyond them is dropped at once.
const MAX_HANDSHAKES: usize = 64;

/// Accepts one connection from every process above `me`, each through the handshake,
/// until `deadline`. Each handshake runs on a thread of its own, so that a silent
/// stranger holds up nobody.
fn accept_above(
    listener: &TcpListener,
    me: usize,
    n: usize,
    deadline: Instant,
    secret: &Secret,
) -> Result<Vec<TcpStream>> {
    let mut slots: Vec<Option<TcpStream>> = (me + 1..n).map(|_| None).collect();
    let (done, results) = mpsc::channel();
    let running = Arc::new(AtomicUsize::new(0));
    while slots.iter().any(Option::is_none) {
        while let Ok(joined) = results.try_recv() {
            place(&mut slots, me, joined);
        }
        match listener.accept() {
            Ok((mut stream, from)) => {
                if running.load(Ordering::SeqCst) >= MAX_HANDSHAKES {
                    tracing::warn!(
                        "process {me}: dropped a connection from {from}: {MAX_HANDSHAKES} handshakes are under way"
                    );
                    continue;
                }
                running.fetch_add(1, Ordering::SeqCst);
                let (done, running, secret) = (done.clone(), Arc::clone(&running), secret.clone());
                let wanted = move |i: u64| i > me as u64 && i < n as u64;
                let spawned = std::thread::Builder::new()
                    .name("tidewater:handshake".into())
                    .spawn(move || {
                        let result = handshake::accept(&mut stream, &secret, me as u64, wanted);
                        running.fetch_sub(1, Ordering::SeqCst);
                        match result {
                            Ok(index) => {
                                let _ = done.send((from, index, stream));
                            }
                            // Said here: the cluster may be complete (and the loop over)
                            // before a silent stranger's time is up.
                            Err(why) => {
                                tracing::warn!(
                                    "process {me}: dropped a connection from {from}: {why}"
                                )
                            }
                        }
                    });
                if let Err(e) = spawned {
                    return Err(Error::Internal(format!(
                        "process {me}: cannot start a thread: {e}"
                    )));
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if Instant::now() >= deadline {
                    let missing: Vec<String> = slots
                        .iter()
                        .enumerate()
                        .filter(|(_, s)| s.is_none())
                        .map(|(i, _)| (me + 1 + i).to_string())
                        .collect();
                    return Err(Error::Cluster {
                        message: format!(
                            "process {me}: process(es) {} never connected (gave up after waiting)",
                            missing.join(", ")
                        ),
                    });
                }
                // Waits for a handshake under way as much as for the next connection.
                if let Ok(joined) = results.recv_timeout(POLL) {
                    place(&mut slots, me, joined);
                }
            }
            Err(e) => {
                return Err(Error::Internal(format!(
                    "process {me} cannot accept connections: {e}"
                )))
            }
        }
    }
    Ok(slots.into_iter().flatten().collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    fn free_addresses(n: usize) -> Vec<String> {
        let ls: Vec<TcpListener> = (0..n)
            .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
            .collect();
        ls.iter()
            .map(|l| l.local_addr().unwrap().to_string())
            .collect()
    }

    fn secret() -> Secret {
        Secret::parse("00112233445566778899aabbccddeeff").unwrap()
    }

    #[test]
    fn three_processes_started_apart_connect_each_to_each_in_order() {
        let addresses = free_addresses(3);
        let handles: Vec<_> = (0..3)
            .rev()
            .map(|me| {
                let addresses = addresses.clone();
                std::thread::spawn(move || {
                    // The highest starts first: its connections are refused at first.
                    std::thread::sleep(Duration::from_millis(30 * (2 - me as u64)));
                    let mut streams =
                        connect(&addresses, me, Duration::from_secs(10), &secret()).unwrap();
                    // Each says who it is on every stream, and reads who is at the other end.
                    for s in streams.iter_mut().flatten() {
                        s.write_all(&[me as u8]).unwrap();
                    }
                    let peers: Vec<Option<u8>> = streams
                        .iter_mut()
                        .map(|s| {
                            s.as_mut().map(|s| {
                                let mut b = [0u8];
                                s.read_exact(&mut b).unwrap();
                                b[0]
                            })
                        })
                        .collect();
                    (me, peers)
                })
            })
            .collect();
        let mut got: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        got.sort();
        assert_eq!(
            got,
            vec![
                (0, vec![None, Some(1), Some(2)]),
                (1, vec![Some(0), None, Some(2)]),
                (2, vec![Some(0), Some(1), None]),
            ]
        );
    }

    #[test]
    fn a_process_that_never_comes_is_named_after_the_deadline() {
        let addresses = free_addresses(2);
        let err = connect(&addresses, 0, Duration::from_millis(100), &secret())
            .unwrap_err()
            .to_string();
        assert!(err.contains("process(es) 1 never connected"), "{err}");
        let err = connect(&addresses, 1, Duration::from_millis(100), &secret())
            .unwrap_err()
            .to_string();
        assert!(err.contains("could not connect to process 0 at"), "{err}");
    }

    /// Strangers connect first: one claims to be process 1 the old way (8 bytes), one
    /// sends garbage, one stays silent, one has another secret. Each is dropped, and
    /// the real process 1 joins; the silent one holds up nothing (before: the first
    /// was taken as process 1, garbage failed the job, silence stalled it 10 s).
    #[test]
    fn strangers_are_dropped_and_the_real_peer_joins() {
        let addresses = free_addresses(2);
        let to = addresses[0].clone();
        let strangers = std::thread::spawn(move || {
            let reach = || loop {
                if let Ok(s) = TcpStream::connect(&to) {
                    return s;
                }
                std::thread::sleep(POLL);
            };
            let mut claims = reach();
            claims.write_all(&1u64.to_be_bytes()).unwrap();
            let mut garbage = reach();
            garbage.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
            let silent = reach();
            let mut other = reach();
            let wrong = Secret::parse("ffeeddccbbaa99887766554433221100").unwrap();
            let refused = handshake::connect(&mut other, &wrong, 1, 0);
            (claims, garbage, silent, refused.map_err(|e| e.to_string()))
        });
        let real = {
            let addresses = addresses.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(200));
                connect(&addresses, 1, Duration::from_secs(10), &secret())
            })
        };
        let started = Instant::now();
        let streams = connect(&addresses, 0, Duration::from_secs(10), &secret()).unwrap();
        assert!(streams[1].is_some());
        assert!(real.join().unwrap().unwrap()[0].is_some());
        assert!(
            started.elapsed() < handshake::STEP_TIMEOUT,
            "a stranger held the cluster up: {:?}",
            started.elapsed()
        );
        let (_claims, _garbage, _silent, refused) = strangers.join().unwrap();
        // The process with another secret learns the acceptor is not its peer.
        assert_eq!(refused.unwrap_err(), "it does not hold the job's secret");
    }
}
