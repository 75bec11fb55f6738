//! `docs/benchmarks.md` from the runs' records: per workload, a table of the median run
//! of each runner × workers × processes × checkpoint setting, and an SVG bar chart of
//! its records/s (`docs/benchmarks/<workload>.svg`).

pub use super::group::human;
use super::group::{cost_groups, figure, group, Group};
use super::record::BenchRecord;
use super::workloads::WordCount;
use anyhow::Context;
use std::fmt::Write as _;
use std::path::Path;

/// What a workload's chart shows: its title's figure, the axis, and a value's label.
fn chart_figure(workload: &str) -> (&'static str, &'static str, fn(f64) -> String) {
    match workload {
        "latency" => (
            "p99 latency at half the peak rate",
            "p99 ms (median run)",
            |v| format!("{v:.1} ms"),
        ),
        "recovery" => (
            "kill to first checkpoint after it",
            "ms (median run)",
            |v| format!("{v:.0} ms"),
        ),
        _ => ("records/s", "records/s (median run)", human),
    }
}

fn opt(x: Option<f64>, digits: usize) -> String {
    x.map_or("—".to_string(), |v| format!("{v:.digits$}"))
}

/// What a workload computes.
pub fn describe(workload: &str) -> String {
    if let Some(w) = WordCount::from_name(workload) {
        return w.description().to_string();
    }
    if workload == "latency" {
        return "Latency at a fixed rate: generated records keyed into a StatefulParDo counting per key \
                (10,000 keys: a shuffle and state), each stamped with its creation time on the \
                generator's schedule and measured when the sink receives it (before its transaction \
                commits). First the setting's peak is measured (`--words` records as fast as they go), \
                then the pipeline runs at half that rate for `--latency-seconds` (5); p50 / p99 / max \
                skip its first 10% of records (start-up; in a local cluster each process's first 10%, \
                and the processes' latencies are merged). records/s is the rate achieved in that run"
            .into();
    }
    if workload == "recovery" {
        return "Recovery after a kill: the crash job (`examples/src/crash_job.rs`: windowed counts and \
                running counts per word, committed exactly once by `EpochFiles`) at 20,000 records/s in \
                a local cluster of 2 processes with checkpoints; after two checkpoint intervals of \
                steady state the last process the supervisor lists is SIGKILLed. **recovery** is the \
                time from the kill to the first checkpoint the restarted job completes (its first \
                committed progress: a new manifest), **restart** the time until the supervisor has \
                started the new processes. The committed output is then compared with the direct \
                runner's: nothing lost or repeated through the kill"
            .into();
    }
    if workload == "nexmark-q12" {
        return "Nexmark Q12 through `examples/nexmark`'s query (see `docs/nexmark.md`); it depends on the \
                processing clock, so its events are replayed through a TestStream on a scripted clock \
                (one second of events per second), which holds them all in memory: it runs on fewer \
                events (`--q12-events`, 50,000) than the other queries"
            .into();
    }
    if let Some(q) = workload.strip_prefix("nexmark-q") {
        return format!(
            "Nexmark Q{q} through `examples/nexmark`'s query (see `docs/nexmark.md`); records are generated events"
        );
    }
    format!("`{workload}`")
}

/// The file name of a workload's chart.
pub fn svg_name(workload: &str) -> String {
    let safe: String = workload
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{safe}.svg")
}

/// `x` with all but its 3 leading digits zeroed, rounded: `2000376` is `2000000`.
fn round_to_3_digits(x: u64) -> u64 {
    let mut unit = 1;
    while x / unit >= 1000 {
        unit *= 10;
    }
    (x + unit / 2) / unit * unit
}

/// The `--workload` value naming `workloads`, with the groups where they are whole.
fn workload_flag(workloads: &[String]) -> String {
    let wordcount: Vec<String> = WordCount::ALL.iter().map(|w| w.name().into()).collect();
    let nexmark: Vec<String> = (0..=14).map(|q| format!("nexmark-q{q}")).collect();
    let has_all = |group: &[String]| group.iter().all(|w| workloads.contains(w));
    let mut out: Vec<String> = Vec::new();
    for w in workloads {
        let name = if has_all(&wordcount) && wordcount.contains(w) {
            "wordcount".to_string()
        } else if has_all(&nexmark) && nexmark.contains(w) {
            "nexmark".to_string()
        } else {
            w.clone()
        };
        if !out.contains(&name) {
            out.push(name);
        }
    }
    let all = ["wordcount", "latency", "recovery", "nexmark"];
    if out.len() == all.len() && all.iter().all(|w| out.iter().any(|o| o == w)) {
        return "all".into();
    }
    out.join(",")
}

/// `YYYY-MM-DD HH:MM` (UTC) of a Unix time.
fn utc(unix_s: u64) -> String {
    // Days to civil date (Howard Hinnant's algorithm), to keep this free of a date crate.
    let days = (unix_s / 86_400) as i64;
    let secs = unix_s % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}",
        secs / 3600,
        (secs % 3600) / 60
    )
}

fn distinct<T: PartialEq + Clone>(xs: impl Iterator<Item = T>) -> Vec<T> {
    let mut out = Vec::new();
    for x in xs {
        if !out.contains(&x) {
            out.push(x);
        }
    }
    out
}

/// The markdown of the report; charts are linked as `benchmarks/<workload>.svg` and
/// the records' file is named `json_name` (relative to `docs/`).
pub fn render_markdown(records: &[BenchRecord], json_name: &str) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "# Benchmarks\n");
    let _ = writeln!(
        md,
        "Generated by `bench --report` from [`{json_name}`]({json_name}) (one JSON object per run). \
         Do not edit by hand: rerun the commands below.\n"
    );
    if records.is_empty() {
        let _ = writeln!(md, "No runs recorded.");
        return md;
    }
    let machines = distinct(records.iter().map(|r| r.machine.clone()));
    let profiles = distinct(records.iter().map(|r| r.profile.clone()));
    let loads: Vec<f64> = records.iter().filter_map(|r| r.load_avg_1m).collect();
    let first = records
        .iter()
        .map(|r| r.started_at_unix_s)
        .min()
        .unwrap_or(0);
    let last = records
        .iter()
        .map(|r| r.started_at_unix_s)
        .max()
        .unwrap_or(0);
    let _ = writeln!(md, "## Where and how\n");
    let _ = writeln!(md, "- **Machine:** {}.", machines.join("; "));
    let _ = writeln!(
        md,
        "- **When:** {} to {} UTC, {} runs; **build:** {}.",
        utc(first),
        utc(last),
        records.len(),
        profiles.join(", ")
    );
    if let (Some(lo), Some(hi)) = (
        loads.iter().copied().reduce(f64::min),
        loads.iter().copied().reduce(f64::max),
    ) {
        let range = match lo == hi {
            true => format!("{lo:.2}"),
            false => format!("{lo:.2} to {hi:.2}"),
        };
        let _ = writeln!(
            md,
            "- **Load:** one-minute load average {range} when the runs started (this includes the \
             benchmark itself). \
             This is a shared 2-core VM: absolute figures are noisy (other builds run beside them); \
             compare runners measured in the same run, not across reports."
        );
    }
    let steals: Vec<f64> = records.iter().filter_map(|r| r.steal_pct).collect();
    if let Some(hi) = steals.iter().copied().reduce(f64::max) {
        let over = steals.iter().filter(|s| **s >= 1.0).count();
        let _ = writeln!(
            md,
            "- **Steal:** the hypervisor ran other guests for up to {hi:.1}% of this VM's CPU \
             time during a run (`steal` in `/proc/stat`, over the run; {over} of {} runs \
             measured 1% or more). A stall of a few milliseconds on one core lands in a p99 \
             latency: the latency table gives each row's.",
            steals.len()
        );
    }
    let reran: Vec<&BenchRecord> = records
        .iter()
        .filter(|r| r.steal_rerun_above.is_some())
        .collect();
    if let Some(limit) = reran.first().and_then(|r| r.steal_rerun_above) {
        let _ = writeln!(
            md,
            "- **Runs again:** a latency run during which steal exceeded {limit}% \
             (`--max-steal`) measures the host's stalls more than the runner: it was run again \
             (up to `--steal-retries` times) and is left out of the tables and targets. {} such \
             run{}: {}.",
            reran.len(),
            if reran.len() == 1 { "" } else { "s" },
            reran
                .iter()
                .map(|r| {
                    format!(
                        "{} W={} P={}{}{} p99 {} ms at steal {}%",
                        r.runner,
                        r.workers,
                        r.processes,
                        if r.checkpoint { " checkpointed" } else { "" },
                        if r.at_least_once {
                            " at-least-once"
                        } else {
                            ""
                        },
                        r.p99_latency_ms.map_or("-".into(), |p| format!("{p:.2}")),
                        r.steal_pct.map_or("-".into(), |s| format!("{s:.1}")),
                    )
                })
                .collect::<Vec<_>>()
                .join("; ")
        );
    }
    let drifts: std::collections::BTreeSet<u64> = records
        .iter()
        .filter_map(|r| r.max_watermark_drift_ms)
        .collect();
    if !drifts.is_empty() {
        let native = records.iter().filter(|r| r.runner == "native").count();
        let aligned = records
            .iter()
            .filter(|r| r.max_watermark_drift_ms.is_some())
            .count();
        let _ = writeln!(
            md,
            "- **Watermark alignment:** {aligned} of {native} native runs align their sources' \
             watermarks (`--runner-option max_watermark_drift_ms={}`, Flink's `maxAllowedDrift`; \
             `bench --watermark-drift-ms`): an instance of a source that runs more than that \
             ahead of the slowest one in event time waits, so that the windows between them \
             are not held in state. It changes no output.",
            drifts
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join("|"),
        );
    }
    let _ = writeln!(
        md,
        "- **records/s** is input records (words, or Nexmark events) over the wall time of the \
         run inside its process: from `run` called to `run` returned, so process start-up and \
         pipeline construction are excluded, runner start-up is not. **per core** divides by \
         workers × processes. Each run is its own process (the `bench` binary re-executes \
         itself), so **peak RSS** (`VmHWM`) is that run's alone. The tables show the run of median \
         records/s of each setting (of median p99 latency for `latency`, of median recovery \
         time for `recovery`); every run is in the JSON. The runs of settings that differ \
         only in their checkpoint interval alternate (off, on, off, on, ...), so that the \
         machine's drift over minutes falls on both sides of a fault-tolerance cost alike.\n\
         - Before anything is timed, each workload's output on a small input is compared, \
         sorted line by line, with the direct runner's (validation on); a setting whose output \
         differs is not timed and does not appear here.\n\
         - Checkpointed runs (the `checkpoint` column) take a checkpoint every interval into a \
         fresh directory; runs shorter than the interval take few or none, so their cost shows \
         on long runs only. On the micro-batch runner the interval is its batch interval (a \
         bounded input runs in batches of at most 100,000 records, back to back).\n\
         - Runs with 2 processes are local clusters on loopback: their time includes starting \
         the processes and connecting them (tens of milliseconds), and their peak RSS is their \
         largest process's, as each reports its own (none before 2026-12-03 15:00: —). Rows marked \
         at-least-once checkpoint without aligning the inputs (`--guarantee at-least-once`, the \
         native runner only): next to the exactly-once rows they show what alignment costs."
    );
    let peers = distinct(records.iter().filter_map(|r| r.peer.clone()));
    if !peers.is_empty() {
        let _ = writeln!(
            md,
            "- **Peers** (`bench --compare-peers`: the peer kit's `run.sh`, after our runs, on the \
             same machine and the same input file): {}. Their rows are marked *(peer)*; their \
             workers column is their parallelism (Flink slots, Spark `local[p]`, timely workers). \
             Their seconds are the job time the peer reports in its process, which excludes its \
             start-up as ours does: Flink's net job runtime once its MiniCluster is up, Spark's \
             query time once its SparkSession is up, the timely program's whole run. Their peak \
             RSS is the whole process's (a JVM's included). Each peer run's records out and sum of \
             counts are checked against the generator's figures, as the kit's `summarize.py` does. \
             The peers' `stateful` (one total per word) is our `count`; Flink's `rolling` (one \
             update per word in) is our `stateful`; `flink-batch` is Flink's batch execution mode, \
             `spark-sql` Spark's built-in split and explode, `spark-ss` Spark Structured Streaming \
             (availableNow, with its checkpoint location).",
            peers.join("; ")
        );
    }
    let mut missing = Vec::new();
    if !records.iter().any(|r| r.p99_latency_ms.is_some()) {
        missing.push("latency at a fixed rate (the `latency` workload)");
    }
    if !records.iter().any(|r| r.recovery_ms.is_some()) {
        missing.push("recovery time after a kill (the `recovery` workload)");
    }
    if peers.is_empty() {
        missing.push("the peers in the same run (`--compare-peers`)");
    }
    if !missing.is_empty() {
        let _ = writeln!(md, "- Not measured in this run: {}.", missing.join("; "));
    }
    let _ = writeln!(md);
    let ours: Vec<&BenchRecord> = records.iter().filter(|r| r.peer.is_none()).collect();
    let runners = distinct(ours.iter().map(|r| r.runner.clone()));
    let workers = distinct(ours.iter().map(|r| r.workers));
    let reps = group(records)
        .iter()
        .flat_map(|(_, gs)| gs.iter().map(|g| g.runs.len()))
        .max()
        .unwrap_or(1);
    let words = records
        .iter()
        .find(|r| !r.cost_run && WordCount::from_name(&r.workload).is_some())
        .map(|r| r.records);
    let events = records
        .iter()
        .find(|r| r.workload.starts_with("nexmark-"))
        .map(|r| r.records);
    let mut sizes = String::new();
    if let Some(w) = words {
        // The words generated for `--words N` are N give or take a few per mille.
        let _ = write!(sizes, " --words {}", round_to_3_digits(w));
    }
    if let Some(e) = events {
        let _ = write!(sizes, " --events {e}");
    }
    let workloads = workload_flag(&distinct(ours.iter().map(|r| r.workload.clone())));
    let _ = writeln!(md, "To reproduce:\n\n```sh");
    if events.is_some() {
        let _ = writeln!(
            md,
            "cargo build --release -p tidewater-nexmark   # the Nexmark runs call its binary"
        );
    }
    // A recovery run always checkpoints in a cluster: its flags are no other run's.
    let timed = || ours.iter().filter(|r| r.workload != "recovery");
    let checkpoints = distinct(timed().map(|r| r.checkpoint_interval_ms.unwrap_or(0)));
    let processes = distinct(timed().map(|r| r.processes));
    let processes_flag = if processes.iter().any(|p| *p > 1) {
        format!(
            " --processes {}",
            processes
                .iter()
                .map(|p| p.to_string())
                .collect::<Vec<_>>()
                .join(",")
        )
    } else {
        String::new()
    };
    let checkpoint_flag = if checkpoints.iter().any(|c| *c > 0) {
        format!(
            " --checkpoint-ms {}",
            checkpoints
                .iter()
                .map(|c| c.to_string())
                .collect::<Vec<_>>()
                .join(",")
        )
    } else {
        String::new()
    };
    let checkpoint_flag = if ours.iter().any(|r| r.at_least_once) {
        format!("{checkpoint_flag} --guarantee exactly-once,at-least-once")
    } else {
        checkpoint_flag
    };
    if let Some(l) = ours
        .iter()
        .find(|r| r.workload == "latency" && r.latency_rate_per_s.is_some())
    {
        let seconds = (l.records as f64 / l.latency_rate_per_s.unwrap_or(1.0)).round();
        if seconds != 5.0 {
            let _ = write!(sizes, " --latency-seconds {seconds}");
        }
    }
    if let Some(r) = records.iter().find(|r| r.cost_run) {
        let _ = write!(sizes, " --cost-words {}", round_to_3_digits(r.records));
        let cost_reps = cost_groups(records)
            .iter()
            .flat_map(|(_, gs)| gs.iter().map(|g| g.runs.len()))
            .max()
            .unwrap_or(1);
        if cost_reps != reps {
            let _ = write!(sizes, " --cost-reps {cost_reps}");
        }
    }
    if !peers.is_empty() {
        let names = distinct(
            records
                .iter()
                .filter(|r| r.peer.is_some())
                .map(|r| peer_of(&r.runner).to_string()),
        );
        let _ = write!(
            sizes,
            " \\\n    --compare-peers --peers {}",
            names.join(",")
        );
    }
    let _ = writeln!(
        md,
        "cargo run --release -p tidewater-examples --bin bench -- --runner {} --workers {}{processes_flag}{checkpoint_flag} \\\n    --workload {workloads}{sizes} --reps {reps} --json docs/{json_name}",
        runners.join(","),
        workers
            .iter()
            .map(|w| w.to_string())
            .collect::<Vec<_>>()
            .join(","),
    );
    let _ = writeln!(
        md,
        "cargo run --release -p tidewater-examples --bin bench -- --report --json docs/{json_name}\n```\n"
    );
    let ratios = super::peers::ratios(records);
    if !ratios.is_empty() {
        let _ = writeln!(md, "## Ours / peers\n");
        let _ = writeln!(
            md,
            "Each of our single-process settings against each peer at the same parallelism \
             (workers), both with checkpoints or both without, median run against median run, \
             records/s inside the job. Measured side by side in one run, these ratios are what to \
             compare on a noisy machine, not the absolute figures. The targets are issue 10's: \
             native ≥ 0.8× the hand-written timely program on the stateless word count and ≥ 2× \
             Flink (streaming) on `count` (the peers' stateful) and `windowed`; micro-batch ≥ 2× \
             Spark on those two. Flink's batch mode and Spark SQL are in the tables below, not \
             paired.\n"
        );
        let peer_words = records
            .iter()
            .filter(|r| r.peer.is_some())
            .map(|r| r.records)
            .max()
            .unwrap_or(0);
        if peer_words < 10_000_000 {
            let _ = writeln!(
                md,
                "**The peers read {peer_words} words here, fewer than the standard 10 million \
                 (`--words 10000000`):** a JVM peer's job time then holds more of its JIT \
                 warm-up for the work done, which flatters these ratios; on a busy machine the \
                 JVMs' service threads also compete for the 2 cores.\n"
            );
        }
        let _ = writeln!(md, "{}", super::peers::ratios_markdown(&ratios));
    }
    let judged = super::targets::judge(records);
    if !judged.is_empty() {
        let _ = writeln!(
            md,
            "## Other targets
"
        );
        let _ = writeln!(
            md,
            "Issue 10's targets that are not ratios to a peer, judged from the median runs below: \
             what fault tolerance costs (the same single-process setting with checkpoints on \
             against off, the median of the reps' costs with each rep's runs paired, on the \
             long runs below where there are: snapshots on the native runner, commits on the \
             micro-batch runner, whose checkpoint interval is its batch interval; a local \
             cluster's time holds its start-up, so it is not judged), p99 latency at half the peak, the direct runner \
             against the native one, and peak memory on the stateful word count. One run per \
             setting swings by 10% or more on this machine: a cost within that of its target \
             is within the noise.\n"
        );
        let _ = writeln!(md, "{}", super::targets::markdown(&judged));
    }
    let long = cost_groups(records);
    if let Some(words) = long.first().map(|(_, gs)| gs[0].runs[0].records) {
        let _ = writeln!(md, "## What fault tolerance costs, on long runs\n");
        let _ = writeln!(
            md,
            "The word counts again on {} words (`--cost-words`), with checkpoints on and off, \
             so that each run lasts long enough for several checkpoints: a run of the main input \
             lasts a few seconds and takes few or none, so its cost is mostly noise. Each rep runs the settings \
             next to each other, and the targets above judge the median of the reps' costs \
             (`1 - on / off`, rep by rep), not the medians' ratio, so that the machine's drift \
             from one rep to the next cancels out.{}\n",
            human(words as f64),
            match records.iter().find_map(|r| r.cost_run.then_some(r.batch_records).flatten()) {
                Some(n) => format!(
                    " The micro-batch runner, which reads a bounded input in batches of 100,000 \
                     records by default, runs here in batches of at most {} lines back to back until the input's \
                     end (`--trigger available-now --max-records-per-batch`, as Spark's \
                     availableNow with a record limit), with commits and without: some ten \
                     batches, so some ten commits, a run.",
                    human(n as f64)
                ),
                None => " The native runner only: the micro-batch runner's cost is judged on the \
                     runs below."
                    .to_string(),
            }
        );
        for (workload, groups) in &long {
            let _ = writeln!(md, "### {workload}\n");
            throughput_table(&mut md, groups);
            let _ = writeln!(md);
        }
    }
    for (workload, groups) in group(records) {
        let _ = writeln!(md, "## {workload}\n");
        let _ = writeln!(md, "{}.\n", describe(&workload));
        let (what, _, _) = chart_figure(&workload);
        let _ = writeln!(
            md,
            "![{workload}: {what} per runner and workers](benchmarks/{})\n",
            svg_name(&workload)
        );
        match workload.as_str() {
            "latency" => {
                let _ = writeln!(
                    md,
                    "| runner | workers | processes | checkpoint | runs | rate records/s (half the peak) | records | p50 ms | p99 ms | max ms | steal % | peak RSS MB |"
                );
                let _ = writeln!(
                    md,
                    "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"
                );
                for g in &groups {
                    let m = g.median();
                    let _ = writeln!(
                        md,
                        "{} | {} | {} | {} | {} | {} | {} | {} |",
                        setting_cells(g),
                        m.latency_rate_per_s.map_or("—".into(), human),
                        m.records,
                        opt(m.p50_latency_ms, 2),
                        opt(m.p99_latency_ms, 2),
                        opt(m.max_latency_ms, 2),
                        opt(m.steal_pct, 1),
                        opt(m.peak_rss_mb, 0),
                    );
                }
            }
            "recovery" => {
                let _ = writeln!(
                    md,
                    "| runner | workers | processes | checkpoint | runs | records | committed lines | recovery ms (kill → first checkpoint) | restart ms (kill → processes started) | job seconds |"
                );
                let _ = writeln!(md, "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|");
                for g in &groups {
                    let m = g.median();
                    let _ = writeln!(
                        md,
                        "{} | {} | {} | {} | {} | {:.2} |",
                        setting_cells(g),
                        m.records,
                        m.outputs,
                        opt(m.recovery_ms, 0),
                        opt(m.restart_ms, 0),
                        m.seconds,
                    );
                }
            }
            _ => throughput_table(&mut md, &groups),
        }
        let _ = writeln!(md);
    }
    md
}

/// A setting's checkpoint cell: `off`, `every 1000 ms`, `every 1000 ms, at-least-once`.
fn checkpoint_cell(g: &Group) -> String {
    let mut c = match g.checkpoint {
        (true, Some(ms)) => format!("every {ms} ms"),
        (true, None) => "on".into(),
        (false, _) => "off".into(),
    };
    if g.at_least_once {
        c.push_str(", at-least-once");
    }
    c
}

/// A setting's runner cell, a peer's marked.
fn runner_cell(g: &Group) -> String {
    match g.is_peer() {
        true => format!("{} *(peer)*", g.runner),
        false => g.runner.clone(),
    }
}

/// The cells every table's row starts with: runner, workers, processes, checkpoint,
/// runs (from the leading `|`, without the one after the last).
fn setting_cells(g: &Group) -> String {
    format!(
        "| {} | {} | {} | {} | {}",
        runner_cell(g),
        g.workers,
        g.processes,
        checkpoint_cell(g),
        g.runs.len()
    )
}

/// The table of a throughput workload's settings, their median runs.
fn throughput_table(md: &mut String, groups: &[Group]) {
    let _ = writeln!(
        md,
        "| runner | workers | processes | checkpoint | runs | records | outputs | seconds | records/s | records/s per core | peak RSS MB |"
    );
    let _ = writeln!(md, "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|");
    for g in groups {
        let m = g.median();
        let _ = writeln!(
            md,
            "{} | {} | {} | {:.3} | {} | {} | {} |",
            setting_cells(g),
            m.records,
            m.outputs,
            m.seconds,
            human(m.records_per_s),
            human(m.records_per_s_per_core),
            opt(m.peak_rss_mb, 0),
        );
    }
}

/// The peer a peer's runner name belongs to: `flink` for `flink-batch`.
fn peer_of(runner: &str) -> &str {
    super::peers::KNOWN
        .iter()
        .filter(|k| runner == **k || runner.starts_with(&format!("{k}-")))
        .max_by_key(|k| k.len())
        .copied()
        .unwrap_or(runner)
}

/// A bar chart of each setting of a workload (its median run's records/s, or p99
/// latency, or recovery time), as SVG.
pub fn render_svg(workload: &str, groups: &[Group]) -> anyhow::Result<String> {
    use plotters::prelude::*;
    use plotters::style::text_anchor::{HPos, Pos, VPos};
    let (what, y_desc, value_label) = chart_figure(workload);
    let bars: Vec<(String, f64, usize)> = groups
        .iter()
        .map(|g| {
            let runners = distinct(groups.iter().map(|g| g.runner.clone()));
            let colour = runners.iter().position(|r| *r == g.runner).unwrap_or(0);
            let v = figure(g.median());
            (g.label(), if v.is_finite() { v } else { 0.0 }, colour)
        })
        .collect();
    let top = bars.iter().map(|b| b.1).fold(0.0, f64::max).max(1.0) * 1.2;
    let n = bars.len().max(1) as i32;
    let mut svg = String::new();
    {
        let width = (160 + 140 * bars.len() as u32).max(480);
        let root = SVGBackend::with_string(&mut svg, (width, 360)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| anyhow::anyhow!("{e:?}"))?;
        let mut chart = ChartBuilder::on(&root)
            .caption(format!("{workload}: {what}"), ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(64)
            // Segments of `0..m` are its m + 1 integers; one bar alone still needs two.
            .build_cartesian_2d((0..(n - 1).max(1)).into_segmented(), 0f64..top)
            .map_err(|e| anyhow::anyhow!("{e:?}"))?;
        let labels: Vec<String> = bars.iter().map(|b| b.0.clone()).collect();
        let x_label = |v: &SegmentValue<i32>| match v {
            SegmentValue::CenterOf(i) => labels.get(*i as usize).cloned().unwrap_or_default(),
            _ => String::new(),
        };
        let y_label = |y: &f64| match workload {
            "latency" | "recovery" => format!("{y:.0}"),
            _ => human(*y),
        };
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(bars.len().max(1))
            .x_label_formatter(&x_label)
            .y_label_formatter(&y_label)
            .y_desc(y_desc)
            .draw()
            .map_err(|e| anyhow::anyhow!("{e:?}"))?;
        chart
            .draw_series(bars.iter().enumerate().map(|(i, (_, v, colour))| {
                let i = i as i32;
                let mut bar = Rectangle::new(
                    [
                        (SegmentValue::Exact(i), 0.0),
                        (SegmentValue::Exact(i + 1), *v),
                    ],
                    Palette99::pick(*colour).mix(0.8).filled(),
                );
                bar.set_margin(0, 0, 16, 16);
                bar
            }))
            .map_err(|e| anyhow::anyhow!("{e:?}"))?;
        chart
            .draw_series(bars.iter().enumerate().map(|(i, (_, v, _))| {
                Text::new(
                    value_label(*v),
                    (SegmentValue::CenterOf(i as i32), *v + top * 0.01),
                    TextStyle::from(("sans-serif", 14).into_font())
                        .pos(Pos::new(HPos::Center, VPos::Bottom)),
                )
            }))
            .map_err(|e| anyhow::anyhow!("{e:?}"))?;
        root.present().map_err(|e| anyhow::anyhow!("{e:?}"))?;
    }
    Ok(svg)
}

/// Writes `<docs>/benchmarks.md` and `<docs>/benchmarks/<workload>.svg` from the
/// records in `json` (linked from the report by its path relative to `docs`).
pub fn write_report(records: &[BenchRecord], docs: &Path, json: &Path) -> anyhow::Result<()> {
    let charts = docs.join("benchmarks");
    std::fs::create_dir_all(&charts)
        .with_context(|| format!("cannot create {}", charts.display()))?;
    for (workload, groups) in group(records) {
        let path = charts.join(svg_name(&workload));
        std::fs::write(&path, render_svg(&workload, &groups)?)
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    let json_name = relative_to(json, docs);
    let path = docs.join("benchmarks.md");
    std::fs::write(&path, render_markdown(records, &json_name))
        .with_context(|| format!("cannot write {}", path.display()))
}

/// `path` relative to `base` when it lies under it, else as given.
fn relative_to(path: &Path, base: &Path) -> String {
    let abs = |p: &Path| {
        std::fs::canonicalize(p)
            .ok()
            .or_else(|| {
                let dir = std::fs::canonicalize(p.parent()?).ok()?;
                Some(dir.join(p.file_name()?))
            })
            .unwrap_or_else(|| p.to_path_buf())
    };
    match abs(path).strip_prefix(abs(base)) {
        Ok(rel) => rel.to_string_lossy().into_owned(),
        Err(_) => path.to_string_lossy().into_owned(),
    }
}

#[cfg(test)]
mod tests;
