//! Pipeline options, parsed from the command line.

use std::path::PathBuf;

/// Options every pipeline takes: which runner, validation, the seed, where to dump the
/// plan, and runner-specific `--runner-option key=value` pairs.
///
/// Flatten it into a binary's own arguments with clap:
///
/// ```
/// use clap::Parser;
/// #[derive(Parser)]
/// struct Args {
///     #[command(flatten)]
///     options: tidewater::PipelineOptions,
///     #[arg(long)]
///     input: Option<String>,
/// }
/// let args = Args::parse_from(["wc", "--runner=direct", "--seed=7", "--input=x.txt"]);
/// assert_eq!(args.options.runner, "direct");
/// assert_eq!(args.options.seed, Some(7));
/// ```
#[derive(clap::Args, Clone, Debug)]
pub struct PipelineOptions {
    /// The runner that executes the pipeline: direct, microbatch or native.
    #[arg(long, default_value = "direct", value_parser = parse_runner)]
    pub runner: String,
    /// Seed of the direct runner's schedule (element order, bundle boundaries); printed
    /// on failure so that a failing order can be replayed.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Turn off the direct runner's checks (coder round-trips, shuffled order,
    /// element copies for error messages) for speed.
    #[arg(long)]
    pub no_validate: bool,
    /// Write the portable plan (JSON) to this path before running.
    #[arg(long, value_name = "PATH")]
    pub dump_plan: Option<PathBuf>,
    /// Write the pipeline as a Graphviz graph to this path before running: composites
    /// as clusters, fused stages coloured (`dot -Tsvg FILE` draws it).
    #[arg(long, value_name = "PATH")]
    pub dump_plan_dot: Option<PathBuf>,
    /// How log lines look: `text` (one line per event, with the job, process and
    /// worker) or `json` (one object per line, for log shippers). `RUST_LOG` filters
    /// them (by default: Tidewater's from info, everything else's warnings).
    #[arg(long, value_enum, default_value_t = crate::log::LogFormat::Text)]
    pub log_format: crate::log::LogFormat,
    /// Run this saved plan (as `--dump-plan` wrote it) instead of the pipeline the
    /// binary builds. An example binary still builds its pipeline first, which
    /// registers its functions (closures, generic transforms); `run_plan` builds none and
    /// resolves the functions it links (`tidewater::register!`). A plan naming a function
    /// the binary has in neither registry is refused before anything runs.
    #[arg(long, value_name = "FILE")]
    pub plan: Option<PathBuf>,
    /// Stop reading unbounded sources after this long (e.g. `30s`, `500ms`, `2m`); the
    /// pipeline then drains: watermarks advance to the end and windows fire.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub max_duration: Option<std::time::Duration>,
    /// A runner-specific option, `key=value`; may be repeated. The direct runner's:
    /// bundle_size, lift_combiners, partial_flush_groups, max_key_groups,
    /// checkpoint_every, commit_every_ms (an unknown one is refused with their meaning).
    #[arg(long = "runner-option", value_name = "KEY=VALUE", value_parser = parse_key_value)]
    pub runner_options: Vec<(String, String)>,
    /// The job's identity, which its sinks name their transactions and output with, so
    /// that recovering one job never touches another's: letters, digits, `-` and `_`, at
    /// most 64. By default an engine runner derives it from the pipeline and its
    /// checkpoint directory (the same across restarts, different for another directory),
    /// the direct runner from the pipeline; a job restored from a checkpoint or savepoint
    /// keeps the identity recorded there.
    #[arg(long, value_name = "ID", value_parser = parse_job_id)]
    pub job_id: Option<String>,
    /// Run even where a sink's record of what it committed shows that this run would
    /// write some of it again (a restore from an older checkpoint than the newest
    /// committed epoch, a lost checkpoint directory): that output is then duplicated.
    /// Without it such a run is refused, naming the epochs and the other choices.
    #[arg(long)]
    pub accept_duplicates: bool,
    /// Where stateful DoFns keep their keyed state: `memory`, or `fjall`, an embedded
    /// LSM store on local disk, for state larger than memory (a small cache of cells in
    /// memory; checkpoints are the same either way, so a job can switch between them
    /// from a savepoint).
    #[arg(long, value_enum, default_value_t = StateBackendKind::Memory)]
    pub state_backend: StateBackendKind,
    /// With `--state-backend fjall`: the local directory the store's files go in (a
    /// directory per process, removed when it ends); by default the system's
    /// temporary directory.
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// With `--state-backend fjall`: how many windows each grouping (GroupByKey,
    /// Combine) keeps in memory per worker; the least recently touched of the others
    /// wait in the store until their next input or timer (default 65536).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub state_hot_windows: Option<u64>,
    /// The flags a runner declares for itself (e.g. `--batch-interval`), as given.
    #[command(flatten)]
    pub runner_flags: crate::runner_flags::RunnerFlags,
    /// Workers, processes and checkpoints of the distributed runners.
    #[command(flatten)]
    pub engine: EngineOptions,
}

/// Where a job keeps the keyed state of its stateful DoFns (`--state-backend`).
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum StateBackendKind {
    /// In memory.
    #[default]
    Memory,
    /// In an embedded LSM store (fjall) on local disk.
    Fjall,
}

/// Options of the distributed runners (native and micro-batch): workers, processes,
/// checkpoints. The direct runner refuses all but their defaults.
#[derive(clap::Args, Clone, Debug, PartialEq, Eq)]
#[command(next_help_heading = "Distributed runners (native, microbatch)")]
pub struct EngineOptions {
    /// Worker threads per process.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub workers: u64,
    /// Processes in the job (timely's cluster mode over TCP); each is started with the
    /// same binary and arguments, and its own --process-id.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub processes: u64,
    /// This process's index, from 0 to --processes - 1.
    #[arg(long, default_value_t = 0)]
    pub process_id: u64,
    /// A file listing `host:port` of every process, one per line, in process order.
    #[arg(long, value_name = "FILE")]
    pub hosts: Option<PathBuf>,
    /// A file holding the cluster's secret (at least 16 bytes: hex, or any text),
    /// readable by its owner only: a process joins the cluster only by proving it holds
    /// it. Or the environment variable TIDEWATER_CLUSTER_SECRET. Required when a host of
    /// --hosts is not on loopback; a local cluster makes its own.
    #[arg(long, value_name = "FILE")]
    pub cluster_secret_file: Option<PathBuf>,
    /// TLS between the processes of the cluster: this process's certificate chain
    /// (PEM). With --tls-key and --tls-ca; every process presents its certificate and
    /// checks its peers' against the CA, and the certificate of a process connected to
    /// must name its host as --hosts gives it.
    #[arg(long, value_name = "FILE", requires_all = ["tls_key", "tls_ca"])]
    pub tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM).
    #[arg(long, value_name = "FILE", requires_all = ["tls_cert", "tls_ca"])]
    pub tls_key: Option<PathBuf>,
    /// The CA certificates (PEM) a peer's certificate must chain to.
    #[arg(long, value_name = "FILE", requires_all = ["tls_cert", "tls_key"])]
    pub tls_ca: Option<PathBuf>,
    /// Serve the job's status while it runs at HOST:PORT (port 0: any free one): its
    /// page (`/`), `/api/job` (JSON) and `/metrics` (Prometheus). The job's first line
    /// gives the URL. A local cluster's supervisor serves the whole job; with --hosts,
    /// give it to every process (process 0 serves). The native and micro-batch runners.
    #[arg(long, value_name = "HOST:PORT")]
    pub status_addr: Option<String>,
    /// With --status-addr: keep serving the job's final figures this long after it
    /// ends (e.g. 30s), for a last scrape.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, requires = "status_addr")]
    pub status_linger: Option<std::time::Duration>,
    /// With --status-addr: allow savepoints, stop and cancel over the API
    /// (`POST /api/savepoint`, `/api/stop`, `/api/cancel`; the `tidewater` CLI) to
    /// whoever presents the token in FILE (at least 16 characters; a file only its
    /// owner can read) as `Authorization: Bearer TOKEN`. Or the environment variable
    /// TIDEWATER_CONTROL_TOKEN. Without either, the API only reads.
    #[arg(long, value_name = "FILE", requires = "status_addr")]
    pub control_token_file: Option<PathBuf>,
    /// Launch this many processes of this binary on loopback and supervise them
    /// (restarting all from the last checkpoint when one dies or hangs).
    #[arg(long, value_name = "N")]
    pub local_cluster: Option<u64>,
    /// Coordinate this job across hosts: listen at HOST:PORT for the agents of its
    /// hosts (each the job's binary with --coordinator), run the job on the hosts
    /// registered, and restart it from the last checkpoint on the hosts left when one
    /// fails or is lost, or on all when one registers. Needs --cluster-secret-file (or
    /// TIDEWATER_CLUSTER_SECRET) off loopback, and a checkpoint directory every host
    /// reaches (an object store, or a shared filesystem).
    #[arg(long, value_name = "HOST:PORT", conflicts_with_all = ["local_cluster", "coordinator"])]
    pub coordinate: Option<String>,
    /// With --coordinate: the job starts once this many hosts have registered.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub expect_hosts: u64,
    /// With --coordinate: the fewest hosts the job goes on with after losing some (it
    /// waits for more below that).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub min_hosts: u64,
    /// Run as this host's agent of the coordinator at HOST:PORT (see --coordinate): the
    /// coordinator tells it when to run the job's process here, and with which peers.
    #[arg(long, value_name = "HOST:PORT", conflicts_with_all = ["local_cluster", "processes", "process_id", "hosts"])]
    pub coordinator: Option<String>,
    /// How often a checkpoint is taken (e.g. 1s, 500ms).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub checkpoint_interval: Option<std::time::Duration>,
    /// Where checkpoints are written: a directory, or an object store's URL
    /// (s3://bucket/prefix, gs://..., az://...; credentials from the environment); a
    /// job started with one holding a complete checkpoint resumes from it.
    #[arg(long, value_name = "DIR")]
    pub checkpoint_dir: Option<PathBuf>,
    /// exactly-once (aligned checkpoints) or at-least-once (no alignment: lower
    /// latency, duplicates after a failure).
    #[arg(long, default_value = "exactly-once", value_parser = ["exactly-once", "at-least-once"])]
    pub guarantee: String,
    /// Keep a savepoint (a complete checkpoint the user owns) here at the end of a
    /// bounded run or a stop (Ctrl-C, --max-duration: sources stop where they are);
    /// while the job runs, each savepoint request (SIGUSR1 to the binary, or
    /// `tidewater::runner::request_savepoint`) keeps the next complete checkpoint in
    /// DIR/savepoint-<epoch>. Resume from either with --from-savepoint, at any
    /// parallelism.
    #[arg(long, value_name = "DIR")]
    pub savepoint_dir: Option<PathBuf>,
    /// Start from the savepoint in DIR (Flink's `run -s`), at any parallelism; DIR
    /// is only read, so the savepoint stays as it is for another start. New
    /// checkpoints go to --checkpoint-dir, and once that holds one of this job (a
    /// restart after a failure) the job resumes from there instead.
    #[arg(long, value_name = "DIR")]
    pub from_savepoint: Option<PathBuf>,
    /// Restore a savepoint or checkpoint even though it holds state of steps this
    /// pipeline no longer has (Flink's --allowNonRestoredState): their state is
    /// dropped. Without it such a restore is refused, naming the steps.
    #[arg(long)]
    pub allow_non_restored_state: bool,
    /// Say what restoring the newest savepoint or checkpoint in DIR into this pipeline
    /// would do, per stateful step (restored, new, dropped or incompatible), and exit
    /// without running: 0 if the run would restore it, non-zero if it would be refused.
    #[arg(long, value_name = "DIR")]
    pub check_savepoint: Option<PathBuf>,
    /// Print the state held in the newest savepoint or checkpoint in DIR (every
    /// stateful DoFn's cells and timers and every grouping's open windows, per key
    /// and window; other steps' parts raw) and exit without running.
    #[arg(long, value_name = "DIR")]
    pub inspect_savepoint: Option<PathBuf>,
    /// With --inspect-savepoint: only this state id (a step's name or pinned uid).
    #[arg(long, value_name = "ID", requires = "inspect_savepoint")]
    pub inspect_id: Option<String>,
    /// With --inspect-savepoint: only this key (as it is printed).
    #[arg(long, value_name = "KEY", requires = "inspect_savepoint")]
    pub inspect_key: Option<String>,
    /// With --inspect-savepoint: json (one object per line) or csv.
    #[arg(long, default_value = "json", value_parser = ["json", "csv"])]
    pub inspect_format: String,
    /// The arguments `--local-cluster` starts each process with (the cluster flags are
    /// added); by default this process's own. Set by programs that run one pipeline of
    /// several, such as the conformance suite.
    #[arg(skip)]
    pub child_args: Option<Vec<String>>,
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            workers: 1,
            processes: 1,
            process_id: 0,
            cluster_secret_file: None,
            tls_cert: None,
            tls_key: None,
            tls_ca: None,
            status_addr: None,
            status_linger: None,
            control_token_file: None,
            hosts: None,
            local_cluster: None,
            coordinate: None,
            expect_hosts: 1,
            min_hosts: 1,
            coordinator: None,
            checkpoint_interval: None,
            checkpoint_dir: None,
            guarantee: "exactly-once".into(),
            savepoint_dir: None,
            from_savepoint: None,
            allow_non_restored_state: false,
            check_savepoint: None,
            inspect_savepoint: None,
            inspect_id: None,
            inspect_key: None,
            inspect_format: "json".into(),
            child_args: None,
        }
    }
}

impl Default for PipelineOptions {
    fn default() -> Self {
        PipelineOptions {
            runner: "direct".into(),
            seed: None,
            no_validate: false,
            dump_plan: None,
            dump_plan_dot: None,
            log_format: crate::log::LogFormat::Text,
            plan: None,
            max_duration: None,
            runner_options: Vec::new(),
            job_id: None,
            accept_duplicates: false,
            state_backend: StateBackendKind::Memory,
            state_dir: None,
            state_hot_windows: None,
            runner_flags: Default::default(),
            engine: EngineOptions::default(),
        }
    }
}

impl PipelineOptions {
    /// Options for `runner`, everything else default.
    ///
    /// ```
    /// assert_eq!(tidewater::PipelineOptions::for_runner("native").runner, "native");
    /// ```
    pub fn for_runner(runner: &str) -> Self {
        PipelineOptions {
            runner: runner.to_string(),
            ..Default::default()
        }
    }

    /// These options with runner flag `--name value` ([`crate::Runner::flags`]).
    ///
    /// ```
    /// let o = tidewater::PipelineOptions::for_runner("microbatch").with_runner_flag("trigger", "once");
    /// assert_eq!(o.runner_flags.get("trigger"), Some("once"));
    /// ```
    pub fn with_runner_flag(mut self, name: &str, value: impl Into<String>) -> Self {
        self.runner_flags.set(name, value);
        self
    }

    /// The value of runner option `key`, if given.
    ///
    /// ```
    /// let mut o = tidewater::PipelineOptions::default();
    /// o.runner_options.push(("bundle_size".into(), "10".into()));
    /// assert_eq!(o.runner_option("bundle_size"), Some("10"));
    /// ```
    pub fn runner_option(&self, key: &str) -> Option<&str> {
        self.runner_options
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// A runner name, checked against the registered runners while the flags are parsed
/// (so that a typo exits with status 2 before anything runs). A binary registers its
/// runners before parsing; with none registered the name is checked when it runs.
fn parse_runner(s: &str) -> Result<String, String> {
    let known: Vec<String> = crate::runner::registered_runners()
        .iter()
        .map(|r| r.name().to_string())
        .collect();
    if known.is_empty() || known.iter().any(|k| k == s) {
        Ok(s.to_string())
    } else {
        Err(format!(
            "unknown runner '{s}'; known runners: {}",
            known.join(", ")
        ))
    }
}

/// Parses a `KEY=VALUE` runner option, for binaries that take `--runner-option`.
///
/// ```
/// assert_eq!(tidewater::parse_key_value("a=b=c"), Ok(("a".into(), "b=c".into())));
/// assert!(tidewater::parse_key_value("=b").is_err());
/// ```
pub fn parse_key_value(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => Err(format!("expected KEY=VALUE, got '{s}'")),
    }
}

/// Parses `500ms`, `30s`, `2m` or `1h`; a number without a unit is refused, since it
/// could mean seconds or milliseconds.
///
/// ```
/// # use std::time::Duration;
/// use clap::Parser;
/// #[derive(Parser)]
/// struct A { #[command(flatten)] o: tidewater::PipelineOptions }
/// assert_eq!(A::parse_from(["x", "--max-duration=1500ms"]).o.max_duration, Some(Duration::from_millis(1500)));
/// assert_eq!(A::parse_from(["x", "--max-duration=2m"]).o.max_duration, Some(Duration::from_secs(120)));
/// assert!(A::try_parse_from(["x", "--max-duration=soon"]).is_err());
/// let e = A::try_parse_from(["x", "--max-duration=10"]).err().unwrap().to_string();
/// assert!(e.contains("'10' has no unit: write 10s for seconds, 10ms for milliseconds or 10m for minutes"), "{e}");
/// ```
pub fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    let bad = || format!("expected a duration such as 500ms, 30s or 2m, got '{s}'");
    let (num, unit) = match s.find(|c: char| !c.is_ascii_digit() && c != '.') {
        Some(i) => (&s[..i], &s[i..]),
        None => {
            return Err(format!(
                "'{s}' has no unit: write {s}s for seconds, {s}ms for milliseconds or {s}m for minutes"
            ));
        }
    };
    let n: f64 = num.parse().map_err(|_| bad())?;
    let secs = match unit {
        "ms" => n / 1000.0,
        "s" => n,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        _ => return Err(bad()),
    };
    if !secs.is_finite() || secs < 0.0 {
        return Err(bad());
    }
    Ok(std::time::Duration::from_secs_f64(secs))
}

/// Checks a `--job-id`: 1 to 64 letters, digits, `-` or `_`.
///
/// ```
/// assert!(tidewater::parse_job_id("nightly-2").is_ok());
/// assert_eq!(
///     tidewater::parse_job_id("a b").unwrap_err(),
///     "a job id is 1 to 64 letters, digits, - or _: 'a b'"
/// );
/// ```
pub fn parse_job_id(s: &str) -> Result<String, String> {
    if !s.is_empty()
        && s.len() <= 64
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        Ok(s.to_string())
    } else {
        Err(format!(
            "a job id is 1 to 64 letters, digits, - or _: '{s}'"
        ))
    }
}
