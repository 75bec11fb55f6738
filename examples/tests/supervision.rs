//! A local cluster's supervisor as a production job meets it: many failures spread over
//! a long run (the restart strategy), the supervisor itself killed (no process of its
//! cluster left behind), a second job on the same checkpoint directory (refused), a
//! database outage, and SIGTERM (a drain).
//! Every run's committed output must still be the direct runner's, line for line.

mod common;

use common::*;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// Waits until the cluster's processes are running (their pids written), or the job
/// ends; their pids.
fn running(run: &Run, child: &mut std::process::Child) -> Vec<i32> {
    let started = Instant::now();
    loop {
        let pids = run.pids();
        if !pids.is_empty() {
            return pids;
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "{}: the job ended before its processes were seen",
            run.runner
        );
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{}: no process started within 30 s",
            run.runner
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The work directory of the supervisor of cluster process `pid` (its outcome file's,
/// which the process has in its environment).
fn work_dir(pid: i32) -> std::path::PathBuf {
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
    let outcome = environ
        .split(|b| *b == 0)
        .filter_map(|kv| std::str::from_utf8(kv).ok())
        .find_map(|kv| kv.strip_prefix("TIDEWATER_CLUSTER_CHILD="))
        .expect("a cluster process knows where its outcome goes")
        .to_string();
    std::path::Path::new(&outcome)
        .parent()
        .unwrap()
        .to_path_buf()
}

/// 24 SIGKILLs spread over the run, one 0.5 to 1 s after the restart of the
/// one before: the job keeps completing checkpoints between them, so the default
/// restart strategy (exponential delay, reset by an attempt that checkpointed) restarts
/// it every time. Before, the supervisor gave up at the 21st restart of the job's life.
/// (The restart strategy's own test takes 30 kills in a minute: `restart/tests.rs`.)
#[test]
fn kills_past_the_twentieth_spread_over_the_run_do_not_end_a_job_that_keeps_checkpointing() {
    let _s = serial();
    // 10,000 records a second: about 36 s of input, longer than the kills take (about
    // 25 s: 0.75 s between a restart and the next kill, and the restart).
    const LONG: u64 = 360_000;
    const KILLS: u32 = 24;
    let want = reference_of(LONG);
    let (mut rng, seed) = Rng::new();
    // One runner a run, drawn (the seed says which): the restart strategy is the
    // supervisor's, the same for both, and each run lasts 45 s.
    let drawn = RUNNERS[rng.below(2) as usize];
    for runner in [drawn] {
        let mut run = Run::on(runner);
        run.records = LONG;
        let mut child = run.command(&["--local-cluster=2"]).spawn().unwrap();
        let mut kills = 0;
        while kills < KILLS {
            let pids = running(&run, &mut child);
            std::thread::sleep(Duration::from_millis(500 + rng.below(500)));
            assert!(
                child.try_wait().unwrap().is_none(),
                "{runner}, seed {seed}: the job ended after {kills} kills, before {KILLS}"
            );
            signal(pids[rng.below(pids.len() as u64) as usize], "-KILL");
            kills += 1;
            // The restart this kill causes: new pids.
            let waited = Instant::now();
            loop {
                let now = run.pids();
                if !now.is_empty() && now.iter().all(|p| !pids.contains(p)) {
                    break;
                }
                assert!(
                    child.try_wait().unwrap().is_none(),
                    "{runner}, seed {seed}: the job ended at kill {kills}"
                );
                assert!(
                    waited.elapsed() < Duration::from_secs(30),
                    "{runner}, seed {seed}: no restart 30 s after kill {kills}"
                );
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        let stderr = finish_within(child, "the kills", Duration::from_secs(300));
        assert!(
            stderr.contains(&format!("(restart {KILLS})")),
            "{runner}, seed {seed}: {KILLS} restarts were due:\n{stderr}"
        );
        let got = run.lines();
        assert!(
            got == want,
            "{runner}, seed {seed}: {}",
            difference(&got, &want)
        );
        eprintln!(
            "{runner}: {KILLS} kills, {KILLS} restarts (seed {seed}), every line exactly once"
        );
    }
}

/// The supervisor SIGKILLed mid-run: its processes see their standard input close and
/// end, none is left running (before, they ran on to the end of the job, writing
/// output with no one supervising them). A new supervisor on the same checkpoint
/// directory then resumes the job, and the output is exact.
#[test]
fn a_killed_supervisor_leaves_no_process_behind_and_the_job_resumes() {
    let _s = serial();
    // About 10 s of input: the processes would outlive the check by far.
    const RECORDS_10S: u64 = 100_000;
    let want = reference_of(RECORDS_10S);
    on_each_runner(|runner| {
        let mut run = Run::on(runner);
        run.records = RECORDS_10S;
        let mut supervisor = run.command(&["--local-cluster=2"]).spawn().unwrap();
        let pids = running(&run, &mut supervisor);
        std::thread::sleep(Duration::from_millis(1_000));
        supervisor.kill().unwrap();
        supervisor.wait().unwrap();
        let killed = Instant::now();
        while !pids.iter().all(|p| gone(*p)) {
            assert!(
                killed.elapsed() < Duration::from_secs(3),
                "{runner}: processes {:?} of a killed supervisor still run 3 s later",
                pids.iter().filter(|p| !gone(**p)).collect::<Vec<_>>()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        let resumed = run.command(&["--local-cluster=2"]).spawn().unwrap();
        finish(
            resumed,
            &format!("{runner}: resumed after its supervisor was killed"),
        );
        let got = run.lines();
        assert!(got == want, "{runner}: {}", difference(&got, &want));
    });
}

/// A second job on a checkpoint directory in use is refused at once, naming the
/// directory and the holder, and the first job's output stays exact; a single-process
/// job is refused the same way.
#[test]
fn a_second_job_on_the_same_checkpoint_dir_is_refused() {
    let _s = serial();
    on_each_runner(|runner| {
        let run = Run::on(runner);
        let mut first = run.command(&["--local-cluster=2"]).spawn().unwrap();
        running(&run, &mut first);
        for second in [&["--local-cluster=2"][..], &["--workers=1"][..]] {
            let out = run.command(second).stderr(Stdio::piped()).output().unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(!out.status.success(), "{runner} {second:?}: not refused");
            let expected = format!(
                "invalid option --checkpoint-dir {}: it is in use by another job (process {} holds its lock): one job per checkpoint directory",
                run.ckpt.display(),
                first.id()
            );
            assert!(
                err.contains(&expected),
                "{runner} {second:?}: expected {expected:?} in:\n{err}"
            );
        }
        finish(first, &format!("{runner}: the first job"));
        assert_exact(&run, &format!("{runner}: the first job"));
    });
}

/// The database out of reach for 3 s mid-run (a proxy in front of it cuts every
/// connection and refuses new ones): processes fail with `Unavailable`, and the restarts
/// in the outage fail at once. The default restart strategy backs off (0.1, 0.2, 0.4,
/// 0.8, 1.6 s: past the outage in five restarts) where the supervisor used to burn its 20
/// restarts in the outage's first seconds and fail the job as the server came back.
/// Every row is committed exactly once.
#[test]
fn a_three_second_database_outage_is_survived() {
    let Some(url) = postgres("a_three_second_database_outage_is_survived") else {
        return;
    };
    let _s = serial();
    // Each runner through a proxy of its own, side by side: the jobs mostly wait.
    on_each_runner(|runner| {
        let table = format!("outage_{runner}");
        let c = pg_client(&url);
        pg_fresh_table(&c, &table);
        let Some((server, with_port)) = pg_url_ports(&url) else {
            eprintln!("*** SKIPPED: TIDEWATER_PG_URL is not of the key=value form ***");
            return;
        };
        let proxy = Proxy::start(server);
        let through = with_port(proxy.port);
        let run = Run::on(runner);
        let [pg, pg_table] = pg_flags(&through, &table);
        let child = run
            .command(&["--local-cluster=2", &pg, &pg_table])
            .spawn()
            .unwrap();
        pg_wait_for_rows(&c, &table, runner);
        proxy.cut(true);
        std::thread::sleep(Duration::from_secs(3));
        proxy.cut(false);
        let what = format!("{runner}: a 3-second database outage");
        let _watch = pg_watch(&url, Duration::from_secs(60), &what);
        let stderr = finish(child, &what);
        let restarts = stderr
            .matches("restarting all 2 processes from the last checkpoint")
            .count();
        assert!(restarts >= 1, "{what}: no restart:\n{stderr}");
        pg_assert_exact(&c, &table, &what);
        eprintln!("{what}: survived with {restarts} restarts");
    });
}

/// SIGTERM to the supervisor (what a service manager sends) drains the job: the
/// processes stop reading, fire their windows, commit their output and end, and the
/// supervisor exits 0 long before the input's end, leaving no process behind. The
/// output is what was read, each line once: every word's running totals are 1..k
/// without a gap or a repeat. (Before, SIGTERM killed the supervisor, and its processes
/// ended without committing what they had read.)
#[test]
fn sigterm_to_the_supervisor_drains_the_job() {
    let _s = serial();
    const RECORDS_10S: u64 = 100_000;
    let want = reference_of(RECORDS_10S);
    on_each_runner(|runner| {
        let mut run = Run::on(runner);
        run.records = RECORDS_10S;
        let mut supervisor = run.command(&["--local-cluster=2"]).spawn().unwrap();
        let pids = running(&run, &mut supervisor);
        std::thread::sleep(Duration::from_millis(1_500));
        signal(supervisor.id() as i32, "-TERM");
        let asked = Instant::now();
        let stderr = finish_within(
            supervisor,
            &format!("{runner}: drained by SIGTERM"),
            Duration::from_secs(20),
        );
        let took = asked.elapsed();
        assert!(
            stderr.contains("local cluster: SIGTERM: draining the job"),
            "{runner}: {stderr}"
        );
        assert!(
            pids.iter().all(|p| gone(*p)),
            "{runner}: processes left behind"
        );
        let got = run.lines();
        assert!(
            !got.is_empty() && got.len() < want.len(),
            "{runner}: drained early, {} lines of {} (after {took:?})",
            got.len(),
            want.len()
        );
        let mut seen = std::collections::BTreeSet::new();
        let mut totals: std::collections::BTreeMap<&str, Vec<u64>> = Default::default();
        for line in &got {
            assert!(seen.insert(line), "{runner}: {line:?} twice");
            if let Some(rest) = line.strip_prefix("total ") {
                let (word, n) = rest.rsplit_once(' ').unwrap();
                totals.entry(word).or_default().push(n.parse().unwrap());
            }
        }
        for (word, mut ns) in totals {
            ns.sort();
            let k = ns.len() as u64;
            assert!(
                ns == (1..=k).collect::<Vec<_>>(),
                "{runner}: the running totals of {word:?} are not 1..{k}: {ns:?}"
            );
        }
        eprintln!(
            "{runner}: drained {took:?} after SIGTERM with {} of {} lines",
            got.len(),
            want.len()
        );
    });
}

/// The supervisor's work directory (hosts and outcome files) has a random name and is
/// its user's only (0700), and the hosts file is 0600: a local user can neither read
/// it nor plant a symlink where a launch writes (before: `/tmp/tidewater-cluster-PID`,
/// reused if it existed, its hosts file world-readable and written through symlinks).
#[test]
fn the_cluster_work_directory_is_private_and_unpredictable() {
    use std::os::unix::fs::PermissionsExt;
    let _s = serial();
    const RECORDS_10S: u64 = 100_000;
    let mut run = Run::on("native");
    run.records = RECORDS_10S;
    let mut supervisor = run.command(&["--local-cluster=2"]).spawn().unwrap();
    let pids = running(&run, &mut supervisor);
    let work = work_dir(pids[0]);
    let name = work.file_name().unwrap().to_string_lossy().into_owned();
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let work_mode = mode(&work);
    let hosts_mode = mode(&work.join("hosts-0"));
    let supervisor_pid = supervisor.id();
    signal(supervisor_pid as i32, "-TERM");
    finish_within(supervisor, "drained", Duration::from_secs(20));
    assert!(!work.exists(), "the work directory outlives its supervisor");
    assert!(
        name.starts_with("tidewater-cluster-")
            && name != format!("tidewater-cluster-{supervisor_pid}"),
        "a predictable work directory: {}",
        work.display()
    );
    assert_eq!(work_mode, 0o700, "{}", work.display());
    assert_eq!(hosts_mode, 0o600, "the hosts file");
}

/// A local cluster's supervisor picks free ports and releases them before its processes
/// bind them: another program may take one in between. The process that finds its port
/// taken is restarted with its cluster on fresh ports (not a failed job), and the
/// output stays exact. Here the test takes process 1's port itself: process 1 waits
/// 2.5 s before it binds (`TIDEWATER_DELAY=connect`), the test reads the port from the
/// hosts file of the first attempt and holds it until the second attempt starts.
#[test]
fn a_port_taken_before_a_process_binds_it_restarts_the_cluster() {
    let _s = serial();
    let run = Run::on("native");
    let mut supervisor = run
        .command(&["--local-cluster=2"])
        .env("TIDEWATER_DELAY", "connect:2500")
        .spawn()
        .unwrap();
    let pids = running(&run, &mut supervisor);
    let work = work_dir(pids[0]);
    let hosts = std::fs::read_to_string(work.join("hosts-0")).unwrap();
    let address = hosts
        .lines()
        .nth(1)
        .expect("process 1's address")
        .to_string();
    let taken = std::net::TcpListener::bind(&address)
        .unwrap_or_else(|e| panic!("process 1 bound {address} within 2.5 s ({e})"));
    let started = Instant::now();
    while !work.join("hosts-1").exists() {
        assert!(
            supervisor.try_wait().unwrap().is_none(),
            "the job ended instead of restarting"
        );
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no second attempt within 30 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(taken);
    let stderr = finish(supervisor, "port taken");
    assert!(
        stderr.contains(&format!(
            "process 1 cannot listen on its address {address}: Address already in use"
        )) && stderr.contains("restarting all 2 processes"),
        "the taken port did not restart the cluster:\n{stderr}"
    );
    assert_exact(&run, "port taken");
}
