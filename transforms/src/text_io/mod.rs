//! Reading and writing text files, a line per element.

use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Write as _};
use std::path::{Path, PathBuf};
mod files;

pub use files::shard_name;
use files::{matches, not_regular, parent_dir};
use tidewater::{
    Combine, CombineFn, DoFn, FlattenExt, PBegin, PCollection, PInput, PTransform, ParDo, Pipeline,
    ProcessContext, Sink, Timestamp, Trigger, Txn, UserError, WatermarkEstimator, Window, WindowFn,
    WindowedValue,
};

/// Entry points: `TextIO::read().from(pattern)` and `TextIO::write().to(prefix)`.
///
/// ```
/// use tidewater_transforms::TextIO;
/// tidewater_runner_direct::register();
/// let dir = tempfile::tempdir().unwrap();
/// std::fs::write(dir.path().join("in.txt"), "a\nb\n").unwrap();
/// let p = tidewater::Pipeline::new(Default::default());
/// let lines = p.apply("Read", TextIO::read().from(dir.path().join("*.txt").to_str().unwrap()));
/// lines.apply("Write", TextIO::write().to(dir.path().join("out").to_str().unwrap()).with_num_shards(2));
/// p.run().unwrap();
/// assert!(dir.path().join("out-00000-of-00002").exists());
/// assert!(dir.path().join("out-00001-of-00002").exists());
/// ```
pub struct TextIO;

impl TextIO {
    /// A read of every line of every file matching a pattern.
    pub fn read() -> Read {
        Read {
            pattern: None,
            read: Box::new(|p, source| p.apply("ReadLines", tidewater::Read::from(source))),
        }
    }

    /// A write of every element as a line into sharded files.
    pub fn write() -> Write {
        Write {
            prefix: None,
            suffix: String::new(),
            shards: 1,
        }
    }
}

/// Applies the read of a [`TextSource`] (with or without event times).
type ApplyRead = Box<dyn FnOnce(&Pipeline, TextSource) -> PCollection<String>>;

/// See [`TextIO::read`].
pub struct Read {
    pattern: Option<String>,
    read: ApplyRead,
}

impl Read {
    /// Reads the files matching `pattern`: a path, or a glob such as `logs/*.txt`.
    pub fn from(mut self, pattern: &str) -> Self {
        self.pattern = Some(pattern.to_string());
        self
    }

    /// Gives every line the event time `f(&line)` as it is read, with watermarks
    /// estimated from those times (see [`tidewater::Read::with_timestamps`]); without
    /// it, lines have no event time and the watermark stays at its minimum until the
    /// files are read.
    ///
    /// ```
    /// use tidewater::{Timestamp, WatermarkEstimator};
    /// use tidewater_transforms::TextIO;
    /// /// `<milliseconds>,<text>`
    /// fn line_time(line: &String) -> Timestamp {
    ///     let ms = line.split(',').next().and_then(|t| t.parse().ok());
    ///     Timestamp::from_millis(ms.unwrap_or(i64::MIN / 1000))
    /// }
    /// tidewater_runner_direct::register();
    /// let dir = tempfile::tempdir().unwrap();
    /// std::fs::write(dir.path().join("in.txt"), "1000,a\n2000,b\n").unwrap();
    /// let p = tidewater::Pipeline::new(Default::default());
    /// p.apply(
    ///     "Read",
    ///     TextIO::read()
    ///         .from(dir.path().join("in.txt").to_str().unwrap())
    ///         .with_timestamps(line_time, WatermarkEstimator::MonotonicallyIncreasing),
    /// );
    /// p.run().unwrap();
    /// ```
    pub fn with_timestamps<F>(mut self, f: F, watermarks: WatermarkEstimator) -> Self
    where
        F: Fn(&String) -> Timestamp + Send + Sync + 'static,
    {
        self.read = Box::new(move |p, source| {
            p.apply(
                "ReadLines",
                tidewater::Read::from(source).with_timestamps(f, watermarks),
            )
        });
        self
    }
}

impl PTransform<PBegin> for Read {
    type Output = PCollection<String>;
    fn expand(self, input: PBegin) -> PCollection<String> {
        let p = input.pipeline().clone();
        let files = match &self.pattern {
            Some(pattern) => match matches(pattern) {
                Ok(files) => files,
                Err(message) => {
                    p.record_error(message);
                    Vec::new()
                }
            },
            None => {
                p.record_error("TextIO::read() needs a file pattern: call .from(pattern)".into());
                Vec::new()
            }
        };
        (self.read)(&p, TextSource::new(&files))
    }
}

// Linked, so that a binary that did not construct the pipeline still reads text files
// from a saved plan.
tidewater::register!(Source TextSource);

/// The lines of a list of files, taken end to end and cut into blocks of
/// [`TextSource::BLOCK`] bytes, dealt to the partitions in turn: partition `p` of `n`
/// reads blocks `p`, `p + n`, `p + 2n`, ... The partitions so move through the files
/// together: in a file written in event-time order (a log), their event times stay
/// close, and windows fire as the file is read instead of waiting on the partition
/// that holds the earliest range, with all the later ones' state held meanwhile.
///
/// A block's lines are those that start in it, as Hadoop splits text: a line across a
/// block's end belongs to the block it starts in, and a line that starts exactly at a
/// block's end to that block too, unless that is a file's first byte. The files and
/// their lengths are fixed when the pipeline is built.
#[derive(Serialize, Deserialize)]
pub struct TextSource {
    files: Vec<(String, u64)>,
    /// Bytes per block (a plan saved before blocks were dealt has none: the default);
    /// at least 1.
    #[serde(
        default = "TextSource::default_block",
        deserialize_with = "TextSource::positive_block"
    )]
    block: u64,
    /// Per partition: the open file it reads, by file index, and the byte (counted
    /// over the files end to end) the reader stands at.
    #[serde(skip)]
    readers: Vec<Option<OpenFile>>,
    /// Where each file starts, counted over the files end to end, then where the last
    /// ends: found once, so that placing a byte is a binary search, not a pass over
    /// the files for every line.
    #[serde(skip)]
    starts: std::sync::OnceLock<Vec<u64>>,
}

/// A file a partition has open: its index, the byte the reader stands at (counted over
/// the files end to end), and the reader.
type OpenFile = (usize, u64, BufReader<std::fs::File>);

/// Where a partition of a [`TextSource`] stands: the byte it reads next, counted over
/// the files end to end.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TextPosition {
    /// The next byte.
    pub offset: u64,
    /// Whether the partition still has to skip the rest of a line that started before
    /// its block.
    pub skip_partial: bool,
}

impl TextSource {
    /// Bytes per block by default: small enough that the partitions of a file keep
    /// close in it, large enough that a jump to the next block costs nothing next to
    /// reading one.
    pub const BLOCK: u64 = 1 << 20;

    fn default_block() -> u64 {
        Self::BLOCK
    }

    /// A plan's `block`, refused if 0 (every partition would divide by it).
    fn positive_block<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        let block = u64::deserialize(d)?;
        if block == 0 {
            return Err(serde::de::Error::custom(
                "field `block` (bytes per block) must be at least 1, found 0",
            ));
        }
        Ok(block)
    }

    /// The lines of `paths`, in this order, with their lengths now.
    pub fn new(paths: &[PathBuf]) -> Self {
        TextSource {
            files: paths
                .iter()
                .map(|f| {
                    let len = std::fs::metadata(f).map(|m| m.len()).unwrap_or(0);
                    (f.to_string_lossy().into_owned(), len)
                })
                .collect(),
            block: Self::BLOCK,
            readers: Vec::new(),
            starts: std::sync::OnceLock::new(),
        }
    }

    /// The same lines, in blocks of `bytes` (at least 1) dealt to the partitions.
    pub fn with_block_size(mut self, bytes: u64) -> Self {
        self.block = bytes.max(1);
        self
    }

    /// Each file's first byte, counted over the files end to end, then the total.
    fn starts(&self) -> &[u64] {
        self.starts.get_or_init(|| {
            let mut starts = Vec::with_capacity(self.files.len() + 1);
            let mut at = 0;
            starts.push(at);
            for (_, len) in &self.files {
                at += len;
                starts.push(at);
            }
            starts
        })
    }

    fn total(&self) -> u64 {
        *self.starts().last().expect("starts holds the end")
    }

    /// The file holding global byte `offset` and the offset in it (an empty file holds
    /// none).
    fn locate(&self, offset: u64) -> Option<(usize, u64)> {
        let starts = self.starts();
        if offset >= self.total() {
            return None;
        }
        // The last file starting at or before `offset`: past any empty ones that start
        // there too, and before the end, which lies past `offset`.
        let file = starts.partition_point(|s| *s <= offset) - 1;
        Some((file, offset - starts[file]))
    }

    fn file_start(&self, file: usize) -> u64 {
        self.starts()[file]
    }

    /// Where a partition starts reading block `block`: its first byte, past the rest
    /// of a line that started before it unless that is a file's first byte.
    fn block_start(&self, block: u64) -> TextPosition {
        let offset = block.saturating_mul(self.block);
        TextPosition {
            offset,
            skip_partial: self.locate(offset).is_some_and(|(_, o)| o > 0),
        }
    }

    /// Steps `pos` over the partition's next lines, at most `max` of them, as `read`
    /// gives them, and on to where the partition's next line starts: `take` consumes
    /// one line from the reader (`keep`: the line is the partition's, not the rest of
    /// one that started before its block, or another partition's) and says how many
    /// bytes it took (0: the file ended). `slot` holds the open file.
    fn walk(
        &self,
        partition: usize,
        partitions: usize,
        pos: &mut TextPosition,
        max: usize,
        slot: &mut Option<OpenFile>,
        mut take: impl FnMut(&mut BufReader<std::fs::File>, bool) -> std::io::Result<usize>,
    ) -> Result<tidewater::ReadStatus, UserError> {
        use std::io::{Seek, SeekFrom};
        let n = partitions.max(1) as u64;
        let mine = partition as u64 % n;
        let mut read = 0;
        loop {
            let Some((file, in_file)) = self.locate(pos.offset) else {
                return Ok(tidewater::ReadStatus::Done);
            };
            if !pos.skip_partial {
                // The block the line starting here belongs to: the one it starts in,
                // or the previous one when it starts exactly at a block's end inside
                // a file.
                let block = (pos.offset - u64::from(in_file > 0)) / self.block;
                if block % n != mine {
                    // Another partition's: on to this partition's next block.
                    let next = block + (mine + n - block % n) % n;
                    *pos = self.block_start(next);
                    continue;
                }
                if read == max {
                    // The partition's next line starts here. (A read that took its
                    // last line went on to the end above and says Done: a batch that
                    // read exactly what was available ends the partition.)
                    return Ok(tidewater::ReadStatus::More);
                }
            }
            let next_file = self.file_start(file) + self.files[file].1;
            let path = &self.files[file].0;
            // The reader stands elsewhere after a jump to the next block (once per
            // block) or in another file: open the file there.
            if slot
                .as_ref()
                .is_none_or(|(f, at, _)| (*f, *at) != (file, pos.offset))
            {
                // A file named in a plan may be anything: a device or a FIFO would
                // block or never end.
                if let Some(kind) = not_regular(Path::new(path)) {
                    return Err(format!(
                        "input file '{path}' is {kind}, not a regular file: TextIO reads regular files"
                    )
                    .into());
                }
                let f = std::fs::File::open(path)
                    .and_then(|mut f| f.seek(SeekFrom::Start(in_file)).map(|_| f))
                    .map_err(|e| format!("cannot read input file '{path}': {e}"))?;
                *slot = Some((file, pos.offset, BufReader::with_capacity(1 << 16, f)));
            }
            let (_, at, reader) = slot.as_mut().expect("opened above");
            let keep = !pos.skip_partial;
            let took = take(reader, keep)
                .map_err(|e| format!("cannot read input file '{path}' at byte {in_file}: {e}"))?
                as u64;
            if took == 0 {
                // The file ended early (it shrank since the pipeline was built): go on
                // with the next one.
                pos.offset = next_file;
                pos.skip_partial = false;
                *slot = None;
                continue;
            }
            pos.offset += took;
            *at = pos.offset;
            pos.skip_partial = false;
            read += usize::from(keep);
        }
    }
}

impl tidewater::Source for TextSource {
    type Output = String;
    type Position = TextPosition;

    fn is_bounded(&self) -> bool {
        true
    }

    fn partitions(&self, desired: usize) -> usize {
        // No partition smaller than 1 MiB.
        let most = (self.total() / (1 << 20)).max(1);
        (desired as u64).clamp(1, most) as usize
    }

    fn initial_position(&self, partition: usize, _partitions: usize) -> TextPosition {
        // Partition p's first block is block p.
        self.block_start(partition as u64)
    }

    fn read(
        &mut self,
        partition: usize,
        partitions: usize,
        pos: &mut TextPosition,
        max: usize,
        _now: Timestamp,
        out: &mut Vec<(String, tidewater::Timestamp)>,
    ) -> Result<tidewater::ReadStatus, UserError> {
        if self.readers.len() < partitions {
            self.readers.resize_with(partitions, || None);
        }
        let mut slot = self.readers[partition].take();
        let status = self.walk(
            partition,
            partitions,
            pos,
            max,
            &mut slot,
            |reader, keep| {
                let mut line = String::new();
                let n = reader.read_line(&mut line)?;
                if keep && n > 0 {
                    if line.ends_with('\n') {
                        line.pop();
                        if line.ends_with('\r') {
                            line.pop();
                        }
                    }
                    out.push((line, tidewater::Timestamp::MIN));
                }
                Ok(n)
            },
        );
        self.readers[partition] = slot;
        status
    }

    fn available(
        &self,
        partition: usize,
        partitions: usize,
        pos: &TextPosition,
        now: Timestamp,
    ) -> Option<u64> {
        self.try_available(partition, partitions, pos, now)
            .ok()
            .flatten()
    }

    /// The lines left from `pos` to the partition's end, counted by a pass over the
    /// bytes (a micro-batch fixes its ranges with it before reading them).
    fn try_available(
        &self,
        partition: usize,
        partitions: usize,
        pos: &TextPosition,
        now: Timestamp,
    ) -> Result<Option<u64>, UserError> {
        self.try_available_up_to(partition, partitions, pos, now, u64::MAX)
    }

    /// The lines left from `pos`, counted no further than `cap`: a micro-batch of a
    /// large file passes over its own lines, not the rest of the file, on every batch.
    fn try_available_up_to(
        &self,
        partition: usize,
        partitions: usize,
        pos: &TextPosition,
        _now: Timestamp,
        cap: u64,
    ) -> Result<Option<u64>, UserError> {
        let mut pos = pos.clone();
        let mut count = 0u64;
        self.walk(
            partition,
            partitions,
            &mut pos,
            usize::try_from(cap).unwrap_or(usize::MAX),
            &mut None,
            |reader, keep| {
                // Past one line, without decoding it.
                let mut n = 0;
                loop {
                    let buf = reader.fill_buf()?;
                    if buf.is_empty() {
                        break;
                    }
                    let (took, ended) = match memchr::memchr(b'\n', buf) {
                        Some(i) => (i + 1, true),
                        None => (buf.len(), false),
                    };
                    reader.consume(took);
                    n += took;
                    if ended {
                        break;
                    }
                }
                count += u64::from(keep && n > 0);
                Ok(n)
            },
        )?;
        Ok(Some(count))
    }

    fn watermark(&self, _: usize, _: usize, _: &TextPosition) -> tidewater::Timestamp {
        tidewater::Timestamp::MIN
    }
}

/// See [`TextIO::write`].
pub struct Write {
    prefix: Option<String>,
    suffix: String,
    shards: u32,
}

impl Write {
    /// Files are named `<prefix>-SSSSS-of-NNNNN<suffix>`.
    pub fn to(mut self, prefix: &str) -> Self {
        self.prefix = Some(prefix.to_string());
        self
    }

    /// Appended to every file name, e.g. `.txt`.
    pub fn with_suffix(mut self, suffix: &str) -> Self {
        self.suffix = suffix.to_string();
        self
    }

    /// Number of output files (1 by default); every shard is written, empty or not.
    pub fn with_num_shards(mut self, shards: u32) -> Self {
        self.shards = shards;
        self
    }
}

impl PTransform<PCollection<String>> for Write {
    /// The names of the files written; they are in place once the epoch that wrote
    /// them commits (for a bounded job, when it ends).
    type Output = PCollection<String>;
    fn expand(self, input: PCollection<String>) -> PCollection<String> {
        let p = input.pipeline().clone();
        let prefix = self.prefix.unwrap_or_else(|| {
            p.record_error("TextIO::write() needs an output prefix: call .to(prefix)".into());
            String::new()
        });
        if !(1..=MAX_SHARDS).contains(&self.shards) {
            p.record_error(format!(
                "TextIO::write() needs 1 to {MAX_SHARDS} shards, not {}",
                self.shards
            ));
        }
        if !input.is_bounded() {
            p.record_error(
                "TextIO::write() needs bounded input: it writes each shard once, when its input is complete, \
                 and an unbounded PCollection never is (writing per window and pane, as Beam's withWindowedWrites, \
                 is not supported yet); write unbounded output through a Sink with write_to"
                    .into(),
            );
            return p.create("NoFiles", Vec::<String>::new());
        }
        let dir = parent_dir(&prefix);
        if !dir.is_dir() {
            p.record_error(format!(
                "output directory '{}' (of prefix '{prefix}') does not exist or is not a directory",
                dir.display()
            ));
        }
        let spec = ShardSpec {
            prefix,
            suffix: self.suffix,
            shards: self.shards.max(1),
        };
        // As Beam's WriteFiles without windowed writes: every window goes into the same
        // files, so the input is first re-windowed into the global window (otherwise each
        // window would write, and overwrite, the same shard names).
        let shards = input
            .apply(
                "GlobalWindow",
                Window::into(WindowFn::Global).triggering(Trigger::Default),
            )
            .apply(
                "AssignShard",
                ParDo::of(AssignShard {
                    shards: spec.shards,
                }),
            )
            .group_by_key("GroupByShard");
        // Every shard is written, empty or not: the shards no line went to are found
        // once all are grouped.
        let written = shards
            .apply("ShardNumbers", ParDo::of(ShardNumber))
            .apply("CollectShards", Combine::globally(CollectFn));
        let empty = written.apply("EmptyShards", ParDo::of(EmptyShards { spec: spec.clone() }));
        vec![shards, empty]
            .apply_flatten("AllShards")
            .write_to("WriteShards", ShardSink { spec: spec.clone() });
        written.apply("FileNames", ParDo::of(FileNames { spec }))
    }
}

#[derive(Clone, Serialize, Deserialize)]
struct ShardSpec {
    prefix: String,
    suffix: String,
    #[serde(deserialize_with = "shard_count")]
    shards: u32,
}

/// The most shards a write may have: each is a file.
const MAX_SHARDS: u32 = 100_000;

/// A plan's shard count: 1 to [`MAX_SHARDS`] (0 divided by zero).
fn shard_count<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    tidewater::plan::field::check(d, "shards", "between 1 and 100000", |n: &u32| {
        (1..=MAX_SHARDS).contains(n)
    })
}

impl ShardSpec {
    fn name(&self, i: u32) -> String {
        shard_name(&self.prefix, i, self.shards, &self.suffix)
    }

    /// The hidden file that holds shard `i` of transaction `txn` until it commits.
    fn staged_path(&self, i: u32, txn: &Txn) -> PathBuf {
        let name = self.name(i);
        let final_path = PathBuf::from(&name);
        let file_name = final_path
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default();
        parent_dir(&name).join(format!(".{file_name}.{}.staged", txn.id()))
    }
}

/// Writes each epoch's shards to hidden staged files (synced to disk) and renames them
/// into place at commit: a reader never sees a partial shard, and a shard is in place
/// exactly once whatever crashes in between.
#[derive(Serialize, Deserialize)]
struct ShardSink {
    spec: ShardSpec,
}

impl Sink for ShardSink {
    type In = (u32, Vec<String>);

    fn write(
        &mut self,
        txn: &Txn,
        shards: Vec<WindowedValue<(u32, Vec<String>)>>,
    ) -> Result<(), UserError> {
        for wv in shards {
            let (i, lines) = wv.value;
            let path = self.spec.staged_path(i, txn);
            // A shard's lines arrive once per epoch (one pane of the global window);
            // the file is created afresh, so a replayed epoch starts over.
            let write = || -> std::io::Result<()> {
                let mut w = std::io::BufWriter::new(std::fs::File::create(&path)?);
                for l in &lines {
                    w.write_all(l.as_bytes())?;
                    w.write_all(b"\n")?;
                }
                w.into_inner().map_err(|e| e.into_error())?.sync_all()
            };
            write().map_err(|e| {
                let _ = std::fs::remove_file(&path);
                format!("cannot write output file '{}': {e}", self.spec.name(i))
            })?;
        }
        Ok(())
    }

    fn stage(&mut self, _txn: &Txn) -> Result<(), UserError> {
        // Each staged file was synced when written.
        Ok(())
    }

    fn commit(&mut self, txn: &Txn) -> Result<(), UserError> {
        for i in 0..self.spec.shards {
            let staged = self.spec.staged_path(i, txn);
            if staged.exists() {
                std::fs::rename(&staged, self.spec.name(i)).map_err(|e| {
                    format!(
                        "cannot move output file '{}' into place: {e}",
                        self.spec.name(i)
                    )
                })?;
            }
        }
        Ok(())
    }

    fn abort(&mut self, txn: &Txn) -> Result<(), UserError> {
        for i in 0..self.spec.shards {
            let _ = std::fs::remove_file(self.spec.staged_path(i, txn));
        }
        Ok(())
    }
}

/// Keys every line by its shard: a hash of its bytes, so the same input gives the same
/// files on every runner.
#[derive(Serialize, Deserialize)]
struct AssignShard {
    #[serde(deserialize_with = "shard_count")]
    shards: u32,
}

impl DoFn for AssignShard {
    type In = String;
    type Out = (u32, String);
    fn process(
        &mut self,
        line: String,
        ctx: &mut ProcessContext<'_, (u32, String)>,
    ) -> Result<(), UserError> {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in line.as_bytes() {
            h = (h ^ *b as u64).wrapping_mul(0x0100_0000_01b3);
        }
        ctx.output(((h % self.shards as u64) as u32, line));
        Ok(())
    }
}

/// The shard number of a group of lines.
#[derive(Serialize, Deserialize)]
struct ShardNumber;

impl DoFn for ShardNumber {
    type In = (u32, Vec<String>);
    type Out = u32;
    fn process(
        &mut self,
        (i, _): (u32, Vec<String>),
        ctx: &mut ProcessContext<'_, u32>,
    ) -> Result<(), UserError> {
        ctx.output(i);
        Ok(())
    }
}

/// Collects every input into one vector.
#[derive(Serialize, Deserialize)]
struct CollectFn;

impl CombineFn for CollectFn {
    type In = u32;
    type Acc = Vec<u32>;
    type Out = Vec<u32>;
    fn create_accumulator(&self) -> Vec<u32> {
        Vec::new()
    }
    fn add_input(&self, acc: &mut Vec<u32>, x: u32) {
        acc.push(x);
    }
    fn merge_accumulators(&self, acc: &mut Vec<u32>, other: Vec<u32>) {
        acc.extend(other);
    }
    fn extract_output(&self, acc: Vec<u32>) -> Vec<u32> {
        acc
    }
}

/// The shards no line went to, each with no lines.
#[derive(Serialize, Deserialize)]
struct EmptyShards {
    spec: ShardSpec,
}

impl DoFn for EmptyShards {
    type In = Vec<u32>;
    type Out = (u32, Vec<String>);
    fn process(
        &mut self,
        written: Vec<u32>,
        ctx: &mut ProcessContext<'_, (u32, Vec<String>)>,
    ) -> Result<(), UserError> {
        for i in 0..self.spec.shards {
            if !written.contains(&i) {
                ctx.output((i, Vec::new()));
            }
        }
        Ok(())
    }
}

/// The name of every shard file.
#[derive(Serialize, Deserialize)]
struct FileNames {
    spec: ShardSpec,
}

impl DoFn for FileNames {
    type In = Vec<u32>;
    type Out = String;
    fn process(
        &mut self,
        _: Vec<u32>,
        ctx: &mut ProcessContext<'_, String>,
    ) -> Result<(), UserError> {
        for i in 0..self.spec.shards {
            ctx.output(self.spec.name(i));
        }
        Ok(())
    }
}
