//! An exactly-once file sink for streams: each epoch's lines of each sink instance go
//! to one file, written hidden, synced when the epoch ends and renamed into place when
//! its checkpoint is complete — Flink's FileSink with two-phase commit. Works on
//! bounded and unbounded input, on every runner.
//!
//! ```no_run
//! # use tidewater::{Pipeline, PipelineOptions};
//! # let p = Pipeline::new(PipelineOptions::default());
//! # let lines = p.create("Lines", vec!["a".to_string()]);
//! lines.write_to("Out", tidewater_transforms::EpochFiles::to("/tmp/out"));
//! // committed files: /tmp/out/part-<epoch>-<instance>-<job>.txt
//! ```

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::PathBuf;
use tidewater::{Committed, Sink, Txn, UserError, WindowedValue};

// Linked: a binary that did not construct the pipeline writes it from a saved plan.
tidewater::register!(Sink EpochFiles);

/// Lines written into `dir`, one file per committed epoch and sink instance.
#[derive(Serialize, Deserialize)]
pub struct EpochFiles {
    dir: PathBuf,
    /// Transactions this instance has (re)started writing in this process.
    #[serde(skip)]
    open: BTreeSet<Txn>,
    /// The job writing ([`Sink::begin_job`]): in every file name, so that two jobs
    /// writing into one directory neither overwrite nor discard each other's files.
    #[serde(skip)]
    job: Option<String>,
}

impl EpochFiles {
    /// A sink writing into the existing directory `dir`.
    pub fn to(dir: impl Into<PathBuf>) -> Self {
        EpochFiles {
            dir: dir.into(),
            open: BTreeSet::new(),
            job: None,
        }
    }

    /// The name of transaction `txn`'s file once committed:
    /// `part-<epoch>-<instance>-<job>.txt`.
    pub fn file_name(&self, txn: &Txn) -> String {
        match &self.job {
            Some(job) => format!("part-{:020}-{:05}-{job}.txt", txn.epoch, txn.instance),
            None => Self::file_name_without_job(txn),
        }
    }

    /// The name files had before they named their job (still committed on restore).
    fn file_name_without_job(txn: &Txn) -> String {
        format!("part-{:020}-{:05}.txt", txn.epoch, txn.instance)
    }

    fn staged(&self, txn: &Txn) -> PathBuf {
        self.dir.join(format!(".{}.staged", self.file_name(txn)))
    }

    fn committed_path(&self, txn: &Txn) -> PathBuf {
        self.dir.join(self.file_name(txn))
    }
}

/// The epoch and job of a committed file's name, `part-<epoch>-<instance>-<job>.txt`.
fn parse_name(name: &str) -> Option<(u64, &str)> {
    let rest = name.strip_prefix("part-")?.strip_suffix(".txt")?;
    let (epoch, rest) = rest.split_once('-')?;
    let (instance, job) = rest.split_once('-')?;
    (epoch.len() == 20
        && instance.len() == 5
        && instance.parse::<u32>().is_ok()
        && !job.is_empty())
    .then_some(())?;
    Some((epoch.parse().ok()?, job))
}

/// Makes the entries of directory `dir` (a file created or renamed in it) durable.
fn sync_dir(dir: &std::path::Path) -> Result<(), UserError> {
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io("cannot sync output directory", dir, e))
}

fn io(what: &str, path: &std::path::Path, e: std::io::Error) -> UserError {
    format!("{what} '{}': {e}", path.display()).into()
}

impl Sink for EpochFiles {
    type In = String;

    fn begin_job(&mut self, job: &str) -> Result<(), UserError> {
        self.job = Some(job.to_string());
        Ok(())
    }

    fn write(&mut self, txn: &Txn, lines: Vec<WindowedValue<String>>) -> Result<(), UserError> {
        let path = self.staged(txn);
        // The first write of a transaction in this process starts its file afresh: a
        // transaction replayed after a failure starts over.
        let fresh = self.open.insert(*txn);
        let file = std::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .append(!fresh)
            .truncate(fresh)
            .open(&path)
            .map_err(|e| io("cannot open output file", &path, e))?;
        let mut w = std::io::BufWriter::new(file);
        for l in &lines {
            w.write_all(l.value.as_bytes())
                .and_then(|()| w.write_all(b"\n"))
                .map_err(|e| io("cannot write output file", &path, e))?;
        }
        w.flush()
            .map_err(|e| io("cannot write output file", &path, e))
    }

    fn stage(&mut self, txn: &Txn) -> Result<(), UserError> {
        let path = self.staged(txn);
        if let Ok(f) = std::fs::File::open(&path) {
            f.sync_all()
                .map_err(|e| io("cannot sync output file", &path, e))?;
            // The file's name too: a staged file must survive a crash of the machine.
            sync_dir(&self.dir)?;
        }
        self.open.remove(txn);
        Ok(())
    }

    fn commit(&mut self, txn: &Txn) -> Result<(), UserError> {
        let (mut staged, mut to) = (self.staged(txn), self.committed_path(txn));
        if !staged.exists() {
            // Staged before files named their job (a checkpoint of an earlier version).
            let old = Self::file_name_without_job(txn);
            (staged, to) = (self.dir.join(format!(".{old}.staged")), self.dir.join(old));
        }
        if !staged.exists() {
            // Committed before (a restored checkpoint commits its staged transactions
            // again): its file is in place, nothing left to do. Its committed file is
            // the record of the commit (the ledger); without either, the lines are gone.
            if to.exists() || self.committed_path(txn).exists() {
                return Ok(());
            }
            return Err(format!(
                "epoch {} of instance {} was staged in '{}' but its file is gone, and it was never committed ('{}' does not exist): its lines are lost (was the file deleted, or the output directory replaced?)",
                txn.epoch,
                txn.instance,
                self.staged(txn).display(),
                self.committed_path(txn).display()
            )
            .into());
        }
        std::fs::rename(&staged, &to).map_err(|e| io("cannot move into place", &to, e))?;
        // Committed means durable: the rename is in the directory only once it is synced.
        sync_dir(&self.dir)
    }

    /// The jobs among the committed files' names (the names are the ledger), each with
    /// its newest epoch.
    fn committed(&mut self, _restoring: bool) -> Result<Vec<Committed>, UserError> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io("cannot list output directory", &self.dir, e)),
        };
        let mut last: BTreeMap<String, u64> = BTreeMap::new();
        for entry in entries {
            let entry = entry.map_err(|e| io("cannot list output directory", &self.dir, e))?;
            if let Some((epoch, job)) = entry.file_name().to_str().and_then(parse_name) {
                let e = last.entry(job.to_string()).or_insert(epoch);
                *e = (*e).max(epoch);
            }
        }
        Ok(last
            .into_iter()
            .map(|(job, last_epoch)| Committed { job, last_epoch })
            .collect())
    }

    fn abort(&mut self, txn: &Txn) -> Result<(), UserError> {
        self.open.remove(txn);
        let _ = std::fs::remove_file(self.staged(txn));
        Ok(())
    }
}
