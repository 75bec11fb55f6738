//! Exactly-once after crashes: the crash job (`tidewater_examples::crash_job`) runs on
//! the native and the micro-batch runner in 2 processes of a local cluster with
//! checkpoints, its processes are killed (SIGKILL at random moments, an abort during a snapshot, an abort between
//! staging and commit) or hung (SIGSTOP), the supervisor restarts the cluster from the
//! last complete checkpoint, and every committed line must equal the direct runner's
//! output exactly: nothing lost, nothing duplicated. At-least-once must lose nothing;
//! a checkpoint taken at 2 workers must resume at 1 and at 3; a corrupt checkpoint must
//! fall back to the previous one. On the micro-batch runner a batch whose ranges were
//! logged before a crash runs again with exactly those ranges.
//!
//! The random moments come from a seed printed with every failure
//! (`TIDEWATER_CRASH_SEED=N` replays one).

mod common;

use common::*;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// (The two runners' jobs side by side: they are rate-limited and mostly wait.)
#[test]
fn random_kills_leave_every_line_exactly_once() {
    let _s = serial();
    on_each_runner(|runner| random_kills_of(Run::on(runner)));
}

/// The same with the running count's state in the embedded store: its checkpoints are
/// the store's own table files (`state_snapshots=files`, the default), restored into a
/// new store after each kill.
#[test]
fn random_kills_with_state_in_the_embedded_store_leave_every_line_exactly_once() {
    let _s = serial();
    on_each_runner(|runner| random_kills_of(Run::on_store(runner)));
}

/// The crash job reading a Kafka topic (4 partitions, the generator's numbers and event
/// times, read up to the end offsets taken at start): after kills, every line exactly
/// once, the same as the direct runner's over the generator. The source's offsets are
/// what the checkpoints hold for it, so this is the test that they resume it exactly.
#[test]
fn random_kills_over_a_kafka_topic_leave_every_line_exactly_once() {
    let Some(brokers) = tidewater_kafka::test_brokers(
        "random_kills_over_a_kafka_topic_leave_every_line_exactly_once",
    ) else {
        return;
    };
    let _s = serial();
    on_each_runner(|runner| {
        let topic = format!(
            "crash-{runner}-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0)
        );
        random_kills_of(Run::over_topic(runner, &brokers, &topic));
    });
}

#[test]
fn a_crash_during_a_snapshot_or_between_staging_and_commit_loses_and_repeats_nothing() {
    let _s = serial();
    let points = [
        ("native", "snapshot"),
        ("native", "staged"),
        ("native", "committed"),
        ("microbatch", "offsets"),
        ("microbatch", "snapshot"),
        ("microbatch", "staged"),
        ("microbatch", "committed"),
    ];
    // The jobs are rate-limited (they mostly wait): all at once, each on its own
    // directories and ports.
    let started: Vec<_> = points
        .into_iter()
        .map(|(runner, point)| {
            let run = Run::on(runner);
            let marker = run.ckpt.with_extension("fault");
            let child = run
                .command(&["--local-cluster=2"])
                .env(
                    "TIDEWATER_FAULT",
                    format!("{point}:800:{}", marker.display()),
                )
                .spawn()
                .unwrap();
            (run, point, child)
        })
        .collect();
    for (run, point, child) in started {
        let runner = run.runner;
        let what = format!("{runner}: {point}");
        let stderr = finish(child, &what);
        assert!(
            stderr.contains(&format!("fault injected at '{point}'"))
                && stderr.contains("restarting all 2 processes"),
            "{what}: the fault did not fire and recover:\n{stderr}"
        );
        assert_exact(&run, &what);
    }
}

#[test]
fn a_hung_process_is_found_by_the_watchdog_and_the_output_stays_exact() {
    let _s = serial();
    let run = Run::new();
    let child = run
        .command(&["--local-cluster=2", "--runner-option=watchdog_ms=1500"])
        .spawn()
        .unwrap();
    let started = Instant::now();
    loop {
        std::thread::sleep(Duration::from_millis(700));
        if let Some(&pid) = run.pids().last() {
            signal(pid, "-STOP");
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "no processes");
    }
    let stderr = finish(child, "hung process");
    assert!(
        stderr.contains("a process hangs"),
        "the watchdog did not fire:\n{stderr}"
    );
    assert_exact(&run, "hung process");
}

#[test]
fn at_least_once_loses_nothing_after_kills() {
    let _s = serial();
    let (mut rng, seed) = Rng::new();
    let run = Run::new();
    let child = run
        .command(&["--local-cluster=2", "--guarantee=at-least-once"])
        .spawn()
        .unwrap();
    for _ in 0..2 {
        std::thread::sleep(Duration::from_millis(500 + rng.below(800)));
        if let Some(&pid) = run.pids().first() {
            signal(pid, "-KILL");
        }
    }
    finish(child, &format!("at-least-once (seed {seed})"));
    // Nothing lost: every window count and every word's final running count is at
    // least the exact one (replayed records may add to them).
    let parse = |lines: &[String]| {
        let mut m = BTreeMap::<String, u64>::new();
        for l in lines {
            let (key, n) = l.rsplit_once(' ').unwrap();
            let n: u64 = n.parse().unwrap();
            let e = m.entry(key.to_string()).or_default();
            *e = (*e).max(n);
        }
        m
    };
    let (got, want) = (parse(&run.lines()), parse(reference()));
    for (key, n) in &want {
        let have = got.get(key).copied().unwrap_or(0);
        assert!(
            have >= *n,
            "seed {seed}: '{key}' reached {have}, expected at least {n}"
        );
    }
}

/// Runs the job in one process with `workers` workers until a fault aborts it mid-run.
fn crash_at(run: &Run, workers: u32) {
    crash_at_point(run, workers, "staged")
}

/// Runs the job in one process with `workers` workers until a fault at `point` aborts
/// it mid-run.
fn crash_at_point(run: &Run, workers: u32, point: &str) {
    crash_at_point_with(run, workers, point, &[])
}

/// [`crash_at_point`] with more environment variables for the crashed run.
fn crash_at_point_with(run: &Run, workers: u32, point: &str, env: &[(&str, &str)]) {
    let mut command = run.command(&[&format!("--workers={workers}")]);
    command.envs(env.iter().copied());
    abort_at(run, command, point);
}

/// Resumed at another number of workers, one worker reads partitions that were read
/// by different workers: the crashed run starts worker 1's source 300 ms late, as a
/// loaded machine may, so the two partitions' rate schedules (kept in their positions)
/// stand 300 ms apart. A partition waiting for its schedule still holds the watermark:
/// none of its records comes out late (a window fired without them).
#[test]
fn a_checkpoint_taken_at_two_workers_resumes_at_one_and_at_three() {
    let _s = serial();
    // Rate-limited jobs that mostly wait: the four side by side.
    std::thread::scope(|scope| {
        for runner in RUNNERS {
            for workers in [1, 3] {
                scope.spawn(move || {
                    let run = Run::on(runner);
                    crash_at_point_with(
                        &run,
                        2,
                        "staged",
                        &[("TIDEWATER_DELAY", "late-source:300")],
                    );
                    let child = run
                        .command(&[&format!("--workers={workers}")])
                        .spawn()
                        .unwrap();
                    let what = format!("{runner}: resume at {workers} workers");
                    finish(child, &what);
                    assert_exact(&run, &what);
                });
            }
        }
    });
}

/// The newest checkpoint's manifest.
#[test]
fn a_corrupt_checkpoint_falls_back_to_the_previous_one_and_says_so() {
    let _s = serial();
    on_each_runner(|runner| corrupt_checkpoint(runner, false));
}

#[test]
fn a_corrupt_full_file_under_delta_snapshots_falls_back_to_a_checkpoint_before_it() {
    let _s = serial();
    on_each_runner(|runner| corrupt_checkpoint(runner, true));
}

/// Corrupts a file of the newest checkpoint: the first one it names, or with `full` the
/// full file a delta of it builds on (which the checkpoints since share; with a full
/// snapshot every 3 checkpoints, one of an earlier generation is there to fall back
/// to), or its own first when it has no delta. The crash comes between staging and
/// commit at 1 worker, so the newest checkpoint's epoch is not committed: falling back
/// to the one before it is automatic. Falling back past a generation goes past
/// committed epochs: refused (`replay.rs`), and with `--accept-duplicates` nothing is
/// lost.
fn corrupt_checkpoint(runner: &'static str, full: bool) {
    let mut run = Run::on(runner);
    if full {
        run.source
            .push("--runner-option=full_snapshot_every=3".to_string());
    }
    crash_at(&run, 1);
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(newest_manifest(&run.ckpt)).unwrap()).unwrap();
    // Where the crash falls depends on the machine's speed. When the newest checkpoint
    // builds on full files of earlier ones, the first of those goes bad: the fallback
    // is the checkpoint kept from the generation before. When it starts a generation
    // (every file full), one of its own goes bad: the fallback is the one before it.
    // (Removing such a manifest instead, as if the crash had come before it, would not
    // do: the older generation's last checkpoint went when it was written.)
    let files = manifest["files"].as_array().unwrap();
    let base = files.iter().find_map(|f| f["base"][0]["name"].as_str());
    let file = match (full, base) {
        (true, Some(base)) => base,
        _ => files[0]["name"].as_str().unwrap(),
    };
    let path = run.ckpt.join("parts").join(file);
    let mut bytes = std::fs::read(&path).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x5a;
    std::fs::write(&path, bytes).unwrap();
    let what = format!("{runner}: after a corrupt checkpoint");
    if full && base.is_some() {
        let err = refused(run.command(&["--workers=2"]), &what);
        assert!(
            err.contains("falling back to an older one")
                && err.contains("refused to write committed output again"),
            "{what}: {err}"
        );
        let stderr = finish(
            run.command(&["--workers=2", "--accept-duplicates"])
                .spawn()
                .unwrap(),
            &what,
        );
        assert!(
            stderr
                .lines()
                .any(|l| l.contains("WARN") && l.contains("sink 'Output' already committed")),
            "{what}: {stderr}"
        );
        let got = run.lines();
        let have: std::collections::BTreeSet<&String> = got.iter().collect();
        assert!(
            reference().iter().all(|l| have.contains(l)),
            "{what}: lines lost"
        );
        return;
    }
    let stderr = finish(run.command(&["--workers=2"]).spawn().unwrap(), "corrupt");
    assert!(
        stderr.contains("is unusable") && stderr.contains("falling back to an older one"),
        "{runner}: no fallback reported:\n{stderr}"
    );
    assert_exact(&run, &what);
}

#[test]
fn a_job_stopped_with_a_savepoint_at_two_workers_resumes_from_it_at_one() {
    let _s = serial();
    let run = Run::new();
    let savepoint = run.ckpt.with_extension("savepoint");
    // Stopped after 1 s of about 3: the sources stop where they are (no drain).
    let stopped = Command::new(env!("CARGO_BIN_EXE_crash_job"))
        .args([
            "--runner=native",
            "--workers=2",
            "--checkpoint-interval=100ms",
            "--max-duration=1s",
            &format!("--records={RECORDS}"),
            &format!("--rate={RATE}"),
        ])
        .arg(format!("--savepoint-dir={}", savepoint.display()))
        .arg(format!("--output={}", run.out.display()))
        .status()
        .unwrap();
    assert!(stopped.success());
    let partial = run.lines().len();
    assert!(
        partial < reference().len(),
        "the stopped job wrote everything ({partial} lines): it should have stopped early"
    );
    let kept = files_of(&savepoint);
    assert!(kept.len() >= 2, "{kept:?}");
    // Started from the savepoint with checkpoints of its own: the savepoint is only
    // read, and stays for another start.
    let resumed = Command::new(env!("CARGO_BIN_EXE_crash_job"))
        .args([
            "--runner=native",
            "--workers=1",
            "--checkpoint-interval=100ms",
            &format!("--records={RECORDS}"),
            &format!("--rate={RATE}"),
        ])
        .arg(format!("--from-savepoint={}", savepoint.display()))
        .arg(format!("--checkpoint-dir={}", run.ckpt.display()))
        .arg(format!("--output={}", run.out.display()))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    finish(resumed, "resumed from the savepoint");
    assert_exact(&run, "resumed from a savepoint");
    assert_eq!(files_of(&savepoint), kept, "the savepoint changed");
    assert!(
        std::fs::read_dir(&run.ckpt).unwrap().any(|e| e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .ends_with(".manifest")),
        "the resumed job's checkpoints are not in its --checkpoint-dir"
    );
    // A directory without a savepoint is named.
    let out = Command::new(env!("CARGO_BIN_EXE_crash_job"))
        .args(["--runner=native", "--records=10"])
        .arg(format!("--from-savepoint={}", run.out.display()))
        .arg(format!("--output={}", run.ckpt.join("none").display()))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "--from-savepoint {}: no savepoint there",
            run.out.display()
        )),
        "{stderr}"
    );
}

/// A savepoint asked of a running local cluster (SIGUSR1 to its supervisor, which
/// passes it to process 0) is kept while the job goes on to the end; a job started
/// from it at another parallelism writes exactly the output of the epochs after it:
/// with the first job's output up to the savepoint, every line once.
#[test]
fn a_savepoint_taken_while_a_cluster_runs_resumes_exactly_after_its_epoch() {
    let _s = serial();
    let run = Run::new();
    // The job takes about 3 s; ask once its first checkpoints are there.
    savepoint_while_running(run, &["--workers=1", "--local-cluster=2"], |run| {
        run.pids().len() >= 2 && run.ckpt.exists()
    });
}

/// The same of a job on the direct runner: it keeps the savepoint between two rounds
/// and goes on; the native runner resumes from it.
#[test]
fn a_savepoint_taken_while_a_direct_job_runs_resumes_exactly_after_its_epoch() {
    let _s = serial();
    let run = Run::on("direct");
    // Its first output is committed after 1 s.
    savepoint_while_running(run, &[], |run| !run.lines().is_empty());
}

/// Runs the crash job with `extra` flags, asks it for a savepoint 0.7 s after `ready`
/// holds, and checks that the job went on to the end, and that a job resumed from the
/// savepoint writes exactly the output after it.
fn savepoint_while_running(run: Run, extra: &[&str], ready: impl Fn(&Run) -> bool) {
    let savepoints = run.ckpt.with_extension("savepoints");
    let first = run
        .command(
            &[
                extra,
                &[&format!("--savepoint-dir={}", savepoints.display())[..]],
            ]
            .concat(),
        )
        .spawn()
        .unwrap();
    let started = Instant::now();
    while !ready(&run) {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the job did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(700));
    signal(first.id() as i32, "-USR1");
    let err = finish(first, "the job a savepoint was taken of");
    // It went on to the end.
    assert_exact(&run, "the job a savepoint was taken of");
    let kept: Vec<u64> = std::fs::read_dir(&savepoints)
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            name.strip_prefix("savepoint-").and_then(|n| n.parse().ok())
        })
        .collect();
    let [epoch] = kept[..] else {
        panic!("expected one savepoint taken while the job ran, found {kept:?}:\n{err}");
    };
    assert!(
        err.contains(&format!(
            "savepoint-{epoch} (start a job from it with --from-savepoint)"
        )),
        "{err}"
    );
    // The first job's output moves away; the second, from the savepoint at 3 workers,
    // writes into a directory at the same path (the plan is the same) that holds the
    // output as it was at the savepoint: the files of its epochs and those before. (The
    // savepoint commits again what it staged, which must be there, committed; and over
    // the first job's later epochs the second would be refused as a replay.)
    let before = run.out.with_extension("first");
    std::fs::rename(&run.out, &before).unwrap();
    std::fs::create_dir_all(&run.out).unwrap();
    let epoch_of = |name: &str| -> u64 {
        name.strip_prefix("part-")
            .and_then(|n| n.split('-').next())
            .and_then(|e| e.parse().ok())
            .unwrap_or_else(|| panic!("not a committed file: {name}"))
    };
    let mut copied = BTreeMap::new();
    for e in std::fs::read_dir(&before).unwrap() {
        let path = e.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with("part-") && epoch_of(&name) <= epoch {
            let bytes = std::fs::read(&path).unwrap();
            std::fs::write(run.out.join(&name), &bytes).unwrap();
            copied.insert(name, bytes);
        }
    }
    let resumed = Command::new(env!("CARGO_BIN_EXE_crash_job"))
        .args([
            "--runner=native",
            "--workers=3",
            "--checkpoint-interval=100ms",
            &format!("--records={RECORDS}"),
            &format!("--rate={RATE}"),
        ])
        .arg(format!(
            "--from-savepoint={}",
            savepoints.join(format!("savepoint-{epoch}")).display()
        ))
        .arg(format!(
            "--checkpoint-dir={}",
            run.ckpt.with_extension("second").display()
        ))
        .arg(format!("--output={}", run.out.display()))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    finish(resumed, "resumed from a savepoint taken while the job ran");
    let mut lines = Vec::new();
    let mut counts = [0usize; 2];
    for (dir, after) in [(&before, false), (&run.out, true)] {
        for e in std::fs::read_dir(dir).unwrap() {
            let path = e.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if !name.starts_with("part-") {
                continue;
            }
            let e = epoch_of(&name);
            if let (true, Some(bytes)) = (after, copied.get(&name)) {
                assert_eq!(
                    std::fs::read(&path).unwrap(),
                    *bytes,
                    "the resumed job rewrote {name}, of its savepoint's epochs"
                );
                continue;
            }
            if after {
                assert!(
                    e > epoch,
                    "the resumed job wrote epoch {e}, not after {epoch}"
                );
            } else if e > epoch {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            counts[after as usize] += text.lines().count();
            lines.extend(text.lines().map(String::from));
        }
    }
    // The savepoint was taken in the middle: both jobs wrote some of the output.
    assert!(
        counts[0] > 0 && counts[1] > 0,
        "lines up to the savepoint and after it: {counts:?}"
    );
    lines.sort();
    assert!(
        lines == *reference(),
        "output up to the savepoint and after it: {}",
        difference(&lines, reference())
    );
}

/// Every file under `dir` with its bytes, by path.
fn files_of(dir: &std::path::Path) -> std::collections::BTreeMap<std::path::PathBuf, Vec<u8>> {
    let mut out = std::collections::BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let path = e.unwrap().path();
            if path.is_dir() {
                todo.push(path);
            } else {
                out.insert(path.clone(), std::fs::read(&path).unwrap());
            }
        }
    }
    out
}

/// A crash right after a batch's ranges were logged: the restarted job runs that batch
/// again with exactly the logged ranges (at 2 workers and at 3: each partition's range
/// goes to its new owner), and the output is exact.
#[test]
fn a_logged_batch_runs_again_with_exactly_its_ranges() {
    let _s = serial();
    for workers in [2, 3] {
        let run = Run::on("microbatch");
        crash_at_point(&run, 2, "offsets");
        let child = run
            .command(&[&format!("--workers={workers}")])
            .spawn()
            .unwrap();
        let what = format!("replayed batch at {workers} workers");
        let stderr = finish(child, &what);
        assert!(
            stderr.contains("runs again with the source ranges logged before the failure"),
            "{what}: the logged batch was not replayed:\n{stderr}"
        );
        assert_exact(&run, &what);
    }
}

/// The crash job writes into PostgreSQL table `table` (made afresh) through the
/// two-phase-commit sink; a process aborts at `point` once, the cluster restarts, and
/// every committed row must equal the direct runner's lines, with no transaction left
/// prepared.
fn postgres_crash(url: &str, runner: &'static str, point: &str) {
    let table = format!("crash_{runner}_{point}");
    let c = pg_client(url);
    let run = Run::on(runner);
    pg_fresh_table(&c, &table);
    let marker = run.ckpt.with_extension("fault");
    let [pg, pg_table] = pg_flags(url, &table);
    let child = run
        .command(&["--local-cluster=2", &pg, &pg_table])
        .env(
            "TIDEWATER_FAULT",
            format!("{point}:800:{}", marker.display()),
        )
        .spawn()
        .unwrap();
    let what = format!("{runner}: PostgreSQL, {point}");
    let stderr = finish(child, &what);
    assert!(
        stderr.contains(&format!("fault injected at '{point}'"))
            && stderr.contains("restarting all 2 processes"),
        "{what}: the fault did not fire and recover:\n{stderr}"
    );
    pg_assert_exact(&c, &table, &what);
}

/// A crash between `PREPARE TRANSACTION` and `COMMIT PREPARED` (`staged`: the
/// checkpoint is durable, its transactions are prepared, not committed; the restored
/// checkpoint commits them) and during a snapshot (prepared transactions of a
/// checkpoint that never completed: rolled back, the epochs written again).
#[test]
fn a_crash_between_prepare_and_commit_leaves_every_postgres_row_exactly_once() {
    let Some(url) =
        postgres("a_crash_between_prepare_and_commit_leaves_every_postgres_row_exactly_once")
    else {
        return;
    };
    let _s = serial();
    on_each_runner(|runner| {
        for point in ["staged", "snapshot"] {
            postgres_crash(&url, runner, point);
        }
    });
}

/// Crashed at 2 workers during a snapshot, resumed at 1: the one instance takes over
/// both old instances (commits what the checkpoint staged, rolls back what it did not
/// record); every row exactly once.
#[test]
fn a_postgres_job_crashed_at_two_workers_resumes_at_one_with_every_row_exactly_once() {
    let Some(url) = postgres(
        "a_postgres_job_crashed_at_two_workers_resumes_at_one_with_every_row_exactly_once",
    ) else {
        return;
    };
    let _s = serial();
    on_each_runner(|runner| {
        let table = format!("rescale_{runner}");
        let c = pg_client(&url);
        pg_fresh_table(&c, &table);
        let run = Run::on(runner);
        let [pg, pg_table] = pg_flags(&url, &table);
        let marker = run.ckpt.with_extension("fault");
        let status = run
            .command(&["--workers=2", &pg, &pg_table])
            .env(
                "TIDEWATER_FAULT",
                format!("snapshot:1000:{}", marker.display()),
            )
            .status()
            .unwrap();
        assert!(!status.success(), "the fault should have aborted the run");
        let what = format!("{runner}: PostgreSQL, resumed at 1 worker");
        let child = run
            .command(&["--workers=1", &pg, &pg_table])
            .spawn()
            .unwrap();
        let stderr = finish(child, &what);
        // Whether the crash left transactions prepared depends on where the other
        // tasks stood; `tidewater-postgres`'s tests roll back another instance's.
        let rolled_back = stderr.matches("PostgreSQL sink: rolling back").count();
        eprintln!("{what}: {rolled_back} prepared transactions rolled back at restart");
        pg_assert_exact(&c, &table, &what);
    });
}

/// Two jobs of the same binary on one table, each with its own checkpoint directory
/// (issue 33's reproduction): job A stops between staging and commit (its epoch's
/// transactions prepared), job B runs to the end on the same table, then A resumes from
/// its checkpoint. Each job's rows are there exactly once: transaction ids name the job
/// (derived from the checkpoint directory), so B's recovery leaves A's prepared
/// transactions alone. Before, they named only the table: B rolled A's back, and A's
/// resumption "committed" transactions that no longer existed (98,616 rows of 101,172).
/// B is given its own `--job-id`: started afresh with a derived id over output the same
/// pipeline committed, it would be refused as a replay (`replay.rs`).
#[test]
fn two_jobs_on_one_postgres_table_each_commit_every_row_exactly_once() {
    let Some(url) = postgres("two_jobs_on_one_postgres_table_each_commit_every_row_exactly_once")
    else {
        return;
    };
    let _s = serial();
    let mut twice: Vec<String> = reference().iter().chain(reference()).cloned().collect();
    twice.sort();
    on_each_runner(|runner| {
        let table = format!("two_jobs_{runner}");
        let c = pg_client(&url);
        pg_fresh_table(&c, &table);
        let [pg, pg_table] = pg_flags(&url, &table);
        let (a, b) = (Run::on(runner), Run::on(runner));
        let marker = a.ckpt.with_extension("fault");
        let status = a
            .command(&["--workers=2", &pg, &pg_table])
            .env(
                "TIDEWATER_FAULT",
                format!("staged:1000:{}", marker.display()),
            )
            .status()
            .unwrap();
        assert!(!status.success(), "the fault should have aborted job A");
        let what = format!("{runner}: job B beside job A's prepared transactions");
        finish(
            b.command(&["--workers=1", &pg, &pg_table, "--job-id=job-b"])
                .spawn()
                .unwrap(),
            &what,
        );
        let what = format!("{runner}: job A resumed after job B");
        finish(
            a.command(&["--workers=2", &pg, &pg_table]).spawn().unwrap(),
            &what,
        );
        pg_assert_lines(
            &c,
            &table,
            &twice,
            &format!("{runner}: two jobs on one table"),
        );
    });
}

/// Two jobs writing `EpochFiles` into one directory, each with its own checkpoint
/// directory: job A stops between staging and commit, job B runs to the end, A resumes.
/// Each file names its job, so neither overwrites the other's files (before, B's
/// `part-E-I.txt` replaced A's of the same epoch and instance, and B's writes truncated
/// A's staged files): the directory holds both jobs' lines, each exactly once.
#[test]
fn two_jobs_writing_files_into_one_directory_each_commit_every_line_exactly_once() {
    let _s = serial();
    let mut twice: Vec<String> = reference().iter().chain(reference()).cloned().collect();
    twice.sort();
    on_each_runner(|runner| {
        let a = Run::on(runner);
        let mut b = Run::on(runner);
        b.out = a.out.clone();
        crash_at(&a, 2);
        finish(
            b.command(&["--workers=1", "--job-id=job-b"])
                .spawn()
                .unwrap(),
            &format!("{runner}: job B beside job A's staged files"),
        );
        finish(
            a.command(&["--workers=2"]).spawn().unwrap(),
            &format!("{runner}: job A resumed after job B"),
        );
        let got = a.lines();
        assert!(got == twice, "{runner}: {}", difference(&got, &twice));
    });
}

/// Two runs of one job (the same `--job-id`) on one table at once: the second is
/// refused, naming the job and the lock the first holds, and the first commits every
/// row exactly once. (Otherwise the second's recovery would roll back the first's
/// prepared transactions, whose rows the first would then "commit" into nothing.)
#[test]
fn a_second_run_of_one_job_on_one_postgres_table_is_refused() {
    let Some(url) = postgres("a_second_run_of_one_job_on_one_postgres_table_is_refused") else {
        return;
    };
    let _s = serial();
    // About 15 s of input: the first run outlasts the second's wait for the lock.
    const LONGER: u64 = 150_000;
    let want = reference_of(LONGER);
    on_each_runner(|runner| {
        let table = format!("same_job_{runner}");
        let c = pg_client(&url);
        pg_fresh_table(&c, &table);
        let [pg, pg_table] = pg_flags(&url, &table);
        let (mut first, second) = (Run::on(runner), Run::on(runner));
        first.records = LONGER;
        let job = format!("--job-id=same-{runner}");
        let running = first
            .command(&["--workers=1", &pg, &pg_table, &job])
            .spawn()
            .unwrap();
        pg_wait_for_rows(&c, &table, runner);
        // The first run has committed rows: the second, starting from the beginning,
        // is refused as a replay of them.
        let err = refused(
            second.command(&["--workers=1", &pg, &pg_table, &job]),
            runner,
        );
        assert!(
            err.contains(&format!("already committed job same-{runner}'s output")),
            "{runner}: {err}"
        );
        // Told to accept duplicates, it is still refused: the first holds the lock.
        let err = refused(
            second.command(&["--workers=1", &pg, &pg_table, &job, "--accept-duplicates"]),
            runner,
        );
        assert!(
            err.contains(&format!(
                "instance 0 of job same-{runner} is already writing into {table}"
            )),
            "{runner}: {err}"
        );
        finish(running, &format!("{runner}: the first run"));
        pg_assert_lines(&c, &table, &want, &format!("{runner}: the first run"));
    });
}

/// A job restored from its checkpoint keeps the id recorded there (in its sinks' parts):
/// given another `--job-id`, the restart is refused, saying which job the checkpoint
/// is of; without one, it runs on under the recorded id.
#[test]
fn a_restored_job_keeps_its_id_and_another_given_is_refused() {
    let _s = serial();
    on_each_runner(|runner| {
        let run = Run::on(runner);
        finish(
            run.command(&["--job-id=first"]).spawn().unwrap(),
            &format!("{runner}: the first run"),
        );
        let out = run.command(&["--job-id=second"]).output().unwrap();
        assert!(!out.status.success(), "{runner}: another job id was taken");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("invalid option --job-id second: the checkpoint restored is of job first, and a restored job keeps its id"),
            "{runner}: {err}"
        );
        finish(
            run.command(&[]).spawn().unwrap(),
            &format!("{runner}: resumed without --job-id"),
        );
        assert_exact(&run, &format!("{runner}: job id kept"));
    });
}

/// The server lost mid-run (every connection of the sink cut once rows are committed):
/// a process whose open transaction was cut fails with `Unavailable`, the supervisor
/// restarts the cluster from the last checkpoint, and every row is there exactly once.
#[test]
fn a_postgres_server_lost_mid_run_restarts_the_cluster_from_the_last_checkpoint() {
    let Some(url) =
        postgres("a_postgres_server_lost_mid_run_restarts_the_cluster_from_the_last_checkpoint")
    else {
        return;
    };
    let _s = serial();
    let rt = tidewater::io::runtime();
    on_each_runner(|runner| {
        let table = format!("lost_{runner}");
        let c = pg_client(&url);
        pg_fresh_table(&c, &table);
        let run = Run::on(runner);
        let [pg, pg_table] = pg_flags(&url, &table);
        let child = run
            .command(&["--local-cluster=2", &pg, &pg_table])
            .spawn()
            .unwrap();
        pg_wait_for_rows(&c, &table, runner);
        std::thread::sleep(Duration::from_millis(300));
        let cut = rt
            .block_on(c.query(
                &format!(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name LIKE 'tidewater-{table}-%'"
                ),
                &[],
            ))
            .unwrap()
            .len();
        assert!(cut > 0, "{runner}: no connection was cut");
        let what = format!("{runner}: PostgreSQL lost mid-run");
        let stderr = finish(child, &what);
        // A cut that falls between two transactions of an instance loses nothing: the
        // sink connects again. One that cuts an open transaction fails the process
        // with `Unavailable`, and the cluster must restart.
        if stderr.contains("an external system is unavailable") {
            assert!(
                stderr.contains("restarting all 2 processes from the last checkpoint"),
                "{what}: no restart after the loss:\n{stderr}"
            );
            eprintln!("{what}: the cluster restarted from the last checkpoint");
        } else {
            eprintln!("{what}: the cut fell between transactions; the sink connected again");
        }
        pg_assert_exact(&c, &table, &what);
    });
}

/// Chaos: `TIDEWATER_CHAOS_TRIALS` trials (2 by default: the smoke CI runs; the long
/// run is in the README), each drawn from the seed (`TIDEWATER_CRASH_SEED` repeats a
/// run): a runner; a crash at a random moment — a fault at a snapshot, between staging
/// and commit or after a commit, or SIGKILLs of random processes of a local cluster —
/// and a restart, in the same cluster or at another number of workers (a rescale); the
/// whole process group SIGKILLed and started again; SIGKILLs while the cluster recovers
/// from the one before; the newest checkpoint corrupted after a crash (falling back past
/// a committed epoch must be refused clearly, and the job resumes once it is mended);
/// with `TIDEWATER_PG_DIR` (`.ci/postgres`), the database restarted mid-run. At random,
/// worker 1's source started late (partitions out of step) and, with a PostgreSQL
/// server, the two-phase-commit sink; with an S3 server (`common::s3`), checkpoints on
/// it. Every trial's committed output must be the direct runner's, line for line.
#[test]
fn chaos_trials_leave_every_line_exactly_once() {
    let trials: u64 = std::env::var("TIDEWATER_CHAOS_TRIALS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2);
    let pg = std::env::var("TIDEWATER_PG_URL")
        .ok()
        .filter(|u| !u.is_empty());
    // With an S3 server, half the trials checkpoint there.
    let s3 = s3::server("chaos trials with checkpoints on S3");
    let _s = serial();
    let (mut rng, seed) = Rng::new();
    for trial in 0..trials {
        // A client per trial: a trial may restart the database.
        let client = pg.as_deref().map(pg_client);
        let pg = pg.as_deref().zip(client.as_ref());
        let what = chaos_trial(
            &mut rng,
            pg,
            s3.as_ref(),
            &format!("chaos seed {seed} trial {trial}"),
        );
        eprintln!("{what}: exact");
    }
}

/// The arguments as `&str`s, for [`Run::command`].
fn strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

/// One chaos trial (see above); what it did.
fn chaos_trial(
    rng: &mut Rng,
    pg: Option<(&str, &tokio_postgres::Client)>,
    s3: Option<&s3::S3>,
    label: &str,
) -> String {
    let runner = RUNNERS[rng.below(2) as usize];
    let s3 = s3.filter(|_| rng.below(2) == 0);
    let run = match s3 {
        Some(s3) => Run::on_s3(runner, s3),
        None => Run::on(runner),
    };
    let mut what = format!(
        "{label}: {runner}{}",
        if s3.is_some() {
            ", checkpoints on S3"
        } else {
            ""
        }
    );
    let mut env: Vec<(&str, String)> = Vec::new();
    if rng.below(2) == 0 {
        let ms = rng.below(400);
        env.push(("TIDEWATER_DELAY", format!("late-source:{ms}")));
        what.push_str(&format!(", worker 1's source {ms} ms late"));
    }
    let table = format!("chaos_{}", std::process::id());
    let mut sink = Vec::new();
    let pg = pg.filter(|_| rng.below(3) == 0);
    if let Some((url, c)) = pg {
        pg_fresh_table(c, &table);
        sink.extend(pg_flags(url, &table));
        what.push_str(", PostgreSQL sink");
    }
    let point = ["snapshot", "staged", "committed"][rng.below(3) as usize];
    let after = 50 + rng.below(2_500);
    let fault = format!(
        "{point}:{after}:{}",
        run.out.with_extension("fault").display()
    );
    let workers = format!("--workers={}", 1 + rng.below(3));
    let cluster = [
        sink.clone(),
        vec!["--local-cluster=2".into(), workers.clone()],
    ]
    .concat();
    let command = |args: &[String]| {
        let mut c = run.command(&strs(args));
        c.envs(env.iter().map(|(k, v)| (*k, v.as_str())));
        c
    };
    // Without a database to restart, its scenario is a random kill's.
    let pg_dir = std::env::var("TIDEWATER_PG_DIR")
        .ok()
        .filter(|_| pg.is_some());
    let mut scenario = rng.below(7);
    // The newest checkpoint is corrupted in a local directory only.
    if (scenario == 6 && pg_dir.is_none()) || (scenario == 5 && s3.is_some()) {
        scenario = 1;
    }
    match scenario {
        0 => {
            let again = format!("--workers={}", 1 + rng.below(3));
            what.push_str(&format!(
                ", fault at '{point}' after {after} ms, {workers}, resumed with {again}"
            ));
            // The run may end before the fault fires: resuming a finished job adds nothing.
            let _ = command(&[sink.clone(), vec![workers]].concat())
                .env("TIDEWATER_FAULT", &fault)
                .status()
                .unwrap();
            let child = command(&[sink, vec![again]].concat()).spawn().unwrap();
            finish(child, &what);
        }
        1 => {
            let kills = 1 + rng.below(3);
            what.push_str(&format!(
                ", {kills} SIGKILLs in a local cluster of 2, {workers}"
            ));
            let child = command(&cluster).spawn().unwrap();
            let started = Instant::now();
            let mut done = 0;
            while done < kills && started.elapsed() < Duration::from_secs(60) {
                std::thread::sleep(Duration::from_millis(200 + rng.below(1_200)));
                let pids = run.pids();
                if !pids.is_empty() {
                    signal(pids[rng.below(pids.len() as u64) as usize], "-KILL");
                    done += 1;
                }
            }
            finish(child, &what);
        }
        3 => {
            let after = 300 + rng.below(1_500);
            what.push_str(&format!(
                ", the whole process group SIGKILLed after {after} ms, {workers}, started again"
            ));
            let mut child = command(&cluster).spawn().unwrap();
            std::thread::sleep(Duration::from_millis(after));
            let pids = run.pids();
            child.kill().unwrap();
            child.wait().unwrap();
            for p in &pids {
                signal(*p, "-KILL");
            }
            let killed = Instant::now();
            while !pids.iter().all(|p| gone(*p)) {
                assert!(
                    killed.elapsed() < Duration::from_secs(5),
                    "{what}: a process survived"
                );
                std::thread::sleep(Duration::from_millis(10));
            }
            finish(command(&cluster).spawn().unwrap(), &what);
        }
        4 => {
            let kills = 2 + rng.below(2);
            what.push_str(&format!(
                ", {kills} SIGKILLs each while the cluster recovers from the one before, {workers}"
            ));
            let mut child = command(&cluster).spawn().unwrap();
            let started = Instant::now();
            let mut before: Vec<i32> = Vec::new();
            let mut done = 0;
            while done < kills && started.elapsed() < Duration::from_secs(60) {
                if child.try_wait().unwrap().is_some() {
                    break;
                }
                let pids = run.pids();
                // The first kill once the cluster runs; each next one as soon as the
                // restarted processes are there, while they restore.
                if pids.is_empty() || pids == before {
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                }
                std::thread::sleep(Duration::from_millis(if done == 0 {
                    300 + rng.below(700)
                } else {
                    rng.below(300)
                }));
                signal(pids[rng.below(pids.len() as u64) as usize], "-KILL");
                before = pids;
                done += 1;
            }
            finish(child, &what);
        }
        5 => {
            what.push_str(&format!(
                ", fault at '{point}' after {after} ms, {workers}, the newest checkpoint corrupted"
            ));
            let _ = command(&[sink.clone(), vec![workers.clone()]].concat())
                .env("TIDEWATER_FAULT", &fault)
                .status()
                .unwrap();
            if run.ckpt.exists()
                && std::fs::read_dir(&run.ckpt).unwrap().any(|e| {
                    e.unwrap()
                        .path()
                        .extension()
                        .is_some_and(|x| x == "manifest")
                })
            {
                corrupt_newest_checkpoint(&run.ckpt);
                let out = command(&[sink.clone(), vec![workers.clone()]].concat())
                    .output()
                    .unwrap();
                let err = String::from_utf8_lossy(&out.stderr);
                if !out.status.success() {
                    // Its epoch was committed: falling back past it is refused, and
                    // nothing is written; or it was the only one: there is nothing
                    // to fall back to. The checkpoint mended, the job resumes.
                    let replay = err.contains("refused to write committed output again")
                        && err.contains("--accept-duplicates");
                    let none = err.contains("no usable checkpoint in");
                    assert!(
                        replay || none,
                        "{what}: failed without a clear refusal:\n{err}"
                    );
                    what.push_str(if replay {
                        " (fallback refused: its epoch was committed)"
                    } else {
                        " (refused: no other checkpoint)"
                    });
                    corrupt_newest_checkpoint(&run.ckpt);
                }
            }
            let child = command(&[sink, vec![workers]].concat()).spawn().unwrap();
            finish(child, &what);
        }
        6 => {
            let dir = pg_dir.expect("chosen only with a database to restart");
            what.push_str(&format!(
                ", the database restarted mid-run in a local cluster of 2, {workers}"
            ));
            let child = command(&cluster).spawn().unwrap();
            if let Some((_, c)) = pg {
                pg_wait_for_rows(c, &table, &what);
            }
            std::thread::sleep(Duration::from_millis(rng.below(500)));
            let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../.ci/postgres");
            let status = Command::new(script)
                .args(["restart", &dir])
                .stdout(Stdio::null())
                .status()
                .unwrap();
            assert!(status.success(), "{what}: the database did not restart");
            finish(child, &what);
            let c = pg_client(pg.expect("a PostgreSQL sink").0);
            pg_assert_exact(&c, &table, &what);
            return what;
        }
        _ => {
            what.push_str(&format!(
                ", fault at '{point}' after {after} ms in a local cluster of 2, {workers}"
            ));
            let child = command(&cluster)
                .env("TIDEWATER_FAULT", &fault)
                .spawn()
                .unwrap();
            finish(child, &what);
        }
    }
    match pg {
        Some((_, c)) => pg_assert_exact(c, &table, &what),
        None => assert_exact(&run, &what),
    }
    what
}
