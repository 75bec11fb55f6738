//! Runs the conformance cases on the chosen runners and prints the runner × case
//! matrix, then the reason of every failed or unsupported cell. Exits with 1 if any
//! cell failed.
//!
//!     cargo run -p tidewater-conformance -- --runner all
//!     cargo run -p tidewater-conformance -- --runner direct --case group_by_key --seed 7
//!     cargo run -p tidewater-conformance -- --runner direct --runner-option checkpoint_every=1

use clap::Parser;
use std::fmt::Write as _;
use std::io::Write as _;
use std::process::ExitCode;
use tidewater_conformance::{all_cases, harness, register_runners, MatrixConfig};

#[derive(Parser)]
#[command(about = "Tidewater's conformance suite: every case on every runner")]
struct Args {
    /// The runner to test, or `all` for every registered runner.
    #[arg(long, default_value = "all")]
    runner: String,
    /// Run only the cases whose name contains this.
    #[arg(long = "case", value_name = "SUBSTRING")]
    case_filter: Option<String>,
    /// Run each case with this seed only (passed as `--seed` to the runner); by
    /// default each case runs with seeds 1, 2 and 3 and passes only if all pass.
    #[arg(long)]
    seed: Option<u64>,
    /// Seconds a single run may take before it counts as failed.
    #[arg(long, default_value_t = 120)]
    timeout_secs: u64,
    /// A runner option every run gets, `KEY=VALUE` (may be repeated), e.g.
    /// `--runner-option checkpoint_every=1` to snapshot and restore the direct runner
    /// at every step.
    #[arg(long = "runner-option", value_name = "KEY=VALUE", value_parser = tidewater::parse_key_value)]
    runner_options: Vec<(String, String)>,
    /// Run without the direct runner's validation (its fast path).
    #[arg(long)]
    no_validate: bool,
    /// Where stateful DoFns keep their state in every run: `memory` or `fjall`.
    #[arg(long, value_enum, default_value_t = tidewater::StateBackendKind::Memory)]
    state_backend: tidewater::StateBackendKind,
    /// With `--state-backend fjall`: windows each grouping keeps in memory (1: nearly
    /// every window goes to the store between bundles).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    state_hot_windows: Option<u64>,
    /// Flags of a runner (e.g. the micro-batch runner's `--batch-interval`): each run
    /// gets those its runner declares.
    #[command(flatten)]
    runner_flags: tidewater::runner_flags::RunnerFlags,
    /// Workers, processes (`--local-cluster N`: every case in N processes on loopback)
    /// of the distributed runners; the direct runner always runs one worker.
    #[command(flatten)]
    engine: tidewater::EngineOptions,
    /// The run a cluster process belongs to (names its scratch directories).
    #[arg(long, hide = true)]
    scratch_run: Option<String>,
    /// List the cases with their declared features and exit.
    #[arg(long)]
    list: bool,
}

fn main() -> ExitCode {
    // Runners first: their flags are parsed with them.
    register_runners();
    let args = Args::parse();
    // A process of a local cluster the harness started for one case: run that case's
    // pipeline as this process (the runner ends the process with its outcome).
    if std::env::var_os(tidewater_runner_native::CLUSTER_CHILD_ENV).is_some() {
        return run_cluster_child(&args);
    }
    // The "source = topic" class runs when a Kafka broker is configured (and says so
    // loudly when not).
    let cases: Vec<_> = all_cases()
        .into_iter()
        .chain(tidewater_conformance::topic::topic_cases())
        .filter(|c| match &args.case_filter {
            Some(f) => c.name.contains(f.as_str()),
            None => true,
        })
        .collect();
    if cases.is_empty() {
        eprintln!(
            "error: no case matches --case {:?}",
            args.case_filter.unwrap_or_default()
        );
        return ExitCode::from(2);
    }
    if args.list {
        let mut out = String::new();
        for c in &cases {
            let _ = writeln!(
                out,
                "{:<45} {}",
                c.name,
                c.features
                    .iter()
                    .map(|f| f.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        print_out(&out);
        return ExitCode::SUCCESS;
    }
    let runners: Vec<String> = if args.runner == "all" {
        tidewater::runner::registered_runners()
            .iter()
            .map(|r| r.name().to_string())
            .collect()
    } else {
        vec![args.runner.clone()]
    };
    let config = MatrixConfig {
        seeds: args
            .seed
            .map_or_else(|| MatrixConfig::default().seeds, |s| vec![s]),
        timeout: std::time::Duration::from_secs(args.timeout_secs),
        runner_options: args.runner_options.clone(),
        no_validate: args.no_validate,
        state_backend: args.state_backend,
        state_hot_windows: args.state_hot_windows,
        runner_flags: args.runner_flags.clone(),
        engine: args.engine.clone(),
    };
    let matrix = harness::with_quiet_panics(|| harness::run_matrix(&cases, &runners, &config));
    let matrix = match matrix {
        Ok(m) => m,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let seeds = config
        .seeds
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    print_out(&format!(
        "{} cases on {} (seeds {seeds})\n\n{}",
        cases.len(),
        runners.join(", "),
        matrix.render()
    ));
    if matrix.has_failures() {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// Prints to stdout; a closed pipe (`| head`) is not an error worth a panic.
fn print_out(s: &str) {
    let _ = std::io::stdout().lock().write_all(s.as_bytes());
}

/// Runs the one case `--case` names exactly, as one process of a local cluster.
fn run_cluster_child(args: &Args) -> ExitCode {
    let Some(case) = all_cases()
        .into_iter()
        .chain(tidewater_conformance::topic::all())
        .find(|c| Some(c.name) == args.case_filter.as_deref())
    else {
        eprintln!("error: a cluster process needs --case with a case's exact name");
        return ExitCode::from(2);
    };
    let options = tidewater::PipelineOptions {
        seed: args.seed,
        runner_options: args.runner_options.clone(),
        no_validate: args.no_validate,
        state_backend: args.state_backend,
        state_hot_windows: args.state_hot_windows,
        runner_flags: args.runner_flags.clone(),
        engine: args.engine.clone(),
        ..tidewater::PipelineOptions::for_runner(&args.runner)
    };
    if let Some(run) = &args.scratch_run {
        tidewater_conformance::scratch::set_run(run.clone());
    }
    let p = tidewater::Pipeline::new(options);
    (case.build)(&p);
    // The native runner ends a cluster process itself; reaching here is a failure.
    match p.run() {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}
