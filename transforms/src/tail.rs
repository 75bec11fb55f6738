//! A text source that tails a file: lines appended while the pipeline runs are read.

use serde::{Deserialize, Serialize};
use std::io::{Read, Seek, SeekFrom};
use tidewater::{ReadStatus, Source, Timestamp, UserError};

/// Reads the lines of a file as they are appended (an unbounded source; stop it with
/// `--max-duration`). Each line's timestamp is the processing time it was read at, and
/// the watermark follows processing time. The position is the byte offset after the
/// last complete line read, so a reader resumes exactly there; a partial last line is
/// left for the next read.
///
/// ```
/// use tidewater_transforms::TailFile;
/// let source = TailFile::new("/var/log/app.log");
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TailFile {
    /// The file.
    pub path: String,
    /// Start at the end of the file as it is when reading begins, instead of its start.
    pub from_end: bool,
}

/// Where the tail reader stands.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TailPosition {
    /// Byte offset after the last complete line read; `None` before the first read.
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

    /// Tails `path` from its end at the first read.
    pub fn from_end(mut self) -> Self {
        self.from_end = true;
        self
    }
}

impl Source for TailFile {
    type Output = String;
    type Position = TailPosition;

    fn is_bounded(&self) -> bool {
        false
    }

    fn partitions(&self, _desired: usize) -> usize {
        1
    }

    fn initial_position(&self, _partition: usize, _partitions: usize) -> TailPosition {
        TailPosition { offset: None }
    }

    fn read(
        &mut self,
        _p: usize,
        _n: usize,
        pos: &mut TailPosition,
        max: usize,
        now: Timestamp,
        out: &mut Vec<(String, Timestamp)>,
    ) -> Result<ReadStatus, UserError> {
        let mut file = match std::fs::File::open(&self.path) {
            Ok(f) => f,
            // The file may not exist yet: nothing to read now.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(ReadStatus::Idle),
            Err(e) => return Err(format!("cannot read tailed file '{}': {e}", self.path).into()),
        };
        let len = file
            .metadata()
            .map_err(|e| format!("cannot read tailed file '{}': {e}", self.path))?
            .len();
        let offset = *pos
            .offset
            .get_or_insert(if self.from_end { len } else { 0 });
        if len < offset {
            return Err(format!(
                "tailed file '{}' shrank from {offset} to {len} bytes (truncated or replaced)",
                self.path
            )
            .into());
        }
        if len == offset {
            return Ok(ReadStatus::Idle);
        }
        file.seek(SeekFrom::Start(offset))
            .map_err(|e| format!("cannot seek in '{}': {e}", self.path))?;
        let mut buf = Vec::new();
        // A bounded chunk: a large existing file is consumed over several reads.
        file.take((len - offset).min(1 << 20))
            .read_to_end(&mut buf)
            .map_err(|e| format!("cannot read tailed file '{}': {e}", self.path))?;
        let mut consumed = 0usize;
        for line in buf.split_inclusive(|b| *b == b'\n') {
            if out.len() >= max || !line.ends_with(b"\n") {
                break;
            }
            let text = std::str::from_utf8(&line[..line.len() - 1]).map_err(|_| {
                format!(
                    "tailed file '{}' has a line that is not UTF-8 at byte {}",
                    self.path,
                    offset + consumed as u64
                )
            })?;
            out.push((text.strip_suffix('\r').unwrap_or(text).to_string(), now));
            consumed += line.len();
        }
        pos.offset = Some(offset + consumed as u64);
        Ok(if out.len() >= max {
            ReadStatus::More
        } else {
            ReadStatus::Idle
        })
    }

    fn watermark(&self, _p: usize, _n: usize, _pos: &TailPosition) -> Timestamp {
        // Lines are stamped with the processing time they are read at; this reading is
        // never behind the time of the read that asks for it.
        Timestamp(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis() as i64)
                .unwrap_or(0)
                - 1,
        )
    }
}
