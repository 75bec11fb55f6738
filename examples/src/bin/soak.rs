//! Soak test: the streaming word count over an unbounded generator for a while (10
//! minutes by default), its panes written into a sink that keeps nothing, with the
//! process's resident memory printed every minute. Memory must stay flat: keys are
//! forgotten once their windows expire, side data is pruned, and nothing is captured.
//! Not part of CI (it runs for minutes).
//!
//! `cargo run --release -p tidewater-examples --bin soak -- --minutes 10`

use clap::Parser;
use std::time::{Duration, Instant};
use tidewater::{Pipeline, PipelineOptions};
use tidewater_examples::streaming_word_count;

/// Runs the streaming word count unbounded and prints RSS every minute.
#[derive(Parser)]
#[command(name = "soak")]
struct Args {
    /// How long to run.
    #[arg(long, default_value_t = 10.0)]
    minutes: f64,
    /// Records per second (each a few words).
    #[arg(long, default_value_t = 20_000.0)]
    rate: f64,
    /// Seconds between RSS lines.
    #[arg(long, default_value_t = 60)]
    every: u64,
    /// Runner options (e.g. `checkpoint_every=100`).
    #[arg(long = "runner-option", value_name = "KEY=VALUE", value_parser = tidewater::parse_key_value)]
    runner_options: Vec<(String, String)>,
}

fn rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

fn main() -> std::process::ExitCode {
    tidewater_examples::report(run())
}

fn run() -> anyhow::Result<()> {
    // Runners first, so that --runner is checked against them while parsing.
    tidewater_examples::register_runners();
    let args = Args::parse();
    tidewater_examples::drain_on_ctrl_c();
    tidewater_examples::savepoints_on_sigusr1();
    let duration = Duration::from_secs_f64(args.minutes * 60.0);
    let options = PipelineOptions {
        no_validate: true,
        max_duration: Some(duration),
        runner_options: args.runner_options.clone(),
        ..PipelineOptions::default()
    };
    let p = Pipeline::new(options);
    streaming_word_count::build(&p, 0, args.rate, 42).write_to(
        "Panes",
        tidewater_examples::CountingSink::<(String, u64)>::default(),
    );
    let every = Duration::from_secs(args.every.max(1));
    let started = Instant::now();
    std::thread::spawn(move || loop {
        std::thread::sleep(every);
        tidewater_examples::outln!(
            "{:>6.0}s  rss={:>7.1}MB  panes committed={}",
            started.elapsed().as_secs_f64(),
            rss_mb(),
            tidewater_examples::committed_count()
        );
    });
    tidewater_examples::outln!("{:>6.0}s  rss={:>7.1}MB", 0.0, rss_mb());
    p.run()?;
    tidewater_examples::outln!(
        "done after {:.0}s: rss={:.1}MB, pane elements committed={}",
        started.elapsed().as_secs_f64(),
        rss_mb(),
        tidewater_examples::committed_count()
    );
    Ok(())
}
