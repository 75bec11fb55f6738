//! Connecting the processes of a cluster to one another.
//!
//! timely's own start-up (`timely_communication::networking::create_sockets`) polls
//! for connections once a second: every cluster start, and so every recovery restart,
//! waited about a second with nothing to do, and it waits forever for a process that
//! never comes. This does the same handshake (process `i` connects to every process
//! below it and sends its index as a big-endian `u64`; it accepts the connections of
//! every process above it) polling every few milliseconds, and gives up with an error
//! naming the missing process after a deadline. The sockets are then handed to timely
//! (`initialize_networking_from_sockets`), which runs its send and receive threads on
//! them as it would on its own.

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};
use tidewater::{Error, Result};

/// How long a process waits between attempts to connect or accept.
const POLL: Duration = Duration::from_millis(5);

/// Connects process `me` of `addresses.len()` to all the others; the result has a
/// stream to each other process, in order, and `None` at `me` (timely's layout).
///
/// Fails when `addresses[me]` cannot be bound, or when some process has not connected
/// (or could not be connected to) within `timeout`.
pub fn connect(
    addresses: &[String],
    me: usize,
    timeout: Duration,
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
        Error::Internal(format!(
            "process {me} cannot listen on its address {own}: {e}"
        ))
    })?;
    listener
        .set_nonblocking(true)
        .map_err(|e| Error::Internal(format!("process {me}: {e}")))?;
    // Accepting runs beside connecting: a process connects downwards while the ones
    // above it connect to it, and neither may wait for the other.
    let accepting = std::thread::Builder::new()
        .name("tidewater:accept".into())
        .spawn(move || accept_above(&listener, me, n, deadline))
        .map_err(|e| Error::Internal(format!("process {me}: cannot start a thread: {e}")))?;
    let below = connect_below(addresses, me, deadline);
    let above = accepting
        .join()
        .map_err(|_| Error::Internal(format!("process {me}: its accepting thread panicked")))?;
    let mut out = below?;
    out.push(None);
    out.extend(above?.into_iter().map(Some));
    Ok(out)
}

/// Connects to every process below `me`, retrying until `deadline`.
fn connect_below(
    addresses: &[String],
    me: usize,
    deadline: Instant,
) -> Result<Vec<Option<TcpStream>>> {
    let mut out = Vec::with_capacity(me);
    for (index, address) in addresses.iter().enumerate().take(me) {
        let mut stream = loop {
            match TcpStream::connect(address.as_str()) {
                Ok(s) => break s,
                Err(e) if Instant::now() >= deadline => {
                    return Err(Error::Internal(format!(
                        "process {me} could not connect to process {index} at {address}: {e} (gave up after waiting)"
                    )))
                }
                Err(_) => std::thread::sleep(POLL),
            }
        };
        let sent = stream
            .set_nodelay(true)
            .and_then(|()| stream.write_all(&(me as u64).to_be_bytes()));
        sent.map_err(|e| {
            Error::Internal(format!(
                "process {me} could not greet process {index} at {address}: {e}"
            ))
        })?;
        out.push(Some(stream));
    }
    Ok(out)
}

/// Accepts one connection from every process above `me` (they say who they are),
/// until `deadline`.
fn accept_above(
    listener: &TcpListener,
    me: usize,
    n: usize,
    deadline: Instant,
) -> Result<Vec<TcpStream>> {
    let mut slots: Vec<Option<TcpStream>> = (me + 1..n).map(|_| None).collect();
    while slots.iter().any(Option::is_none) {
        match listener.accept() {
            Ok((mut stream, from)) => {
                let index = greeting(&mut stream).map_err(|e| {
                    Error::Internal(format!(
                        "process {me}: a connection from {from} did not say which process it is: {e}"
                    ))
                })?;
                let slot = index
                    .checked_sub(me as u64 + 1)
                    .and_then(|i| slots.get_mut(usize::try_from(i).ok()?))
                    .ok_or_else(|| {
                        Error::Internal(format!(
                            "process {me}: a connection from {from} says it is process {index}, \
                             which is not above it in a cluster of {n}"
                        ))
                    })?;
                if slot.is_some() {
                    return Err(Error::Internal(format!(
                        "process {me}: process {index} connected twice (from {from})"
                    )));
                }
                *slot = Some(stream);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if Instant::now() >= deadline {
                    let missing: Vec<String> = slots
                        .iter()
                        .enumerate()
                        .filter(|(_, s)| s.is_none())
                        .map(|(i, _)| (me + 1 + i).to_string())
                        .collect();
                    return Err(Error::Internal(format!(
                        "process {me}: process(es) {} never connected (gave up after waiting)",
                        missing.join(", ")
                    )));
                }
                std::thread::sleep(POLL);
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

/// Reads the index a connecting process sends first.
fn greeting(stream: &mut TcpStream) -> io::Result<u64> {
    stream.set_nonblocking(false)?;
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut buf = [0u8; 8];
    stream.read_exact(&mut buf)?;
    stream.set_read_timeout(None)?;
    Ok(u64::from_be_bytes(buf))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn free_addresses(n: usize) -> Vec<String> {
        let ls: Vec<TcpListener> = (0..n)
            .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
            .collect();
        ls.iter()
            .map(|l| l.local_addr().unwrap().to_string())
            .collect()
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
                    let mut streams = connect(&addresses, me, Duration::from_secs(10)).unwrap();
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
        let err = connect(&addresses, 0, Duration::from_millis(100))
            .unwrap_err()
            .to_string();
        assert!(err.contains("process(es) 1 never connected"), "{err}");
        let err = connect(&addresses, 1, Duration::from_millis(100))
            .unwrap_err()
            .to_string();
        assert!(err.contains("could not connect to process 0 at"), "{err}");
    }

    #[test]
    fn a_connection_that_claims_a_wrong_index_is_refused() {
        let addresses = free_addresses(2);
        let to = addresses[0].clone();
        let h = std::thread::spawn(move || loop {
            if let Ok(mut s) = TcpStream::connect(&to) {
                s.write_all(&7u64.to_be_bytes()).unwrap();
                std::thread::sleep(Duration::from_millis(200));
                break;
            }
            std::thread::sleep(POLL);
        });
        let err = connect(&addresses, 0, Duration::from_secs(5))
            .unwrap_err()
            .to_string();
        h.join().unwrap();
        assert!(err.contains("says it is process 7"), "{err}");
    }
}
