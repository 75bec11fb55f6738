//! The bench binary's flags and what one run is set to (a `Setting`).

use super::*;

/// Runs workloads on runners and reports throughput and peak RSS.
#[derive(Parser)]
#[command(name = "bench")]
pub(super) struct Args {
    /// Runners to measure, comma-separated (any registered runner).
    #[arg(long, default_value = "direct", value_delimiter = ',')]
    pub(super) runner: Vec<String>,
    /// Workers per process, comma-separated; passed as `--workers N` to every runner
    /// but `direct`, which has one.
    #[arg(long, default_value = "1", value_delimiter = ',')]
    pub(super) workers: Vec<u32>,
    /// Processes, comma-separated: a run with N > 1 launches a local cluster of N
    /// processes on loopback (`--local-cluster N`, on the engine runners only); its time
    /// includes starting the processes and their connection (a latency run's
    /// percentiles do not: each process counts from its first record).
    #[arg(long, default_value = "1", value_delimiter = ',')]
    pub(super) processes: Vec<u32>,
    /// Set by a local cluster's supervisor on each of its processes.
    #[arg(long, hide = true)]
    pub(super) process_id: Option<u64>,
    /// Set by a local cluster's supervisor on each of its processes.
    #[arg(long, hide = true)]
    pub(super) hosts: Option<PathBuf>,
    /// TLS between the processes of a cluster run (`--processes` > 1): each process's
    /// certificate (PEM), with --tls-key and --tls-ca, as the engine runners take them.
    /// The certificate must name 127.0.0.1, where a local cluster's processes listen.
    #[arg(long, value_name = "FILE", requires_all = ["tls_key", "tls_ca"])]
    pub(super) tls_cert: Option<PathBuf>,
    /// With --checkpoint-ms: checkpoints under this object store URL (`s3://bucket`,
    /// `gs://`, `az://`; credentials and endpoint from the environment, e.g. `AWS_ENDPOINT`)
    /// instead of a local temporary directory.
    #[arg(long, value_name = "URL")]
    pub(super) checkpoint_store: Option<String>,
    /// Cluster runs (`--processes` > 1) on a network instead of loopback: each process
    /// in a network namespace of its own, the namespaces joined by a bridge and veth
    /// pairs, run by a coordinator here with an agent in each (needs root).
    #[arg(long)]
    pub(super) over_veth: bool,
    /// Set on the agents of an `--over-veth` run: the coordinator's address.
    #[arg(long, hide = true)]
    pub(super) coordinator: Option<String>,
    /// The key of --tls-cert (PEM).
    #[arg(long, value_name = "FILE", requires_all = ["tls_cert", "tls_ca"])]
    pub(super) tls_key: Option<PathBuf>,
    /// The CA a peer's certificate must chain to (PEM).
    #[arg(long, value_name = "FILE", requires_all = ["tls_cert", "tls_key"])]
    pub(super) tls_ca: Option<PathBuf>,
    /// Serve each engine run's status (`--status-addr`, on a free loopback port; one
    /// process only) and fetch `/api/job` and `/metrics` from it every second while the
    /// run lasts: the cost of watching a job, against runs without (alternate runs
    /// with and without it).
    #[arg(long)]
    pub(super) status_poll: bool,
    /// A runner option (`KEY=VALUE`, may be repeated) for every runner but `direct`,
    /// e.g. the native runner's `bundle_size=4096`.
    #[arg(long = "runner-option", value_name = "KEY=VALUE", value_parser = tidewater::parse_key_value)]
    pub(super) runner_options: Vec<(String, String)>,
    /// Where stateful DoFns keep their state on every runner: `memory`, or `fjall` (an
    /// embedded store under the system's temporary directory).
    #[arg(long, value_enum, default_value_t = tidewater::StateBackendKind::Memory)]
    pub(super) state_backend: tidewater::StateBackendKind,
    /// Checkpoint intervals in milliseconds to measure each distributed runner with,
    /// comma-separated; `0` is without checkpoints (e.g. `0,1000`: the cost of
    /// checkpoints every second). Each checkpointed run writes into a fresh temporary
    /// directory.
    #[arg(long, default_value = "0", value_delimiter = ',')]
    pub(super) checkpoint_ms: Vec<u64>,
    /// Guarantees to measure the native runner's checkpointed runs with,
    /// comma-separated: `exactly-once` (barrier alignment) and `at-least-once` (no
    /// alignment: duplicates after a failure, for latency), e.g. both to see what
    /// alignment costs. Runs without checkpoints, on other runners and `recovery`
    /// (which checks exactly-once output) are exactly-once only.
    #[arg(long, default_value = "exactly-once", value_delimiter = ',', value_parser = ["exactly-once", "at-least-once"])]
    pub(super) guarantee: Vec<String>,
    /// Workloads, comma-separated: stateless, count, stateful, windowed, latency,
    /// recovery, nexmark-q0 .. nexmark-q14; or the groups wordcount, nexmark, all.
    /// `latency` measures the peak of a keyed stateful pipeline (`--words` generated
    /// records as fast as they go), then p50/p99/max latency from creation to sink at
    /// half that rate for `--latency-seconds`; `recovery` runs the crash job on an
    /// engine runner in a local cluster (2 processes, or `--processes` if more) with
    /// checkpoints (`--checkpoint-ms`, 1000 if only 0 is given), SIGKILLs one process
    /// and times the restarted job's first checkpoint.
    #[arg(long, default_value = "wordcount", value_delimiter = ',')]
    pub(super) workload: Vec<String>,
    /// How long the `latency` workload's run at half the peak rate lasts (the first
    /// 10% of its records are not counted: start-up).
    #[arg(long, default_value_t = 5.0, value_name = "SECONDS")]
    pub(super) latency_seconds: f64,
    /// Also run the peer kit's `run.sh` (Flink, Spark, the hand-written timely
    /// program, ...) on the same input, after our runs: its runs are recorded next to
    /// ours (with the peer's version) and ours/peer ratios are printed per workload
    /// and parallelism (`--workers` is the peers' parallelism, `--reps` their
    /// repetitions). The input is the kit's `PEERS_ROOT/data/wc<lines>` (generated
    /// there, byte for byte as the kit's `gen_input.py` writes it, if missing).
    #[arg(long)]
    pub(super) compare_peers: bool,
    /// The peer kit: the directory holding `run.sh` and `setup.sh` (not part of this
    /// repository). By default `../shared/peers` next to the repository, if it is there.
    #[arg(long, value_name = "DIR")]
    pub(super) peers_dir: Option<PathBuf>,
    /// Where the kit's `setup.sh` installed the peers (its `PEERS_ROOT`); by default
    /// `$PEERS_ROOT`, else `$TMPDIR/peers-bench`.
    #[arg(long, value_name = "DIR")]
    pub(super) peers_root: Option<PathBuf>,
    /// The peers `--compare-peers` runs, comma-separated (`run.sh`'s `PEERS`):
    /// rust-plain, timely, java-plain, flink, spark, bytewax, beam, pyflink-table.
    #[arg(long, default_value = "timely,flink,spark", value_delimiter = ',')]
    pub(super) peers: Vec<String>,
    /// Words to generate for the word counts (rounded to whole lines of 10 words on
    /// average, as `gen_input.py --lines words/10` writes them).
    #[arg(long, default_value_t = 10_000_000)]
    pub(super) words: u64,
    /// Also measure what fault tolerance costs on a longer input of this many words
    /// (e.g. 50000000: some ten checkpoints a run at 1 s, where a run of the standard
    /// 10 million takes 0 to 2). After the main runs, each word count's native and
    /// micro-batch single-process settings with and without checkpoints
    /// (`--checkpoint-ms` with 0 among them) run `--cost-reps` times again on it, rep
    /// by rep; their records are marked `cost_run`: the report judges the costs from
    /// them and keeps them out of the throughput tables. The micro-batch runner would
    /// read the bounded input in batches of its default limit (100,000 records), so in
    /// this pass it runs ten batches of a tenth of the lines each, on and off alike (`--batch-records`).
    #[arg(long, value_name = "WORDS")]
    pub(super) cost_words: Option<u64>,
    /// Reps of each setting in the `--cost-words` pass (default: `--reps`). The costs
    /// are medians of rep-by-rep costs, and one long run still swings by some 10% on a
    /// shared VM: more reps narrow the median where the targets sit near the noise.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub(super) cost_reps: Option<u32>,
    /// Micro-batch runs read at most N lines per batch, in batches back to back until
    /// the input's end (Spark's `Trigger.AvailableNow` with a record limit: the
    /// runner's `--trigger available-now --max-records-per-batch N`), instead of the
    /// runner's default limit (30,000 records a batch, back to back). The `--cost-words` pass sets it to a tenth of
    /// its input for the micro-batch runner.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub(super) batch_records: Option<u64>,
    /// The `stateful` workload keeps N bytes of state per word beside its count (its
    /// output is the same): a state of a given size from a given vocabulary, e.g. the
    /// cost of checkpoints of gigabytes of state (`--state-backend fjall`).
    #[arg(long, value_name = "N")]
    pub(super) state_value_bytes: Option<usize>,
    /// The native runner's watermark alignment (its runner option
    /// `max_watermark_drift_ms`, Flink's maxAllowedDrift): an instance of a source
    /// whose watermark runs more than N ms ahead of the slowest instance pauses. The
    /// windowed word count's event times span 500 s that two workers read at
    /// different speeds; without it their reducers hold tens of seconds more windows.
    /// 0: off.
    #[arg(long, value_name = "N", default_value_t = 2000)]
    pub(super) watermark_drift_ms: u64,
    /// A latency run during which the hypervisor's steal (`/proc/stat`) exceeded this
    /// many percent of the CPU time is recorded as disturbed (`steal_rerun_above`) and
    /// run again, up to `--steal-retries` times: a stall of the VM lands in the p99,
    /// which then measures the host rather than the runner. The report leaves such
    /// runs out of its tables and targets and lists them. A negative limit runs every
    /// latency run again.
    #[arg(
        long,
        value_name = "PCT",
        default_value_t = 5.0,
        allow_negative_numbers = true
    )]
    pub(super) max_steal: f64,
    /// How many times a latency run disturbed by steal (`--max-steal`) runs again.
    #[arg(long, value_name = "N", default_value_t = 2)]
    pub(super) steal_retries: u32,
    /// Generator seed.
    #[arg(long, default_value_t = 42)]
    pub(super) seed: u64,
    /// Vocabulary size.
    #[arg(long, default_value_t = 10_000)]
    pub(super) vocab: usize,
    /// The exponent of the vocabulary's Zipf distribution (0: every word as likely,
    /// so that nearly every word of the vocabulary is in the input and the state
    /// holds it, e.g. with `--state-value-bytes`).
    #[arg(long, default_value_t = 1.0)]
    pub(super) zipf_s: f64,
    /// Use the files `gen_input.py --out PREFIX` wrote (`PREFIX.txt`, `PREFIX.ts.txt`,
    /// `PREFIX.meta.json`) instead of generating them.
    #[arg(long, value_name = "PREFIX")]
    pub(super) input: Option<PathBuf>,
    /// Words of the input on which outputs are checked against the direct runner's.
    #[arg(long, default_value_t = 20_000)]
    pub(super) check_words: u64,
    /// Nexmark events per timed run.
    #[arg(long, default_value_t = 1_000_000)]
    pub(super) events: u64,
    /// Nexmark events of Q12's timed runs, at most: Q12 replays its events through a
    /// TestStream on a scripted processing clock, which holds them all in memory and
    /// slows down with their number (about 500 MB and 3 s at 50,000 on the direct runner).
    #[arg(long, default_value_t = 50_000)]
    pub(super) q12_events: u64,
    /// Nexmark events of the output check.
    #[arg(long, default_value_t = 10_000)]
    pub(super) check_events: u64,
    /// A smoke run: 100,000 words (20,000 checked), 10,000 Nexmark events (2,000
    /// checked), whatever the size flags say.
    #[arg(long)]
    pub(super) quick: bool,
    /// Timed runs of each setting; each is recorded.
    #[arg(long, default_value_t = 1)]
    pub(super) reps: u32,
    /// Keep the direct runner's validation on while timing (off by default: this
    /// measures speed; the check's reference run always validates).
    #[arg(long)]
    pub(super) validate: bool,
    /// Where the runs' records go, one JSON object a line (written anew); `--report`
    /// reads them from here.
    #[arg(long, value_name = "FILE")]
    pub(super) json: Option<PathBuf>,
    /// Render the report (`DOCS/benchmarks.md`, `DOCS/benchmarks/*.svg`) from `--json`
    /// instead of running anything.
    #[arg(long)]
    pub(super) report: bool,
    /// The docs directory `--report` writes into.
    #[arg(long, value_name = "DOCS", default_value = "docs")]
    pub(super) docs: PathBuf,
    /// The `nexmark` binary (by default the one next to this binary: build it with
    /// `cargo build [--release] -p tidewater-nexmark`).
    #[arg(long, value_name = "PATH")]
    pub(super) nexmark_bin: Option<PathBuf>,
    /// Internal: run one measurement in this process and write its result to
    /// `--child-out` (this is how the parent runs each measurement).
    #[arg(long, value_enum, hide = true)]
    pub(super) child: Option<ChildMode>,
    #[arg(long, hide = true)]
    pub(super) child_out: Option<PathBuf>,
    /// Internal: records of a `latency` or `recovery` child.
    #[arg(long, hide = true)]
    pub(super) child_records: Option<u64>,
    /// Internal: records/s of a `latency` or `recovery` child (0: as fast as possible).
    #[arg(long, hide = true, default_value_t = 0.0)]
    pub(super) child_rate: f64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(super) enum ChildMode {
    /// Run and write the output lines.
    Output,
    /// Run into a counting sink and write the record.
    Time,
    /// Run the crash job in a local cluster (the parent kills one of its processes).
    Recovery,
}

/// What a child runs.
#[derive(Clone)]
pub(super) struct Setting<'a> {
    pub(super) workload: &'a str,
    pub(super) runner: &'a str,
    pub(super) workers: u32,
    /// Processes of a local cluster (1: this process only).
    pub(super) processes: u32,
    /// In a process of a local cluster: its index and the hosts file.
    pub(super) cluster_process: Option<(u64, PathBuf)>,
    pub(super) runner_options: &'a [(String, String)],
    /// Checkpoint interval (ms), if checkpointing.
    pub(super) checkpoint_ms: Option<u64>,
    /// Checkpoints without alignment (`--guarantee at-least-once`).
    pub(super) at_least_once: bool,
    /// `--state-backend`.
    pub(super) state_backend: tidewater::StateBackendKind,
    /// Micro-batches of at most this many lines, back to back (`--batch-records`).
    pub(super) batch_records: Option<u64>,
    /// The `stateful` workload's bytes of state per word (`--state-value-bytes`).
    pub(super) state_value_bytes: Option<usize>,
    /// The native runner's watermark alignment (`--watermark-drift-ms`), if on.
    pub(super) watermark_drift_ms: Option<u64>,
    /// TLS between a cluster's processes: certificate, key and CA files.
    pub(super) tls: Option<[&'a Path; 3]>,
    /// Serve the run's status and poll it every second (`--status-poll`).
    pub(super) status_poll: bool,
    /// Checkpoints under this object store URL (`--checkpoint-store`).
    pub(super) checkpoint_store: Option<&'a str>,
    /// Who runs a cluster run's processes.
    pub(super) role: Role,
    /// Cluster runs on a network of namespaces (`--over-veth`).
    pub(super) over_veth: bool,
}

/// Who runs the processes of a cluster run (`--processes` > 1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Role {
    /// A local cluster on loopback.
    Local,
    /// A coordinator listening at the address, for agents on a network (`--over-veth`).
    Coordinate(String),
    /// A host's agent of the coordinator at the address.
    Agent(String),
}

impl Args {
    /// `--tls-cert`, `--tls-key` and `--tls-ca`, when given (clap requires all three).
    pub(super) fn tls(&self) -> Option<[&Path; 3]> {
        match (&self.tls_cert, &self.tls_key, &self.tls_ca) {
            (Some(c), Some(k), Some(a)) => Some([c.as_path(), k.as_path(), a.as_path()]),
            _ => None,
        }
    }
}

impl Setting<'_> {
    /// Notes on `record` what was run: validation, the processes (and, from `result`,
    /// their figures), checkpoints and the guarantee.
    pub(super) fn describe(
        &self,
        record: &mut BenchRecord,
        validate: bool,
        result: &tidewater::runner::PipelineResult,
    ) {
        record.validate = validate;
        record.on_cluster(self.processes, result);
        record.checkpoint = self.checkpoint_ms.is_some();
        record.checkpoint_interval_ms = self.checkpoint_ms;
        if self.checkpoint_ms.is_some() {
            record.checkpoints_of(result);
        }
        record.at_least_once = self.at_least_once;
        record.embedded_state = self.state_backend == tidewater::StateBackendKind::Fjall;
        record.over_veth = matches!(self.role, Role::Coordinate(_));
    }

    pub(super) fn options(&self, validate: bool) -> PipelineOptions {
        let mut o = PipelineOptions {
            runner: self.runner.to_string(),
            no_validate: !validate,
            state_backend: self.state_backend,
            ..Default::default()
        };
        if self.runner != "direct" {
            o.engine.workers = u64::from(self.workers);
            if self.processes > 1 {
                match &self.cluster_process {
                    // A process of the cluster its supervisor launched.
                    Some((id, hosts)) => {
                        o.engine.processes = u64::from(self.processes);
                        o.engine.process_id = *id;
                        o.engine.hosts = Some(hosts.clone());
                    }
                    None => match &self.role {
                        Role::Local => o.engine.local_cluster = Some(u64::from(self.processes)),
                        Role::Coordinate(address) => {
                            o.engine.coordinate = Some(address.clone());
                            o.engine.expect_hosts = u64::from(self.processes);
                            o.engine.min_hosts = u64::from(self.processes);
                        }
                        Role::Agent(address) => o.engine.coordinator = Some(address.clone()),
                    },
                }
                if let Some([cert, key, ca]) = self.tls {
                    o.engine.tls_cert = Some(cert.to_path_buf());
                    o.engine.tls_key = Some(key.to_path_buf());
                    o.engine.tls_ca = Some(ca.to_path_buf());
                }
            }
            if self.status_poll && self.processes == 1 {
                o.engine.status_addr = Some(format!("127.0.0.1:{}", free_port()));
            }
            o.runner_options = self.runner_options.to_vec();
            if let (Some(ms), "native") = (self.watermark_drift_ms, self.runner) {
                o.runner_options
                    .push(("max_watermark_drift_ms".into(), ms.to_string()));
            }
            if let (Some(n), "microbatch") = (self.batch_records, self.runner) {
                o.runner_flags.set("trigger", "available-now");
                o.runner_flags.set("max-records-per-batch", n.to_string());
            }
            if let Some(ms) = self.checkpoint_ms {
                // The micro-batch runner checkpoints every batch: the interval is its
                // batch interval.
                if self.runner == "microbatch" {
                    o.runner_flags.set("batch-interval", format!("{ms}ms"));
                } else {
                    o.engine.checkpoint_interval = Some(std::time::Duration::from_millis(ms));
                }
                let name = format!("tidewater-bench-checkpoints-{}", std::process::id());
                o.engine.checkpoint_dir = Some(match self.checkpoint_store {
                    Some(url) => PathBuf::from(format!("{}/{name}", url.trim_end_matches('/'))),
                    None => std::env::temp_dir().join(name),
                });
                if self.at_least_once {
                    o.engine.guarantee = "at-least-once".into();
                }
            }
        }
        o
    }
}

/// A port free on loopback now.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or(0)
}
