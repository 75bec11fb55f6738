//! The job the crash tests kill: generated records (bounded, optionally paced) split
//! into words, counted per word per 1-second event-time window and as a running count
//! per word kept in state, every result line written through the exactly-once
//! [`EpochFiles`] sink. Its committed output is the same on every runner and after
//! any number of crashes and restarts: the watermark of the generator is exact (no
//! record is late), so no result depends on timing; a running count's lines are the
//! counts 1..n of each word whatever order the records took.
//!
//! The numbers come from the generator, or from a Kafka topic that holds the same
//! numbers with the same event times ([`fill_topic`]), read up to its end offsets
//! (`available-now`): the output is then the same again, and a crash test over the topic
//! shows that the offsets in the checkpoint resume the source exactly.

use crate::streaming_word_count::words_of;
use std::path::Path;
use tidewater::{
    DoFn, Duration, ElementContext, FlattenExt, PCollection, ParDo, Pipeline, ProcessContext, Read,
    StatefulParDo, UserError, Window, WindowFn,
};
use tidewater_kafka::admin::{KafkaAdmin, KafkaError, ProducerRecord};
use tidewater_kafka::{KafkaRecord, KafkaSource};
use tidewater_transforms::{Count, EpochFiles, GenerateSequence};

/// Where the job's numbers come from.
#[derive(Clone, Debug)]
pub enum Input {
    /// The generator: `records` numbers, `rate` per second (0: as fast as possible).
    Generated {
        /// How many.
        records: u64,
        /// Per second.
        rate: f64,
    },
    /// A topic filled by [`fill_topic`], read at most `rate` records per second.
    Kafka {
        /// Comma-separated `host:port`.
        brokers: String,
        /// The topic.
        topic: String,
        /// Per second (0: as fast as the broker gives).
        rate: f64,
    },
}

/// Number `n` is the value of a record of partition `n % partitions` with timestamp
/// `n` ms (the generator's event time), produced in order, so every partition's
/// timestamps increase. Creates the topic; a topic that exists must hold exactly that.
pub fn fill_topic(
    brokers: &str,
    topic: &str,
    records: u64,
    partitions: u32,
) -> Result<(), KafkaError> {
    let admin = KafkaAdmin::connect(brokers, topic)?;
    if admin.create_topic(partitions)? {
        let numbers: Vec<u64> = (0..records).collect();
        for part in 0..partitions {
            let mine: Vec<ProducerRecord> = numbers
                .iter()
                .filter(|n| **n % u64::from(partitions) == u64::from(part))
                .map(|n| ProducerRecord::text(&n.to_string(), *n as i64))
                .collect();
            for batch in mine.chunks(1000) {
                admin.produce(part, batch)?;
            }
        }
    }
    let mut held = 0;
    for part in 0..admin.partitions()? as u32 {
        held += admin.high_watermark(part)?;
    }
    if held != records as i64 {
        return Err(KafkaError(format!(
            "Kafka topic '{topic}' holds {held} records, not the {records} of the crash job"
        )));
    }
    Ok(())
}

/// A record's number.
fn number(r: KafkaRecord) -> u64 {
    let text = r.value_text();
    text.parse().unwrap_or_else(|_| {
        panic!(
            "record {} of partition {} is not a number: {text:?}",
            r.offset, r.partition
        )
    })
}

/// The job's numbers, with their event times.
pub fn numbers(p: &Pipeline, input: &Input) -> PCollection<u64> {
    match input {
        Input::Generated { records, rate } => {
            let mut source = GenerateSequence::new(0, Some(*records)).with_event_time(0, 1);
            if *rate > 0.0 {
                source = source.with_rate(*rate);
            }
            p.apply("Generate", Read::from(source))
        }
        Input::Kafka {
            brokers,
            topic,
            rate,
        } => {
            let mut source = KafkaSource::new(brokers, topic).available_now();
            if *rate > 0.0 {
                source = source.with_max_rate(*rate);
            }
            p.apply("ReadTopic", source.read()).map("Number", number)
        }
    }
}

/// The job's result lines, before they are written.
pub fn lines(p: &Pipeline, records: u64, rate: f64) -> PCollection<String> {
    lines_of(p, &Input::Generated { records, rate })
}

/// Which version of the job runs. The crash tests run [`Version::V1`]; the upgrade
/// tests deploy the others over its savepoints (issue 36: upgrades with state).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Version {
    /// The job as described above.
    #[default]
    V1,
    /// A stateless change: a map added before the counts (node numbers shift), and
    /// other closures, at other lines, that mark their lines `v2`; the windowed count
    /// and the sink renamed, their uids pinned to their old names. Its state is V1's.
    V2,
    /// The running count removed: its state has no step to go to.
    V3,
    /// The running count keeps a struct, `Tally { count }`, in its cell `count`
    /// ([`crate::tally::v1`]): V1's `u64` there does not read as one.
    V4,
    /// The tally gains a field with `#[serde(default)]` ([`crate::tally::v2`]): it
    /// reads V4's values.
    V5,
    /// The running count's cell `count` holds an `i64`, not V1's `u64`
    /// ([`crate::tally::signed`]): another type, which reads V1's values.
    V6,
}

/// The job's result lines over `input`.
pub fn lines_of(p: &Pipeline, input: &Input) -> PCollection<String> {
    lines_of_version(p, input, Version::V1)
}

/// The result lines of `version` of the job over `input`.
pub fn lines_of_version(p: &Pipeline, input: &Input, version: Version) -> PCollection<String> {
    let mut words = numbers(p, input).flat_map_with("Words", 7u64, |seed: &u64, offset: u64| {
        words_of(*seed, offset)
    });
    if version == Version::V2 {
        words = words.map("Trim", |word: String| word.trim().to_string());
    }
    let windows = words.apply(
        "Window",
        Window::into(WindowFn::fixed(Duration::from_secs(1))),
    );
    let windowed = if version == Version::V2 {
        // Renamed, its state pinned to the old name's id.
        windows
            .apply("CountEachWindow", Count::per_element())
            .with_uid("CountPerWindow")
    } else {
        windows.apply("CountPerWindow", Count::per_element())
    };
    let per_window = if version == Version::V2 {
        windowed.map_with_context(
            "FormatWindowCount",
            |(word, n): (String, u64), c: &ElementContext| {
                format!("window {} {word} {n} v2", c.window().start().millis())
            },
        )
    } else {
        windowed.map_with_context(
            "FormatWindowCount",
            |(word, n): (String, u64), c: &ElementContext| {
                format!("window {} {word} {n}", c.window().start().millis())
            },
        )
    };
    if version == Version::V3 {
        return per_window;
    }
    let pairs = words.map("PairWithOne", |word: String| (word, 1u64));
    let counted = match version {
        Version::V4 => pairs.apply("RunningCount", StatefulParDo::of(crate::tally::v1::TallyV1)),
        Version::V5 => pairs.apply("RunningCount", StatefulParDo::of(crate::tally::v2::TallyV2)),
        Version::V6 => pairs.apply(
            "RunningCount",
            StatefulParDo::of(crate::tally::signed::SignedCount),
        ),
        _ => pairs.apply(
            "RunningCount",
            StatefulParDo::of(crate::stateful_word_count::RunningCount),
        ),
    };
    let totals = counted.apply("FormatTotal", ParDo::of(FormatTotal));
    vec![per_window, totals].apply_flatten("AllLines")
}

/// Formats a running total, counts the totals in the user counter `totals` and keeps
/// the last in the gauge `last_total` (which a job's status shows while it runs).
#[derive(serde::Serialize, serde::Deserialize)]
pub struct FormatTotal;

impl DoFn for FormatTotal {
    type In = (String, u64);
    type Out = String;
    fn process(
        &mut self,
        (word, n): (String, u64),
        ctx: &mut ProcessContext<'_, String>,
    ) -> Result<(), UserError> {
        ctx.inc_counter("totals", 1);
        ctx.set_gauge("last_total", n as i64);
        ctx.output(format!("total {word} {n}"));
        Ok(())
    }
}

/// The whole job: its lines committed into `out` (an existing directory).
pub fn build(p: &Pipeline, records: u64, rate: f64, out: &Path) {
    build_over(p, &Input::Generated { records, rate }, out);
}

/// The whole job over `input`.
pub fn build_over(p: &Pipeline, input: &Input, out: &Path) {
    build_version(p, input, out, Version::V1);
}

/// `version` of the whole job over `input`.
pub fn build_version(p: &Pipeline, input: &Input, out: &Path, version: Version) {
    let lines = lines_of_version(p, input, version);
    match version {
        // v2 renames its sink and keeps its state id: what v1 staged is committed.
        Version::V2 => lines.apply(
            "Write lines",
            tidewater::WriteToSink::new(EpochFiles::to(out)).with_uid("Output"),
        ),
        _ => lines.write_to("Output", EpochFiles::to(out)),
    }
}

/// The whole job, its lines committed into column `line` of PostgreSQL table `table`
/// on the server at `url` (the PostgreSQL sink, two-phase commit by epoch).
pub fn build_postgres(p: &Pipeline, records: u64, rate: f64, url: &str, table: &str) {
    build_postgres_over(p, &Input::Generated { records, rate }, url, table);
}

/// The job over `input`, its lines written into PostgreSQL.
pub fn build_postgres_over(p: &Pipeline, input: &Input, url: &str, table: &str) {
    lines_of(p, input).write_to(
        "Output",
        tidewater_postgres::PostgresSink::<String>::new(url, table, &["line"]).bridged(),
    );
}

/// Every committed line in `out`, sorted: the job's output, to compare across runs.
pub fn committed_lines(out: &Path) -> std::io::Result<Vec<String>> {
    let mut lines = Vec::new();
    for entry in std::fs::read_dir(out)? {
        let path = entry?.path();
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        if name.is_some_and(|n| n.starts_with("part-")) {
            lines.extend(std::fs::read_to_string(&path)?.lines().map(String::from));
        }
    }
    lines.sort();
    Ok(lines)
}
