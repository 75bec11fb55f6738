//! The job the crash tests kill (see `tidewater_examples::crash_job`): generated words
//! counted per 1 s window and as running counts, committed exactly once into `--output`.
//!
//! `cargo run -p tidewater-examples --bin crash_job -- --runner native --local-cluster 2
//! --checkpoint-dir /tmp/ckpt --checkpoint-interval 200ms --records 200000 --rate 50000
//! --output /tmp/out`; kill its processes at will: the committed lines come out the
//! same as on the direct runner.

use clap::Parser;
use tidewater::{Pipeline, PipelineOptions};
use tidewater_examples::crash_job;

/// Generated words counted per window and in state, written exactly once.
#[derive(Parser)]
struct Args {
    #[command(flatten)]
    options: PipelineOptions,
    /// Records to generate (1 to 4 words each).
    #[arg(long, default_value_t = 100_000)]
    records: u64,
    /// Records per second (0: as fast as possible).
    #[arg(long, default_value_t = 0.0)]
    rate: f64,
    /// Read the numbers from this Kafka topic (filled by `crash_job::fill_topic`)
    /// instead of generating them; with `--kafka-brokers`.
    #[arg(long, requires = "kafka_brokers")]
    kafka_topic: Option<String>,
    /// The topic's brokers, comma-separated `host:port`.
    #[arg(long)]
    kafka_brokers: Option<String>,
    /// The directory the committed files go to (created if missing).
    #[arg(long)]
    output: std::path::PathBuf,
    /// Write the lines into PostgreSQL instead (a `postgresql://` URL or `key=value`
    /// pairs), into `--pg-table`'s column `line`, exactly once by epoch.
    #[arg(long)]
    postgres: Option<String>,
    /// The table for `--postgres` (it must exist, with a text column `line`).
    #[arg(long, default_value = "crash_job")]
    pg_table: String,
    /// Which version of the job (the upgrade tests deploy v2 and v3 over v1's
    /// savepoints).
    #[arg(long, value_enum, default_value = "v1")]
    job_version: crash_job::Version,
}

fn main() -> std::process::ExitCode {
    tidewater_examples::report(run())
}

fn run() -> anyhow::Result<()> {
    tidewater_examples::register_runners();
    tidewater_examples::savepoints_on_sigusr1();
    let args = Args::parse();
    std::fs::create_dir_all(&args.output)?;
    let p = Pipeline::new(args.options);
    let input = match (args.kafka_topic, args.kafka_brokers) {
        (Some(topic), Some(brokers)) => crash_job::Input::Kafka {
            brokers,
            topic,
            rate: args.rate,
        },
        _ => crash_job::Input::Generated {
            records: args.records,
            rate: args.rate,
        },
    };
    match &args.postgres {
        Some(url) => crash_job::build_postgres_over(&p, &input, url, &args.pg_table),
        None => crash_job::build_version(&p, &input, &args.output, args.job_version),
    }
    p.run()?;
    Ok(())
}
