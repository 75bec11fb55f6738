//! When a supervised cluster is restarted after a failure, and when it gives up:
//! Flink's restart strategies (`restart-strategy.type`), chosen with
//! `--restart-strategy` (the [`FLAG`] both engine runners declare).
//!
//! - `exponential-delay` (the default): the first restart after `initial`, each
//!   following one `multiplier` times later, at most `max`, each delay moved by up to
//!   ± `jitter` of itself; never gives up. An attempt that completed a checkpoint, or
//!   ran `reset-after` without failing, was no crash loop: the next delay is `initial`
//!   again. So a job that keeps making checkpoints survives any number of kills, and a
//!   crash loop (a database down, say) backs off instead of spinning.
//! - `fixed-delay`: at most `attempts` restarts in the job's life, each after `delay`.
//! - `failure-rate`: restarts after `delay` as long as no more than `failures` failures
//!   fall within any `interval`.
//! - `none`: the first failure is the job's.
//!
//! A failure of the pipeline itself (a user error, a refused option) is never
//! restarted; nor is a cluster without a checkpoint directory, having nothing to
//! resume from.

use std::collections::VecDeque;
use std::time::Duration;
use tidewater::exec::SplitMix64;
use tidewater::runner::RunnerFlag;

/// `--restart-strategy`, declared by both engine runners.
pub const FLAG: RunnerFlag = RunnerFlag {
    name: "restart-strategy",
    value_name: "STRATEGY",
    help: "How --local-cluster's supervisor restarts the job after a failure, as Flink's restart strategies: \
           exponential-delay[:initial=100ms,max=30s,multiplier=2,jitter=0.1,reset-after=1m] (the default; never gives up, \
           back to the initial delay after an attempt that completed a checkpoint), \
           fixed-delay[:attempts=20,delay=1s], failure-rate[:failures=10,interval=1m,delay=1s], or none",
    check: check_flag,
};

fn check_flag(value: &str) -> Result<(), String> {
    RestartStrategy::parse(value).map(|_| ())
}

/// A restart strategy.
#[derive(Clone, Debug, PartialEq)]
pub enum RestartStrategy {
    /// Delays growing from `initial` by `multiplier` up to `max`, ± `jitter`; reset by
    /// an attempt that completed a checkpoint or ran `reset_after`.
    ExponentialDelay {
        /// The first delay.
        initial: Duration,
        /// The longest delay.
        max: Duration,
        /// Each delay is the previous one times this (at least 1).
        multiplier: f64,
        /// A delay moves by up to this fraction of itself, either way (0 to 1).
        jitter: f64,
        /// An attempt that ran this long resets the delay.
        reset_after: Duration,
    },
    /// At most `attempts` restarts, each after `delay`.
    FixedDelay {
        /// Restarts in the job's life.
        attempts: usize,
        /// The delay before each.
        delay: Duration,
    },
    /// Restarts after `delay` while at most `failures` failures fall in any `interval`.
    FailureRate {
        /// Failures allowed per interval.
        failures: usize,
        /// The interval.
        interval: Duration,
        /// The delay before each restart.
        delay: Duration,
    },
    /// No restart.
    None,
}

impl Default for RestartStrategy {
    fn default() -> Self {
        RestartStrategy::ExponentialDelay {
            initial: Duration::from_millis(100),
            max: Duration::from_secs(30),
            multiplier: 2.0,
            jitter: 0.1,
            reset_after: Duration::from_secs(60),
        }
    }
}

impl RestartStrategy {
    /// Parses `NAME[:key=value,...]`; keys left out keep their defaults.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tidewater_runners_timely::restart::RestartStrategy;
    /// assert_eq!(
    ///     RestartStrategy::parse("fixed-delay:attempts=3").unwrap(),
    ///     RestartStrategy::FixedDelay { attempts: 3, delay: Duration::from_secs(1) }
    /// );
    /// assert_eq!(
    ///     RestartStrategy::parse("fixed-delay:tries=3").unwrap_err(),
    ///     "fixed-delay has no setting 'tries'; its settings: attempts, delay"
    /// );
    /// ```
    pub fn parse(spec: &str) -> Result<RestartStrategy, String> {
        let (name, settings) = match spec.split_once(':') {
            Some((n, s)) => (n, s),
            None => (spec, ""),
        };
        let mut strategy = match name {
            "exponential-delay" => RestartStrategy::default(),
            "fixed-delay" => RestartStrategy::FixedDelay {
                attempts: 20,
                delay: Duration::from_secs(1),
            },
            "failure-rate" => RestartStrategy::FailureRate {
                failures: 10,
                interval: Duration::from_secs(60),
                delay: Duration::from_secs(1),
            },
            "none" => RestartStrategy::None,
            other => {
                return Err(format!(
                    "unknown restart strategy '{other}': expected exponential-delay, fixed-delay, failure-rate or none"
                ))
            }
        };
        for setting in settings.split(',').filter(|s| !s.is_empty()) {
            let (key, value) = setting
                .split_once('=')
                .ok_or_else(|| format!("'{setting}': expected key=value"))?;
            strategy.set(name, key.trim(), value.trim())?;
        }
        Ok(strategy)
    }

    fn set(&mut self, name: &str, key: &str, value: &str) -> Result<(), String> {
        let duration =
            |v: &str| tidewater::parse_duration(v).map_err(|e| format!("{name} {key}={v}: {e}"));
        let count = |v: &str| {
            v.parse::<usize>()
                .ok()
                .filter(|n| *n >= 1)
                .ok_or_else(|| format!("{name} {key}={v}: expected a whole number, at least 1"))
        };
        let fraction = |v: &str, lo: f64, hi: f64| {
            v.parse::<f64>()
                .ok()
                .filter(|x| (lo..=hi).contains(x))
                .ok_or_else(|| format!("{name} {key}={v}: expected a number from {lo} to {hi}"))
        };
        let settings: &str = match self {
            RestartStrategy::ExponentialDelay {
                initial,
                max,
                multiplier,
                jitter,
                reset_after,
            } => match key {
                "initial" => return duration(value).map(|d| *initial = d),
                "max" => return duration(value).map(|d| *max = d),
                "multiplier" => return fraction(value, 1.0, 100.0).map(|x| *multiplier = x),
                "jitter" => return fraction(value, 0.0, 1.0).map(|x| *jitter = x),
                "reset-after" => return duration(value).map(|d| *reset_after = d),
                _ => "initial, max, multiplier, jitter, reset-after",
            },
            RestartStrategy::FixedDelay { attempts, delay } => match key {
                "attempts" => return count(value).map(|n| *attempts = n),
                "delay" => return duration(value).map(|d| *delay = d),
                _ => "attempts, delay",
            },
            RestartStrategy::FailureRate {
                failures,
                interval,
                delay,
            } => match key {
                "failures" => return count(value).map(|n| *failures = n),
                "interval" => return duration(value).map(|d| *interval = d),
                "delay" => return duration(value).map(|d| *delay = d),
                _ => "failures, interval, delay",
            },
            RestartStrategy::None => return Err(format!("{name} has no settings")),
        };
        Err(format!(
            "{name} has no setting '{key}'; its settings: {settings}"
        ))
    }
}

/// How one failed attempt went.
#[derive(Clone, Copy, Debug)]
pub struct Failure {
    /// When it failed, from the start of the job.
    pub at: Duration,
    /// How long the attempt ran.
    pub ran: Duration,
    /// Whether it completed a checkpoint.
    pub checkpointed: bool,
}

/// A strategy applied to a job's failures, one after another.
#[derive(Debug)]
pub struct Restarts {
    strategy: RestartStrategy,
    /// Restarts so far.
    restarts: usize,
    /// The next exponential delay, before jitter.
    next: Duration,
    /// When recent failures happened (failure-rate).
    recent: VecDeque<Duration>,
    /// Draws the jitter.
    rng: SplitMix64,
}

impl Restarts {
    /// `strategy`, before the first failure; `seed` draws the jitter.
    pub fn new(strategy: RestartStrategy, seed: u64) -> Restarts {
        let next = match &strategy {
            RestartStrategy::ExponentialDelay { initial, .. } => *initial,
            _ => Duration::ZERO,
        };
        Restarts {
            strategy,
            restarts: 0,
            next,
            recent: VecDeque::new(),
            rng: SplitMix64::new(seed),
        }
    }

    /// Restarts so far.
    pub fn restarts(&self) -> usize {
        self.restarts
    }

    /// After `failure`: the delay before the restart, or why the job gives up.
    pub fn on_failure(&mut self, failure: Failure) -> Result<Duration, String> {
        let delay = match &self.strategy {
            RestartStrategy::None => {
                return Err("the restart strategy is none".into());
            }
            RestartStrategy::FixedDelay { attempts, delay } => {
                if self.restarts >= *attempts {
                    return Err(format!(
                        "gave up after {} restarts (fixed-delay attempts={attempts})",
                        self.restarts
                    ));
                }
                *delay
            }
            RestartStrategy::FailureRate {
                failures,
                interval,
                delay,
            } => {
                self.recent.push_back(failure.at);
                while self
                    .recent
                    .front()
                    .is_some_and(|t| failure.at.saturating_sub(*t) >= *interval)
                {
                    self.recent.pop_front();
                }
                if self.recent.len() > *failures {
                    return Err(format!(
                        "{} failures within {interval:?} (failure-rate failures={failures})",
                        self.recent.len()
                    ));
                }
                *delay
            }
            RestartStrategy::ExponentialDelay {
                initial,
                max,
                multiplier,
                jitter,
                reset_after,
            } => {
                if failure.checkpointed || failure.ran >= *reset_after {
                    self.next = *initial;
                }
                let base = self.next.min(*max);
                self.next = base.mul_f64(*multiplier).min(*max);
                // Up to ± jitter of the delay.
                let unit = (self.rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64; // [0, 1)
                base.mul_f64(1.0 + jitter * (2.0 * unit - 1.0))
            }
        };
        self.restarts += 1;
        Ok(delay)
    }
}

#[cfg(test)]
mod tests;
