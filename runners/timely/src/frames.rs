//! Checking what a peer sends before timely reads it.
//!
//! timely's receive thread (`zero_copy::tcp::recv_loop`) trusts the frames on a
//! connection: a frame's header (six big-endian `u64`s: channel, source worker, target
//! workers `lower..upper`, payload length, sequence number) is used as it is, so a
//! target outside this process's workers indexes past its queues and panics, and a
//! length near `u64::MAX` overflows or asks for memory without bound. [`Checked`] sits
//! between the socket and timely and reads every header as it passes: the source must
//! be one of the peer's own workers, the targets a non-empty range of this process's
//! workers, the length at most [`MAX_FRAME`], and nothing may follow the end-of-stream
//! frame (length 0). A frame that breaks a rule never reaches timely: the read fails
//! with an error naming the peer and the field, which ends that connection the way a
//! lost peer does (timely's "timely communication error: reading data: ..."), and the
//! job fails or its supervisor restarts it. Payloads are not looked into: they come
//! from a process that proved it holds the job's secret ([`crate::handshake`]).

use std::io::{self, Read, Write};
use std::net::Shutdown;
use timely::communication::allocator::zero_copy::stream::Stream;

/// The largest payload one frame may carry (1 GiB): timely's frames hold one
/// container of a channel, far below it.
pub const MAX_FRAME: u64 = 1 << 30;

/// Bytes in a frame header.
const HEADER: usize = 48;

/// Who is at the two ends of a connection, and how many workers each process has.
#[derive(Clone, Copy, Debug)]
pub struct Ends {
    /// This process.
    pub me: usize,
    /// The peer process.
    pub peer: usize,
    /// Workers per process.
    pub threads: usize,
}

/// Where the reader is in the stream of frames.
#[derive(Clone, Debug)]
enum Position {
    /// Inside a header: the bytes of it read so far.
    Header { bytes: [u8; HEADER], filled: usize },
    /// Inside a payload: the bytes of it still to come.
    Payload(u64),
    /// After the end-of-stream frame: nothing more may come.
    Ended,
    /// A rule was broken: every read fails with this.
    Failed(String),
}

/// A stream whose reads are checked frame by frame ([module docs](self)).
pub struct Checked<S> {
    inner: S,
    ends: Ends,
    position: Position,
}

impl<S> Checked<S> {
    /// `inner`, the connection between `ends.me` and `ends.peer`.
    pub fn new(inner: S, ends: Ends) -> Checked<S> {
        Checked {
            inner,
            ends,
            position: Position::Header {
                bytes: [0; HEADER],
                filled: 0,
            },
        }
    }

    /// Follows `data`, the next bytes of the stream, through the frames; the broken
    /// rule, if one is.
    fn follow(&mut self, mut data: &[u8]) -> Result<(), String> {
        while !data.is_empty() {
            match &mut self.position {
                Position::Header { bytes, filled } => {
                    let take = (HEADER - *filled).min(data.len());
                    bytes[*filled..*filled + take].copy_from_slice(&data[..take]);
                    *filled += take;
                    data = &data[take..];
                    if *filled == HEADER {
                        let header = *bytes;
                        self.position = self.ends.check(&header)?;
                    }
                }
                Position::Payload(left) => {
                    let take = (*left).min(data.len() as u64);
                    *left -= take;
                    data = &data[take as usize..];
                    if *left == 0 {
                        self.position = Position::Header {
                            bytes: [0; HEADER],
                            filled: 0,
                        };
                    }
                }
                Position::Ended => {
                    return Err(format!(
                        "{} bytes followed its end-of-stream frame",
                        data.len()
                    ))
                }
                Position::Failed(why) => return Err(why.clone()),
            }
        }
        Ok(())
    }
}

impl Ends {
    /// The position after `header`, or the rule it breaks.
    fn check(&self, header: &[u8; HEADER]) -> Result<Position, String> {
        let field =
            |i: usize| u64::from_be_bytes(header[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
        let (source, lower, upper, length) = (field(1), field(2), field(3), field(4));
        if length == 0 {
            return Ok(Position::Ended);
        }
        let workers = |p: usize| {
            let first = (p as u64).saturating_mul(self.threads as u64);
            first..first.saturating_add(self.threads as u64)
        };
        let (theirs, mine) = (workers(self.peer), workers(self.me));
        if !theirs.contains(&source) {
            return Err(format!(
                "a frame's source worker is {source}, not one of the peer's workers {theirs:?}"
            ));
        }
        if lower >= upper || lower < mine.start || upper > mine.end {
            return Err(format!(
                "a frame's target workers are {lower}..{upper}, not a range of this process's workers {mine:?}"
            ));
        }
        if length > MAX_FRAME {
            return Err(format!(
                "a frame's length is {length} bytes, over the limit of {MAX_FRAME}"
            ));
        }
        Ok(Position::Payload(length))
    }
}

impl<S: Read> Read for Checked<S> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if let Position::Failed(why) = &self.position {
            return Err(io::Error::new(io::ErrorKind::InvalidData, why.clone()));
        }
        let n = self.inner.read(buf)?;
        if let Err(why) = self.follow(&buf[..n]) {
            let why = format!(
                "process {} sent a malformed frame: {why}; its connection is closed",
                self.ends.peer
            );
            self.position = Position::Failed(why.clone());
            return Err(io::Error::new(io::ErrorKind::InvalidData, why));
        }
        Ok(n)
    }
}

impl<S: Write> Write for Checked<S> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.inner.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

impl<S: Stream> Stream for Checked<S> {
    /// A clone starts at the beginning of the stream: timely clones each connection
    /// once for its send thread and once for its receive thread before either reads.
    fn try_clone(&self) -> io::Result<Self> {
        Ok(Checked::new(self.inner.try_clone()?, self.ends))
    }

    fn set_nonblocking(&self, nonblocking: bool) -> io::Result<()> {
        self.inner.set_nonblocking(nonblocking)
    }

    fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        self.inner.shutdown(how)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const ENDS: Ends = Ends {
        me: 1,
        peer: 0,
        threads: 2,
    };

    fn header(fields: [u64; 6]) -> Vec<u8> {
        fields.iter().flat_map(|f| f.to_be_bytes()).collect()
    }

    fn frame(source: u64, targets: (u64, u64), payload: &[u8]) -> Vec<u8> {
        let mut f = header([7, source, targets.0, targets.1, payload.len() as u64, 3]);
        f.extend_from_slice(payload);
        f
    }

    /// Reads all of `stream` through a checker in reads of at most `chunk` bytes: what
    /// came through, and the error that stopped it.
    fn read_all(stream: &[u8], chunk: usize) -> (Vec<u8>, Option<String>) {
        let mut checked = Checked::new(stream, ENDS);
        let (mut out, mut buf) = (Vec::new(), vec![0u8; chunk]);
        loop {
            match checked.read(&mut buf) {
                Ok(0) => return (out, None),
                Ok(n) => out.extend_from_slice(&buf[..n]),
                Err(e) => return (out, Some(e.to_string())),
            }
        }
    }

    fn well_formed() -> Vec<u8> {
        let mut s = frame(0, (2, 3), b"hello");
        s.extend(frame(1, (2, 4), &[9; 100]));
        s.extend(header([0; 6]));
        s
    }

    #[test]
    fn well_formed_frames_pass_whole_in_any_chunking() {
        let s = well_formed();
        for chunk in [1, 5, 47, 48, 49, 1000] {
            assert_eq!(read_all(&s, chunk), (s.clone(), None), "chunk {chunk}");
        }
    }

    #[test]
    fn each_broken_rule_is_named_and_nothing_of_the_frame_passes() {
        let cases: [(Vec<u8>, &str); 6] = [
            (
                frame(2, (2, 3), b"x"),
                "process 0 sent a malformed frame: a frame's source worker is 2, not one of the peer's workers 0..2",
            ),
            (
                frame(0, (0, 1), b"x"),
                "a frame's target workers are 0..1, not a range of this process's workers 2..4",
            ),
            (frame(0, (3, 5), b"x"), "target workers are 3..5"),
            (frame(0, (3, 3), b"x"), "target workers are 3..3"),
            (
                header([0, 0, 2, 3, u64::MAX, 0]),
                "a frame's length is 18446744073709551615 bytes, over the limit of 1073741824",
            ),
            (
                [header([0; 6]), vec![1]].concat(),
                "1 bytes followed its end-of-stream frame",
            ),
        ];
        for (bad, expected) in cases {
            let mut s = frame(0, (2, 3), b"ok");
            let good = s.len();
            s.extend(&bad);
            // Read in one go: the whole read fails, so not a byte of it reaches timely.
            let (out, err) = read_all(&s[good..], 4096);
            let err = err.unwrap_or_else(|| panic!("{expected}: passed"));
            assert!(err.contains(expected), "{err}");
            assert!(err.ends_with("its connection is closed"), "{err}");
            assert!(out.is_empty(), "{expected}");
            // Byte by byte, what passes stops short of the bad header's end.
            let (out, err) = read_all(&s, 1);
            assert!(err.is_some() && out.len() <= good + HEADER, "{expected}");
            // Once failed, always failed.
            let mut checked = Checked::new(&bad[..], ENDS);
            let mut buf = vec![0; 4096];
            assert!(checked.read(&mut buf).is_err());
            assert!(checked.read(&mut buf).is_err());
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(tidewater::fuzz::cases(256)))]

        /// Fuzz target (`tidewater::fuzz`): random bytes, and well-formed streams with
        /// random bytes spliced in: the checker never panics, and whatever it lets
        /// through is a prefix of the input whose complete headers all keep the rules.
        #[test]
        fn fuzz_frames_only_rule_keeping_frames_pass(
            noise in proptest::collection::vec(any::<u8>(), 0..400),
            at in 0usize..400,
            chunk in 1usize..100,
        ) {
            let mut s = well_formed();
            let at = at.min(s.len());
            s.splice(at..at, noise.iter().copied());
            let (out, _) = read_all(&s, chunk);
            prop_assert!(s.starts_with(&out));
            let mut rest = &out[..];
            while rest.len() >= HEADER {
                let h: [u8; HEADER] = rest[..HEADER].try_into().unwrap();
                match ENDS.check(&h) {
                    Ok(Position::Payload(n)) => {
                        rest = &rest[(HEADER as u64 + n).min(rest.len() as u64) as usize..]
                    }
                    Ok(_) => break,
                    Err(why) => prop_assert!(false, "passed a broken header: {why}"),
                }
            }
        }
    }
}
