use super::q9::{q9, WinningBid};
use crate::Event;
use nexmark::config::NexmarkConfig;
use serde::{Deserialize, Serialize};
use tidewater::{Combine, CombineFn, PCollection, Window, WindowFn};

/// Q6 averages over each seller's last this many closed auctions (Beam: 10).
pub const Q6_LAST_AUCTIONS: usize = 10;

/// Q6's output: a seller's average selling price.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct SellerPrice {
    /// The seller.
    pub seller: usize,
    /// Mean of the winning prices of their last auctions, rounded half up.
    pub price: u64,
}

/// The mean price of the `n` latest (time, price) sales, by time then price (Beam's
/// `MovingMeanSellingPrice` with `ASCENDING_TIME_THEN_PRICE`), rounded half up as
/// Beam's `Math.round`.
#[derive(Serialize, Deserialize)]
pub struct MovingMeanSellingPrice {
    n: usize,
}

impl MovingMeanSellingPrice {
    fn keep_latest(&self, acc: &mut Vec<(u64, usize)>) {
        acc.sort();
        let extra = acc.len().saturating_sub(self.n);
        acc.drain(..extra);
    }
}

impl CombineFn for MovingMeanSellingPrice {
    type In = (u64, usize);
    type Acc = Vec<(u64, usize)>;
    type Out = u64;
    fn create_accumulator(&self) -> Self::Acc {
        Vec::new()
    }
    fn add_input(&self, acc: &mut Self::Acc, sale: (u64, usize)) {
        acc.push(sale);
        self.keep_latest(acc);
    }
    fn merge_accumulators(&self, acc: &mut Self::Acc, other: Self::Acc) {
        acc.extend(other);
        self.keep_latest(acc);
    }
    fn extract_output(&self, acc: Self::Acc) -> u64 {
        if acc.is_empty() {
            return 0;
        }
        let (sum, n) = (
            acc.iter().map(|s| s.1 as u64).sum::<u64>(),
            acc.len() as u64,
        );
        // Beam's `Math.round((double) sum / n)`: half up (prices are not negative).
        (2 * sum + n) / (2 * n)
    }
}

/// Q6, average selling price by seller: per seller, the mean winning price of their
/// last [`Q6_LAST_AUCTIONS`] closed auctions (by winning bid time). Q9 -> key by seller
/// -> Combine.perKey(moving mean). Beam re-triggers on every winning bid with
/// accumulating panes; the pane boundaries of such a trigger depend on bundling, so we
/// compute the final pane only (the global window's default trigger).
pub fn q6(events: &PCollection<Event>, config: &NexmarkConfig) -> PCollection<SellerPrice> {
    q9(events, config)
        .apply("Q6.Global", Window::into(WindowFn::Global))
        .map("Q6.BySeller", |w: WinningBid| {
            (w.auction.seller, (w.bid.date_time, w.bid.price))
        })
        .apply(
            "Q6.MovingMean",
            Combine::per_key(MovingMeanSellingPrice {
                n: Q6_LAST_AUCTIONS,
            }),
        )
        .map("Q6.Project", |(seller, price): (usize, u64)| SellerPrice {
            seller,
            price,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mean_rounds_half_up_as_beams_math_round() {
        let mean = MovingMeanSellingPrice { n: 10 };
        let of = |prices: &[usize]| {
            let mut acc = mean.create_accumulator();
            for (t, p) in prices.iter().enumerate() {
                mean.add_input(&mut acc, (t as u64, *p));
            }
            mean.extract_output(acc)
        };
        assert_eq!(of(&[1, 2]), 2); // 1.5
        assert_eq!(of(&[1, 1, 2]), 1); // 1.33
        assert_eq!(of(&[1, 2, 2]), 2); // 1.67
        assert_eq!(of(&[]), 0);
        // Only the latest 10 count: the first sale (1000) is dropped, mean 5.5 -> 6.
        assert_eq!(of(&[1000, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10]), 6);
    }
}
