//! End-to-end latency at a fixed rate (see `tidewater_examples::latency`): prints p50,
//! p99 and max from creation on the generator's schedule to the sink, skipping the
//! first 10% of records (start-up).
//!
//! `cargo run --release -p tidewater-examples --bin latency -- --runner native --rate 1000000 --seconds 5`

use clap::Parser;
use tidewater::{Pipeline, PipelineOptions};

/// Latency from creation to sink at a fixed rate.
#[derive(Parser)]
struct Args {
    #[command(flatten)]
    options: PipelineOptions,
    /// Records per second (use half of the measured peak).
    #[arg(long, default_value_t = 500_000.0)]
    rate: f64,
    /// How long to run.
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    /// Distinct keys of the stateful step.
    #[arg(long, default_value_t = 10_000)]
    keys: u64,
}

fn main() -> std::process::ExitCode {
    tidewater_examples::report(run())
}

fn run() -> anyhow::Result<()> {
    tidewater_examples::register_runners();
    let args = Args::parse();
    let p = Pipeline::new(args.options);
    tidewater_examples::latency::build(&p, args.rate, args.seconds, args.keys);
    p.run()?;
    let (p50, p99, max) = tidewater_examples::latency::percentiles(0.1)
        .ok_or_else(|| anyhow::anyhow!("no record reached the sink"))?;
    tidewater_examples::outln!(
        "rate {:.0}/s for {}s: latency p50 {p50:.2} ms, p99 {p99:.2} ms, max {max:.2} ms",
        args.rate,
        args.seconds
    );
    Ok(())
}
