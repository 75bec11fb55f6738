//! The summary an engine run prints at its end.

/// The engine's figures of a run, for people: records, checkpoints or batches, their
/// cost, the records in flight, and a line per operator (records in and out, input
/// watermark, backpressure); see [`crate::metrics`].
pub fn summary(runner: &str, metrics: &tidewater::exec::MetricResults) -> String {
    use crate::metrics::{
        show_watermark, ALIGNMENT_MS, INPUT_WATERMARK, QUEUED_MAX, RECORDS_IN, RECORDS_OUT,
        THROTTLED_MS,
    };
    let step = crate::metrics::ENGINE_STEP;
    let counter = |name| metrics.counter(step, name).unwrap_or(0);
    let dist = |name, unit: &str| match metrics.distribution(step, name) {
        Some(d) if d.count > 0 => format!(
            "{name} avg {:.1}{unit} max {}{unit} over {}",
            d.sum as f64 / d.count as f64,
            d.max,
            d.count
        ),
        _ => format!("{name} -"),
    };
    let mut out = format!(
        "{runner} runner: {} records read; {} checkpoints ({}); {}; {}; {}; {}",
        counter("records_read"),
        counter("checkpoints"),
        dist("manifest_ms", "ms"),
        dist("snapshot_ms", "ms"),
        dist("snapshot_write_ms", "ms"),
        dist("snapshot_durable_ms", "ms"),
        dist("snapshot_bytes", "B"),
    );
    if counter("batches") > 0 {
        out.push_str(&format!(
            "; per batch and worker: {}, {}, {}, {}",
            dist("batch_records", ""),
            dist("batch_ms", "ms"),
            dist("scheduling_delay_ms", "ms"),
            dist("batch_state_bytes", "B"),
        ));
    } else {
        out.push_str(&format!(
            "; {}; sources held back {} ms by the epochs in flight",
            dist("alignment_ms", "ms"),
            counter("throttled_ms"),
        ));
        if counter(crate::metrics::DRIFT_PAUSED_MS) > 0 {
            out.push_str(&format!(
                ", {} ms by watermark alignment",
                counter(crate::metrics::DRIFT_PAUSED_MS)
            ));
        }
    }
    if counter("checkpoints") > 0 {
        out.push_str(&format!(
            "\n  per checkpoint: {}, {}; per checkpoint and worker: {}",
            dist("checkpoint_ms", "ms"),
            dist("checkpoint_bytes", "B"),
            dist("checkpoint_alignment_ms", "ms"),
        ));
    }
    if let Some(d) = metrics.distribution(step, "records_in_flight_max") {
        let epoch = metrics
            .distribution(step, "epoch_records")
            .map_or(0, |e| e.max);
        out.push_str(&format!(
            "\n  records in flight (read, not yet durable everywhere) at most {} on a worker; an epoch read at most {epoch}",
            d.max
        ));
    }
    let operators: Vec<(&String, &tidewater::exec::StepMetrics)> = metrics
        .steps
        .iter()
        .filter(|(name, m)| {
            name.as_str() != step && m.counters.iter().any(|(k, _)| k == RECORDS_IN)
        })
        .collect();
    if operators.is_empty() {
        return out;
    }
    let width = operators
        .iter()
        .map(|(n, _)| n.len())
        .max()
        .unwrap_or(0)
        .max("operator".len());
    out.push_str(&format!(
        "\n  {:<width$}  {:>12}  {:>12}  {:>20}  backpressure",
        "operator", "records in", "records out", "input watermark"
    ));
    for (name, _) in operators {
        let c = |k| metrics.counter(name, k).unwrap_or(0);
        let watermark = metrics
            .distribution(name, INPUT_WATERMARK)
            .map_or("-".into(), |d| show_watermark(d.min));
        let backpressure = match metrics.counter(name, THROTTLED_MS) {
            Some(ms) => format!("held back {ms} ms"),
            None => format!(
                "aligned {} ms, queued at most {}",
                c(ALIGNMENT_MS),
                metrics.distribution(name, QUEUED_MAX).map_or(0, |d| d.max)
            ),
        };
        out.push_str(&format!(
            "\n  {name:<width$}  {:>12}  {:>12}  {watermark:>20}  {backpressure}",
            c(RECORDS_IN),
            c(RECORDS_OUT),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::summary;
    use crate::metrics::OperatorFigures;
    use crate::metrics::ENGINE_STEP;
    use tidewater::exec::MetricResults;
    use tidewater::Timestamp;

    #[test]
    fn the_summary_has_a_line_per_checkpoint_figure_and_per_operator() {
        let mut m = MetricResults::default();
        let e = m.step_mut(ENGINE_STEP);
        e.inc_counter("records_read", 600);
        e.inc_counter("checkpoints", 2);
        e.inc_counter("throttled_ms", 7);
        for (ms, bytes) in [(10, 300), (30, 500)] {
            e.update_distribution("checkpoint_ms", ms);
            e.update_distribution("checkpoint_bytes", bytes);
            e.update_distribution("checkpoint_alignment_ms", 0);
        }
        e.update_distribution("records_in_flight_max", 48);
        e.update_distribution("epoch_records", 16);
        let source = OperatorFigures::new("Generate", true);
        source.add_in(600);
        source.add_out(600);
        source.add_throttled(std::time::Duration::from_millis(7));
        source.watermark.set(Timestamp::MAX);
        source.report(&mut m);
        let count = OperatorFigures::new("Count/GroupByKey", false);
        count.add_in(600);
        count.add_out(10);
        count.add_alignment(std::time::Duration::from_millis(3));
        count.set_queued(2);
        count.watermark.set(Timestamp(1500));
        count.report(&mut m);
        // A DoFn's own metrics are not an operator's line.
        m.step_mut("Format").inc_counter("formatted", 10);
        assert_eq!(
            summary("native", &m),
            "native runner: 600 records read; 2 checkpoints (manifest_ms -); snapshot_ms -; snapshot_write_ms -; snapshot_durable_ms -; snapshot_bytes -; alignment_ms -; sources held back 7 ms by the epochs in flight
  per checkpoint: checkpoint_ms avg 20.0ms max 30ms over 2, checkpoint_bytes avg 400.0B max 500B over 2; per checkpoint and worker: checkpoint_alignment_ms avg 0.0ms max 0ms over 2
  records in flight (read, not yet durable everywhere) at most 48 on a worker; an epoch read at most 16
  operator            records in   records out       input watermark  backpressure
  Count/GroupByKey           600            10               1500 ms  aligned 3 ms, queued at most 2
  Generate                   600           600           end of time  held back 7 ms"
        );
    }
}
