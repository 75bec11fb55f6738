//! Checkpoints and savepoints on an S3-compatible server (`common::s3`: the one
//! `.ci/run` starts, or a `moto_server` started here): `--checkpoint-dir s3://...` and
//! `--savepoint-dir s3://...` on both checkpointing runners, kills at random, a
//! savepoint of 3 processes restored into 1 process and into a local cluster, and one
//! job per checkpoint store (a lease). Every output line is compared with the direct
//! runner's.

mod common;

use common::*;
use std::process::{Command, Stdio};

#[test]
fn random_kills_with_checkpoints_on_s3_leave_every_line_exactly_once() {
    let Some(s3) = s3::server("random_kills_with_checkpoints_on_s3_leave_every_line_exactly_once")
    else {
        return;
    };
    // One runner a run (drawn; the chaos trials checkpoint on S3 on both as well).
    let (mut rng, seed) = Rng::new();
    let runner = RUNNERS[rng.below(2) as usize];
    eprintln!("random kills with checkpoints on S3: {runner} (seed {seed})");
    let _s = serial();
    random_kills_of(Run::on_s3(runner, &s3));
}

/// A micro-batch job of 3 processes stopped with a savepoint kept on S3; the savepoint
/// restores into one process and, again, into a local cluster of 2: each run's output,
/// with the stopped job's, is the direct runner's, line for line. (The native runner's:
/// a savepoint of 3 hosts, `coordinated.rs`.)
#[test]
fn a_savepoint_on_s3_from_3_processes_restores_into_1_and_into_a_local_cluster() {
    let Some(s3) =
        s3::server("a_savepoint_on_s3_from_3_processes_restores_into_1_and_into_a_local_cluster")
    else {
        return;
    };
    let _s = serial();
    for runner in ["microbatch"] {
        let run = Run::on_s3(runner, &s3);
        let savepoint = format!("{}/savepoints", s3.bucket(runner));
        // Stopped after 1 s of about 3: the savepoint is the job's last checkpoint.
        let stopped = run
            .command(&[
                "--local-cluster=3",
                "--max-duration=1s",
                &format!("--savepoint-dir={savepoint}"),
            ])
            .spawn()
            .unwrap();
        finish(stopped, &format!("{runner}: the stopped job"));
        let partial = run.lines();
        assert!(
            partial.len() < reference().len(),
            "{runner}: the stopped job wrote everything ({} lines): it should have stopped early",
            partial.len()
        );
        for (what, cluster) in [
            ("one process", None),
            ("a local cluster of 2", Some("--local-cluster=2")),
        ] {
            let resumed = Run::on_s3(runner, &s3);
            for line in std::fs::read_dir(&run.out).unwrap() {
                let line = line.unwrap();
                std::fs::copy(line.path(), resumed.out.join(line.file_name())).unwrap();
            }
            let mut extra = vec![format!("--from-savepoint={savepoint}")];
            extra.extend(cluster.map(str::to_string));
            let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
            let child = resumed.command(&extra).spawn().unwrap();
            finish(
                child,
                &format!("{runner}: resumed from the savepoint into {what}"),
            );
            assert_exact(
                &resumed,
                &format!("{runner}: resumed from an S3 savepoint into {what}"),
            );
        }
    }
}

/// A second job on the same checkpoint store is refused while the first holds its
/// lease, naming the holder; once the first has ended, the next one runs.
#[test]
fn a_second_job_on_one_s3_checkpoint_store_is_refused_while_the_first_runs() {
    let Some(s3) =
        s3::server("a_second_job_on_one_s3_checkpoint_store_is_refused_while_the_first_runs")
    else {
        return;
    };
    let _s = serial();
    let mut run = Run::on_s3("native", &s3);
    // Some 12 s: a second job looks at the lease again a renewal (5 s) later before it
    // is refused (a holder that stopped renewing would be waited out).
    run.records = 120_000;
    let mut first = run.command(&[]).spawn().unwrap();
    // It has committed output, so it runs (and took the lease before it ran).
    let started = std::time::Instant::now();
    while run.lines().is_empty() {
        assert!(
            first.try_wait().unwrap().is_none(),
            "the first job ended before it committed anything"
        );
        assert!(started.elapsed() < std::time::Duration::from_secs(30));
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let second = Command::new(env!("CARGO_BIN_EXE_crash_job"))
        .args(run.args(&[]))
        .envs(run.env.iter().map(|(k, v)| (*k, v.as_str())))
        .stdout(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(!second.status.success(), "the second job ran:\n{stderr}");
    assert!(
        stderr.contains(&format!(
            "invalid option --checkpoint-dir {}: it is in use by another job (process {} on",
            run.ckpt.display(),
            first.id()
        )) && stderr.contains("holds its lease for"),
        "{stderr}"
    );
    let status = first.wait().unwrap();
    assert!(status.success());
    assert_exact(&run, "the first job");
    // Let go at its end: a job on the store now runs (and adds nothing: it is done).
    let again = run.command(&[]).spawn().unwrap();
    finish(again, "a job after the first");
    assert_exact(&run, "after a second run");
}

/// Credentials, region and endpoint only in the AWS shared files (a profile named by
/// `AWS_PROFILE`, the files by `AWS_SHARED_CREDENTIALS_FILE` and `AWS_CONFIG_FILE`),
/// none in the environment: the job checkpoints on S3 and its output is exact. A
/// profile neither file holds is refused, naming it.
#[test]
fn credentials_region_and_endpoint_come_from_the_aws_profile_files() {
    let Some(s3) = s3::server("credentials_region_and_endpoint_come_from_the_aws_profile_files")
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let credentials = dir.path().join("credentials");
    let config = dir.path().join("config");
    std::fs::write(
        &credentials,
        "[tidewater-test]\naws_access_key_id = testing\naws_secret_access_key = testing\n",
    )
    .unwrap();
    std::fs::write(
        &config,
        format!(
            "[profile tidewater-test]\nregion = us-east-1\nendpoint_url = {}\n",
            s3.endpoint
        ),
    )
    .unwrap();
    let mut run = Run::on_s3("native", &s3);
    let files = |profile: &str| {
        vec![
            (
                "AWS_SHARED_CREDENTIALS_FILE",
                credentials.display().to_string(),
            ),
            ("AWS_CONFIG_FILE", config.display().to_string()),
            ("AWS_PROFILE", profile.to_string()),
            ("HOME", dir.path().display().to_string()),
        ]
    };
    run.env = files("nowhere");
    let refused = without_aws_environment(run.command(&[])).output().unwrap();
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success() && stderr.contains("profile 'nowhere'"),
        "{stderr}"
    );
    run.env = files("tidewater-test");
    let job = without_aws_environment(run.command(&[])).spawn().unwrap();
    finish(job, "credentials from the AWS profile files");
    assert_exact(&run, "credentials from the AWS profile files");
}

/// `command` without the AWS variables of the test's own environment.
fn without_aws_environment(mut command: Command) -> Command {
    for (k, _) in std::env::vars() {
        if k.starts_with("AWS_")
            && !matches!(
                k.as_str(),
                "AWS_PROFILE" | "AWS_CONFIG_FILE" | "AWS_SHARED_CREDENTIALS_FILE"
            )
        {
            command.env_remove(k);
        }
    }
    command
}
