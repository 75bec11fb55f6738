//! What the crash and supervision tests share: the crash job's reference output (the
//! direct runner's), a run of it in a temporary directory, kills, waiting for a job, and
//! comparing outputs line for line; a PostgreSQL server's helpers.

#![allow(dead_code)] // each test binary uses its part

pub mod coordinated;
pub mod netns;
pub mod s3;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};
use tidewater::{Pipeline, PipelineOptions};
use tidewater_examples::crash_job;

pub const RECORDS: u64 = 30_000;
/// Records per second: a run takes about 3 s, so kills land mid-run.
pub const RATE: f64 = 10_000.0;

/// Runs `f` for each engine runner, the two side by side on threads of their own: for
/// scenarios whose jobs are rate-limited and mostly wait (a failure in either fails
/// the test, with its message).
pub fn on_each_runner(f: impl Fn(&'static str) + Sync) {
    std::thread::scope(|scope| {
        for runner in RUNNERS {
            let f = &f;
            scope.spawn(move || f(runner));
        }
    });
}

/// One crash scenario at a time: they time their kills, and the machine is small.
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// The direct runner's output of the job of [`RECORDS`] records, once.
pub fn reference() -> &'static Vec<String> {
    static REF: OnceLock<Vec<String>> = OnceLock::new();
    REF.get_or_init(|| reference_of(RECORDS))
}

/// The direct runner's output of the job of `records` records.
pub fn reference_of(records: u64) -> Vec<String> {
    tidewater_examples::register_runners();
    let dir = tempfile::tempdir().unwrap();
    let p = Pipeline::new(PipelineOptions {
        no_validate: true,
        ..PipelineOptions::default()
    });
    crash_job::build(&p, records, 0.0, dir.path());
    p.run().unwrap();
    crash_job::committed_lines(dir.path()).unwrap()
}

pub struct Rng(u64);

impl Rng {
    pub fn new() -> (Self, u64) {
        let seed = std::env::var("TIDEWATER_CRASH_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_nanos() as u64)
                    .unwrap_or(1)
            });
        (Rng(seed), seed)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)) % n.max(1)
    }
}

pub struct Run {
    pub out: PathBuf,
    pub ckpt: PathBuf,
    pub runner: &'static str,
    /// Records the job reads ([`RECORDS`] unless set).
    pub records: u64,
    /// Where the numbers come from, if not the generator (`--kafka-topic ...`).
    pub source: Vec<String>,
    /// The environment its processes get (an object store's endpoint and credentials).
    pub env: Vec<(&'static str, String)>,
    _dir: tempfile::TempDir,
}

/// The runners that checkpoint.
pub const RUNNERS: [&str; 2] = ["native", "microbatch"];

/// A runner's flags for a checkpoint (or batch) every 100 ms.
pub fn runner_flags(runner: &str) -> [String; 2] {
    let interval = match runner {
        "microbatch" => "--batch-interval=100ms",
        _ => "--checkpoint-interval=100ms",
    };
    [format!("--runner={runner}"), interval.to_string()]
}

impl Run {
    pub fn new() -> Self {
        Self::on("native")
    }

    pub fn on(runner: &'static str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let ckpt = dir.path().join("ckpt");
        std::fs::create_dir_all(&out).unwrap();
        Run {
            out,
            ckpt,
            runner,
            records: RECORDS,
            source: Vec::new(),
            env: Vec::new(),
            _dir: dir,
        }
    }

    /// The job with its stateful DoFn's state in the embedded store (`--state-backend
    /// fjall`), in a directory of the run's: checkpoints of it are the store's table
    /// files (`state_snapshots=files`, the default with a local checkpoint directory).
    pub fn on_store(runner: &'static str) -> Self {
        let run = Self::on(runner);
        let state = run._dir.path().join("state");
        Run {
            source: vec![
                "--state-backend=fjall".into(),
                format!("--state-dir={}", state.display()),
            ],
            ..run
        }
    }

    /// The job with its checkpoints in a new bucket of the S3 server `s3`.
    pub fn on_s3(runner: &'static str, s3: &s3::S3) -> Self {
        Run {
            ckpt: PathBuf::from(format!("{}/checkpoints", s3.bucket(runner))),
            env: s3.env(),
            ..Self::on(runner)
        }
    }

    /// The job over a Kafka topic holding the generator's numbers.
    pub fn over_topic(runner: &'static str, brokers: &str, topic: &str) -> Self {
        crash_job::fill_topic(brokers, topic, RECORDS, 4).unwrap();
        Run {
            source: vec![
                format!("--kafka-brokers={brokers}"),
                format!("--kafka-topic={topic}"),
            ],
            ..Self::on(runner)
        }
    }

    pub fn command(&self, extra: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_crash_job"));
        c.args(self.args(extra))
            .envs(self.env.iter().map(|(k, v)| (*k, v.as_str())))
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        c
    }

    /// The crash job's arguments for this run, then `extra`.
    pub fn args(&self, extra: &[&str]) -> Vec<String> {
        let mut args: Vec<String> = runner_flags(self.runner).to_vec();
        args.push(format!("--records={}", self.records));
        args.push(format!("--rate={RATE}"));
        args.push(format!("--checkpoint-dir={}", self.ckpt.display()));
        args.push(format!("--output={}", self.out.display()));
        args.extend(self.source.iter().cloned());
        args.extend(extra.iter().map(|s| s.to_string()));
        args
    }

    /// The processes of its local cluster, process 0 first: from the `pids` file the
    /// supervisor writes in a local checkpoint directory, else found by their command
    /// lines.
    pub fn pids(&self) -> Vec<i32> {
        if self.ckpt.to_string_lossy().contains("://") {
            return cluster_pids(&format!("--checkpoint-dir={}", self.ckpt.display()));
        }
        std::fs::read_to_string(self.ckpt.join("pids"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    }

    pub fn lines(&self) -> Vec<String> {
        crash_job::committed_lines(&self.out).unwrap()
    }
}

/// The processes of a local cluster whose command line holds `marker`, by process id
/// (they have `--process-id=I`; their supervisor has not).
pub fn cluster_pids(marker: &str) -> Vec<i32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<String> = cmdline
            .split(|b| *b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        if !args.iter().any(|a| a == marker) {
            continue;
        }
        if let Some(id) = args
            .iter()
            .find_map(|a| a.strip_prefix("--process-id=")?.parse::<u32>().ok())
        {
            found.push((id, pid));
        }
    }
    found.sort();
    found.into_iter().map(|(_, pid)| pid).collect()
}

pub fn signal(pid: i32, sig: &str) {
    let _ = Command::new("kill").args([sig, &pid.to_string()]).status();
}

/// Waits for `child` (at most 2 minutes); its stderr.
pub fn finish(child: Child, what: &str) -> String {
    finish_within(child, what, Duration::from_secs(120))
}

/// Waits for `child` (at most `limit`); its stderr. The stderr is read while the child
/// runs, so a chatty job cannot fill the pipe and block on it.
pub fn finish_within(mut child: Child, what: &str, limit: Duration) -> String {
    let started = Instant::now();
    let reader = child.stderr.take().map(|mut e| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = std::io::Read::read_to_end(&mut e, &mut bytes);
            String::from_utf8_lossy(&bytes).into_owned()
        })
    });
    let stderr = |reader: Option<std::thread::JoinHandle<String>>| {
        reader
            .map(|r| r.join().unwrap_or_default())
            .unwrap_or_default()
    };
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let err = stderr(reader);
            assert!(
                status.success(),
                "{what}: the job failed ({status}):\n{err}"
            );
            return err;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            let err = stderr(reader);
            panic!("{what}: the job did not finish within {limit:?}; its stderr:\n{err}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The first difference between two sorted line lists, for a failure message.
pub fn difference(got: &[String], want: &[String]) -> String {
    fn count(v: &[String]) -> BTreeMap<&str, i64> {
        let mut m = BTreeMap::<&str, i64>::new();
        for l in v {
            *m.entry(l.as_str()).or_default() += 1;
        }
        m
    }
    let (g, w) = (count(got), count(want));
    let mut diffs = Vec::new();
    for (l, n) in &w {
        let have = g.get(l).copied().unwrap_or(0);
        if have != *n {
            diffs.push(format!("{l:?}: expected {n}, got {have}"));
        }
    }
    for (l, n) in &g {
        if !w.contains_key(l) {
            diffs.push(format!("{l:?}: expected 0, got {n}"));
        }
    }
    format!(
        "{} lines, expected {}; {} differ, first: {:?}",
        got.len(),
        want.len(),
        diffs.len(),
        &diffs[..diffs.len().min(5)]
    )
}

pub fn assert_exact(run: &Run, what: &str) {
    let got = run.lines();
    let other;
    let want = if run.records == RECORDS {
        reference()
    } else {
        other = reference_of(run.records);
        &other
    };
    assert!(got == *want, "{what}: {}", difference(&got, want));
}

/// The PostgreSQL server of the sink's tests (`.ci/run` starts one and sets
/// `TIDEWATER_PG_URL`); `None` after a loud message.
pub fn postgres(test: &str) -> Option<String> {
    match std::env::var("TIDEWATER_PG_URL") {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            eprintln!(
                "\n*** SKIPPED {test}: no PostgreSQL server (set TIDEWATER_PG_URL; see the README) ***\n"
            );
            None
        }
    }
}

pub fn pg_client(url: &str) -> tokio_postgres::Client {
    tidewater::io::runtime().block_on(async {
        let (c, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(async move {
            let _ = conn.await;
        });
        c
    })
}

/// What the PostgreSQL server is doing, for a test's message when a job takes too long:
/// every session of the database (what it runs and waits for), the locks waited for
/// and who holds them, and the prepared transactions.
pub fn pg_activity(url: &str) -> String {
    let c = pg_client(url);
    let rt = tidewater::io::runtime();
    let mut out = String::new();
    let queries = [
        ("sessions", "SELECT pid::text, coalesce(application_name, ''), coalesce(state, ''), coalesce(wait_event_type || ':' || wait_event, ''), coalesce(now() - xact_start, interval '0')::text, left(coalesce(query, ''), 160) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"),
        ("waiting locks", "SELECT w.pid::text, w.locktype, coalesce(w.relation::regclass::text, ''), w.mode, coalesce(array_to_string(pg_blocking_pids(w.pid), ','), ''), coalesce(w.transactionid::text, '') FROM pg_locks w WHERE NOT w.granted"),
        ("prepared", "SELECT gid, prepared::text, owner, database, '', '' FROM pg_prepared_xacts"),
        ("advisory locks", "SELECT pid::text, objid::text, mode, granted::text, '', '' FROM pg_locks WHERE locktype = 'advisory'"),
    ];
    for (what, sql) in queries {
        out.push_str(&format!("-- {what}\n"));
        match rt.block_on(c.query(sql, &[])) {
            Ok(rows) => {
                for r in rows {
                    let cols: Vec<String> = (0..6).map(|i| r.get::<_, String>(i)).collect();
                    out.push_str(&format!("{}\n", cols.join(" | ")));
                }
            }
            Err(e) => out.push_str(&format!("({e})\n")),
        }
    }
    out
}

/// Prints [`pg_activity`] once if the returned guard still lives after `after` (a job
/// that should have ended: the message then says what the server was doing).
pub fn pg_watch(url: &str, after: Duration, what: &str) -> PgWatch {
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (d, url, what) = (done.clone(), url.to_string(), what.to_string());
    std::thread::spawn(move || {
        let started = Instant::now();
        while started.elapsed() < after {
            if d.load(std::sync::atomic::Ordering::SeqCst) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        eprintln!(
            "{what}: still running after {after:?}; the server:\n{}",
            pg_activity(&url)
        );
    });
    PgWatch(done)
}

/// Ends [`pg_watch`]'s wait when dropped.
pub struct PgWatch(std::sync::Arc<std::sync::atomic::AtomicBool>);

impl Drop for PgWatch {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

/// A job started with `--status-addr` (its stderr piped): its status server's base URL,
/// from its first line, and its later stderr lines. They are read all along: a full
/// pipe would stall the job, a closed one fail its messages.
pub fn status_base(child: &mut Child, what: &str) -> (String, std::sync::mpsc::Receiver<String>) {
    let seen = stderr_lines(child);
    let first = seen.recv_timeout(Duration::from_secs(20)).unwrap();
    let base = first
        .strip_prefix("status: ")
        .and_then(|l| l.split_once("/ (the job's page)"))
        .map(|(base, _)| base.to_string())
        .unwrap_or_else(|| panic!("{what}: the first line is not the URL: {first}"));
    (base, seen)
}

/// A job's stderr (piped), line by line, read all along on a thread of its own.
pub fn stderr_lines(child: &mut Child) -> std::sync::mpsc::Receiver<String> {
    use std::io::BufRead;
    let (lines, seen) = std::sync::mpsc::channel();
    let stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    std::thread::spawn(move || {
        for line in stderr.lines().map_while(Result::ok) {
            let _ = lines.send(line);
        }
    });
    seen
}

/// Kills process `pid` when dropped, unless it ended: a test that fails half-way leaves
/// no job running.
pub struct KillOnDrop(pub u32);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if !gone(self.0 as i32) {
            signal(self.0 as i32, "-KILL");
        }
    }
}

/// A fresh PostgreSQL table `table` for the crash job's lines.
pub fn pg_fresh_table(c: &tokio_postgres::Client, table: &str) {
    let rt = tidewater::io::runtime();
    // A failed earlier run may have left transactions prepared on the table, whose
    // locks would hold the DROP forever.
    let left = rt
        .block_on(c.query("SELECT gid FROM pg_prepared_xacts", &[]))
        .unwrap();
    for gid in left.iter().map(|r| r.get::<_, String>(0)) {
        if gid.starts_with(&format!("tidewater:{table}:")) {
            rt.block_on(c.batch_execute(&format!("ROLLBACK PREPARED '{gid}'")))
                .unwrap();
        }
    }
    // The ledger's rows of earlier runs on the table go too: a run of the same job
    // over them would be refused as a replay.
    rt.block_on(c.batch_execute(&format!(
        "SET lock_timeout = '30s'; DROP TABLE IF EXISTS {table}; CREATE TABLE {table} (line text); \
         DO $$ BEGIN IF to_regclass('tidewater_ledger') IS NOT NULL THEN \
         DELETE FROM tidewater_ledger WHERE target = '{table}'; END IF; END $$"
    )))
    .unwrap();
}

/// Waits until `table` holds a committed row (at most a minute).
pub fn pg_wait_for_rows(c: &tokio_postgres::Client, table: &str, what: &str) {
    let started = Instant::now();
    let count = format!("SELECT count(*) FROM {table}");
    let rt = tidewater::io::runtime();
    while rt
        .block_on(c.query_one(&count, &[]))
        .unwrap()
        .get::<_, i64>(0)
        == 0
    {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{what}: no rows in {table} within a minute"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The crash job's flags to write into `table`.
pub fn pg_flags(url: &str, table: &str) -> [String; 2] {
    [format!("--postgres={url}"), format!("--pg-table={table}")]
}

/// Every committed row of `table` equals the direct runner's lines, and no transaction
/// of the job is left prepared.
pub fn pg_assert_exact(c: &tokio_postgres::Client, table: &str, what: &str) {
    pg_assert_lines(c, table, reference(), what)
}

/// Every committed row of `table` equals `want` (sorted), and no transaction of a job
/// on it is left prepared.
pub fn pg_assert_lines(c: &tokio_postgres::Client, table: &str, want: &[String], what: &str) {
    let rt = tidewater::io::runtime();
    let mut got: Vec<String> = rt
        .block_on(c.query(&format!("SELECT line FROM {table}"), &[]))
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    got.sort();
    assert!(got == want, "{what}: {}", difference(&got, want));
    let left = pg_prepared(c, table);
    assert!(left.is_empty(), "{what}: left prepared: {left:?}");
    eprintln!("{what}: every row exactly once");
}

/// A TCP proxy on loopback to a server, which a test can cut: while cut, every
/// connection through it is closed and each new one is closed as it is accepted (the
/// server out of reach); restored, it forwards again.
pub struct Proxy {
    /// The port it listens on.
    pub port: u16,
    cut: std::sync::Arc<std::sync::atomic::AtomicBool>,
    open: std::sync::Arc<Mutex<Vec<std::net::TcpStream>>>,
}

impl Proxy {
    /// A proxy to `target` (`host:port`).
    pub fn start(target: String) -> Proxy {
        use std::sync::atomic::Ordering::SeqCst;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let cut = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let open = std::sync::Arc::new(Mutex::new(Vec::new()));
        let (c, o) = (cut.clone(), open.clone());
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { continue };
                if c.load(SeqCst) {
                    continue; // dropped: closed at once
                }
                let Ok(server) = std::net::TcpStream::connect(&target) else {
                    continue;
                };
                let mut open = o.lock().unwrap();
                for (from, to) in [(&client, &server), (&server, &client)] {
                    let (mut from, mut to) = (from.try_clone().unwrap(), to.try_clone().unwrap());
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut from, &mut to);
                        let _ = to.shutdown(std::net::Shutdown::Both);
                    });
                }
                open.push(client);
                open.push(server);
            }
        });
        Proxy { port, cut, open }
    }

    /// Cuts every connection and refuses new ones (`true`), or forwards again.
    pub fn cut(&self, on: bool) {
        self.cut.store(on, std::sync::atomic::Ordering::SeqCst);
        if on {
            for s in self.open.lock().unwrap().drain(..) {
                let _ = s.shutdown(std::net::Shutdown::Both);
            }
        }
    }
}

/// The `host:port` PostgreSQL URL `url` (of the `key=value` form) names, and a
/// function giving the same URL with another port; `None` for another form.
pub fn pg_url_ports(url: &str) -> Option<(String, impl Fn(u16) -> String + '_)> {
    let field = |k: &str| {
        url.split_whitespace()
            .find_map(|kv| kv.strip_prefix(k).map(str::to_string))
    };
    let server = format!("{}:{}", field("host=")?, field("port=")?);
    let with_port = move |port: u16| {
        url.split_whitespace()
            .map(|kv| match kv.starts_with("port=") {
                true => format!("port={port}"),
                false => kv.to_string(),
            })
            .collect::<Vec<_>>()
            .join(" ")
    };
    Some((server, with_port))
}

/// The newest checkpoint's manifest in `ckpt`.
pub fn newest_manifest(ckpt: &Path) -> PathBuf {
    let mut m: Vec<PathBuf> = std::fs::read_dir(ckpt)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "manifest"))
        .collect();
    m.sort();
    m.pop().expect("a checkpoint was completed")
}

/// The epoch of a checkpoint's manifest file.
pub fn manifest_epoch(manifest: &Path) -> u64 {
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(manifest).unwrap()).unwrap();
    v["epoch"].as_u64().expect("a manifest names its epoch")
}

/// Flips a byte of the first file the newest checkpoint's manifest names: that
/// checkpoint no longer reads back, and a restore falls back to an older one. Its epoch.
pub fn corrupt_newest_checkpoint(ckpt: &Path) -> u64 {
    let manifest = newest_manifest(ckpt);
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&manifest).unwrap()).unwrap();
    let file = v["files"][0]["name"].as_str().unwrap();
    let path = ckpt.join("parts").join(file);
    let mut bytes = std::fs::read(&path).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x5a;
    std::fs::write(&path, bytes).unwrap();
    manifest_epoch(&manifest)
}

/// The newest epoch among the committed files of `out` (`part-E-I-JOB.txt`).
pub fn newest_committed_file_epoch(out: &Path) -> Option<u64> {
    std::fs::read_dir(out)
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().ok()?;
            name.strip_prefix("part-")?.split('-').next()?.parse().ok()
        })
        .max()
}

/// Runs `command` to its end; it must fail. Its stderr.
pub fn refused(mut command: Command, what: &str) -> String {
    let out = command.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        !out.status.success(),
        "{what}: the run was not refused:\n{err}"
    );
    err
}

/// Whether process `pid` is gone (or a zombie no one has reaped yet: it runs no more).
pub fn gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        // "pid (comm) S ...": the state follows the command's closing parenthesis.
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z') || rest.starts_with('X')),
    }
}

/// The transactions of sinks named after `table` (by default, those writing into it)
/// left prepared.
pub fn pg_prepared(c: &tokio_postgres::Client, table: &str) -> Vec<String> {
    tidewater::io::runtime()
        .block_on(c.query("SELECT gid FROM pg_prepared_xacts", &[]))
        .unwrap()
        .iter()
        .map(|r| r.get::<_, String>(0))
        .filter(|g| g.starts_with(&format!("tidewater:{table}:")))
        .collect()
}

/// Runs `command` (of `run`) until a fault at `point` aborts it, 1 s in.
pub fn abort_at(run: &Run, mut command: Command, point: &str) {
    let marker = run.ckpt.with_extension("fault");
    let status = command
        .env(
            "TIDEWATER_FAULT",
            format!("{point}:1000:{}", marker.display()),
        )
        .status()
        .unwrap();
    assert!(!status.success(), "the fault should have aborted the run");
}

/// Ports free on loopback now.
pub fn free_ports(n: usize) -> Vec<u16> {
    let ls: Vec<std::net::TcpListener> = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    ls.iter().map(|l| l.local_addr().unwrap().port()).collect()
}

/// A secret file in `dir` with permissions `mode`.
pub fn secret_file(dir: &std::path::Path, mode: u32) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join("secret");
    std::fs::write(
        &path,
        "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08\n",
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    path
}

/// `n` free ports on loopback, and a hosts file in `dir` listing them.
pub fn hosts_file(dir: &Path, n: usize) -> (Vec<u16>, PathBuf) {
    let ports = free_ports(n);
    let hosts = dir.join("hosts");
    let listing: String = ports.iter().map(|p| format!("127.0.0.1:{p}\n")).collect();
    std::fs::write(&hosts, listing).unwrap();
    (ports, hosts)
}

/// Each word's last running total among the crash job's `lines` (`total WORD N`).
pub fn last_totals<S: AsRef<str>>(lines: impl IntoIterator<Item = S>) -> BTreeMap<String, u64> {
    let mut last = BTreeMap::new();
    for l in lines {
        if let Some((word, n)) = l
            .as_ref()
            .strip_prefix("total ")
            .and_then(|r| r.rsplit_once(' '))
        {
            let n: u64 = n.parse().expect("a total is a number");
            let e = last.entry(word.to_string()).or_insert(n);
            *e = (*e).max(n);
        }
    }
    last
}

/// Kills a process of `run`'s local cluster of 2 at random, three times, each once the
/// restart of the one before is seen; the output must be the direct runner's. (The
/// caller holds [`serial`]: the two runners' runs may go side by side,
/// [`on_each_runner`].)
pub fn random_kills_of(run: Run) {
    let want = reference();
    let (mut rng, seed) = Rng::new();
    let runner = run.runner;
    let mut child = run.command(&["--local-cluster=2"]).spawn().unwrap();
    // Each kill waits for the restart it causes before the next one, so that every
    // kill is a recovery of its own (two kills in one attempt would be one restart).
    let (mut kills, mut restarts) = (0, 0);
    let started = Instant::now();
    while kills < 3 && started.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(300 + rng.below(900)));
        let pids = run.pids();
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if pids.is_empty() {
            continue;
        }
        signal(pids[rng.below(pids.len() as u64) as usize], "-KILL");
        kills += 1;
        let waited = Instant::now();
        while child.try_wait().unwrap().is_none() {
            let now = run.pids();
            if !now.is_empty() && now.iter().all(|p| !pids.contains(p)) {
                restarts += 1;
                break;
            }
            assert!(
                waited.elapsed() < Duration::from_secs(30),
                "{runner}, seed {seed}: no restart 30 s after a kill"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    let stderr = finish(child, &format!("{runner}: random kills (seed {seed})"));
    let restarted = stderr
        .matches("restarting all 2 processes from the last checkpoint")
        .count();
    // A kill is reported in one line by each process that lost it, and the supervisor's;
    // timely's own panics are not shown.
    assert!(
        !stderr.contains("panicked at") && !stderr.contains("stack backtrace"),
        "{runner}, seed {seed}: a recovery printed panics:\n{stderr}"
    );
    assert!(
        restarts >= 2 && restarted >= restarts,
        "{runner}, seed {seed}: {kills} kills, {restarts} restarts seen, {restarted} reported; several were due:\n{stderr}"
    );
    let got = run.lines();
    assert!(
        got == *want,
        "{runner}, seed {seed}: {}",
        difference(&got, want)
    );
    eprintln!(
        "{runner}{}: {kills} kills, {restarts} restarts (seed {seed}), every line exactly once",
        if run.source.is_empty() {
            String::new()
        } else {
            format!(" with {}", run.source.join(" "))
        }
    );
}
