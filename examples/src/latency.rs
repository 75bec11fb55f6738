//! End-to-end latency at a fixed rate: generated records, each stamped with the moment
//! the generator's schedule creates it, keyed through a stateful step (a shuffle and
//! state per key), and measured when they reach the sink (before its transaction
//! commits: output that must be exactly-once outside also waits for the checkpoint).

use serde::{Deserialize, Serialize};
use std::sync::Mutex;
use tidewater::{
    DoFn, Pipeline, ProcessContext, Read, StateContext, StatefulDoFn, StatefulParDo, UserError,
};
use tidewater_transforms::GenerateSequence;

/// Latencies seen by every [`LatencySink`] in this process, in microseconds.
static LATENCIES: Mutex<Vec<u32>> = Mutex::new(Vec::new());

fn now_us() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or(0)
}

/// Stamps record `n` with its creation time on the generator's schedule, n / rate
/// after the schedule's origin, and keys it. The schedule starts when the source first
/// reads, which is when this DoFn sees its first record (they are fused): the origin
/// is taken from that record, so the runner's start-up before the first read (plan
/// translation, workers, connections) is not counted as latency of every record.
#[derive(Serialize, Deserialize)]
pub struct Stamp {
    rate: f64,
    keys: u64,
    #[serde(skip)]
    origin_us: Option<i64>,
}

impl DoFn for Stamp {
    type In = u64;
    type Out = (u64, i64);
    fn process(
        &mut self,
        n: u64,
        ctx: &mut ProcessContext<'_, (u64, i64)>,
    ) -> Result<(), UserError> {
        let due = (n as f64 * 1e6 / self.rate) as i64;
        let origin = *self.origin_us.get_or_insert_with(|| now_us() - due);
        ctx.output((n % self.keys, origin + due));
        Ok(())
    }
}

/// The records seen so far of a key.
const SEEN: tidewater::ValueState<u64> = tidewater::StateSpec::value("n");

/// Counts per key in state and passes the creation time on.
#[derive(Serialize, Deserialize)]
pub struct CountPerKey;

impl StatefulDoFn for CountPerKey {
    type Key = u64;
    type Value = i64;
    type Out = i64;
    fn process(
        &mut self,
        _key: &u64,
        created: i64,
        ctx: &mut StateContext<'_, i64>,
    ) -> Result<(), UserError> {
        let n = SEEN.read(ctx)?.unwrap_or(0) + 1;
        SEEN.write(ctx, &n)?;
        ctx.output(created);
        Ok(())
    }
}

/// Records how long ago each creation time was. With `spill`, each commit also appends
/// the latencies written since the last one to the process's file (4 bytes each,
/// little-endian; see [`crate::spill`] and [`read_spilled`]).
#[derive(Serialize, Deserialize, Default)]
pub struct LatencySink {
    #[serde(default)]
    spill: Option<std::path::PathBuf>,
    #[serde(skip)]
    pending: Vec<u8>,
}

impl tidewater::Sink for LatencySink {
    type In = i64;
    fn write(
        &mut self,
        _: &tidewater::Txn,
        xs: Vec<tidewater::WindowedValue<i64>>,
    ) -> Result<(), UserError> {
        let now = now_us();
        let latencies = xs
            .iter()
            .map(|wv| (now - wv.value).clamp(0, u32::MAX as i64) as u32);
        if self.spill.is_some() {
            self.pending
                .extend(latencies.clone().flat_map(u32::to_le_bytes));
        }
        LATENCIES
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend(latencies);
        Ok(())
    }
    fn stage(&mut self, _: &tidewater::Txn) -> Result<(), UserError> {
        Ok(())
    }
    fn commit(&mut self, _: &tidewater::Txn) -> Result<(), UserError> {
        if let Some(spill) = &self.spill {
            if !self.pending.is_empty() {
                crate::spill::append(spill, &self.pending)?;
                self.pending.clear();
            }
        }
        Ok(())
    }
    fn abort(&mut self, _: &tidewater::Txn) -> Result<(), UserError> {
        self.pending.clear();
        Ok(())
    }
}

/// The latencies the [`LatencySink`]s spilling to `spill` committed, one vector per
/// process (in the order each process committed them); the files are removed.
pub fn read_spilled(spill: &std::path::Path) -> std::io::Result<Vec<Vec<u32>>> {
    Ok(crate::spill::take(spill)?
        .iter()
        .map(|bytes| {
            bytes
                .chunks_exact(4)
                .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect()
        })
        .collect())
}

/// `rate` records per second for `seconds`, over `keys` keys.
pub fn build(p: &Pipeline, rate: f64, seconds: f64, keys: u64) {
    build_records(p, (rate * seconds) as u64, Some(rate), keys, None);
}

/// `records` records over `keys` keys, at `rate` records per second, or as fast as
/// the runner reads them with `None` (a peak measurement: its latencies mean nothing);
/// `spill`: see [`LatencySink`].
pub fn build_records(
    p: &Pipeline,
    records: u64,
    rate: Option<f64>,
    keys: u64,
    spill: Option<&std::path::Path>,
) {
    // Room for every latency up front: growing the shared vector copies it under its
    // lock, which would stall every worker's sink (tens of ms at millions of records)
    // and show in the tail as the pipeline's latency.
    {
        let mut all = LATENCIES.lock().unwrap_or_else(|e| e.into_inner());
        let want = usize::try_from(records).unwrap_or(usize::MAX).min(1 << 28);
        let have = all.len();
        all.reserve(want.saturating_sub(have));
    }
    let mut source = GenerateSequence::new(0, Some(records));
    if let Some(rate) = rate {
        source = source.with_rate(rate);
    }
    p.apply("Generate", Read::from(source))
        .apply(
            "Stamp",
            tidewater::ParDo::of(Stamp {
                // Unpaced, every record is due at the origin (a finite rate: the plan
                // is JSON, which has no infinity).
                rate: rate.unwrap_or(f64::MAX),
                keys,
                origin_us: None,
            }),
        )
        .apply("CountPerKey", StatefulParDo::of(CountPerKey))
        .write_to(
            "Latency",
            LatencySink {
                spill: spill.map(std::path::Path::to_path_buf),
                pending: Vec::new(),
            },
        );
}

/// Records the [`LatencySink`]s of this process have seen so far.
pub fn seen() -> usize {
    LATENCIES.lock().unwrap_or_else(|e| e.into_inner()).len()
}

/// p50, p99 and max of the latencies seen so far, in milliseconds, skipping the first
/// `warmup` fraction of records.
pub fn percentiles(warmup: f64) -> Option<(f64, f64, f64)> {
    percentiles_of(after_warmup(all_seen(), warmup))
}

/// The latencies seen so far in this process, in microseconds, in the order they were
/// seen (to merge those of several processes: see [`after_warmup`] and
/// [`percentiles_of`]).
pub fn all_seen() -> Vec<u32> {
    LATENCIES.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// `seen` without its first `warmup` fraction (start-up).
pub fn after_warmup(mut seen: Vec<u32>, warmup: f64) -> Vec<u32> {
    let skip = (seen.len() as f64 * warmup) as usize;
    seen.drain(..skip.min(seen.len()));
    seen
}

/// p50, p99 and max of latencies `v` (microseconds), in milliseconds.
pub fn percentiles_of(mut v: Vec<u32>) -> Option<(f64, f64, f64)> {
    if v.is_empty() {
        return None;
    }
    v.sort_unstable();
    let at = |q: f64| v[((v.len() - 1) as f64 * q) as usize] as f64 / 1000.0;
    Some((
        at(0.5),
        at(0.99),
        *v.last().expect("not empty") as f64 / 1000.0,
    ))
}
