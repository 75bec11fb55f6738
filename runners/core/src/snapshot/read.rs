//! Reading a snapshot part by part from a reader ([`SnapshotReader`]): each part's
//! header, where its bytes are, and its bytes only where asked for, each part's
//! checksum checked as its bytes pass. A checkpoint's files are read so on restore, a
//! key group's bytes left where they are until the task owning it restores it; a
//! snapshot in memory ([`Snapshot::decode`]) is read by the same code, every part kept.

use super::{corrupt, part_crc, Header, HeaderV3, PartHeader, Scope, Snapshot};
use super::{END, FORMAT_VERSION, MAGIC, PART_FOLLOWS, V3};
use serde::de::DeserializeOwned;
use std::io::Read;
use tidewater::Result;

/// The most a snapshot's header or a part's header may take (a delta's header names
/// the files it builds on: some 60 bytes each).
const MAX_HEADER: usize = 1 << 20;

/// What a reader reads at a time.
const READ_AHEAD: usize = 64 << 10;

/// A part as read: its header and where its bytes are in the snapshot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartInfo {
    /// The transform's name.
    pub transform: String,
    /// Its scope.
    pub scope: Scope,
    /// Where its bytes begin, from the snapshot's first byte.
    pub offset: u64,
    /// How many bytes it has.
    pub len: u64,
    /// The CRC-32 of its transform, scope and bytes (see [`check_part`]).
    pub crc: u32,
}

/// Whether `bytes` are the bytes of part `info` (read again from where it said).
pub fn check_part(info: &PartInfo, bytes: &[u8]) -> Result<()> {
    if bytes.len() as u64 != info.len || part_crc(&info.transform, info.scope, bytes) != info.crc {
        return Err(corrupt(format!(
            "part {:?} of '{}' is corrupt: its checksum does not match",
            info.scope, info.transform
        )));
    }
    Ok(())
}

/// A reader with the bytes read ahead of where the snapshot has been read to.
struct Buffered<R> {
    r: R,
    buf: Vec<u8>,
    /// Where the unread bytes begin in `buf`.
    at: usize,
    /// The offset of `buf[at]` from the snapshot's first byte.
    offset: u64,
    eof: bool,
}

impl<R: Read> Buffered<R> {
    fn available(&self) -> &[u8] {
        &self.buf[self.at..]
    }

    /// Reads until `want` bytes are available or the input ends.
    fn fill(&mut self, want: usize) -> Result<()> {
        if self.at > 0 {
            self.buf.drain(..self.at);
            self.at = 0;
        }
        while self.buf.len() < want && !self.eof {
            let have = self.buf.len();
            self.buf.resize(have + (want - have).max(READ_AHEAD), 0);
            match self.r.read(&mut self.buf[have..]) {
                Ok(0) => {
                    self.buf.truncate(have);
                    self.eof = true;
                }
                Ok(n) => self.buf.truncate(have + n),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => self.buf.truncate(have),
                Err(e) => {
                    self.buf.truncate(have);
                    return Err(corrupt(format!("the snapshot cannot be read: {e}")));
                }
            }
        }
        Ok(())
    }

    fn consume(&mut self, n: usize) {
        self.at += n;
        self.offset += n as u64;
    }

    /// The next postcard value and the bytes it took (read on as needed, up to
    /// [`MAX_HEADER`] bytes).
    fn take<T: DeserializeOwned>(&mut self, what: &str) -> Result<(T, Vec<u8>)> {
        let mut want = 256;
        loop {
            if self.available().len() < want {
                self.fill(want)?;
            }
            let avail = self.available();
            match postcard::take_from_bytes::<T>(avail) {
                Ok((v, rest)) => {
                    let n = avail.len() - rest.len();
                    let taken = avail[..n].to_vec();
                    self.consume(n);
                    return Ok((v, taken));
                }
                Err(postcard::Error::DeserializeUnexpectedEnd)
                    if !self.eof && avail.len() >= want && want < MAX_HEADER =>
                {
                    want = (want * 4).min(MAX_HEADER);
                }
                Err(e) => return Err(corrupt(format!("{what} is truncated or corrupt: {e}"))),
            }
        }
    }

    /// The next `n` bytes, if the input has them.
    fn exact(&mut self, n: usize) -> Result<Option<&[u8]>> {
        if self.available().len() < n {
            self.fill(n)?;
        }
        if self.available().len() < n {
            return Ok(None);
        }
        let at = self.at;
        self.consume(n);
        Ok(Some(&self.buf[at..at + n]))
    }

    /// Passes the next `len` bytes to `f` a piece at a time; how many there were.
    fn pass(&mut self, len: u64, f: &mut dyn FnMut(&[u8])) -> Result<u64> {
        let mut left = len;
        while left > 0 {
            if self.available().is_empty() {
                self.fill(READ_AHEAD)?;
                if self.available().is_empty() {
                    break;
                }
            }
            let n = self
                .available()
                .len()
                .min(usize::try_from(left).unwrap_or(usize::MAX));
            f(&self.buf[self.at..self.at + n]);
            self.consume(n);
            left -= n as u64;
        }
        Ok(len - left)
    }
}

/// Reads a snapshot from a reader, part by part.
pub struct SnapshotReader<R> {
    input: Buffered<R>,
    header: Snapshot,
    /// Version 3: the parts still to read (the count is in its header).
    left: Option<u64>,
    read: u64,
    done: bool,
}

impl<R: Read> SnapshotReader<R> {
    /// Reads the snapshot's header from `r`, refusing one of another plan than
    /// `plan_hash` or another version.
    pub fn new(r: R, plan_hash: u64) -> Result<Self> {
        let mut input = Buffered {
            r,
            buf: Vec::new(),
            at: 0,
            offset: 0,
            eof: false,
        };
        let start = input.exact(MAGIC.len() + 2)?;
        let Some(start) = start.filter(|s| &s[..MAGIC.len()] == MAGIC) else {
            return Err(corrupt("not a Tidewater snapshot (bad magic)".into()));
        };
        let version = u16::from_be_bytes([start[MAGIC.len()], start[MAGIC.len() + 1]]);
        if version != FORMAT_VERSION && version != V3 {
            return Err(corrupt(format!(
                "snapshot format version {version}; this build reads versions {V3} and {FORMAT_VERSION}"
            )));
        }
        let crc = input
            .exact(4)?
            .map(|b| u32::from_be_bytes(b.try_into().expect("4 bytes")))
            .ok_or_else(|| corrupt("the snapshot header is truncated".into()))?;
        let (header, left, taken) = if version == V3 {
            let (h, taken) = input.take::<HeaderV3>("the snapshot header")?;
            let header = Header {
                plan_hash: h.plan_hash,
                max_key_groups: h.max_key_groups,
                epoch: h.epoch,
                base: h.base,
            };
            (header, Some(h.parts), taken)
        } else {
            let (h, taken) = input.take::<Header>("the snapshot header")?;
            (h, None, taken)
        };
        if crc32fast::hash(&taken) != crc {
            return Err(corrupt(
                "the snapshot header is corrupt: its checksum does not match".into(),
            ));
        }
        if header.plan_hash != plan_hash {
            return Err(corrupt(format!(
                "the snapshot was taken from another plan (plan hash {:016x}, this plan {plan_hash:016x}); \
                 a pipeline resumes only from its own snapshots",
                header.plan_hash
            )));
        }
        if header.max_key_groups == 0 {
            return Err(corrupt("the snapshot has 0 key groups".into()));
        }
        let header = Snapshot {
            plan_hash: header.plan_hash,
            max_key_groups: header.max_key_groups,
            epoch: header.epoch,
            base: header.base,
            ..Snapshot::default()
        };
        Ok(SnapshotReader {
            input,
            header,
            left,
            read: 0,
            done: false,
        })
    }

    /// The snapshot's header: a snapshot with no parts.
    pub fn header(&self) -> &Snapshot {
        &self.header
    }

    /// The next part, with its bytes if `keep` takes it; `None` after the last one,
    /// once the snapshot's end is checked and nothing follows it.
    pub fn next_part(
        &mut self,
        keep: &dyn Fn(&str, Scope) -> bool,
    ) -> Result<Option<(PartInfo, Option<Vec<u8>>)>> {
        if self.done || !self.part_follows()? {
            self.done = true;
            return Ok(None);
        }
        let (header, _) = self.input.take::<PartHeader>("a part header")?;
        let mut crc = crc32fast::Hasher::new();
        crc.update(
            &postcard::to_allocvec(&(&header.transform, header.scope)).expect("part ids encode"),
        );
        let keep = keep(&header.transform, header.scope);
        let mut bytes = Vec::new();
        let offset = self.input.offset;
        let got = self.input.pass(header.len, &mut |piece| {
            crc.update(piece);
            if keep {
                bytes.extend_from_slice(piece);
            }
        })?;
        if got < header.len {
            return Err(corrupt(format!(
                "part {:?} of '{}' is truncated: {got} of {} bytes",
                header.scope, header.transform, header.len
            )));
        }
        if crc.finalize() != header.crc {
            return Err(corrupt(format!(
                "part {:?} of '{}' is corrupt: its checksum does not match",
                header.scope, header.transform
            )));
        }
        self.read += 1;
        let info = PartInfo {
            transform: header.transform,
            scope: header.scope,
            offset,
            len: header.len,
            crc: header.crc,
        };
        Ok(Some((info, keep.then_some(bytes))))
    }

    /// Whether another part follows; at the end, checks the part count and that
    /// nothing follows.
    fn part_follows(&mut self) -> Result<bool> {
        if let Some(left) = &mut self.left {
            if *left > 0 {
                *left -= 1;
                return Ok(true);
            }
        } else {
            match self.input.exact(1)?.map(|b| b[0]) {
                Some(PART_FOLLOWS) => return Ok(true),
                Some(END) => {
                    let count = self
                        .input
                        .exact(8)?
                        .ok_or_else(|| corrupt("the snapshot's end is truncated".into()))?;
                    let count = u64::from_be_bytes(count.try_into().expect("8 bytes"));
                    if count != self.read {
                        return Err(corrupt(format!(
                            "the snapshot's end counts {count} parts, {} were read",
                            self.read
                        )));
                    }
                }
                Some(b) => {
                    return Err(corrupt(format!(
                        "the snapshot is corrupt: byte {b} where a part or its end begins"
                    )))
                }
                None => {
                    let n = self.read;
                    return Err(corrupt(format!(
                        "the snapshot is truncated after {n} part{}: its end is missing",
                        if n == 1 { "" } else { "s" }
                    )));
                }
            }
        }
        self.input.fill(1)?;
        let after = self.input.available().len();
        if after > 0 {
            let mut more = after as u64;
            // How many: the rest is read through, not held.
            self.input.consume(after);
            more += self.input.pass(u64::MAX, &mut |_| {})?;
            return Err(corrupt(format!(
                "{more} unexpected bytes after the last part"
            )));
        }
        Ok(false)
    }
}
