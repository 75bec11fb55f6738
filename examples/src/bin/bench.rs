//! Word-count benchmark: generated text (seeded, Zipf-like vocabulary), words/s and
//! peak RSS. `cargo run --release -p tidewater-examples --bin bench -- --words 10000000`;
//! `--workload stateful` measures the stateful word count instead of the lifted Count.

use anyhow::{bail, Context};
use clap::{Parser, ValueEnum};
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::hash::BuildHasher;
use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;
use tidewater::{DoFn, ParDo, Pipeline, PipelineOptions, ProcessContext, UserError};
use tidewater_examples::stateful_word_count;
use tidewater_examples::word_count::CountWords;
use tidewater_transforms::TextIO;

/// The pipeline measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Workload {
    /// Word count with Count.perElement (a lifted combine).
    Count,
    /// The stateful word count: a StatefulParDo keeping a running count per word.
    Stateful,
}

impl Workload {
    fn name(self) -> &'static str {
        match self {
            Workload::Count => "count",
            Workload::Stateful => "stateful",
        }
    }
}

/// Runs word count over generated text and reports throughput.
#[derive(Parser)]
#[command(name = "bench")]
struct Args {
    /// Runner to measure.
    #[arg(long, default_value = "direct")]
    runner: String,
    /// Pipeline to measure.
    #[arg(long, value_enum, default_value_t = Workload::Count)]
    workload: Workload,
    /// Words to generate.
    #[arg(long, default_value_t = 10_000_000)]
    words: u64,
    /// Generator seed.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Vocabulary size.
    #[arg(long, default_value_t = 10_000)]
    vocab: usize,
    /// Use this text file instead of generating one (e.g. the peers' `wc1m.txt`).
    #[arg(long)]
    input: Option<PathBuf>,
    /// Keep the direct runner's validation on (off by default: this measures speed).
    #[arg(long)]
    validate: bool,
    /// Repetitions; each is reported.
    #[arg(long, default_value_t = 1)]
    reps: u32,
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Writes about `words` words in lines of 1..=19 words drawn from a Zipf(1) vocabulary.
fn generate(path: &PathBuf, words: u64, seed: u64, vocab_size: usize) -> anyhow::Result<u64> {
    let mut rng = Rng(seed);
    let mut seen = std::collections::HashSet::new();
    let mut vocab = Vec::with_capacity(vocab_size);
    while vocab.len() < vocab_size {
        let len = 2 + (rng.next() % 11) as usize;
        let w: String = (0..len)
            .map(|_| (b'a' + (rng.next() % 26) as u8) as char)
            .collect();
        if seen.insert(w.clone()) {
            vocab.push(w);
        }
    }
    let mut cum = Vec::with_capacity(vocab_size);
    let mut total = 0.0;
    for k in 1..=vocab_size {
        total += 1.0 / k as f64;
        cum.push(total);
    }
    let mut out = std::io::BufWriter::new(
        std::fs::File::create(path).with_context(|| format!("cannot create {}", path.display()))?,
    );
    let mut written = 0u64;
    while written < words {
        let n = (1 + rng.next() % 19).min(words - written);
        for i in 0..n {
            let x = rng.unit() * total;
            let w = &vocab[cum.partition_point(|c| *c < x).min(vocab_size - 1)];
            if i > 0 {
                out.write_all(b" ")?;
            }
            out.write_all(w.as_bytes())?;
        }
        out.write_all(b"\n")?;
        written += n;
    }
    out.flush()?;
    Ok(written)
}

/// Occurrences of each word in a file as the word count's tokenizer sees them, read a
/// line at a time so the check does not inflate the peak RSS the benchmark reports.
fn count_words(path: &PathBuf) -> anyhow::Result<HashMap<String, u64>> {
    use std::io::BufRead;
    let file =
        std::fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut counts = HashMap::new();
    for line in std::io::BufReader::new(file).lines() {
        for w in tidewater_examples::word_count::extract_words(line?) {
            *counts.entry(w).or_insert(0) += 1;
        }
    }
    Ok(counts)
}

/// Keeps the running counts that reached a word's number of occurrences: the stateful
/// word count's last update of each word, if it counted right. Only these are
/// captured, so the result stays small, and `main` checks them exactly. Words are
/// looked up by a 64-bit hash, so that the filter costs little next to what is
/// measured (a collision would show as a wrong or missing count in that check).
#[derive(Serialize, Deserialize)]
struct KeepFinal {
    expected: FxHashMap<u64, u64>,
}

fn word_hash(word: &str) -> u64 {
    rustc_hash::FxBuildHasher.hash_one(word)
}

impl DoFn for KeepFinal {
    type In = (String, u64);
    type Out = (String, u64);
    fn process(
        &mut self,
        update: (String, u64),
        ctx: &mut ProcessContext<'_, (String, u64)>,
    ) -> Result<(), UserError> {
        if self.expected.get(&word_hash(&update.0)) == Some(&update.1) {
            ctx.output(update);
        }
        Ok(())
    }
}

/// Builds the workload's pipeline over `input`, capturing `(word, count)` as "counts".
fn build(p: &Pipeline, workload: Workload, input: &str, expected: &HashMap<String, u64>) {
    match workload {
        Workload::Count => p
            .apply("ReadLines", TextIO::read().from(input))
            .apply("CountWords", CountWords)
            .capture("counts"),
        Workload::Stateful => stateful_word_count::build(p, input)
            .apply(
                "KeepFinal",
                ParDo::of(KeepFinal {
                    expected: expected.iter().map(|(w, n)| (word_hash(w), *n)).collect(),
                }),
            )
            .capture("counts"),
    }
}

fn peak_rss_mb() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

fn main() -> std::process::ExitCode {
    tidewater_examples::report(run())
}

fn run() -> anyhow::Result<()> {
    // Runners first, so that --runner is checked against them while parsing.
    tidewater_examples::register_runners();
    let args = Args::parse();
    let (path, expected) = match &args.input {
        Some(p) => (p.clone(), count_words(p)?),
        None => {
            let path = std::env::temp_dir().join(format!(
                "tidewater-bench-{}-{}-{}.txt",
                args.words, args.seed, args.vocab
            ));
            // Generated inputs are kept in the temp directory and reused by later runs.
            if !path.exists() {
                let t = Instant::now();
                let n = generate(&path, args.words, args.seed, args.vocab)?;
                eprintln!(
                    "generated {n} words into {} in {:.2}s",
                    path.display(),
                    t.elapsed().as_secs_f64()
                );
            }
            let expected = count_words(&path)?;
            (path, expected)
        }
    };
    let words: u64 = expected.values().sum();
    let input = path.to_str().context("non-UTF-8 path")?;
    for rep in 1..=args.reps {
        let options = PipelineOptions {
            runner: args.runner.clone(),
            no_validate: !args.validate,
            ..Default::default()
        };
        let p = Pipeline::new(options);
        build(&p, args.workload, input, &expected);
        let t = Instant::now();
        let result = p.run()?;
        let secs = t.elapsed().as_secs_f64();
        let counts = result.captured_values::<(String, u64)>("counts")?;
        let total: u64 = counts.iter().map(|(_, c)| c).sum();
        if total != words {
            bail!("counted {total} words but the input has {words}");
        }
        let wrong = counts
            .iter()
            .filter(|(w, c)| expected.get(w) != Some(c))
            .count();
        if wrong > 0 || counts.len() != expected.len() {
            bail!(
                "{} counts for {} words, {wrong} of them wrong",
                counts.len(),
                expected.len()
            );
        }
        tidewater_examples::outln!(
            "rep {rep}: workload={} runner={} validate={} words={words} distinct={} time={secs:.3}s words/s={:.2}M peak_rss={:.0}MB",
            args.workload.name(),
            args.runner,
            args.validate,
            counts.len(),
            words as f64 / secs / 1e6,
            peak_rss_mb().unwrap_or(f64::NAN)
        );
    }
    Ok(())
}
