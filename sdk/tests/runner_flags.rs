//! A runner's own flags: offered by a binary that registered the runner before
//! parsing, checked while parsing, and refused for a run on another runner.

use clap::Parser;
use std::sync::Arc;
use tidewater::runner::{Capabilities, PipelineResult, Runner, RunnerFlag, register_runner};
use tidewater::{PipelineOptions, Result, plan::Plan};

/// A runner that declares `--speed` and runs nothing.
struct Fast;

fn check_speed(s: &str) -> std::result::Result<(), String> {
    match s {
        "slow" | "fast" => Ok(()),
        other => Err(format!("expected slow or fast, got '{other}'")),
    }
}

const FLAGS: [RunnerFlag; 1] = [RunnerFlag {
    name: "speed",
    value_name: "SPEED",
    help: "How fast the test runner runs",
    check: check_speed,
}];

impl Runner for Fast {
    fn name(&self) -> &'static str {
        "fast"
    }
    fn flags(&self) -> &'static [RunnerFlag] {
        &FLAGS
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities::new([], "the test runner runs nothing")
    }
    fn run(&self, _plan: &Plan, _options: &PipelineOptions) -> Result<PipelineResult> {
        unreachable!("its capabilities refuse every pipeline")
    }
}

#[derive(Parser)]
struct Args {
    #[command(flatten)]
    options: PipelineOptions,
}

#[test]
fn a_runner_flag_is_parsed_checked_and_refused_elsewhere() {
    register_runner(Arc::new(Fast));
    tidewater_runner_direct::register();
    let args = Args::try_parse_from(["x", "--runner=fast", "--speed", "slow"]).unwrap();
    assert_eq!(args.options.runner_flags.get("speed"), Some("slow"));
    assert_eq!(
        args.options.runner_flags.iter().collect::<Vec<_>>(),
        vec![("speed", "slow")]
    );
    let e = Args::try_parse_from(["x", "--speed", "warp"])
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("invalid value 'warp' for '--speed <SPEED>': expected slow or fast, got 'warp'"),
        "{e}"
    );
    // Not given: nothing.
    let args = Args::try_parse_from(["x"]).unwrap();
    assert!(args.options.runner_flags.is_empty());
    // Given to a runner that does not declare it: refused, naming the runner that does.
    let options = Args::try_parse_from(["x", "--runner=direct", "--speed=fast"])
        .unwrap()
        .options;
    let p = tidewater::Pipeline::new(options);
    p.apply("Create", tidewater::Create::of(vec![1u64]));
    let e = p.run().unwrap_err().to_string();
    assert_eq!(
        e,
        "invalid option --speed: the direct runner does not take this flag; it is for --runner=fast"
    );
}
