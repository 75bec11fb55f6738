//! The PostgreSQL sink against a real server: `TIDEWATER_PG_URL` names it (`.ci/run`
//! starts one; the README says how to by hand). Without it, the tests that need a
//! server say so loudly and do nothing. Crashes of a local cluster between prepare and
//! commit are in `examples/tests/crash.rs`, with the other crash tests.

use std::time::{Duration, Instant};
use tidewater::{EngineOptions, Pipeline, PipelineOptions, Read};
use tidewater_postgres::PostgresSink;
use tidewater_transforms::{Count, GenerateSequence};
use tokio_postgres::{Client, NoTls};

/// The server, or `None` after a loud message.
fn server(test: &str) -> Option<String> {
    match std::env::var("TIDEWATER_PG_URL") {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            eprintln!(
                "\n*** SKIPPED {test}: no PostgreSQL server (set TIDEWATER_PG_URL, e.g. \
                 eval \"$(.ci/postgres start DIR)\"; see the README) ***\n"
            );
            None
        }
    }
}

/// One test at a time: they share the server, and the machine is small.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tidewater::io::runtime().block_on(f)
}

fn client(url: &str) -> Client {
    block_on(async {
        let (c, conn) = tokio_postgres::connect(url, NoTls).await.unwrap();
        tokio::spawn(async move {
            let _ = conn.await;
        });
        c
    })
}

/// A fresh table `name` (n bigint, k bigint), and no prepared transaction of job `name`.
fn fresh_table(c: &Client, name: &str, columns: &str) {
    block_on(async {
        for row in c
            .query("SELECT gid FROM pg_prepared_xacts", &[])
            .await
            .unwrap()
        {
            let gid: &str = row.get(0);
            if gid.starts_with(&format!("tidewater:{name}:")) {
                c.batch_execute(&format!("ROLLBACK PREPARED '{gid}'"))
                    .await
                    .unwrap();
            }
        }
        // The ledger's rows of earlier runs on the table too: a run of the same job
        // over them would be refused as a replay.
        c.batch_execute(&format!(
            "DROP TABLE IF EXISTS {name}; CREATE TABLE {name} ({columns}); \
             DO $$ BEGIN IF to_regclass('tidewater_ledger') IS NOT NULL THEN \
             DELETE FROM tidewater_ledger WHERE target = '{name}'; END IF; END $$"
        ))
        .await
        .unwrap();
    })
}

fn rows(c: &Client, table: &str) -> Vec<(i64, i64)> {
    block_on(c.query(&format!("SELECT * FROM {table} ORDER BY 1, 2"), &[]))
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect()
}

fn prepared(c: &Client, job: &str) -> Vec<String> {
    block_on(c.query("SELECT gid FROM pg_prepared_xacts", &[]))
        .unwrap()
        .iter()
        .map(|r| r.get::<_, String>(0))
        .filter(|g| g.starts_with(&format!("tidewater:{job}:")))
        .collect()
}

fn row(n: u64) -> (i64, i64) {
    (n as i64, (n % 7) as i64)
}

fn count_row(kv: (i64, u64)) -> (i64, i64) {
    (kv.0, kv.1 as i64)
}

fn key(r: (i64, i64)) -> i64 {
    r.1
}

/// `records` numbers (at `rate` per second, 0: at once) as rows (n, n % 7) into
/// `table`, and the count per key into `table`_counts; both also captured.
fn pipeline(options: PipelineOptions, url: &str, table: &str, records: u64, rate: f64) -> Pipeline {
    tidewater_runner_direct::register();
    tidewater_runner_native::register();
    tidewater_runner_microbatch::register();
    let p = Pipeline::new(options);
    let mut source = GenerateSequence::new(0, Some(records));
    if rate > 0.0 {
        source = source.with_rate(rate);
    }
    let rows = p.apply("Generate", Read::from(source)).map("Row", row);
    rows.capture("rows");
    rows.write_to(
        "WriteRows",
        PostgresSink::new(url, table, &["n", "k"]).bridged(),
    );
    let counts = rows
        .map("Key", key)
        .apply("Count", Count::per_element())
        .map("CountRow", count_row);
    counts.capture("counts");
    counts.write_to(
        "WriteCounts",
        PostgresSink::new(url, &format!("{table}_counts"), &["k", "n"]).bridged(),
    );
    p
}

fn options(runner: &str, ckpt: Option<&std::path::Path>) -> PipelineOptions {
    let mut engine = EngineOptions {
        checkpoint_dir: ckpt.map(|d| d.to_path_buf()),
        ..Default::default()
    };
    let mut flags = tidewater::runner_flags::RunnerFlags::default();
    match runner {
        "native" => {
            engine.workers = 2;
            engine.checkpoint_interval = Some(Duration::from_millis(50));
        }
        "microbatch" => {
            engine.workers = 2;
            flags.set("batch-interval", "50ms");
        }
        _ => {}
    }
    PipelineOptions {
        engine,
        runner_flags: flags,
        ..PipelineOptions::for_runner(runner)
    }
}

fn sorted(mut v: Vec<(i64, i64)>) -> Vec<(i64, i64)> {
    v.sort();
    v
}

#[test]
fn the_rows_equal_the_direct_runners_output_on_every_runner() {
    let Some(url) = server("the_rows_equal_the_direct_runners_output_on_every_runner") else {
        return;
    };
    let _s = serial();
    let c = client(&url);
    let mut want = None;
    for runner in ["direct", "native", "microbatch"] {
        let table = format!("pg_equal_{runner}");
        fresh_table(&c, &table, "n bigint, k bigint");
        fresh_table(&c, &format!("{table}_counts"), "k bigint, n bigint");
        let dir = tempfile::tempdir().unwrap();
        let ckpt = (runner != "direct").then(|| dir.path().join("ckpt"));
        let r = pipeline(
            options(runner, ckpt.as_deref()),
            &url,
            &table,
            3000,
            20_000.0,
        )
        .run()
        .unwrap_or_else(|e| panic!("{runner}: {e}"));
        let captured = (
            sorted(r.captured_values("rows").unwrap()),
            sorted(r.captured_values("counts").unwrap()),
        );
        let want = want.get_or_insert_with(|| captured.clone());
        assert_eq!(want.0.len(), 3000);
        assert_eq!(want.1.len(), 7);
        assert_eq!(&captured, want, "{runner}: captured output");
        assert_eq!(rows(&c, &table), want.0, "{runner}: the rows in {table}");
        assert_eq!(
            rows(&c, &format!("{table}_counts")),
            want.1,
            "{runner}: the counts"
        );
        assert!(prepared(&c, &table).is_empty(), "{runner}: left prepared");
    }
}

#[test]
fn a_server_that_is_down_at_start_is_a_clear_error() {
    let _s = serial();
    // Nothing listens on port 1 of loopback.
    let url = "host=127.0.0.1 port=1 user=postgres dbname=tidewater connect_timeout=5";
    for runner in ["direct", "native", "microbatch"] {
        let started = Instant::now();
        let e = pipeline(options(runner, None), url, "pg_down", 10, 0.0)
            .run()
            .unwrap_err()
            .to_string();
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{runner}: slow"
        );
        // The first to connect is the runner's check of what the job committed,
        // before any worker starts.
        let reported =
            e.contains(" failed in recover: reading what jobs committed: cannot connect");
        assert!(
            e.starts_with("transform 'Write") && reported && e.contains(
                "cannot connect to PostgreSQL at 127.0.0.1:1 (user postgres, database tidewater): error connecting to server: Connection refused (os error 111)"
            ) && e.contains("(is the server running, and the URL right?)"),
            "{runner}: {e}"
        );
    }
}

#[test]
fn a_server_lost_mid_run_recovers_from_the_last_checkpoint_without_losing_rows() {
    let Some(url) =
        server("a_server_lost_mid_run_recovers_from_the_last_checkpoint_without_losing_rows")
    else {
        return;
    };
    let _s = serial();
    let c = client(&url);
    let table = "pg_lost";
    let records = 6000;
    let want: Vec<(i64, i64)> = (0..records).map(row).collect();
    for runner in ["native", "microbatch"] {
        fresh_table(&c, table, "n bigint, k bigint");
        fresh_table(&c, &format!("{table}_counts"), "k bigint, n bigint");
        let dir = tempfile::tempdir().unwrap();
        let ckpt = dir.path().join("ckpt");
        // Every connection of the sinks is cut once rows are committed: the open
        // transactions are gone with them.
        let killer = {
            let url = url.clone();
            std::thread::spawn(move || {
                let c = client(&url);
                let started = Instant::now();
                while rows(&c, table).is_empty() && started.elapsed() < Duration::from_secs(30) {
                    std::thread::sleep(Duration::from_millis(20));
                }
                std::thread::sleep(Duration::from_millis(200));
                block_on(c.query(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name LIKE 'tidewater-pg_lost%'",
                    &[],
                ))
                .unwrap()
                .len()
            })
        };
        let first = pipeline(options(runner, Some(&ckpt)), &url, table, records, 5_000.0).run();
        let cut = killer.join().unwrap();
        assert!(cut > 0, "{runner}: no connection was cut");
        let mut runs = 1;
        if let Err(e) = first {
            let e = e.to_string();
            assert!(
                e.contains("PostgreSQL at 127.0.0.1")
                    && e.ends_with("(an external system is unavailable; the job resumes from its last checkpoint)"),
                "{runner}: the error does not say the server was lost: {e}"
            );
            eprintln!("{runner}: the run failed as the server went away: {e}");
            // The job runs again from its checkpoint directory.
            pipeline(options(runner, Some(&ckpt)), &url, table, records, 5_000.0)
                .run()
                .unwrap_or_else(|e| panic!("{runner}: the run after the loss failed: {e}"));
            runs += 1;
        }
        assert_eq!(
            rows(&c, table),
            want,
            "{runner}: every row exactly once after {runs} runs"
        );
        let counts: Vec<(i64, i64)> = (0..7)
            .map(|k| (k, (0..records as i64).filter(|n| n % 7 == k).count() as i64))
            .collect();
        assert_eq!(
            rows(&c, &format!("{table}_counts")),
            counts,
            "{runner}: counts"
        );
        assert!(prepared(&c, table).is_empty(), "{runner}: left prepared");
    }
}

#[test]
fn a_bad_table_or_column_count_is_a_clear_error() {
    let Some(url) = server("a_bad_table_or_column_count_is_a_clear_error") else {
        return;
    };
    let _s = serial();
    let c = client(&url);
    fresh_table(&c, "pg_bad", "n bigint, k bigint");
    tidewater_runner_direct::register();
    let run = |sink: PostgresSink<(i64, i64)>| {
        let p = Pipeline::new(PipelineOptions::default());
        p.create("Rows", vec![(1i64, 2i64)])
            .write_to("Write", sink.bridged());
        p.run().unwrap_err().to_string()
    };
    let e = run(PostgresSink::new(&url, "pg_missing", &["n", "k"]));
    assert!(
        e.contains("the table pg_missing (n, k) on PostgreSQL at 127.0.0.1:")
            && e.contains("relation \"pg_missing\" does not exist (42P01)"),
        "{e}"
    );
    let e = run(PostgresSink::new(&url, "pg_bad", &["n"]));
    assert!(
        e.contains(
            "PostgreSQL sink: 1 columns given for table 'pg_bad' (n), but a row has 2 values"
        ),
        "{e}"
    );
    // Refused as the plan is decoded, before anything connects: the table, and the
    // sink id that defaults to it.
    let e = run(PostgresSink::new(&url, "pg_bad; drop", &["n", "k"]).with_sink_id("ok"));
    assert!(
        e.contains("field `table` must be a plain name (letters, digits, _; optionally schema.name), found \"pg_bad; drop\""),
        "{e}"
    );
    let e = run(PostgresSink::new(&url, "pg_bad; drop", &["n", "k"]));
    assert!(
        e.contains("field `sink_id` must be 1 to 80 letters, digits, - or _ (by default the table's name), found \"pg_bad; drop\""),
        "{e}"
    );
}

#[test]
fn leftover_prepared_transactions_of_the_instances_taken_over_are_rolled_back_at_start() {
    let Some(url) = server(
        "leftover_prepared_transactions_of_the_instances_taken_over_are_rolled_back_at_start",
    ) else {
        return;
    };
    let _s = serial();
    let c = client(&url);
    fresh_table(&c, "pg_leftover", "n bigint, k bigint");
    // What a crashed earlier run of this job at 2 workers left: a prepared transaction
    // of each instance; the one instance of this run takes over both.
    for i in 0..2 {
        block_on(c.batch_execute(&format!(
            "BEGIN; INSERT INTO pg_leftover VALUES (-1, {i}); PREPARE TRANSACTION 'tidewater:pg_leftover:leftover-job:e9:i{i}'"
        )))
        .unwrap();
    }
    // Another job's on the same table (and sink), and another sink's: not this job's
    // to touch. (When transaction ids named only the table, a job rolled back every
    // other job's on it, whose rows were then lost when that job committed them.)
    let others = [
        "tidewater:pg_leftover:other-job:e9:i0",
        "tidewater:other:leftover-job:e9:i0",
    ];
    for gid in others {
        block_on(c.batch_execute(&format!(
            "BEGIN; INSERT INTO pg_leftover VALUES (-2, 0); PREPARE TRANSACTION '{gid}'"
        )))
        .unwrap();
    }
    tidewater_runner_direct::register();
    let p = Pipeline::new(PipelineOptions {
        job_id: Some("leftover-job".into()),
        ..PipelineOptions::default()
    });
    p.create("Rows", vec![(1i64, 2i64)]).write_to(
        "Write",
        PostgresSink::new(&url, "pg_leftover", &["n", "k"]).bridged(),
    );
    p.run().unwrap();
    assert_eq!(rows(&c, "pg_leftover"), vec![(1, 2)]);
    assert_eq!(
        prepared(&c, "pg_leftover"),
        vec!["tidewater:pg_leftover:other-job:e9:i0".to_string()]
    );
    assert_eq!(
        prepared(&c, "other"),
        vec!["tidewater:other:leftover-job:e9:i0".to_string()]
    );
    for gid in others {
        block_on(c.batch_execute(&format!("ROLLBACK PREPARED '{gid}'"))).unwrap();
    }
}
