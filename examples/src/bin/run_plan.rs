//! Runs a saved plan (`--plan FILE`) without constructing any pipeline, as a Beam Go
//! worker does: the plan's functions resolve among those this binary links and
//! registered at link time (`tidewater::register!`). A plan naming a function that is
//! not linked, or only registers when a pipeline is constructed (closures, generic
//! transforms), is refused before it runs, with the function's name.
//! `cargo run -p tidewater-examples --bin run_plan -- --plan plan.json --runner=native`

use clap::Parser;
use tidewater::PipelineOptions;

/// Runs the plan `--plan FILE` on the runner `--runner` names.
#[derive(Parser)]
#[command(name = "run_plan")]
struct Args {
    #[command(flatten)]
    options: PipelineOptions,
}

fn main() -> std::process::ExitCode {
    tidewater_examples::report(run())
}

fn run() -> anyhow::Result<()> {
    tidewater_examples::register_runners();
    let args = Args::parse();
    tidewater::run_plan_file(&args.options)?;
    tidewater_examples::outln!("plan done");
    Ok(())
}
