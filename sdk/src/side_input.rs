//! Side inputs: a PCollection read whole by a ParDo, per window (Beam's
//! `PCollectionView`: singleton, iterable, map and multimap).

use crate::exec::{AnyBatch, ViewOps, downcast_batch};
use crate::{BoundedWindow, Element, PCollection};
use serde::{Deserialize, Serialize};
use std::any::Any;
use std::collections::BTreeMap;
use std::marker::PhantomData;
use std::sync::Arc;

/// A side input a DoFn reads with [`ProcessContext::side_input`](crate::ProcessContext::side_input);
/// a DoFn keeps it as a field. `T` is what the DoFn sees: `V` for a singleton, `Vec<V>`
/// for an iterable, `BTreeMap<K, V>` for a map, `BTreeMap<K, Vec<V>>` for a multimap.
///
/// A ParDo whose DoFn holds a view as a field reads it without more ado: the view
/// declares itself when the DoFn's fields are written into the plan
/// ([`ParDo::with_side_input`](crate::ParDo::with_side_input) is then not needed).
#[derive(Deserialize)]
#[serde(transparent)]
pub struct PCollectionView<T> {
    tag: String,
    #[serde(skip)]
    source: Option<(usize, String)>,
    #[serde(skip)]
    _t: PhantomData<fn() -> T>,
}

thread_local! {
    /// While a DoFn's fields are written into the plan: the views among them, as
    /// (tag, side PCollection, view function).
    static VIEWS_SEEN: std::cell::RefCell<Option<Vec<(String, usize, String)>>> =
        const { std::cell::RefCell::new(None) };
}

/// Runs `write` (which serializes a DoFn's fields) and returns its result with the
/// views it met, in order, each once.
pub(crate) fn views_in<R>(write: impl FnOnce() -> R) -> (R, Vec<(String, usize, String)>) {
    let outer = VIEWS_SEEN.with(|v| v.borrow_mut().replace(Vec::new()));
    let r = write();
    let mut seen = VIEWS_SEEN.with(|v| std::mem::replace(&mut *v.borrow_mut(), outer));
    let mut views = seen.take().unwrap_or_default();
    let mut tags = std::collections::BTreeSet::new();
    views.retain(|(tag, _, _)| tags.insert(tag.clone()));
    (r, views)
}

impl<T> Serialize for PCollectionView<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if let Some((pcollection, view)) = &self.source {
            VIEWS_SEEN.with(|v| {
                if let Some(seen) = v.borrow_mut().as_mut() {
                    seen.push((self.tag.clone(), *pcollection, view.clone()));
                }
            });
        }
        self.tag.serialize(s)
    }
}

impl<T> Clone for PCollectionView<T> {
    fn clone(&self) -> Self {
        PCollectionView {
            tag: self.tag.clone(),
            source: self.source.clone(),
            _t: PhantomData,
        }
    }
}

impl<T> std::fmt::Debug for PCollectionView<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PCollectionView({})", self.tag)
    }
}

impl<T> PCollectionView<T> {
    /// The tag the ParDo knows it by.
    pub fn tag(&self) -> &str {
        &self.tag
    }

    /// The side PCollection's id and the registered view function's name.
    pub(crate) fn source(&self) -> Option<&(usize, String)> {
        self.source.as_ref()
    }
}

/// Reads side inputs for the window being processed; implemented by the runner.
pub trait SideInputReader {
    /// The value of side input `tag` for main-input window `window`.
    fn get(&self, tag: &str, window: &BoundedWindow) -> Result<&(dyn Any + Send + Sync), String>;
}

/// A reader with no side inputs.
pub struct NoSideInputs;

impl SideInputReader for NoSideInputs {
    fn get(&self, tag: &str, _window: &BoundedWindow) -> Result<&(dyn Any + Send + Sync), String> {
        Err(format!(
            "side input '{tag}' was not declared on this ParDo: add .with_side_input(&view)"
        ))
    }
}

#[derive(Serialize, Deserialize)]
#[serde(bound = "T: Element")]
struct Singleton<T> {
    default: Option<T>,
}
struct Iterable<T>(PhantomData<fn() -> T>);
struct MapView<K, V>(PhantomData<fn() -> (K, V)>);
struct MultiMapView<K, V>(PhantomData<fn() -> (K, V)>);

impl<T: Element> ViewOps for Singleton<T> {
    fn build(&self, batch: Box<dyn AnyBatch>) -> Result<Arc<dyn Any + Send + Sync>, String> {
        let mut items = downcast_batch::<T>(batch);
        match items.len() {
            1 => Ok(Arc::new(items.pop().expect("one").value)),
            0 => self.default.clone().map(|d| Arc::new(d) as Arc<dyn Any + Send + Sync>).ok_or_else(|| {
                "the singleton side input is empty in this window and has no default (use as_singleton_with_default)".to_string()
            }),
            n => Err(format!("the singleton side input has {n} elements in this window; a singleton needs exactly one")),
        }
    }
}

impl<T: Element> ViewOps for Iterable<T> {
    fn build(&self, batch: Box<dyn AnyBatch>) -> Result<Arc<dyn Any + Send + Sync>, String> {
        Ok(Arc::new(
            downcast_batch::<T>(batch)
                .into_iter()
                .map(|wv| wv.value)
                .collect::<Vec<T>>(),
        ))
    }
}

impl<K: Element + Ord, V: Element> ViewOps for MapView<K, V> {
    fn build(&self, batch: Box<dyn AnyBatch>) -> Result<Arc<dyn Any + Send + Sync>, String> {
        let mut m = BTreeMap::new();
        for wv in downcast_batch::<(K, V)>(batch) {
            let (k, v) = wv.value;
            if m.contains_key(&k) {
                return Err(format!(
                    "the map side input has key {k:?} more than once; use as_multimap"
                ));
            }
            m.insert(k, v);
        }
        Ok(Arc::new(m))
    }
}

impl<K: Element + Ord, V: Element> ViewOps for MultiMapView<K, V> {
    fn build(&self, batch: Box<dyn AnyBatch>) -> Result<Arc<dyn Any + Send + Sync>, String> {
        let mut m: BTreeMap<K, Vec<V>> = BTreeMap::new();
        for wv in downcast_batch::<(K, V)>(batch) {
            m.entry(wv.value.0).or_default().push(wv.value.1);
        }
        Ok(Arc::new(m))
    }
}

fn view<T, O: ViewOps + 'static>(
    pc: &PCollection<impl Element>,
    kind: &str,
    ops: impl Fn(&serde_json::Value) -> Result<O, String> + Send + Sync + 'static,
    fields: serde_json::Value,
) -> PCollectionView<T> {
    // The fields (a singleton's default) are part of the name and held by the factory.
    let name = format!("{}#{}", std::any::type_name::<O>(), fields);
    crate::registry::register_view::<O>(
        &name,
        Arc::new(move |_| Ok(Arc::new(ops(&fields)?) as Arc<dyn ViewOps>)),
    );
    PCollectionView {
        tag: format!("side:{}:{kind}", pc.name()),
        source: Some((pc.id, name)),
        _t: PhantomData,
    }
}

impl<T: Element> PCollection<T> {
    /// The one element of each window (an error if there are none or several).
    pub fn as_singleton(&self) -> PCollectionView<T> {
        view::<T, Singleton<T>>(
            self,
            "singleton",
            |_| Ok(Singleton { default: None }),
            serde_json::Value::Null,
        )
    }

    /// The one element of each window, or `default` if there is none.
    pub fn as_singleton_with_default(&self, default: T) -> PCollectionView<T> {
        let fields = serde_json::json!({ "default": serde_json::to_value(&default).unwrap_or(serde_json::Value::Null) });
        view::<T, Singleton<T>>(
            self,
            "singleton",
            |f| serde_json::from_value::<Singleton<T>>(f.clone()).map_err(|e| e.to_string()),
            fields,
        )
    }

    /// All elements of each window.
    pub fn as_iterable(&self) -> PCollectionView<Vec<T>> {
        view::<Vec<T>, Iterable<T>>(
            self,
            "iterable",
            |_| Ok(Iterable(PhantomData)),
            serde_json::Value::Null,
        )
    }
}

impl<K: Element + Ord, V: Element> PCollection<(K, V)> {
    /// A map per window (an error if a key occurs twice).
    pub fn as_map(&self) -> PCollectionView<BTreeMap<K, V>> {
        view::<BTreeMap<K, V>, MapView<K, V>>(
            self,
            "map",
            |_| Ok(MapView(PhantomData)),
            serde_json::Value::Null,
        )
    }

    /// All values of each key, per window.
    pub fn as_multimap(&self) -> PCollectionView<BTreeMap<K, Vec<V>>> {
        view::<BTreeMap<K, Vec<V>>, MultiMapView<K, V>>(
            self,
            "multimap",
            |_| Ok(MultiMapView(PhantomData)),
            serde_json::Value::Null,
        )
    }
}
