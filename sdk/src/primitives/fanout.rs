//! `Combine.perKey(..).withHotKeyFanout(n)`: a hot key's values are combined in `n`
//! parts on several workers first, then the parts are merged per key.

use super::combine::{CombineFn, CombinePerKey};
use crate::{Combine, DoFn, Element, PCollection, PTransform, ParDo, ProcessContext, UserError};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::marker::PhantomData;

impl<F: CombineFn + Serialize + DeserializeOwned> CombinePerKey<F> {
    /// Combines each key's values in `fanout` parts first, spread over the workers,
    /// then merges the parts per key (Beam's `withHotKeyFanout`): for keys so hot that
    /// one worker cannot keep up with them. The output is the same as without; it costs
    /// a second shuffle (of one accumulator per part).
    ///
    /// ```
    /// use tidewater::{Combine, CombineFn};
    /// # #[derive(serde::Serialize, serde::Deserialize)]
    /// # struct Sum;
    /// # impl CombineFn for Sum {
    /// #     type In = u64; type Acc = u64; type Out = u64;
    /// #     fn create_accumulator(&self) -> u64 { 0 }
    /// #     fn add_input(&self, a: &mut u64, x: u64) { *a += x }
    /// #     fn merge_accumulators(&self, a: &mut u64, b: u64) { *a += b }
    /// #     fn extract_output(&self, a: u64) -> u64 { a }
    /// # }
    /// tidewater_runner_direct::register();
    /// let p = tidewater::Pipeline::new(Default::default());
    /// let kvs: Vec<(char, u64)> = (0..1000).map(|i| (if i % 10 == 0 { 'b' } else { 'a' }, 1)).collect();
    /// p.create("Kvs", kvs)
    ///     .apply("Sum", Combine::per_key(Sum).with_hot_key_fanout(8))
    ///     .capture("sums");
    /// let mut sums = p.run().unwrap().captured_values::<(char, u64)>("sums").unwrap();
    /// sums.sort();
    /// assert_eq!(sums, vec![('a', 900), ('b', 100)]);
    /// ```
    pub fn with_hot_key_fanout(self, fanout: u32) -> CombinePerKeyWithFanout<F> {
        CombinePerKeyWithFanout {
            f: self.into_fn(),
            fanout,
        }
    }
}

/// See [`CombinePerKey::with_hot_key_fanout`].
pub struct CombinePerKeyWithFanout<F> {
    f: F,
    fanout: u32,
}

/// Gives each value one of `fanout` parts of its key, in turn from a random start per
/// instance.
#[derive(Serialize, Deserialize)]
#[serde(bound = "")]
struct SpreadKey<K, V> {
    fanout: u32,
    #[serde(skip)]
    next: Option<u32>,
    #[serde(skip)]
    _kv: PhantomData<fn(K, V)>,
}

impl<K: Element, V: Element> DoFn for SpreadKey<K, V> {
    type In = (K, V);
    type Out = ((K, u32), V);
    fn process(
        &mut self,
        (k, v): (K, V),
        ctx: &mut ProcessContext<'_, ((K, u32), V)>,
    ) -> Result<(), UserError> {
        let next = self.next.get_or_insert_with(|| {
            use std::hash::{BuildHasher, Hasher};
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_u8(0);
            h.finish() as u32
        });
        *next = next.wrapping_add(1);
        ctx.output(((k, *next % self.fanout.max(1)), v));
        Ok(())
    }
}

/// The first stage: `F`'s accumulator of a part, not its output.
#[derive(Serialize, Deserialize)]
#[serde(bound = "F: Serialize + DeserializeOwned")]
struct PartialOf<F>(F);

impl<F: CombineFn> CombineFn for PartialOf<F> {
    type In = F::In;
    type Acc = F::Acc;
    type Out = F::Acc;
    fn create_accumulator(&self) -> F::Acc {
        self.0.create_accumulator()
    }
    fn add_input(&self, acc: &mut F::Acc, x: F::In) {
        self.0.add_input(acc, x)
    }
    fn merge_accumulators(&self, acc: &mut F::Acc, other: F::Acc) {
        self.0.merge_accumulators(acc, other)
    }
    fn extract_output(&self, acc: F::Acc) -> F::Acc {
        acc
    }
}

/// The second stage: merges the parts' accumulators, then `F`'s output.
#[derive(Serialize, Deserialize)]
#[serde(bound = "F: Serialize + DeserializeOwned")]
struct MergeOf<F>(F);

impl<F: CombineFn> CombineFn for MergeOf<F> {
    type In = F::Acc;
    type Acc = F::Acc;
    type Out = F::Out;
    fn create_accumulator(&self) -> F::Acc {
        self.0.create_accumulator()
    }
    fn add_input(&self, acc: &mut F::Acc, part: F::Acc) {
        self.0.merge_accumulators(acc, part)
    }
    fn merge_accumulators(&self, acc: &mut F::Acc, other: F::Acc) {
        self.0.merge_accumulators(acc, other)
    }
    fn extract_output(&self, acc: F::Acc) -> F::Out {
        self.0.extract_output(acc)
    }
}

fn drop_part<K, A>(((k, _), acc): ((K, u32), A)) -> (K, A) {
    (k, acc)
}

impl<K: Element, F: CombineFn + Serialize + DeserializeOwned> PTransform<PCollection<(K, F::In)>>
    for CombinePerKeyWithFanout<F>
{
    type Output = PCollection<(K, F::Out)>;
    fn expand(self, input: PCollection<(K, F::In)>) -> PCollection<(K, F::Out)> {
        let p = input.pipeline().clone();
        if self.fanout == 0 {
            p.record_error("with_hot_key_fanout(0): a key is combined in at least one part".into());
        }
        // The same CombineFn in both stages: a copy through its own encoding.
        let second = match crate::coder::round_trip(&self.f) {
            Ok(f) => f,
            Err(e) => {
                p.record_error(format!(
                    "the CombineFn {} does not round-trip through its encoding: {e}",
                    std::any::type_name::<F>()
                ));
                return input.apply("Combine", Combine::per_key(self.f));
            }
        };
        input
            .apply(
                "SpreadKeys",
                ParDo::of(SpreadKey::<K, F::In> {
                    fanout: self.fanout.max(1),
                    next: None,
                    _kv: PhantomData,
                }),
            )
            .apply("CombineParts", Combine::per_key(PartialOf(self.f)))
            .map("DropPart", drop_part::<K, F::Acc>)
            .apply("MergeParts", Combine::per_key(MergeOf(second)))
    }
}
