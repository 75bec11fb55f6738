//! The word-count input: the same bytes as the peers' generator,
//! `../shared/peers/gen_input.py` (seed 42, 10,000-word Zipf(1) vocabulary, lines of
//! 1..=19 words, 10,000 lines per event-time second), so that our figures and the
//! peers' are taken on the same text. This mirrors that script: Python's Mersenne
//! Twister and the few `random.Random` methods it calls are reproduced exactly.

use anyhow::Context;
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The event time of line 0, as in the script.
pub const BASE_TS_MS: i64 = 1_700_000_000_000;

/// The script's arguments.
#[derive(Clone, Debug, PartialEq)]
pub struct GenOptions {
    /// Lines to write (`--lines`).
    pub lines: u64,
    /// Average words per line (`--avg-words`).
    pub avg_words: u64,
    /// Vocabulary size (`--vocab`).
    pub vocab: usize,
    /// Zipf exponent (`--zipf-s`).
    pub zipf_s: f64,
    /// Event-time rate (`--lines-per-sec`).
    pub lines_per_sec: u64,
    /// Seed (`--seed`).
    pub seed: u64,
}

impl Default for GenOptions {
    fn default() -> Self {
        GenOptions {
            lines: 1_000_000,
            avg_words: 10,
            vocab: 10_000,
            zipf_s: 1.0,
            lines_per_sec: 10_000,
            seed: 42,
        }
    }
}

/// What the script writes to `<prefix>.meta.json` (the fields read here; the script's
/// own file, with more fields, reads as well).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct InputMeta {
    /// Lines.
    pub lines: u64,
    /// Words.
    pub words: u64,
    /// Distinct words.
    pub distinct_words: u64,
    /// Distinct (1 s event-time window, word) pairs: the windowed word count's outputs.
    pub windowed_records: u64,
    /// Seed.
    pub seed: u64,
    /// Vocabulary size.
    pub vocab: usize,
    /// Event-time rate.
    pub lines_per_sec: u64,
}

/// The files of one generated input.
#[derive(Clone, Debug)]
pub struct Input {
    /// `<prefix>.txt`: the words, space-separated, one line per line.
    pub text: PathBuf,
    /// `<prefix>.ts.txt`: `<event time ms>\t<words>` per line.
    pub stamped: PathBuf,
    /// Its counts.
    pub meta: InputMeta,
}

impl Input {
    /// An input written by the script or by [`generate`]: `prefix` is the `--out` given
    /// to it (a path to its `.txt` file works as well).
    pub fn open(prefix: &Path) -> anyhow::Result<Input> {
        let prefix = strip_txt(prefix);
        let meta_path = with_suffix(&prefix, ".meta.json");
        let meta: InputMeta = serde_json::from_str(
            &std::fs::read_to_string(&meta_path)
                .with_context(|| format!("cannot read {}", meta_path.display()))?,
        )
        .with_context(|| format!("{} is not a generator's summary", meta_path.display()))?;
        Ok(Input {
            text: with_suffix(&prefix, ".txt"),
            stamped: with_suffix(&prefix, ".ts.txt"),
            meta,
        })
    }

    /// The input for `options` under `dir`, generated unless an earlier run left it there.
    pub fn cached(dir: &Path, options: &GenOptions) -> anyhow::Result<Input> {
        let prefix = dir.join(format!(
            "wc-{}l-{}s-{}v-{}a-{}z-{}r",
            options.lines,
            options.seed,
            options.vocab,
            options.avg_words,
            options.zipf_s,
            options.lines_per_sec
        ));
        if let Ok(input) = Input::open(&prefix) {
            if input.text.exists() && input.stamped.exists() {
                return Ok(input);
            }
        }
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        generate(&prefix, options)
    }
}

fn strip_txt(p: &Path) -> PathBuf {
    let s = p.to_string_lossy();
    PathBuf::from(s.strip_suffix(".txt").unwrap_or(&s).to_string())
}

fn with_suffix(prefix: &Path, suffix: &str) -> PathBuf {
    let mut s = prefix.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

/// MT19937 as CPython's `random.Random` seeds and draws it.
pub struct PyRandom {
    mt: [u32; 624],
    index: usize,
    gauss_next: Option<f64>,
}

impl PyRandom {
    /// `random.Random(seed)` for a non-negative integer seed (`init_by_array` over the
    /// seed's 32-bit digits, least significant first).
    pub fn new(seed: u64) -> PyRandom {
        let key: Vec<u32> = if seed >> 32 == 0 {
            vec![seed as u32]
        } else {
            vec![seed as u32, (seed >> 32) as u32]
        };
        let mut mt = [0u32; 624];
        mt[0] = 19_650_218;
        for i in 1..624 {
            mt[i] = 1_812_433_253u32
                .wrapping_mul(mt[i - 1] ^ (mt[i - 1] >> 30))
                .wrapping_add(i as u32);
        }
        let (mut i, mut j) = (1usize, 0usize);
        for _ in 0..624.max(key.len()) {
            mt[i] = (mt[i] ^ (mt[i - 1] ^ (mt[i - 1] >> 30)).wrapping_mul(1_664_525))
                .wrapping_add(key[j])
                .wrapping_add(j as u32);
            i += 1;
            j += 1;
            if i >= 624 {
                mt[0] = mt[623];
                i = 1;
            }
            if j >= key.len() {
                j = 0;
            }
        }
        for _ in 0..623 {
            mt[i] = (mt[i] ^ (mt[i - 1] ^ (mt[i - 1] >> 30)).wrapping_mul(1_566_083_941))
                .wrapping_sub(i as u32);
            i += 1;
            if i >= 624 {
                mt[0] = mt[623];
                i = 1;
            }
        }
        mt[0] = 0x8000_0000;
        PyRandom {
            mt,
            index: 624,
            gauss_next: None,
        }
    }

    fn next_u32(&mut self) -> u32 {
        if self.index >= 624 {
            for k in 0..624 {
                let y = (self.mt[k] & 0x8000_0000) | (self.mt[(k + 1) % 624] & 0x7fff_ffff);
                let mag = if y & 1 == 1 { 0x9908_b0df } else { 0 };
                self.mt[k] = self.mt[(k + 397) % 624] ^ (y >> 1) ^ mag;
            }
            self.index = 0;
        }
        let mut y = self.mt[self.index];
        self.index += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^ (y >> 18)
    }

    /// `random()`: 53 random bits in [0, 1).
    pub fn random(&mut self) -> f64 {
        let a = (self.next_u32() >> 5) as f64;
        let b = (self.next_u32() >> 6) as f64;
        (a * 67_108_864.0 + b) * (1.0 / 9_007_199_254_740_992.0)
    }

    /// `_randbelow(n)` for 0 < n < 2^32: `getrandbits(n.bit_length())` until below n.
    fn below(&mut self, n: u32) -> u32 {
        let k = 32 - n.leading_zeros();
        loop {
            let r = self.next_u32() >> (32 - k);
            if r < n {
                return r;
            }
        }
    }

    /// `randint(a, b)`, both ends included.
    pub fn randint(&mut self, a: u32, b: u32) -> u32 {
        a + self.below(b - a + 1)
    }

    /// `gauss(mu, sigma)`: Box-Muller, the second value kept for the next call.
    pub fn gauss(&mut self, mu: f64, sigma: f64) -> f64 {
        let z = match self.gauss_next.take() {
            Some(z) => z,
            None => {
                let x2pi = self.random() * std::f64::consts::TAU;
                let g2rad = (-2.0 * (1.0 - self.random()).ln()).sqrt();
                self.gauss_next = Some(x2pi.sin() * g2rad);
                x2pi.cos() * g2rad
            }
        };
        mu + z * sigma
    }
}

/// Writes `<prefix>.txt`, `<prefix>.ts.txt` and `<prefix>.meta.json` as the script
/// does, byte for byte (the meta file holds only [`InputMeta`]'s fields).
pub fn generate(prefix: &Path, options: &GenOptions) -> anyhow::Result<Input> {
    let mut rng = PyRandom::new(options.seed);
    let letters = b"abcdefghijklmnopqrstuvwxyz";
    let mut seen = std::collections::HashSet::new();
    let mut vocab: Vec<String> = Vec::with_capacity(options.vocab);
    while vocab.len() < options.vocab {
        let n = (rng.gauss(6.0, 2.0) as i64).clamp(2, 12);
        let w: String = (0..n)
            .map(|_| letters[rng.below(26) as usize] as char)
            .collect();
        if seen.insert(w.clone()) {
            vocab.push(w);
        }
    }
    let mut cum = Vec::with_capacity(options.vocab);
    let mut total_w = 0.0;
    for k in 1..=options.vocab {
        total_w += 1.0 / (k as f64).powf(options.zipf_s);
        cum.push(total_w);
    }
    let hi = (2 * options.avg_words - 1) as u32;
    let text = with_suffix(prefix, ".txt");
    let stamped = with_suffix(prefix, ".ts.txt");
    // Written under temporary names and renamed when complete, so that a concurrent
    // run never reads a half-written input (the summary, written last, marks it done).
    let part = format!(".part-{}", std::process::id());
    let (text_part, stamped_part) = (with_suffix(&text, &part), with_suffix(&stamped, &part));
    let create = |p: &PathBuf| -> anyhow::Result<std::io::BufWriter<std::fs::File>> {
        Ok(std::io::BufWriter::new(
            std::fs::File::create(p).with_context(|| format!("cannot create {}", p.display()))?,
        ))
    };
    let (mut ft, mut fe) = (create(&text_part)?, create(&stamped_part)?);
    let mut words = 0u64;
    let mut distinct = vec![false; vocab.len()];
    // Distinct (window, word) pairs: words seen in the current second, by rank.
    let mut in_window = vec![false; vocab.len()];
    let mut window_words: Vec<usize> = Vec::new();
    let (mut cur_sec, mut windowed_records) = (None, 0u64);
    let mut line = String::new();
    for i in 0..options.lines {
        let n = rng.randint(1, hi);
        line.clear();
        let ts = BASE_TS_MS + (i as i64 * 1000) / options.lines_per_sec as i64;
        let sec = ts.div_euclid(1000);
        if cur_sec != Some(sec) {
            windowed_records += window_words.len() as u64;
            for w in window_words.drain(..) {
                in_window[w] = false;
            }
            cur_sec = Some(sec);
        }
        for k in 0..n {
            let x = rng.random() * total_w;
            let rank = cum.partition_point(|c| *c < x).min(vocab.len() - 1);
            if k > 0 {
                line.push(' ');
            }
            line.push_str(&vocab[rank]);
            distinct[rank] = true;
            if !in_window[rank] {
                in_window[rank] = true;
                window_words.push(rank);
            }
        }
        words += n as u64;
        writeln!(ft, "{line}")?;
        writeln!(fe, "{ts}\t{line}")?;
    }
    windowed_records += window_words.len() as u64;
    ft.flush()?;
    fe.flush()?;
    drop((ft, fe));
    std::fs::rename(&text_part, &text)?;
    std::fs::rename(&stamped_part, &stamped)?;
    let meta = InputMeta {
        lines: options.lines,
        words,
        distinct_words: distinct.iter().filter(|d| **d).count() as u64,
        windowed_records,
        seed: options.seed,
        vocab: options.vocab,
        lines_per_sec: options.lines_per_sec,
    };
    let meta_path = with_suffix(prefix, ".meta.json");
    let meta_part = with_suffix(&meta_path, &part);
    std::fs::write(&meta_part, serde_json::to_string(&meta)?)
        .with_context(|| format!("cannot write {}", meta_path.display()))?;
    std::fs::rename(&meta_part, &meta_path)?;
    Ok(Input {
        text,
        stamped,
        meta,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Figures and lines of `gen_input.py --lines 25000` (Python 3.11): 3 windows.
    #[test]
    fn matches_the_peers_script() {
        let dir = tempfile::tempdir().unwrap();
        let options = GenOptions {
            lines: 25_000,
            ..Default::default()
        };
        let input = generate(&dir.path().join("l25k"), &options).unwrap();
        assert_eq!(
            (
                input.meta.words,
                input.meta.distinct_words,
                input.meta.windowed_records
            ),
            (249_004, 9808, 23_903)
        );
        let text = std::fs::read_to_string(&input.text).unwrap();
        assert_eq!(text.len(), 1_575_041);
        assert_eq!(text.lines().next(), Some("fr hriturgb tufrxhf dvxrc jvd"));
        let stamped = std::fs::read_to_string(&input.stamped).unwrap();
        assert_eq!(stamped.len(), 1_925_041);
        assert_eq!(
            stamped.lines().nth(1),
            Some("1700000000000\tdvxrc iqpibc zjivww sxnje vufbm jvd cghqt dvxrc moob")
        );
        assert_eq!(Input::open(&input.text).unwrap().meta, input.meta);
    }
}
