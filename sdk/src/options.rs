//! Pipeline options, parsed from the command line.

use std::path::PathBuf;

/// Options every pipeline takes: which runner, validation, the seed, where to dump the
/// plan, and runner-specific `--runner-option key=value` pairs.
///
/// Flatten it into a binary's own arguments with clap:
///
/// ```
/// use clap::Parser;
/// #[derive(Parser)]
/// struct Args {
///     #[command(flatten)]
///     options: tidewater::PipelineOptions,
///     #[arg(long)]
///     input: Option<String>,
/// }
/// let args = Args::parse_from(["wc", "--runner=direct", "--seed=7", "--input=x.txt"]);
/// assert_eq!(args.options.runner, "direct");
/// assert_eq!(args.options.seed, Some(7));
/// ```
#[derive(clap::Args, Clone, Debug)]
pub struct PipelineOptions {
    /// The runner that executes the pipeline: direct, microbatch or native.
    #[arg(long, default_value = "direct")]
    pub runner: String,
    /// Seed of the direct runner's schedule (element order, bundle boundaries); printed
    /// on failure so that a failing order can be replayed.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Turn off the direct runner's checks (coder round-trips, shuffled order,
    /// element copies for error messages) for speed.
    #[arg(long)]
    pub no_validate: bool,
    /// Write the portable plan (JSON) to this path before running.
    #[arg(long, value_name = "PATH")]
    pub dump_plan: Option<PathBuf>,
    /// A runner-specific option, `key=value`; may be repeated.
    #[arg(long = "runner-option", value_name = "KEY=VALUE", value_parser = parse_key_value)]
    pub runner_options: Vec<(String, String)>,
}

impl Default for PipelineOptions {
    fn default() -> Self {
        PipelineOptions {
            runner: "direct".into(),
            seed: None,
            no_validate: false,
            dump_plan: None,
            runner_options: Vec::new(),
        }
    }
}

impl PipelineOptions {
    /// Options for `runner`, everything else default.
    ///
    /// ```
    /// assert_eq!(tidewater::PipelineOptions::for_runner("native").runner, "native");
    /// ```
    pub fn for_runner(runner: &str) -> Self {
        PipelineOptions {
            runner: runner.to_string(),
            ..Default::default()
        }
    }

    /// The value of runner option `key`, if given.
    ///
    /// ```
    /// let mut o = tidewater::PipelineOptions::default();
    /// o.runner_options.push(("bundle_size".into(), "10".into()));
    /// assert_eq!(o.runner_option("bundle_size"), Some("10"));
    /// ```
    pub fn runner_option(&self, key: &str) -> Option<&str> {
        self.runner_options
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

fn parse_key_value(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => Err(format!("expected KEY=VALUE, got '{s}'")),
    }
}
