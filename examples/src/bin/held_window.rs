//! A window held back by an idle source (see `tidewater_examples::held_window`): run it
//! with `--status-addr 127.0.0.1:8081` and ask why no window fires (the page's panel,
//! `tidewater explain --job http://127.0.0.1:8081`). Ctrl-C drains it: every window
//! fires, and the counts are printed.
//!
//! `cargo run -p tidewater-examples --bin held_window -- --runner native
//! --status-addr 127.0.0.1:8081`

use clap::Parser;
use tidewater::{Pipeline, PipelineOptions};
use tidewater_examples::held_window;

/// Numbers and an idle source, counted per 1 s window.
#[derive(Parser)]
struct Args {
    #[command(flatten)]
    options: PipelineOptions,
    /// Numbers to generate.
    #[arg(long, default_value_t = 1_000_000)]
    records: u64,
    /// Numbers per second.
    #[arg(long, default_value_t = 1_000.0)]
    rate: f64,
    /// Hold the counts in a stateful DoFn's event-time timers instead of windows.
    #[arg(long)]
    timers: bool,
}

fn main() -> std::process::ExitCode {
    tidewater_examples::report(run())
}

fn run() -> anyhow::Result<()> {
    tidewater_examples::register_runners();
    tidewater_examples::drain_on_ctrl_c();
    let args = Args::parse();
    let p = Pipeline::new(args.options);
    let counts = if args.timers {
        held_window::build_timers(&p, args.records, args.rate)
    } else {
        held_window::build(&p, args.records, args.rate)
    };
    counts.capture("counts");
    let r = p.run()?;
    // Another process of a --hosts cluster: process 0 prints the counts.
    if !r.holds_captures {
        return Ok(());
    }
    let mut counts = r.captured_values::<String>("counts")?;
    counts.sort();
    for c in counts {
        println!("{c}");
    }
    Ok(())
}
