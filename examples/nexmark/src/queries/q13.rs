use super::bids_of;
use crate::{Bid, Event};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use tidewater::{DoFn, PCollection, PCollectionView, ParDo, ProcessContext, UserError};

/// Rows of Q13's side input (Beam's `sideInputRowCount` default: 500).
pub const Q13_SIDE_ROWS: usize = 500;

/// Q13's side input, as Beam's `prepareSideInput` makes it: `(i, "i")` for every row.
pub fn q13_side_rows() -> Vec<(usize, String)> {
    (0..Q13_SIDE_ROWS).map(|i| (i, i.to_string())).collect()
}

/// Replaces each bid's `extra` with the side input's value for `bidder % rows`.
#[derive(Serialize, Deserialize)]
struct JoinToFiles {
    side: PCollectionView<BTreeMap<usize, String>>,
}

impl DoFn for JoinToFiles {
    type In = Bid;
    type Out = Bid;
    fn process(&mut self, bid: Bid, ctx: &mut ProcessContext<'_, Bid>) -> Result<(), UserError> {
        let side = ctx.side_input(&self.side)?;
        let row = bid.bidder % Q13_SIDE_ROWS;
        let Some(value) = side.get(&row) else {
            return Err(format!("side input has no row {row}").into());
        };
        let extra = value.clone();
        ctx.output(Bid { extra, ..bid });
        Ok(())
    }
}

/// Q13, bounded side input join (Beam's `BoundedSideInputJoin`): every bid, its `extra`
/// replaced by the value of row `bidder % 500` of a bounded table, read as a map side
/// input. The table is a `Create` in the global window, which serves every main window.
pub fn q13(events: &PCollection<Event>) -> PCollection<Bid> {
    let side = events
        .pipeline()
        .create("Q13.SideInput", q13_side_rows())
        .as_map();
    events
        .flat_map("Q13.Bids", bids_of)
        .apply("Q13.JoinToFiles", ParDo::of(JoinToFiles { side }))
}
