//! Flags a runner declares for itself ([`Runner::flags`](crate::Runner::flags)), such
//! as the micro-batch runner's `--batch-interval`: offered on the command line of every
//! binary that registered the runner before parsing its flags, checked while parsing,
//! and handed to the runner as strings in [`PipelineOptions::runner_flags`]
//! (crate::PipelineOptions::runner_flags). The SDK names none of them.

use crate::runner::{RunnerFlag, registered_runners};

/// The runner flags given, by name (without `--`), in the order given.
///
/// ```
/// let mut o = tidewater::PipelineOptions::for_runner("microbatch");
/// o.runner_flags.set("batch-interval", "100ms");
/// assert_eq!(o.runner_flags.get("batch-interval"), Some("100ms"));
/// assert_eq!(o.runner_flags.get("trigger"), None);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunnerFlags {
    given: Vec<(String, String)>,
}

impl RunnerFlags {
    /// The value of flag `name` (the last one given), if given.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.given
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// Gives flag `name` the value `value`, as `--name value` on the command line does.
    pub fn set(&mut self, name: &str, value: impl Into<String>) {
        self.given.retain(|(n, _)| n != name);
        self.given.push((name.to_string(), value.into()));
    }

    /// Every flag given: name and value.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.given.iter().map(|(n, v)| (n.as_str(), v.as_str()))
    }

    /// Whether no flag was given.
    pub fn is_empty(&self) -> bool {
        self.given.is_empty()
    }
}

/// Every flag the registered runners declare, the first declaration of each name.
fn declared() -> Vec<RunnerFlag> {
    let mut flags: Vec<RunnerFlag> = Vec::new();
    for runner in registered_runners() {
        for flag in runner.flags() {
            if !flags.iter().any(|f| f.name == flag.name) {
                flags.push(*flag);
            }
        }
    }
    flags
}

/// The runners that declare flag `name`, by name.
pub fn runners_with_flag(name: &str) -> Vec<&'static str> {
    registered_runners()
        .iter()
        .filter(|r| r.flags().iter().any(|f| f.name == name))
        .map(|r| r.name())
        .collect()
}

impl clap::FromArgMatches for RunnerFlags {
    fn from_arg_matches(matches: &clap::ArgMatches) -> Result<Self, clap::Error> {
        let mut flags = RunnerFlags::default();
        flags.update_from_arg_matches(matches)?;
        Ok(flags)
    }

    fn update_from_arg_matches(&mut self, matches: &clap::ArgMatches) -> Result<(), clap::Error> {
        for flag in declared() {
            // A flag registered after the command was built is not in its matches.
            if let Ok(Some(value)) = matches.try_get_one::<String>(flag.name) {
                self.set(flag.name, value.clone());
            }
        }
        Ok(())
    }
}

impl clap::Args for RunnerFlags {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        declared().into_iter().fold(cmd, |cmd, flag| {
            cmd.arg(
                clap::Arg::new(flag.name)
                    .long(flag.name)
                    .value_name(flag.value_name)
                    .help(flag.help)
                    .help_heading("Runner flags (each for the runners that declare it)")
                    .value_parser(move |s: &str| (flag.check)(s).map(|()| s.to_string())),
            )
        })
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_args(cmd)
    }
}
