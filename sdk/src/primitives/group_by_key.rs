use crate::exec::{
    AnyBatch, Batch, ExecError, GroupingOps, GroupingPhase, GroupingTable, KeyIndex, downcast_batch,
};
use crate::plan::{FunctionSpec, GroupingPayload, UserFunction, urn};
use crate::registry;
use crate::{
    BoundedWindow, Element, PCollection, PTransform, PaneInfo, Timestamp, WindowedValue, Windows,
};
use std::marker::PhantomData;
use std::sync::Arc;

/// Groups the values of each key and window: `(K, V)` becomes `(K, Vec<V>)`.
///
/// Keys are grouped by their encoding, so a key type must encode equal keys to equal
/// bytes: a key type with a float or a `HashMap`/`HashSet` in it is refused at
/// construction (see the [`coder`] module). In the global window of a bounded input
/// there is one output per key, on time, at the end of the window.
///
/// ```
/// let p = tidewater::Pipeline::new(Default::default());
/// let grouped = p.create("Kvs", vec![("a".to_string(), 1i64)]).apply("Group", tidewater::GroupByKey);
/// ```
pub struct GroupByKey;

impl<K: Element, V: Element> PTransform<PCollection<(K, V)>> for GroupByKey {
    type Output = PCollection<(K, Vec<V>)>;
    fn expand(self, input: PCollection<(K, V)>) -> PCollection<(K, Vec<V>)> {
        let p = input.pipeline().clone();
        check_groupable(&p, input.id);
        crate::key_check::check_key_type::<K>(&p, "GroupByKey");
        let name = std::any::type_name::<GroupByKeyOps<K, V>>().to_string();
        registry::register_grouping::<GroupByKeyOps<K, V>>(
            &name,
            Arc::new(|_| Ok(Box::new(GroupByKeyOps::<K, V>(PhantomData)) as Box<dyn GroupingOps>)),
        );
        let payload = GroupingPayload {
            grouping: UserFunction {
                name,
                fields: crate::plan::Json::null(),
            },
        };
        let spec = FunctionSpec {
            urn: urn::GROUP_BY_KEY.into(),
            payload: serde_json::to_value(payload)
                .expect("payload serializes")
                .into(),
        };
        let bounded = p.is_bounded(&[input.id]);
        let out = p.set_primitive(
            spec,
            false,
            crate::pipeline::output_types::<(K, Vec<V>)>("main"),
            bounded,
        );
        p.pcollection(out[0])
    }
}

/// Refuses a grouping that could never fire: an unbounded input in the global window
/// whose trigger only fires at the end of time (Beam refuses it too).
pub(crate) fn check_groupable(p: &crate::Pipeline, input: usize) {
    if p.is_bounded(&[input]) == crate::plan::IsBounded::Unbounded {
        let w = p.windowing_of(input);
        if w.window_fn == crate::WindowFn::Global
            && !w.trigger.may_fire_before_end_of_global_window()
        {
            p.record_error(format!(
                "grouping an unbounded PCollection in the global window with trigger {:?} would never emit anything: \
                 window it first (Window::into) or set a trigger that fires before the end of the window",
                w.trigger
            ));
        }
    }
}

impl<K: Element, V: Element> PCollection<(K, V)> {
    /// Shorthand for `apply(name, GroupByKey)`.
    pub fn group_by_key(&self, name: &str) -> PCollection<(K, Vec<V>)> {
        self.apply(name, GroupByKey)
    }
}

/// The typed operations of a GroupByKey of `(K, V)`.
pub struct GroupByKeyOps<K, V>(PhantomData<fn() -> (K, V)>);

impl<K: Element, V: Element> GroupingOps for GroupByKeyOps<K, V> {
    fn input_type(&self) -> &'static str {
        std::any::type_name::<(K, V)>()
    }
    fn output_type(&self) -> &'static str {
        std::any::type_name::<(K, Vec<V>)>()
    }
    fn new_table(&self, _phase: GroupingPhase) -> Box<dyn GroupingTable> {
        Box::new(GroupByKeyTable::<K, V> {
            groups: Groups::new(),
        })
    }
    fn liftable(&self) -> bool {
        false
    }
    fn key_ops(&self, _phase: GroupingPhase) -> Arc<dyn crate::exec::KeyOps> {
        Arc::new(crate::exec::pair_key_ops::<K, V>())
    }
    fn new_reduce_state(&self, _phase: GroupingPhase) -> Box<dyn crate::exec::ReduceFnState> {
        buffering_state::<K, V>()
    }
    fn empty_output(&self) -> Result<Option<Box<dyn AnyBatch>>, ExecError> {
        Ok(None)
    }
}

struct GroupByKeyTable<K, V> {
    groups: Groups<K, Vec<V>>,
}

/// Groups by the encoding of (window, key): one value per group. Keys and values are
/// kept in separate vectors so that updating a value touches only the values.
pub(crate) struct Groups<K, A> {
    index: KeyIndex,
    keys: Vec<(K, BoundedWindow)>,
    values: Vec<A>,
    key_buf: Vec<u8>,
    /// The earliest end (max timestamp) of a group's window: nothing to drain before it.
    earliest_end: Timestamp,
}

impl<K: Element, A> Groups<K, A> {
    pub(crate) fn new() -> Self {
        Groups {
            index: KeyIndex::default(),
            keys: Vec::new(),
            values: Vec::new(),
            key_buf: Vec::new(),
            earliest_end: Timestamp::MAX,
        }
    }

    /// The value of the group of (`w`, `k`), created by `init` if new.
    pub(crate) fn slot(
        &mut self,
        w: BoundedWindow,
        k: K,
        init: impl FnOnce() -> A,
    ) -> Result<&mut A, ExecError> {
        let i = self.index(w, k, init)?;
        Ok(&mut self.values[i])
    }

    /// The number of the group of (`w`, `k`), created with value `init()` if new.
    pub(crate) fn index(
        &mut self,
        w: BoundedWindow,
        k: K,
        init: impl FnOnce() -> A,
    ) -> Result<usize, ExecError> {
        group_key(&mut self.key_buf, &w, &k)?;
        let (i, new) = self.index.find_or_insert(&self.key_buf);
        if new {
            self.earliest_end = self.earliest_end.min(w.max_timestamp());
            self.keys.push((k, w));
            self.values.push(init());
        }
        Ok(i)
    }

    /// [`Groups::index`] of a group whose encoding ([`group_key`]) and its hash
    /// ([`KeyIndex::hash`]) were computed beforehand: a batch's keys are encoded and
    /// hashed first, then looked up one after another, so that the lookups' memory
    /// accesses overlap instead of each waiting behind its key's hashing.
    pub(crate) fn index_prehashed(
        &mut self,
        encoded: &[u8],
        hash: u64,
        w: BoundedWindow,
        k: K,
        init: impl FnOnce() -> A,
    ) -> usize {
        let (i, new) = self.index.find_or_insert_hashed(hash, encoded);
        if new {
            self.earliest_end = self.earliest_end.min(w.max_timestamp());
            self.keys.push((k, w));
            self.values.push(init());
        }
        i
    }

    pub(crate) fn value_mut(&mut self, i: usize) -> &mut A {
        &mut self.values[i]
    }

    /// The number of the most recently added group.
    pub(crate) fn last_key(&self) -> Option<usize> {
        self.keys.len().checked_sub(1)
    }

    pub(crate) fn key(&self, i: usize) -> &K {
        &self.keys[i].0
    }

    pub(crate) fn len(&self) -> usize {
        self.values.len()
    }

    /// Every group, emptying the table.
    pub(crate) fn drain(&mut self) -> impl Iterator<Item = (K, BoundedWindow, A)> + '_ {
        self.index.clear();
        self.earliest_end = Timestamp::MAX;
        self.keys
            .drain(..)
            .zip(self.values.drain(..))
            .map(|((k, w), a)| (k, w, a))
    }
}

impl<K: Element, A> Groups<K, A> {
    /// The groups whose window ends before `watermark` (its max timestamp is earlier),
    /// removed; the others stay, in their order.
    pub(crate) fn drain_ended_before(
        &mut self,
        watermark: Timestamp,
    ) -> Result<Vec<(K, BoundedWindow, A)>, ExecError> {
        if self.earliest_end >= watermark {
            return Ok(Vec::new());
        }
        // The table's own storage, taken: the kept groups go into fresh storage, and
        // no copy of every group is made.
        let keys = std::mem::take(&mut self.keys);
        let values = std::mem::take(&mut self.values);
        self.index.clear();
        self.earliest_end = Timestamp::MAX;
        let mut ended = Vec::new();
        for ((k, w), a) in keys.into_iter().zip(values) {
            if w.max_timestamp() < watermark {
                ended.push((k, w, a));
            } else {
                let mut a = Some(a);
                self.index(w, k, || a.take().expect("each kept group once"))?;
            }
        }
        Ok(ended)
    }
}

/// Encodes (key, window) into `buf`: the key's canonical encoding (the one key groups
/// and state use) followed by the window's.
pub(crate) fn group_key<K: Element>(
    buf: &mut Vec<u8>,
    window: &BoundedWindow,
    key: &K,
) -> Result<(), ExecError> {
    buf.clear();
    crate::exec::encode_key(key, buf)?;
    append_window(buf, window);
    Ok(())
}

/// Appends the bytes of `window` that follow a key's in a group's encoding.
pub(crate) fn append_window(buf: &mut Vec<u8>, window: &BoundedWindow) {
    // The window in fixed bytes (not through the coder: this runs per element, and the
    // bytes never leave the table). A key's encoding delimits itself, so the pair's is
    // unique.
    match window {
        BoundedWindow::Global => buf.push(0),
        BoundedWindow::Interval { start, end } => {
            buf.push(1);
            buf.extend_from_slice(&start.0.to_le_bytes());
            buf.extend_from_slice(&end.0.to_le_bytes());
        }
        BoundedWindow::Custom(c) => {
            // The window is last: its bytes need no delimiter.
            buf.push(2);
            buf.extend_from_slice(&c.start_and_end().0.0.to_le_bytes());
            buf.extend_from_slice(&c.start_and_end().1.0.to_le_bytes());
            buf.extend_from_slice(c.type_name().as_bytes());
            buf.push(0);
            buf.extend_from_slice(c.bytes());
        }
    }
}

impl<K: Element, V: Element> GroupingTable for GroupByKeyTable<K, V> {
    fn add(&mut self, batch: Box<dyn AnyBatch>) -> Result<(), ExecError> {
        for wv in downcast_batch::<(K, V)>(batch) {
            let (k, v) = wv.value;
            match wv.windows {
                Windows::One(w) => self.groups.slot(w, k, Vec::new)?.push(v),
                Windows::Many(ws) => {
                    for w in ws {
                        self.groups.slot(w, k.clone(), Vec::new)?.push(v.clone());
                    }
                }
            }
        }
        Ok(())
    }

    fn groups(&self) -> usize {
        self.groups.len()
    }

    fn finish(&mut self) -> Result<Box<dyn AnyBatch>, ExecError> {
        let items = self
            .groups
            .drain()
            .map(|(k, w, vs)| WindowedValue {
                value: (k, vs),
                timestamp: w.max_timestamp(),
                windows: Windows::One(w),
                pane: PaneInfo::ON_TIME_AND_ONLY_FIRING,
            })
            .collect();
        Ok(Box::new(Batch { items }))
    }
}

/// GroupByKey's reduction: buffer the values.
struct Buffering<K, V>(PhantomData<fn() -> (K, V)>);

impl<K: Element, V: Element> super::reduce::Reduction for Buffering<K, V> {
    type Key = K;
    type Input = (K, V);
    type Value = V;
    type Acc = Vec<V>;
    type Output = (K, Vec<V>);
    fn split(&self, input: (K, V)) -> (K, V) {
        input
    }
    fn create(&self) -> Vec<V> {
        Vec::new()
    }
    fn add(&self, acc: &mut Vec<V>, v: V) {
        acc.push(v);
    }
    fn merge(&self, acc: &mut Vec<V>, other: Vec<V>) {
        acc.extend(other);
    }
    fn output(&self, key: &K, acc: &Vec<V>) -> (K, Vec<V>) {
        (key.clone(), acc.clone())
    }
    fn take_output(&self, key: &K, acc: Vec<V>) -> (K, Vec<V>) {
        (key.clone(), acc)
    }
}

pub(crate) fn buffering_state<K: Element, V: Element>() -> Box<dyn crate::exec::ReduceFnState> {
    Box::new(super::reduce::ReduceTable::new(Buffering::<K, V>(
        PhantomData,
    )))
}
