//! Writing text files: `TextIO::write().to(prefix)`, in shards, exactly once through
//! the sink commit protocol.

use super::*;

/// See [`TextIO::write`].
pub struct Write {
    pub(super) prefix: Option<String>,
    pub(super) suffix: String,
    pub(super) shards: u32,
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

/// The name of shard `i` of `n`.
pub fn shard_name(prefix: &str, i: u32, n: u32, suffix: &str) -> String {
    format!("{prefix}-{i:05}-of-{n:05}{suffix}")
}

fn parent_dir(prefix: &str) -> PathBuf {
    match Path::new(prefix).parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
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
        if self.shards == 0 {
            p.record_error("TextIO::write() needs at least one shard".into());
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
    shards: u32,
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
