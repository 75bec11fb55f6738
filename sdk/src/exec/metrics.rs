use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Sum, count, min and max of the values reported to a distribution.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DistributionData {
    /// Sum of the values.
    pub sum: i64,
    /// Number of values.
    pub count: i64,
    /// Smallest value.
    pub min: i64,
    /// Largest value.
    pub max: i64,
}

impl DistributionData {
    fn of(v: i64) -> Self {
        DistributionData {
            sum: v,
            count: 1,
            min: v,
            max: v,
        }
    }

    fn merge(&mut self, o: &DistributionData) {
        self.sum += o.sum;
        self.count += o.count;
        self.min = self.min.min(o.min);
        self.max = self.max.max(o.max);
    }
}

/// The last value set to a gauge, and when (Beam's `GaugeResult`): merging keeps the
/// latest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GaugeData {
    /// The value.
    pub value: i64,
    /// When it was set, in ms since the Unix epoch (wall clock).
    pub at_ms: i64,
}

/// The metrics one step (transform) updated. A step uses few metric names, so a short
/// vector searched by name beats a hash map.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepMetrics {
    /// Counters by name.
    pub counters: Vec<(String, i64)>,
    /// Distributions by name.
    pub distributions: Vec<(String, DistributionData)>,
    /// Gauges by name.
    #[serde(default)]
    pub gauges: Vec<(String, GaugeData)>,
}

impl StepMetrics {
    /// Adds `n` to counter `name`.
    pub fn inc_counter(&mut self, name: &str, n: i64) {
        match self.counters.iter_mut().find(|(k, _)| k == name) {
            Some((_, c)) => *c += n,
            None => self.counters.push((name.to_string(), n)),
        }
    }

    /// Reports `value` to distribution `name`.
    pub fn update_distribution(&mut self, name: &str, value: i64) {
        match self.distributions.iter_mut().find(|(k, _)| k == name) {
            Some((_, d)) => d.merge(&DistributionData::of(value)),
            None => self
                .distributions
                .push((name.to_string(), DistributionData::of(value))),
        }
    }

    /// Sets gauge `name` to `value`, now.
    pub fn set_gauge(&mut self, name: &str, value: i64) {
        let at_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        self.merge_gauge(name, GaugeData { value, at_ms });
    }

    /// Gauge `name` takes `g` unless it holds a later value.
    fn merge_gauge(&mut self, name: &str, g: GaugeData) {
        match self.gauges.iter_mut().find(|(k, _)| k == name) {
            Some((_, mine)) if mine.at_ms <= g.at_ms => *mine = g,
            Some(_) => {}
            None => self.gauges.push((name.to_string(), g)),
        }
    }

    /// Adds another container's updates to this one.
    pub fn merge(&mut self, other: &StepMetrics) {
        for (k, g) in &other.gauges {
            self.merge_gauge(k, *g);
        }
        for (k, v) in &other.counters {
            self.inc_counter(k, *v);
        }
        for (k, d) in &other.distributions {
            match self.distributions.iter_mut().find(|(n, _)| n == k) {
                Some((_, mine)) => mine.merge(d),
                None => self.distributions.push((k.clone(), *d)),
            }
        }
    }

    /// Nothing was reported.
    pub fn is_empty(&self) -> bool {
        self.counters.is_empty() && self.distributions.is_empty() && self.gauges.is_empty()
    }
}

/// The metrics of a whole pipeline run, by step (the transform's full name).
///
/// ```
/// let mut r = tidewater::exec::MetricResults::default();
/// r.step_mut("Split").inc_counter("words", 3);
/// assert_eq!(r.counter("Split", "words"), Some(3));
/// assert_eq!(r.counter_total("words"), 3);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetricResults {
    /// Metrics per step.
    pub steps: BTreeMap<String, StepMetrics>,
}

impl MetricResults {
    /// The container of `step`, created if missing.
    pub fn step_mut(&mut self, step: &str) -> &mut StepMetrics {
        self.steps.entry(step.to_string()).or_default()
    }

    /// Counter `name` of `step`.
    pub fn counter(&self, step: &str, name: &str) -> Option<i64> {
        self.steps
            .get(step)?
            .counters
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| *v)
    }

    /// Counter `name` summed over every step.
    pub fn counter_total(&self, name: &str) -> i64 {
        self.steps
            .values()
            .flat_map(|s| s.counters.iter())
            .filter(|(k, _)| k == name)
            .map(|(_, v)| v)
            .sum()
    }

    /// Distribution `name` of `step`.
    pub fn distribution(&self, step: &str, name: &str) -> Option<DistributionData> {
        self.steps
            .get(step)?
            .distributions
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| *v)
    }

    /// Gauge `name` of `step`: its latest value.
    ///
    /// ```
    /// let mut r = tidewater::exec::MetricResults::default();
    /// r.step_mut("Read").set_gauge("backlog", 7);
    /// r.step_mut("Read").set_gauge("backlog", 3);
    /// assert_eq!(r.gauge("Read", "backlog"), Some(3));
    /// ```
    pub fn gauge(&self, step: &str, name: &str) -> Option<i64> {
        self.steps
            .get(step)?
            .gauges
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, g)| g.value)
    }

    /// Adds another run's (or worker's) metrics.
    pub fn merge(&mut self, other: &MetricResults) {
        for (step, m) in &other.steps {
            self.step_mut(step).merge(m);
        }
    }
}

/// This process's peak resident set so far (`VmHWM` in `/proc/self/status`), in KiB,
/// where the system tells (Linux): the figure engines and benchmarks report as peak
/// RSS.
///
/// ```
/// if cfg!(target_os = "linux") {
///     assert!(tidewater::exec::peak_rss_kb().unwrap() > 0);
/// }
/// ```
pub fn peak_rss_kb() -> Option<i64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}
