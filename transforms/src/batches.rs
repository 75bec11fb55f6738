//! Beam's `GroupIntoBatches`: the values of each key in batches of a given size, with
//! state and timers.

use serde::{Deserialize, Serialize};
use std::marker::PhantomData;
use tidewater::{
    BagState, Duration, Element, EventTimer, PCollection, PTransform, ProcessingTimer,
    StateContext, StateSpec, StatefulDoFn, StatefulParDo, TimerSpec, UserError, ValueState,
};

/// Batches the values of each key and window: `(K, V)` becomes `(K, Vec<V>)` with at
/// most `size` values per batch (Beam's `GroupIntoBatches.ofSize`). A batch goes out
/// when it is full, when the watermark passes the end of its window (what is left),
/// and, with [`GroupIntoBatches::with_max_buffering_duration`], once its first value
/// has waited that long in processing time.
///
/// ```
/// use tidewater_transforms::GroupIntoBatches;
/// tidewater_runner_direct::register();
/// let p = tidewater::Pipeline::new(Default::default());
/// let kvs: Vec<(char, u32)> = (0..5).map(|i| ('a', i)).chain([('b', 9)]).collect();
/// p.create("Kvs", kvs)
///     .apply("Batches", GroupIntoBatches::of_size(2))
///     .map("Sizes", |(k, vs): (char, Vec<u32>)| (k, vs.len()))
///     .capture("sizes");
/// let mut sizes = p.run().unwrap().captured_values::<(char, usize)>("sizes").unwrap();
/// sizes.sort();
/// assert_eq!(sizes, vec![('a', 1), ('a', 2), ('a', 2), ('b', 1)]);
/// ```
pub struct GroupIntoBatches<V> {
    size: u64,
    max_buffering_ms: Option<i64>,
    _v: PhantomData<fn(V)>,
}

impl<V: Element> GroupIntoBatches<V> {
    /// Batches of at most `size` values (at least 1).
    pub fn of_size(size: u64) -> Self {
        GroupIntoBatches {
            size,
            max_buffering_ms: None,
            _v: PhantomData,
        }
    }

    /// Also sends a batch out once its first value has waited `d` in processing time
    /// (on the micro-batch runner: at the first batch boundary after that).
    ///
    /// ```
    /// use tidewater::Duration;
    /// use tidewater_transforms::GroupIntoBatches;
    /// let p = tidewater::Pipeline::new(Default::default());
    /// let batches = p.create("Kvs", vec![(1u8, 2u8)])
    ///     .apply("Batches", GroupIntoBatches::of_size(100).with_max_buffering_duration(Duration::from_secs(1)));
    /// assert!(p.construction_errors().is_empty());
    /// ```
    pub fn with_max_buffering_duration(mut self, d: impl Into<Duration>) -> Self {
        self.max_buffering_ms = Some(d.into().millis());
        self
    }
}

#[derive(Serialize, Deserialize)]
#[serde(bound = "")]
struct Batcher<K, V> {
    size: u64,
    max_buffering_ms: Option<i64>,
    #[serde(skip)]
    _kv: PhantomData<fn(K, V)>,
}

const COUNT: ValueState<u64> = StateSpec::value("count");
const END_OF_WINDOW: EventTimer = TimerSpec::event("end-of-window");
const BUFFERING: ProcessingTimer = TimerSpec::processing("buffering");

/// The batch so far (a bag of the key's value type).
fn batch<V: Element>() -> BagState<V> {
    StateSpec::bag("batch")
}

impl<K: Element, V: Element> Batcher<K, V> {
    fn flush(&self, key: &K, ctx: &mut StateContext<'_, (K, Vec<V>)>) -> Result<(), UserError> {
        let values = batch::<V>().read(ctx)?;
        batch::<V>().clear(ctx);
        COUNT.clear(ctx);
        BUFFERING.clear(ctx);
        if !values.is_empty() {
            ctx.output((key.clone(), values));
        }
        Ok(())
    }
}

impl<K: Element, V: Element> StatefulDoFn for Batcher<K, V> {
    type Key = K;
    type Value = V;
    type Out = (K, Vec<V>);
    fn process(
        &mut self,
        key: &K,
        v: V,
        ctx: &mut StateContext<'_, (K, Vec<V>)>,
    ) -> Result<(), UserError> {
        let count = COUNT.read(ctx)?.unwrap_or(0);
        if count == 0 {
            END_OF_WINDOW.set(ctx, ctx.window().max_timestamp())?;
            if let Some(ms) = self.max_buffering_ms {
                BUFFERING.set_after(ctx, ms)?;
            }
        }
        batch::<V>().add(ctx, &v)?;
        if count + 1 >= self.size {
            self.flush(key, ctx)
        } else {
            COUNT.write(ctx, &(count + 1))
        }
    }

    fn on_timer(
        &mut self,
        key: &K,
        _name: &str,
        ctx: &mut StateContext<'_, (K, Vec<V>)>,
    ) -> Result<(), UserError> {
        self.flush(key, ctx)
    }
}

impl<K: Element, V: Element> PTransform<PCollection<(K, V)>> for GroupIntoBatches<V> {
    type Output = PCollection<(K, Vec<V>)>;
    fn expand(self, input: PCollection<(K, V)>) -> Self::Output {
        if self.size == 0 {
            input.pipeline().record_error(
                "GroupIntoBatches::of_size(0): a batch holds at least one value".into(),
            );
        }
        input.apply(
            "Batch",
            StatefulParDo::of(Batcher::<K, V> {
                size: self.size.max(1),
                max_buffering_ms: self.max_buffering_ms,
                _kv: PhantomData,
            }),
        )
    }
}
