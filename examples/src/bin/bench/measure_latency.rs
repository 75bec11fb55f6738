//! The `latency` workload: a setting's peak, then its latencies at half of it.

use super::*;

/// The native runner's watermark alignment `args` ask for, if on.
pub(super) fn drift(args: &Args) -> Option<u64> {
    (args.watermark_drift_ms > 0).then_some(args.watermark_drift_ms)
}

/// Distinct keys of the `latency` workload's stateful step.
pub(super) const LATENCY_KEYS: u64 = 10_000;

/// The `latency` workload on `setting`: its peak first (`--words` records as fast as
/// they go), then its latencies at half that rate for `--latency-seconds`, each run in
/// a child of its own.
pub(super) fn timed_latency(
    args: &Args,
    setting: &Setting<'_>,
    dir: &Path,
) -> anyhow::Result<BenchRecord> {
    let peak = latency_child(args, setting, dir, args.words, 0.0).context("the peak run")?;
    let rate = peak.records_per_s / 2.0;
    let records = ((rate * args.latency_seconds) as u64).max(1);
    eprintln!(
        "latency on {} W={} P={}: peak {}/s ({} records in {:.2}s); measuring at half of it, {}/s for {}s",
        setting.runner,
        setting.workers,
        setting.processes,
        human(peak.records_per_s),
        peak.records,
        peak.seconds,
        human(rate),
        args.latency_seconds
    );
    latency_child(args, setting, dir, records, rate).context("the run at half the peak")
}

/// One run of the latency pipeline in a child: `records` at `rate` (0: unpaced).
pub(super) fn latency_child(
    args: &Args,
    setting: &Setting<'_>,
    dir: &Path,
    records: u64,
    rate: f64,
) -> anyhow::Result<BenchRecord> {
    let file = dir.join(format!("record-{}.json", std::process::id()));
    let _ = std::fs::remove_file(&file);
    let mut cmd = Command::new(std::env::current_exe()?);
    cmd.args(["--child", "time", "--workload", "latency"])
        .arg(format!("--child-records={records}"))
        .arg(format!("--child-rate={rate}"))
        .arg("--child-out")
        .arg(&file);
    setting_flags(&mut cmd, setting, args.validate);
    run_child(cmd)?;
    let line = std::fs::read_to_string(&file).context("the child wrote no record")?;
    let _ = std::fs::remove_file(&file);
    serde_json::from_str(&line).with_context(|| format!("not a record: {line}"))
}

/// The fraction of a latency run's first records not counted (start-up).
pub(super) const LATENCY_WARMUP: f64 = 0.1;

/// In a child: one run of the latency pipeline, `--child-records` at `--child-rate`
/// (0: as fast as they go, for the peak).
pub(super) fn latency_run(args: &Args, setting: &Setting<'_>, out: &Path) -> anyhow::Result<()> {
    let records = args
        .child_records
        .context("a latency child needs --child-records")?;
    let rate = (args.child_rate > 0.0).then_some(args.child_rate);
    let options = cluster_options(setting, args.validate, out);
    let checkpoint_dir = options.engine.checkpoint_dir.clone();
    let p = Pipeline::new(options);
    // A local cluster's sinks run in its processes, which end inside the run: they
    // spill what they saw to files next to `out`, merged here (each process without
    // its own start-up).
    let spill = (setting.processes > 1).then(|| out.with_extension("latencies"));
    if let (Some(spill), None) = (&spill, &setting.cluster_process) {
        tidewater_examples::spill::clear(spill)?;
    }
    latency::build_records(&p, records, rate, LATENCY_KEYS, spill.as_deref());
    let start = RunStart::now();
    let t = Instant::now();
    let result = p.run();
    let seconds = t.elapsed().as_secs_f64();
    if let Some(dir) = &checkpoint_dir {
        let _ = std::fs::remove_dir_all(dir);
    }
    let result = result?;
    let seen: Vec<u32> = match spill {
        None => {
            let seen = latency::all_seen();
            if seen.len() as u64 != records {
                bail!(
                    "the sink received {} records, {records} expected",
                    seen.len()
                );
            }
            latency::after_warmup(seen, LATENCY_WARMUP)
        }
        Some(spill) => {
            let per_process = latency::read_spilled(&spill)
                .with_context(|| format!("reading the latencies at {}", spill.display()))?;
            let count: usize = per_process.iter().map(Vec::len).sum();
            if count as u64 != records {
                bail!(
                    "the sinks of the {} processes committed {count} records, {records} expected",
                    per_process.len()
                );
            }
            per_process
                .into_iter()
                .flat_map(|v| latency::after_warmup(v, LATENCY_WARMUP))
                .collect()
        }
    };
    let mut record = BenchRecord::measured(
        "latency",
        setting.runner,
        setting.workers,
        records,
        seconds,
        records,
        start,
    );
    setting.describe(&mut record, args.validate, &result);
    if let Some(rate) = rate {
        let (p50, p99, max) = latency::percentiles_of(seen).context("no latency was measured")?;
        record.p50_latency_ms = Some(p50);
        record.p99_latency_ms = Some(p99);
        record.max_latency_ms = Some(max);
        record.latency_rate_per_s = Some(rate);
    }
    std::fs::write(out, record.to_json_line())?;
    Ok(())
}
