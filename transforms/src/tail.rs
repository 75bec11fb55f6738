//! A text source that tails a file: lines appended while the pipeline runs are read.
//! It is an async connector (`tidewater::io`): its reader runs on the connector
//! runtime, reading ahead of the pipeline by a bounded number of chunks.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use std::io::{Read, Seek, SeekFrom};
use tidewater::io::{AsyncSource, AsyncSourceReader};
use tidewater::{ReadStatus, Timestamp, UserError};

/// Reads the lines of a file as they are appended (an unbounded source; stop it with
/// `--max-duration`). Each line's timestamp is the wall-clock time it was read at, and
/// the watermark follows that clock. The position is the byte offset after the last
/// complete line read, so a reader resumes exactly there; a partial last line is left
/// for the next read. Read it with `Read::from_async`. A micro-batch run with
/// `--trigger available-now` or `once` reads the complete lines the file holds when
/// the run starts, and stops.
///
/// ```
/// use tidewater_transforms::TailFile;
/// let p = tidewater::Pipeline::new(Default::default());
/// let lines = p.apply("Tail", tidewater::Read::from_async(TailFile::new("/var/log/app.log")));
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TailFile {
    /// The file.
    #[serde(deserialize_with = "non_empty_path")]
    pub path: String,
    /// Start at the end of the file as it is when reading begins, instead of its start.
    pub from_end: bool,
}

fn non_empty_path<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    tidewater::plan::field::check(d, "path", "a file's path", |p: &String| !p.is_empty())
}

/// Where the tail reader stands.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TailPosition {
    /// Byte offset after the last complete line read; `None` before reading began.
    pub offset: Option<u64>,
}

impl TailFile {
    /// Tails `path` from its start.
    pub fn new(path: &str) -> Self {
        TailFile {
            path: path.to_string(),
            from_end: false,
        }
    }

    /// Tails `path` from its end when reading begins.
    pub fn from_end(mut self) -> Self {
        self.from_end = true;
        self
    }
}

/// Reads the tailed file from its offset on the connector runtime.
pub struct TailReader {
    path: String,
    offset: u64,
    watermark: Timestamp,
}

#[async_trait]
impl AsyncSource for TailFile {
    type Output = String;
    type Position = TailPosition;
    type Reader = TailReader;

    fn is_bounded(&self) -> bool {
        false
    }

    async fn partitions(&self, _desired: usize) -> Result<usize, UserError> {
        Ok(1)
    }

    fn initial_position(&self, _partition: usize, _partitions: usize) -> TailPosition {
        TailPosition { offset: None }
    }

    async fn open(
        &self,
        _partition: usize,
        _partitions: usize,
        at: TailPosition,
    ) -> Result<TailReader, UserError> {
        let offset = match at.offset {
            Some(o) => o,
            // A file that does not exist yet starts empty: its end is 0.
            None if self.from_end => match std::fs::metadata(&self.path) {
                Ok(m) => m.len(),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
                Err(e) => {
                    return Err(format!("cannot read tailed file '{}': {e}", self.path).into());
                }
            },
            None => 0,
        };
        Ok(TailReader {
            path: self.path.clone(),
            offset,
            watermark: Timestamp::MIN,
        })
    }

    /// The complete lines after the position (a micro-batch run with `--trigger once`
    /// or `available-now` reads exactly those: lines appended later wait for the next
    /// run). Before reading began, none if tailing from the end (the reader starts at
    /// the end as it is then), else the file's complete lines.
    async fn available(
        &self,
        _partition: usize,
        _partitions: usize,
        at: &TailPosition,
    ) -> Result<Option<u64>, UserError> {
        let offset = match at.offset {
            Some(o) => o,
            None if self.from_end => return Ok(Some(0)),
            None => 0,
        };
        let path = self.path.clone();
        let lines = tokio::task::spawn_blocking(move || complete_lines(&path, offset))
            .await
            .map_err(|e| {
                format!(
                    "counting the lines of tailed file '{}' stopped: {e}",
                    self.path
                )
            })??;
        Ok(Some(lines))
    }
}

#[async_trait]
impl AsyncSourceReader for TailReader {
    type Output = String;
    type Position = TailPosition;

    async fn read(
        &mut self,
        max: usize,
        out: &mut Vec<(String, Timestamp)>,
    ) -> Result<ReadStatus, UserError> {
        let (path, offset) = (self.path.clone(), self.offset);
        let now = Timestamp::wall_clock();
        let (lines, offset) = tokio::task::spawn_blocking(move || read_lines(&path, offset, max))
            .await
            .map_err(|e| format!("reading tailed file '{}' stopped: {e}", self.path))??;
        self.offset = offset;
        // Lines are stamped with the time of the read; later reads are not earlier.
        self.watermark = Timestamp(now.millis() - 1);
        let full = lines.len() >= max;
        out.extend(lines.into_iter().map(|l| (l, now)));
        Ok(if full {
            ReadStatus::More
        } else {
            ReadStatus::Idle
        })
    }

    fn position(&self) -> TailPosition {
        TailPosition {
            offset: Some(self.offset),
        }
    }

    fn watermark(&self) -> Timestamp {
        self.watermark
    }
}

/// `path` opened, with its length now (`None` if it does not exist yet); a file shorter
/// than `offset`, which a reader already passed, is an error.
fn open_at_most(path: &str, offset: u64) -> Result<Option<(std::fs::File, u64)>, UserError> {
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot read tailed file '{path}': {e}").into()),
    };
    let len = file
        .metadata()
        .map_err(|e| format!("cannot read tailed file '{path}': {e}"))?
        .len();
    if len < offset {
        return Err(format!(
            "tailed file '{path}' shrank from {offset} to {len} bytes (truncated or replaced)"
        )
        .into());
    }
    Ok(Some((file, len)))
}

/// The longest line a tailed file may have, in bytes (with its `\n`), and the most
/// one read takes in.
const MAX_LINE: u64 = 1 << 20;

/// Up to `max` complete lines of `path` from byte `offset`, and the offset after them.
fn read_lines(path: &str, offset: u64, max: usize) -> Result<(Vec<String>, u64), UserError> {
    // The file may not exist yet: nothing to read now.
    let Some((mut file, len)) = open_at_most(path, offset)? else {
        return Ok((Vec::new(), offset));
    };
    if len == offset {
        return Ok((Vec::new(), offset));
    }
    file.seek(SeekFrom::Start(offset))
        .map_err(|e| format!("cannot seek in '{path}': {e}"))?;
    let mut buf = Vec::new();
    // A bounded chunk: a large existing file is consumed over several reads.
    file.take((len - offset).min(MAX_LINE))
        .read_to_end(&mut buf)
        .map_err(|e| format!("cannot read tailed file '{path}': {e}"))?;
    let mut consumed = 0usize;
    let mut lines = Vec::new();
    for line in buf.split_inclusive(|b| *b == b'\n') {
        if lines.len() >= max || !line.ends_with(b"\n") {
            break;
        }
        let text = std::str::from_utf8(&line[..line.len() - 1]).map_err(|_| {
            format!(
                "tailed file '{path}' has a line that is not UTF-8 at byte {}",
                offset + consumed as u64
            )
        })?;
        lines.push(text.strip_suffix('\r').unwrap_or(text).to_string());
        consumed += line.len();
    }
    // A whole chunk without a line's end would be read again and again, the reader
    // never moving on.
    if lines.is_empty() && max > 0 && buf.len() as u64 == MAX_LINE {
        return Err(format!(
            "tailed file '{path}' has a line longer than {MAX_LINE} bytes at byte {offset}"
        )
        .into());
    }
    Ok((lines, offset + consumed as u64))
}

/// How many complete lines `path` holds after byte `offset`.
fn complete_lines(path: &str, offset: u64) -> Result<u64, UserError> {
    let Some((mut file, len)) = open_at_most(path, offset)? else {
        return Ok(0);
    };
    file.seek(SeekFrom::Start(offset))
        .map_err(|e| format!("cannot seek in '{path}': {e}"))?;
    // Up to the length seen now: lines appended while counting are the next run's.
    let mut rest = file.take(len - offset);
    let mut buf = vec![0u8; 1 << 16];
    let mut lines = 0u64;
    loop {
        let n = rest
            .read(&mut buf)
            .map_err(|e| format!("cannot read tailed file '{path}': {e}"))?;
        if n == 0 {
            return Ok(lines);
        }
        lines += buf[..n].iter().filter(|b| **b == b'\n').count() as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A line longer than a read's chunk was read again at every poll, the reader
    /// never moving on; it is now an error naming the file and the byte.
    #[test]
    fn a_line_longer_than_the_limit_is_an_error_naming_where() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let mut text = b"first\n".to_vec();
        text.extend(std::iter::repeat_n(b'x', MAX_LINE as usize + 10));
        text.extend(b"\nlast\n");
        std::fs::write(&path, &text).unwrap();
        let path = path.to_str().unwrap();
        let (lines, offset) = read_lines(path, 0, 100).unwrap();
        assert_eq!((lines, offset), (vec!["first".to_string()], 6));
        let err = read_lines(path, 6, 100).unwrap_err().to_string();
        assert_eq!(
            err,
            format!("tailed file '{path}' has a line longer than 1048576 bytes at byte 6")
        );
        // A line just under the limit is read.
        let short = [vec![b'y'; MAX_LINE as usize - 1], b"\n".to_vec()].concat();
        std::fs::write(dir.path().join("ok"), &short).unwrap();
        let ok = dir.path().join("ok");
        let (lines, _) = read_lines(ok.to_str().unwrap(), 0, 100).unwrap();
        assert_eq!(lines[0].len(), MAX_LINE as usize - 1);
    }

    #[test]
    fn a_plans_empty_path_is_refused_naming_the_field() {
        let err = serde_json::from_str::<TailFile>(r#"{"path": "", "from_end": false}"#)
            .err()
            .unwrap()
            .to_string();
        assert!(
            err.starts_with("field `path` must be a file's path, found \"\""),
            "{err}"
        );
    }
}
