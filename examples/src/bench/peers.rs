//! The peers side by side (`bench --compare-peers`): the peer kit's `run.sh` (in
//! `../shared/peers/`, not part of this repository) runs Flink, Spark, timely, ... on
//! the same generated input as our runners, in the same run; its raw TSV becomes
//! [`BenchRecord`]s (with [`BenchRecord::peer`] set) next to ours, and [`ratios`] pairs
//! each of our settings with the peers measured at the same parallelism.
//!
//! A peer's figure is the job time it reports in its process (as the kit's
//! `summarize.py` "job words/s"): Flink's net job runtime once its MiniCluster is up,
//! Spark's query time once its SparkSession is up, timely's and the plain loops' whole
//! run; ours is `run` called to `run` returned. Both exclude process start-up.

use super::group::{group, human};
use super::input::{generate, GenOptions, Input, InputMeta};
use super::record::{BenchRecord, RunStart};
use anyhow::{bail, Context};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The peers `run.sh` knows (its `PEERS`).
pub const KNOWN: [&str; 8] = [
    "rust-plain",
    "timely",
    "java-plain",
    "flink",
    "spark",
    "bytewax",
    "beam",
    "pyflink-table",
];

/// The columns of `run.sh`'s raw TSV, in order.
const COLUMNS: [&str; 12] = [
    "rep",
    "peer",
    "workload",
    "variant",
    "par",
    "input",
    "wall_s",
    "maxrss_kb",
    "user_s",
    "sys_s",
    "rc",
    "result",
];

/// One row of `run.sh`'s raw TSV: one run of one peer configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct PeerRun {
    /// Repetition, from 1.
    pub rep: u32,
    /// `flink`, `spark`, `timely`, ...
    pub peer: String,
    /// The peer's workload: `empty`, `stateless`, `stateful`, `windowed`, `rolling`,
    /// `ss-stateful`.
    pub workload: String,
    /// The peer's variant: `-`, `streaming`, `batch`, `streaming+ckpt1s`, `ds`, `sql`.
    pub variant: String,
    /// Parallelism.
    pub par: u32,
    /// The input file's name (in the kit's data directory).
    pub input: String,
    /// Process wall time (start-up included), if the run ended.
    pub wall_s: Option<f64>,
    /// Peak RSS of the process in KiB (`/usr/bin/time`'s `%M`).
    pub maxrss_kb: Option<u64>,
    /// Exit code (124: timed out).
    pub rc: i32,
    /// The `RESULT key=value ...` line the peer printed, as a map.
    pub result: BTreeMap<String, String>,
}

/// Parses `run.sh`'s raw TSV (`$PEERS_ROOT/results/raw-<stamp>.tsv`).
pub fn parse_raw(text: &str) -> anyhow::Result<Vec<PeerRun>> {
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap_or("").split('\t').collect();
    if header != COLUMNS {
        bail!(
            "not run.sh's raw TSV: the header is {header:?}, expected {:?}",
            COLUMNS
        );
    }
    let mut runs = Vec::new();
    for (i, line) in lines.enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let f: Vec<&str> = line.split('\t').collect();
        if f.len() != COLUMNS.len() {
            bail!(
                "line {}: {} fields, expected {}",
                i + 2,
                f.len(),
                COLUMNS.len()
            );
        }
        let number = |s: &str| s.parse::<f64>().ok();
        runs.push(PeerRun {
            rep: f[0]
                .parse()
                .with_context(|| format!("line {}: rep", i + 2))?,
            peer: f[1].to_string(),
            workload: f[2].to_string(),
            variant: f[3].to_string(),
            par: f[4]
                .parse()
                .with_context(|| format!("line {}: par", i + 2))?,
            input: f[5].to_string(),
            wall_s: number(f[6]),
            maxrss_kb: f[7].parse().ok(),
            rc: f[10].parse().unwrap_or(-1),
            result: f[11]
                .split_whitespace()
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        });
    }
    Ok(runs)
}

impl PeerRun {
    /// Our workload this run computes the same output as: `stateless`; the peers'
    /// `stateful` (and Spark's `ss-stateful`), one total per word, is our `count`;
    /// Flink's `rolling`, one update per word in, is our `stateful`; `windowed`. The
    /// start-up-only `empty` has none.
    pub fn our_workload(&self) -> Option<&'static str> {
        match self.workload.as_str() {
            "stateless" => Some("stateless"),
            "stateful" | "ss-stateful" => Some("count"),
            "rolling" => Some("stateful"),
            "windowed" => Some("windowed"),
            _ => None,
        }
    }

    /// The runner name its records carry: the peer, with its variant unless it is the
    /// peer's main one (`flink` is streaming, `spark` the Dataset API):
    /// `flink-batch`, `spark-sql`, `spark-ss` (Structured Streaming).
    pub fn runner(&self) -> String {
        if self.workload == "ss-stateful" {
            return format!("{}-ss", self.peer);
        }
        match self.variant.as_str() {
            "-" | "streaming" | "streaming+ckpt1s" | "ds" => self.peer.clone(),
            v => format!("{}-{v}", self.peer),
        }
    }

    /// Whether it checkpointed, and the interval: Flink's `streaming+ckpt1s` every
    /// second, Spark Structured Streaming into its checkpoint location (per batch).
    pub fn checkpoint(&self) -> (bool, Option<u64>) {
        if self.variant.ends_with("+ckpt1s") {
            (true, Some(1000))
        } else if self.workload == "ss-stateful" {
            (true, None)
        } else {
            (false, None)
        }
    }

    /// The job time the peer reported in its process, in seconds: Flink's net
    /// runtime (`net_ms`), else `job_ms`.
    pub fn job_seconds(&self) -> Option<f64> {
        let ms: f64 = self
            .result
            .get("net_ms")
            .or_else(|| self.result.get("job_ms"))?
            .parse()
            .ok()?;
        Some(ms / 1000.0)
    }

    /// The records it output, if it ran to the end and its output is right (records
    /// out and the sum of counts equal the generator's figures, as `summarize.py`
    /// checks); else what is wrong.
    pub fn check(&self, meta: &InputMeta) -> Result<u64, String> {
        if self.rc != 0 {
            return Err(format!(
                "exit code {}{}",
                self.rc,
                if self.rc == 124 { " (timed out)" } else { "" }
            ));
        }
        let get = |k: &str| -> Result<u64, String> {
            self.result
                .get(k)
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| format!("no {k} in its RESULT line"))
        };
        let (records, sum) = (get("records_out")?, get("sum_counts")?);
        let expected = match self.workload.as_str() {
            "stateless" | "rolling" => meta.words,
            "stateful" | "ss-stateful" => meta.distinct_words,
            "windowed" => meta.windowed_records,
            _ => 0,
        };
        if records != expected {
            return Err(format!("{records} records out, {expected} expected"));
        }
        // A rolling count's updates sum to more than the words.
        if self.workload != "rolling" && sum != meta.words {
            return Err(format!(
                "the counts sum to {sum}, {} words expected",
                meta.words
            ));
        }
        Ok(records)
    }

    /// The run as a record of our workload (`None` for `empty`), checked against
    /// `meta` (its input's figures). `peer` names the system and version.
    pub fn to_record(
        &self,
        meta: &InputMeta,
        peer: &str,
        start: RunStart,
    ) -> Option<Result<BenchRecord, String>> {
        let workload = self.our_workload()?;
        Some(self.check(meta).and_then(|outputs| {
            let seconds = self
                .job_seconds()
                .filter(|s| *s > 0.0)
                .ok_or_else(|| "no job time (net_ms or job_ms) in its RESULT line".to_string())?;
            let mut r = BenchRecord::measured(
                workload,
                &self.runner(),
                self.par,
                meta.words,
                seconds,
                outputs,
                start,
            );
            r.peak_rss_mb = self.maxrss_kb.map(|kb| kb as f64 / 1024.0);
            (r.checkpoint, r.checkpoint_interval_ms) = self.checkpoint();
            r.profile = "release".into();
            r.peer = Some(peer.to_string());
            // `start` is the kit's, before all its runs: no one run's steal.
            r.steal_pct = None;
            Ok(r)
        }))
    }
}

/// What a run of `run.sh` gave: the records of its good runs, and the runs that
/// failed or whose output is wrong, with why.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// The good runs' records.
    pub records: Vec<BenchRecord>,
    /// The others.
    pub failed: Vec<(PeerRun, String)>,
}

/// The peer kit (`run.sh`, `setup.sh`, ...) and where its peers are installed.
#[derive(Clone, Debug)]
pub struct Kit {
    /// The kit's directory.
    pub dir: PathBuf,
    /// Its `PEERS_ROOT`: installed peers, generated data, raw results.
    pub root: PathBuf,
    /// The peers to run.
    pub peers: Vec<String>,
}

/// What a peer needs under `PEERS_ROOT` once `setup.sh` installed it.
fn installed_files(peer: &str) -> &'static [&'static str] {
    match peer {
        "timely" => &["timely-wc/target/release/timely-wc"],
        "rust-plain" => &["rust-plain-wc/target/release/rust-plain-wc"],
        "java-plain" => &["classes-plain"],
        "flink" => &["venv-flink", "classes-flink"],
        "spark" => &["venv-spark", "classes-spark"],
        "bytewax" => &["venv-bytewax"],
        "beam" => &["venv-beam"],
        "pyflink-table" => &["venv-flink"],
        _ => &[],
    }
}

impl Kit {
    /// The kit's default place: `../shared/peers` next to this repository.
    pub fn default_dir() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/peers")
    }

    /// The kit in `dir` (`--peers-dir`, else [`Kit::default_dir`]) with its peers
    /// installed under `root` (`--peers-root`, else `$PEERS_ROOT`, else
    /// `$TMPDIR/peers-bench`, as `run.sh` has it), every one of `peers` known to
    /// `run.sh` and installed.
    pub fn locate(
        dir: Option<&Path>,
        root: Option<&Path>,
        peers: &[String],
    ) -> anyhow::Result<Kit> {
        let dir = match dir {
            Some(d) => d.to_path_buf(),
            None => {
                let d = Kit::default_dir();
                if !d.join("run.sh").exists() {
                    bail!(
                        "--compare-peers needs the peer kit, which is not part of this repository: \
                         there is none at {} (the default, ../shared/peers next to the repository); \
                         give its directory with --peers-dir DIR",
                        d.display()
                    );
                }
                d
            }
        };
        if !dir.join("run.sh").exists() {
            bail!(
                "--peers-dir {}: no run.sh there (the peer kit's directory holds run.sh and setup.sh)",
                dir.display()
            );
        }
        let dir = std::fs::canonicalize(&dir).unwrap_or(dir);
        let root = match root {
            Some(r) => r.to_path_buf(),
            None => match std::env::var_os("PEERS_ROOT") {
                Some(r) => PathBuf::from(r),
                None => std::env::var_os("TMPDIR")
                    .map(PathBuf::from)
                    .unwrap_or_else(|| PathBuf::from("/tmp"))
                    .join("peers-bench"),
            },
        };
        for peer in peers {
            if !KNOWN.contains(&peer.as_str()) {
                bail!("unknown peer '{peer}': --peers takes {}", KNOWN.join(", "));
            }
            if let Some(missing) = installed_files(peer)
                .iter()
                .find(|f| !root.join(f).exists())
            {
                bail!(
                    "peer {peer} is not installed under {} (no {missing}): run `bash {}/setup.sh` \
                     (about 5 minutes and 1.5 GB the first time; PEERS_ROOT={} for this place) or give --peers-root",
                    root.display(),
                    dir.display(),
                    root.display()
                );
            }
        }
        if peers.is_empty() {
            bail!("--peers names no peer");
        }
        Ok(Kit {
            dir,
            root,
            peers: peers.to_vec(),
        })
    }

    /// The timed input, which the peers read too: `PEERS_ROOT/data/wc<lines>`,
    /// generated there by our copy of `gen_input.py` (the same bytes) if missing. With
    /// `given` (`--input`), its line count, and its files copied there if missing.
    pub fn input(&self, given: Option<&Path>, options: &GenOptions) -> anyhow::Result<Input> {
        let defaults = GenOptions::default();
        if options.seed != defaults.seed || options.vocab != defaults.vocab {
            bail!(
                "run.sh generates its input with gen_input.py's defaults (seed {}, {} words): \
                 --seed and --vocab cannot change with --compare-peers",
                defaults.seed,
                defaults.vocab
            );
        }
        let given = given.map(Input::open).transpose()?;
        let lines = given.as_ref().map_or(options.lines, |g| g.meta.lines);
        let prefix = input_prefix(&self.root, lines);
        if let Ok(existing) = Input::open(&prefix) {
            if existing.text.exists() && existing.stamped.exists() {
                if let Some(g) = &given {
                    let figures = |m: &InputMeta| (m.words, m.distinct_words, m.windowed_records);
                    if figures(&g.meta) != figures(&existing.meta) {
                        bail!(
                            "--input {} differs from the peers' input of as many lines, {} \
                             (words, distinct words, window-word pairs {:?} vs {:?})",
                            g.text.display(),
                            existing.text.display(),
                            figures(&g.meta),
                            figures(&existing.meta)
                        );
                    }
                }
                return Ok(existing);
            }
        }
        let data = prefix.parent().expect("a data directory");
        std::fs::create_dir_all(data)
            .with_context(|| format!("cannot create {}", data.display()))?;
        match given {
            Some(g) => {
                std::fs::copy(&g.text, prefix.with_extension("txt"))?;
                std::fs::copy(&g.stamped, prefix.with_extension("ts.txt"))?;
                std::fs::write(
                    prefix.with_extension("meta.json"),
                    serde_json::to_string(&g.meta)?,
                )?;
                Input::open(&prefix)
            }
            None => generate(&prefix, &GenOptions { lines, ..defaults }),
        }
    }

    /// Runs `run.sh` for the peer workloads of `ours` at parallelisms `pars`, `reps`
    /// times, on `input` (the kit's file of its line count), its progress going to
    /// stderr.
    pub fn run(
        &self,
        ours: &[String],
        pars: &[u32],
        reps: u32,
        input: &Input,
    ) -> anyhow::Result<Outcome> {
        use std::io::BufRead;
        let workloads = peer_workloads(ours);
        if workloads.is_empty() {
            bail!("--compare-peers compares the word counts (stateless, count, stateful, windowed): none was chosen");
        }
        let join = |xs: Vec<String>| xs.join(" ");
        let start = RunStart::now();
        let mut child = std::process::Command::new("bash")
            .arg(self.dir.join("run.sh"))
            .env("PEERS_ROOT", &self.root)
            .env("PEERS", join(self.peers.clone()))
            .env(
                "WORKLOADS",
                join(workloads.iter().map(|w| w.to_string()).collect()),
            )
            .env("PARS", join(pars.iter().map(|p| p.to_string()).collect()))
            .env("REPS", reps.to_string())
            .env("N_LINES", input.meta.lines.to_string())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .with_context(|| format!("cannot start bash {}/run.sh", self.dir.display()))?;
        let mut raw = None;
        for line in std::io::BufReader::new(child.stdout.take().expect("piped")).lines() {
            let line = line?;
            eprintln!("peers: {line}");
            if raw.is_none() {
                raw = line
                    .split_once("raw: ")
                    .and_then(|(_, r)| r.split_whitespace().next())
                    .map(PathBuf::from);
            }
        }
        let status = child.wait()?;
        let raw = raw.context("run.sh did not say where its raw results are")?;
        let text = std::fs::read_to_string(&raw).with_context(|| {
            format!(
                "run.sh ({status}) wrote no raw results to {}",
                raw.display()
            )
        })?;
        let runs = parse_raw(&text).with_context(|| raw.display().to_string())?;
        let java = self.java_version();
        let mut versions: BTreeMap<String, String> = BTreeMap::new();
        let (mut records, mut errors) = (Vec::new(), Vec::new());
        let ours_name = input
            .text
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        for run in runs {
            let base = run
                .input
                .trim_end_matches(".txt")
                .trim_end_matches(".ts")
                .to_string();
            let meta = if run.our_workload().is_none() {
                continue;
            } else if format!("{base}.txt") == ours_name {
                input.meta.clone()
            } else {
                // The Python peers read a smaller prefix of the same text.
                match Input::open(&self.root.join("data").join(&base)) {
                    Ok(i) => i.meta,
                    Err(e) => {
                        errors.push((run, format!("{e:#}")));
                        continue;
                    }
                }
            };
            let version = versions
                .entry(run.peer.clone())
                .or_insert_with(|| peer_version(&self.root, &run.peer, java.as_deref()))
                .clone();
            match run.to_record(&meta, &version, start) {
                Some(Ok(r)) => records.push(r),
                Some(Err(e)) => errors.push((run, e)),
                None => {}
            }
        }
        Ok(Outcome {
            records,
            failed: errors,
        })
    }

    /// `OpenJDK 17.0.15`, if any of the peers runs on a JVM and `java` answers.
    fn java_version(&self) -> Option<String> {
        let jvm = ["flink", "spark", "java-plain"];
        if !self.peers.iter().any(|p| jvm.contains(&p.as_str())) {
            return None;
        }
        let out = std::process::Command::new("java")
            .arg("-version")
            .output()
            .ok()?;
        let text = String::from_utf8_lossy(&out.stderr).into_owned();
        text.lines().next().map(java_version_of)
    }
}

/// The name of `run.sh`'s input file for `lines` lines (`wc<lines>`, in `DATA`).
pub fn input_prefix(peers_root: &Path, lines: u64) -> PathBuf {
    peers_root.join("data").join(format!("wc{lines}"))
}

/// The peers' workloads (`run.sh`'s `WORKLOADS`) that compare with ours.
pub fn peer_workloads(ours: &[String]) -> Vec<&'static str> {
    let mut out = Vec::new();
    for w in ours {
        let peer = match w.as_str() {
            "stateless" => "stateless",
            // The peers' stateful is our count; run.sh adds Flink's rolling count (our
            // stateful) with it.
            "count" | "stateful" => "stateful",
            "windowed" => "windowed",
            _ => continue,
        };
        if !out.contains(&peer) {
            out.push(peer);
        }
    }
    out
}

/// The peer's system and version, as installed under `peers_root` by the kit's
/// `setup.sh`: `Flink 2.3.0 (OpenJDK 17.0.15)`, `timely 0.32.0 (hand-written)`.
pub fn peer_version(peers_root: &Path, peer: &str, java: Option<&str>) -> String {
    let pip = |venv: &str, package: &str| dist_info_version(&peers_root.join(venv), package);
    let on_jvm = |s: String| match java {
        Some(j) => format!("{s} ({j})"),
        None => s,
    };
    let known = |name: &str, v: Option<String>| match v {
        Some(v) => format!("{name} {v}"),
        None => format!("{name} (version unknown)"),
    };
    match peer {
        "flink" => on_jvm(known("Flink", pip("venv-flink", "apache_flink"))),
        "pyflink-table" => known("PyFlink Table API", pip("venv-flink", "apache_flink")),
        "spark" => on_jvm(known("Spark", pip("venv-spark", "pyspark"))),
        "beam" => known("Beam Python", pip("venv-beam", "apache_beam")),
        "bytewax" => known("Bytewax", pip("venv-bytewax", "bytewax")),
        "timely" => format!(
            "{} (hand-written)",
            known(
                "timely",
                cargo_lock_version(&peers_root.join("timely-wc/Cargo.lock"), "timely")
            )
        ),
        "java-plain" => on_jvm("plain Java loop".into()),
        "rust-plain" => "plain Rust loop".into(),
        other => other.to_string(),
    }
}

/// The version of `package` in a venv: its `<package>-<version>.dist-info` directory.
fn dist_info_version(venv: &Path, package: &str) -> Option<String> {
    for lib in std::fs::read_dir(venv.join("lib")).ok()?.flatten() {
        let site = lib.path().join("site-packages");
        for entry in std::fs::read_dir(site).into_iter().flatten().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if let Some(v) = name
                .strip_prefix(&format!("{package}-"))
                .and_then(|r| r.strip_suffix(".dist-info"))
            {
                return Some(v.to_string());
            }
        }
    }
    None
}

/// The version of crate `name` in a `Cargo.lock`.
fn cargo_lock_version(lock: &Path, name: &str) -> Option<String> {
    let text = std::fs::read_to_string(lock).ok()?;
    let mut lines = text.lines();
    while let Some(l) = lines.next() {
        if l.trim() == format!("name = \"{name}\"") {
            let v = lines.next()?.trim().strip_prefix("version = \"")?;
            return Some(v.trim_end_matches('"').to_string());
        }
    }
    None
}

/// `OpenJDK 17.0.15` from `java -version`'s first line.
pub fn java_version_of(first_line: &str) -> String {
    let quoted = first_line.split('"').nth(1);
    match (first_line.split_whitespace().next(), quoted) {
        (Some("openjdk"), Some(v)) => format!("OpenJDK {v}"),
        (Some(vendor), Some(v)) => format!("{vendor} {v}"),
        _ => first_line.trim().to_string(),
    }
}

/// One of our settings next to one peer's at the same parallelism.
#[derive(Clone, Debug, PartialEq)]
pub struct Ratio {
    /// Our workload.
    pub workload: String,
    /// Our runner.
    pub runner: String,
    /// Workers (ours) = parallelism (the peer's).
    pub workers: u32,
    /// Both checkpointing, or neither.
    pub checkpoint: bool,
    /// Ours checkpointed without alignment (`--guarantee at-least-once`).
    pub at_least_once: bool,
    /// Our median run's records/s.
    pub ours: f64,
    /// The peer's runner name (`flink`, `spark-ss`, ...).
    pub peer: String,
    /// The peer's median run's records/s.
    pub theirs: f64,
    /// `ours / theirs`.
    pub ratio: f64,
    /// The target for this pair, where it sets one.
    pub target: Option<f64>,
}

/// Peer variants shown in the tables but not paired: the batch modes and Spark SQL's
/// built-ins, beside each peer's main streaming (or Dataset) form.
const NOT_PAIRED: [&str; 3] = ["flink-batch", "spark-sql", "pyflink-table"];

/// Each of our single-process settings against each peer measured on the same
/// workload at the same parallelism, both with checkpoints or both without: median
/// run against median run.
pub fn ratios(records: &[BenchRecord]) -> Vec<Ratio> {
    let mut out = Vec::new();
    for (workload, groups) in group(records) {
        let is_peer = |g: &super::group::Group| g.runs[0].peer.is_some();
        for ours in groups.iter().filter(|g| !is_peer(g) && g.processes == 1) {
            for theirs in groups.iter().filter(|g| {
                is_peer(g)
                    && !NOT_PAIRED.contains(&g.runner.as_str())
                    && g.workers == ours.workers
                    && g.checkpoint.0 == ours.checkpoint.0
            }) {
                let (a, b) = (ours.median().records_per_s, theirs.median().records_per_s);
                out.push(Ratio {
                    workload: workload.clone(),
                    runner: ours.runner.clone(),
                    workers: ours.workers,
                    checkpoint: ours.checkpoint.0,
                    at_least_once: ours.at_least_once,
                    ours: a,
                    peer: theirs.runner.clone(),
                    theirs: b,
                    ratio: a / b.max(1e-9),
                    target: target(&ours.runner, &theirs.runner, &workload, ours.checkpoint.0),
                });
            }
        }
    }
    out
}

/// The targets: native ≥ 0.8× the hand-written timely program on the
/// stateless word count and ≥ 2× Flink streaming on the stateful (our `count`) and
/// windowed ones; micro-batch ≥ 2× Spark on those two.
pub fn target(runner: &str, peer: &str, workload: &str, checkpoint: bool) -> Option<f64> {
    if checkpoint {
        return None;
    }
    match (runner, peer, workload) {
        ("native", "timely", "stateless") => Some(0.8),
        ("native", "flink", "count" | "windowed") => Some(2.0),
        ("microbatch", "spark", "count" | "windowed") => Some(2.0),
        _ => None,
    }
}

/// `2.13x (target >= 2x: met)`.
fn ratio_cell(r: &Ratio) -> String {
    let mut s = format!("{:.2}x", r.ratio);
    if let Some(t) = r.target {
        let _ = write!(
            s,
            " (target >= {t}x: {})",
            if r.ratio >= t { "met" } else { "not met" }
        );
    }
    s
}

/// The ratios as the text table `bench --compare-peers` prints.
pub fn ratios_text(ratios: &[Ratio]) -> String {
    let mut s = format!(
        "{:<10} {:<10} {:>2} {:<4} {:>9} {:<11} {:>9}  ours/peer\n",
        "workload", "ours", "W", "ckpt", "records/s", "peer", "records/s"
    );
    for r in ratios {
        let _ = writeln!(
            s,
            "{:<10} {:<10} {:>2} {:<4} {:>9} {:<11} {:>9}  {}",
            r.workload,
            r.runner,
            r.workers,
            checkpoints(r),
            human(r.ours),
            r.peer,
            human(r.theirs),
            ratio_cell(r)
        );
    }
    s
}

/// A ratio's checkpoints cell: `off`, `on` (exactly-once) or `on, at-least-once`, as
/// the report's own tables write it.
fn checkpoints(r: &Ratio) -> &'static str {
    match (r.checkpoint, r.at_least_once) {
        (false, _) => "off",
        (true, false) => "on",
        (true, true) => "on, at-least-once",
    }
}

/// The ratios as a markdown table, for the report.
pub fn ratios_markdown(ratios: &[Ratio]) -> String {
    let mut s = String::from(
        "| workload | ours | workers = parallelism | checkpoints | ours records/s | peer | peer records/s | ours / peer |\n\
         |---|---|---:|---|---:|---|---:|---|\n",
    );
    for r in ratios {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            r.workload,
            r.runner,
            r.workers,
            checkpoints(r),
            human(r.ours),
            r.peer,
            human(r.theirs),
            ratio_cell(r).replace(">=", "≥")
        );
    }
    s
}

#[cfg(test)]
mod tests;
