//! The `recovery` workload: a process of a local cluster killed, the time until the
//! restarted job's first checkpoint, and its output checked against the direct runner's.

use super::*;

/// The crash job's records per second in a `recovery` run: well below any runner's
/// peak, so that what is timed is recovery, not a backlog.
pub(super) const RECOVERY_RATE: f64 = 20_000.0;

/// The `recovery` workload on `setting`: the crash job in a local cluster with
/// checkpoints; once it has checkpointed for two intervals, one of its processes
/// (the last the supervisor lists) is SIGKILLed, and the time from the kill to the
/// first checkpoint completed after it (a new manifest: the restarted job's first
/// committed progress) is its recovery time. Its committed output must then equal
/// the direct runner's: exactly once through the kill.
pub(super) fn timed_recovery(setting: &Setting<'_>, dir: &Path) -> anyhow::Result<BenchRecord> {
    let interval = setting.checkpoint_ms.unwrap_or(1000);
    let poll = Duration::from_millis(2);
    // Start-up, two intervals before the kill, recovery, and the rest.
    let records = (RECOVERY_RATE * (3.0 + 4.0 * interval as f64 / 1000.0)) as u64;
    let work = dir.join(format!("recovery-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).with_context(|| format!("cannot create {}", work.display()))?;
    let (ckpt, committed) = (work.join("checkpoints"), work.join("output"));
    let mut cmd = Command::new(std::env::current_exe()?);
    cmd.args(["--child", "recovery", "--workload", "recovery"])
        .arg(format!("--child-records={records}"))
        .arg(format!("--child-rate={RECOVERY_RATE}"))
        .arg("--child-out")
        .arg(&work)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    setting_flags(&mut cmd, setting, false);
    let start = RunStart::now();
    let started = Instant::now();
    let mut child = cmd.spawn().context("cannot start the recovery job")?;
    let stderr = child.stderr.take().map(|mut e| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = std::io::Read::read_to_string(&mut e, &mut s);
            s
        })
    });
    let measured = (|| -> anyhow::Result<(f64, f64)> {
        let deadline = started + Duration::from_secs(120);
        let mut first_checkpoint = None;
        let pids = loop {
            if let Some(status) = child.try_wait()? {
                bail!("the job ended ({status}) before a process was killed");
            }
            let now = Instant::now();
            if first_checkpoint.is_none() && !manifests(&ckpt).is_empty() {
                first_checkpoint = Some(now);
            }
            let pids = std::fs::read_to_string(ckpt.join("pids")).unwrap_or_default();
            if first_checkpoint.is_some_and(|t| now - t >= Duration::from_millis(2 * interval))
                && !pids.trim().is_empty()
            {
                break pids;
            }
            if now > deadline {
                bail!("no checkpoint within 2 minutes");
            }
            std::thread::sleep(poll);
        };
        let victim = pids.lines().last().unwrap_or("").trim().to_string();
        let status = Command::new("kill").args(["-KILL", &victim]).status()?;
        let killed = Instant::now();
        if !status.success() {
            bail!("kill -KILL {victim} failed ({status})");
        }
        let mut restarted: Option<(Duration, Option<u64>)> = None;
        loop {
            let now = Instant::now();
            if restarted.is_none()
                && std::fs::read_to_string(ckpt.join("pids")).is_ok_and(|p| p != pids)
            {
                // The supervisor killed every old process before it started the new
                // ones: a checkpoint the old job completed after the kill is not the
                // restarted job's progress, so only one newer than what is here now is.
                restarted = Some((now - killed, manifests(&ckpt).last().copied()));
            }
            if let Some((restart, newest)) = restarted {
                if manifests(&ckpt).last().copied() > newest {
                    return Ok((
                        restart.as_secs_f64() * 1000.0,
                        (now - killed).as_secs_f64() * 1000.0,
                    ));
                }
            }
            if child.try_wait()?.is_some() {
                bail!("the job ended without a checkpoint after the kill");
            }
            if now > deadline {
                bail!("no checkpoint after the kill within 2 minutes");
            }
            std::thread::sleep(poll);
        }
    })();
    if measured.is_err() && child.try_wait()?.is_none() {
        // The supervisor and the processes it started (alive while it is): none
        // outlives a failed run.
        let pids = std::fs::read_to_string(ckpt.join("pids")).unwrap_or_default();
        let _ = child.kill();
        for pid in pids.lines().map(str::trim).filter(|p| !p.is_empty()) {
            let _ = Command::new("kill").args(["-KILL", pid]).status();
        }
    }
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if started.elapsed() > Duration::from_secs(180) {
            let _ = child.kill();
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let seconds = started.elapsed().as_secs_f64();
    let stderr = stderr.and_then(|t| t.join().ok()).unwrap_or_default();
    let (restart_ms, recovery_ms) = measured?;
    if !status.success() {
        bail!("the job failed ({status}): {}", stderr.trim());
    }
    if !stderr.contains("restarting all") {
        bail!(
            "the cluster did not restart after the kill: {}",
            stderr.trim()
        );
    }
    let lines = crash_job::committed_lines(&committed)?;
    let reference = recovery_reference(records)?;
    compare_outputs(reference, lines.clone())
        .map_err(|m| anyhow::anyhow!("after the kill the committed {m}"))?;
    let _ = std::fs::remove_dir_all(&work);
    let mut record = BenchRecord::measured(
        "recovery",
        setting.runner,
        setting.workers,
        records,
        seconds,
        lines.len() as u64,
        start,
    );
    record.processes = setting.processes;
    record.records_per_s_per_core =
        record.records_per_s / f64::from(setting.workers * setting.processes);
    // This process only watched: the cluster's RSS is not measured.
    record.peak_rss_mb = None;
    record.checkpoint = true;
    record.checkpoint_interval_ms = Some(interval);
    record.recovery_ms = Some(recovery_ms);
    record.restart_ms = Some(restart_ms);
    Ok(record)
}

/// The epochs of the checkpoints completed in `dir` (their manifests), oldest first.
pub(super) fn manifests(dir: &Path) -> Vec<u64> {
    let mut epochs: Vec<u64> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.strip_prefix("checkpoint-")?
                .strip_suffix(".manifest")?
                .parse()
                .ok()
        })
        .collect();
    epochs.sort_unstable();
    epochs
}

/// The direct runner's committed output of the crash job on `records` records (once
/// per size).
pub(super) fn recovery_reference(records: u64) -> anyhow::Result<Vec<String>> {
    static CACHE: std::sync::Mutex<Option<(u64, Vec<String>)>> = std::sync::Mutex::new(None);
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((n, lines)) = cache.as_ref() {
        if *n == records {
            return Ok(lines.clone());
        }
    }
    let dir =
        std::env::temp_dir().join(format!("tidewater-bench-reference-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let p = Pipeline::new(PipelineOptions {
        no_validate: true,
        ..PipelineOptions::default()
    });
    crash_job::build(&p, records, 0.0, &dir);
    p.run()
        .context("the direct runner's reference run of the crash job")?;
    let lines = crash_job::committed_lines(&dir)?;
    let _ = std::fs::remove_dir_all(&dir);
    *cache = Some((records, lines.clone()));
    Ok(lines)
}

/// In a child (the local cluster's supervisor, and each of its processes): the crash
/// job, committed into `WORK/output`, checkpointing into `WORK/checkpoints`.
pub(super) fn recovery_child(
    args: &Args,
    setting: &Setting<'_>,
    work: &Path,
) -> anyhow::Result<()> {
    let records = args
        .child_records
        .context("a recovery child needs --child-records")?;
    let mut options = setting.options(false);
    // Every process of the cluster shares the directories (the parent made them).
    options.engine.checkpoint_dir = Some(work.join("checkpoints"));
    let output = work.join("output");
    std::fs::create_dir_all(&output)?;
    let p = Pipeline::new(options);
    crash_job::build(&p, records, args.child_rate, &output);
    p.run()?;
    Ok(())
}
