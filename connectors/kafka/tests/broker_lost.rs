//! A Kafka broker lost mid-run: the job fails with `Error::Unavailable` (the error a
//! local cluster's supervisor restarts on), and run again from its checkpoint
//! directory it writes every record exactly once. Each test starts its own broker on
//! a free port, with the binary `.ci/kafka-broker` installs, kills it (SIGKILL) once
//! the job has committed output, and starts it again. The broker (tansu 0.6.0 with
//! memory storage, the only engine its build has besides S3) comes back empty, so
//! the test produces the same records again, in the same record batches: they get the
//! same offsets, as a real broker that kept its log would give them. It also produces
//! records the topic did not hold when the run started: the run after the loss still
//! stops at the end offsets the interrupted run took, so they are not read.
//!
//! They run when `TIDEWATER_KAFKA_BROKERS` is set (the broker is then installed; `.ci/run`
//! does both), and say so loudly otherwise.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tidewater::{EngineOptions, Pipeline, PipelineOptions};
use tidewater_kafka::admin::{KafkaAdmin, ProducerRecord};
use tidewater_kafka::{test_brokers, KafkaRecord, KafkaSource};
use tidewater_transforms::EpochFiles;

/// Records per partition before the run starts.
const RECORDS: usize = 1_000;
/// Records per partition produced after the loss, which the runs that started before
/// it must not read.
const LATE: usize = 5;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A broker of our own on `port`, from `.ci/kafka-broker` (which `exec`s tansu, so the
/// child is the broker), once it accepts connections.
fn start_broker(port: u16, log: &Path) -> Child {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.ci/kafka-broker");
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .unwrap();
    let mut child = Command::new("bash")
        .arg(&script)
        .arg(port.to_string())
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", script.display()));
    let started = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the broker on port {port} exited with {status}");
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the broker on port {port} did not listen within 60 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

/// Partition `p`'s records `from..to`: value `p-i`, timestamp `i` ms.
fn records(part: u32, from: usize, to: usize) -> Vec<ProducerRecord> {
    (from..to)
        .map(|i| ProducerRecord::text(&format!("{part}-{i}"), i as i64))
        .collect()
}

/// Creates the topic (2 partitions) and produces `RECORDS` records into each, in
/// record batches of 100; with `late`, `LATE` more each.
fn fill(brokers: &str, topic: &str, late: bool) {
    let a = KafkaAdmin::connect(brokers, topic).unwrap();
    assert!(a.create_topic(2).unwrap(), "topic {topic} existed");
    for part in 0..2 {
        for from in (0..RECORDS).step_by(100) {
            let offsets = a.produce(part, &records(part, from, from + 100)).unwrap();
            assert_eq!(offsets[0], from as i64, "the same offsets again");
        }
        if late {
            a.produce(part, &records(part, RECORDS, RECORDS + LATE))
                .unwrap();
        }
    }
}

fn line(r: KafkaRecord) -> String {
    format!("p{} @{} {}", r.partition, r.offset, r.value_text())
}

fn expected(from: usize, to: usize) -> Vec<String> {
    let mut v: Vec<String> = (0..2)
        .flat_map(|p| (from..to).map(move |i| format!("p{p} @{i} {p}-{i}")))
        .collect();
    v.sort();
    v
}

/// Every committed line in `out`, sorted.
fn committed(out: &Path) -> Vec<String> {
    let mut lines = Vec::new();
    for entry in std::fs::read_dir(out).unwrap() {
        let path = entry.unwrap().path();
        if path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("part-"))
        {
            lines.extend(
                std::fs::read_to_string(&path)
                    .unwrap()
                    .lines()
                    .map(String::from),
            );
        }
    }
    lines.sort();
    lines
}

/// The topic's records, at most 1000 per second, as lines committed into `out`
/// exactly once (EpochFiles), on `runner` with checkpoints in `ckpt`: native reads
/// the bounded source (`available_now`), micro-batch the unbounded one under
/// `--trigger available-now`.
fn pipeline(runner: &str, brokers: &str, topic: &str, out: &Path, ckpt: &Path) -> Pipeline {
    tidewater_runner_native::register();
    tidewater_runner_microbatch::register();
    let mut engine = EngineOptions {
        workers: 2,
        checkpoint_dir: Some(ckpt.to_path_buf()),
        ..Default::default()
    };
    let mut flags = tidewater::runner_flags::RunnerFlags::default();
    let mut source = KafkaSource::new(brokers, topic)
        .with_max_rate(1_000.0)
        .with_timeout_ms(1_000);
    // Small fetches (a few dozen records), so that the reader goes back to the broker
    // all the time: one fetch of 1 MB would hold a partition's every record.
    source.fetch_bytes = 1_024;
    if runner == "native" {
        engine.checkpoint_interval = Some(Duration::from_millis(50));
        source = source.available_now();
    } else {
        flags.set("batch-interval", "20ms");
        flags.set("trigger", "available-now");
        flags.set("max-records-per-batch", "200");
    }
    let p = Pipeline::new(PipelineOptions {
        engine,
        runner_flags: flags,
        ..PipelineOptions::for_runner(runner)
    });
    p.apply("ReadTopic", source.read())
        .map("Line", line)
        .write_to("Output", EpochFiles::to(out));
    p
}

/// One at a time: the kill must land mid-run, which needs the machine's attention.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn broker_lost_mid_run(runner: &str) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let (out, ckpt) = (dir.path().join("out"), dir.path().join("ckpt"));
    std::fs::create_dir(&out).unwrap();
    let log: PathBuf = dir.path().join("broker.log");
    let port = free_port();
    let brokers = format!("127.0.0.1:{port}");
    let topic = format!("lost-{runner}");
    let broker = start_broker(port, &log);
    fill(&brokers, &topic, false);
    // The broker is killed once the job has committed output.
    let killer = {
        let out = out.clone();
        std::thread::spawn(move || {
            let mut broker = broker;
            let started = Instant::now();
            while committed(&out).is_empty() && started.elapsed() < Duration::from_secs(30) {
                std::thread::sleep(Duration::from_millis(10));
            }
            std::thread::sleep(Duration::from_millis(100));
            broker.kill().unwrap();
            broker.wait().unwrap();
            committed(&out).len()
        })
    };
    let started = Instant::now();
    let e = pipeline(runner, &brokers, &topic, &out, &ckpt)
        .run()
        .map(|_| ())
        .expect_err("the run survived the loss of its broker")
        .to_string();
    let before = killer.join().unwrap();
    eprintln!(
        "{runner}: the run failed {:?} in, {before} lines committed before the kill: {e}",
        started.elapsed()
    );
    assert!(
        before > 0 && before < 2 * RECORDS,
        "{runner}: the kill did not land mid-run ({before} lines committed)"
    );
    assert!(
        e.starts_with("transform 'ReadTopic")
            && e.contains(&format!("on the brokers [\"{brokers}\"]"))
            && e.ends_with(
                "(an external system is unavailable; the job resumes from its last checkpoint)"
            ),
        "{runner}: the error does not say the broker was lost: {e}"
    );
    // The broker is back with the same records, and more that the interrupted run
    // did not see at its start.
    let mut broker = start_broker(port, &log);
    fill(&brokers, &topic, true);
    let result = pipeline(runner, &brokers, &topic, &out, &ckpt).run();
    let got = committed(&out);
    if runner == "microbatch" {
        // The next available-now run reads exactly the late records.
        pipeline(runner, &brokers, &topic, &out, &ckpt)
            .run()
            .unwrap_or_else(|e| panic!("{runner}: the run after the recovered one: {e}"));
    }
    let after = committed(&out);
    broker.kill().unwrap();
    broker.wait().unwrap();
    result.unwrap_or_else(|e| panic!("{runner}: the run after the loss failed: {e}"));
    assert_eq!(
        got,
        expected(0, RECORDS),
        "{runner}: every record exactly once, none produced after the run started"
    );
    if runner == "microbatch" {
        let mut want = expected(0, RECORDS + LATE);
        want.sort();
        assert_eq!(after, want, "{runner}: the next run read the late records");
    }
}

#[test]
fn native_a_broker_lost_mid_run_is_unavailable_and_the_job_recovers_every_record_once() {
    if test_brokers(
        "native_a_broker_lost_mid_run_is_unavailable_and_the_job_recovers_every_record_once",
    )
    .is_none()
    {
        return;
    }
    broker_lost_mid_run("native");
}

#[test]
fn microbatch_a_broker_lost_mid_run_is_unavailable_and_the_run_recovers_to_its_end_offsets() {
    if test_brokers(
        "microbatch_a_broker_lost_mid_run_is_unavailable_and_the_run_recovers_to_its_end_offsets",
    )
    .is_none()
    {
        return;
    }
    broker_lost_mid_run("microbatch");
}
