use super::bids_of;
use crate::{Bid, Event};
use serde::{Deserialize, Serialize};
use std::io::Write as _;
use std::path::Path;
use tidewater::{DoFn, PCollection, ParDo, ProcessContext, UserError, Window, WindowFn};

/// Q10's window size (Beam's default: 10 s).
pub const Q10_WINDOW_MS: i64 = 10_000;
/// Q10's number of shards per window.
pub const Q10_SHARDS: usize = 4;

/// Q10's output: one file written, with what it holds.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct OutputFile {
    /// Start of the fixed window, in ms.
    pub window_start: i64,
    /// The shard.
    pub shard: usize,
    /// The file name (inside the output directory).
    pub name: String,
    /// Number of lines (bids) in the file.
    pub lines: usize,
}

/// The line a bid is written as: `auction,bidder,price,date_time`.
pub fn bid_line(b: &Bid) -> String {
    format!("{},{},{},{}", b.auction, b.bidder, b.price, b.date_time)
}

/// The file of shard `shard` of `shards` of the window starting at `window_start`.
pub fn q10_file_name(window_start: i64, shard: usize, shards: usize) -> String {
    format!("bids-{window_start:013}-{shard:05}-of-{shards:05}.csv")
}

/// Writes one shard of one window, lines sorted, to a temporary file renamed into
/// place; outputs what it wrote.
#[derive(Serialize, Deserialize)]
struct WriteShard {
    dir: String,
    shards: usize,
}

impl DoFn for WriteShard {
    type In = (usize, Vec<String>);
    type Out = OutputFile;
    fn process(
        &mut self,
        (shard, mut lines): (usize, Vec<String>),
        ctx: &mut ProcessContext<'_, OutputFile>,
    ) -> Result<(), UserError> {
        let window_start = ctx.window().start().millis();
        let name = q10_file_name(window_start, shard, self.shards);
        let path = Path::new(&self.dir).join(&name);
        let tmp = Path::new(&self.dir).join(format!(".{name}.tmp"));
        lines.sort();
        let write = || -> std::io::Result<()> {
            let mut w = std::io::BufWriter::new(std::fs::File::create(&tmp)?);
            for l in &lines {
                writeln!(w, "{l}")?;
            }
            w.flush()?;
            std::fs::rename(&tmp, &path)
        };
        write().map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        ctx.output(OutputFile {
            window_start,
            shard,
            name,
            lines: lines.len(),
        });
        Ok(())
    }
}

/// Q10, log to sharded files: the bids of each fixed window ([`Q10_WINDOW_MS`]) written
/// into up to [`Q10_SHARDS`] files in `dir` (shard = auction % shards; only non-empty
/// shards are written). Key by shard -> fixed windows -> GroupByKey -> a ParDo that
/// writes each (window, shard) group and names the file by the window's start.
pub fn q10(events: &PCollection<Event>, dir: &str) -> PCollection<OutputFile> {
    events
        .flat_map("Q10.Shard", |e: Event| {
            bids_of(e).map(|b| (b.auction % Q10_SHARDS, bid_line(&b)))
        })
        .apply("Q10.Window", Window::into(WindowFn::fixed(Q10_WINDOW_MS)))
        .group_by_key("Q10.GroupByShard")
        .apply(
            "Q10.Write",
            ParDo::of(WriteShard {
                dir: dir.to_string(),
                shards: Q10_SHARDS,
            }),
        )
}
