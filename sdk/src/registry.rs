//! The registry of user functions and element types, by name.
//!
//! Pipeline construction fills it: applying a ParDo registers its DoFn, creating a
//! PCollection registers its element type, a GroupByKey or Combine registers its typed
//! operations. Names are Rust type names (`std::any::type_name`), which are stable for a
//! given binary, so generic functions (`CountFn<String>`) need no per-type boilerplate.
//! Every process of a job runs the same binary and the same construction code before it
//! decodes a plan, so the registry is complete wherever the plan is read.
//!
//! Concrete functions can also register at link time ([`register!`](crate::register),
//! [`Linked`], [`link`]): a binary that links them resolves their names in a plan it did
//! not construct. Factories build a function from a `&mut dyn erased_serde::Deserializer`
//! over its fields' JSON text in the plan, never from a `serde_json::Value`.

use crate::exec::ErasedWindowFn;
use crate::exec::{ElementType, ErasedDoFn, GroupingOps, TypedElementType};
use crate::{DoFn, Element};
use serde::de::DeserializeOwned;
use std::any::TypeId;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock, RwLock};

/// Builds a DoFn from its fields in the plan.
pub type DoFnFactory = Arc<
    dyn Fn(&mut dyn erased_serde::Deserializer<'_>) -> Result<Box<dyn ErasedDoFn>, String>
        + Send
        + Sync,
>;
/// Builds a grouping's typed operations from its payload's fields.
pub type GroupingFactory = Arc<
    dyn Fn(&mut dyn erased_serde::Deserializer<'_>) -> Result<Box<dyn GroupingOps>, String>
        + Send
        + Sync,
>;

/// Builds a user WindowFn from its fields in the plan.
pub type WindowFnFactory = Arc<
    dyn Fn(&mut dyn erased_serde::Deserializer<'_>) -> Result<Arc<dyn ErasedWindowFn>, String>
        + Send
        + Sync,
>;

/// Builds a source from its fields in the plan.
pub type SourceFactory = Arc<
    dyn Fn(
            &mut dyn erased_serde::Deserializer<'_>,
        ) -> Result<Box<dyn crate::exec::ErasedSource>, String>
        + Send
        + Sync,
>;

/// Builds a sink from its fields in the plan.
pub type SinkFactory = Arc<
    dyn Fn(
            &mut dyn erased_serde::Deserializer<'_>,
        ) -> Result<Box<dyn crate::exec::ErasedSink>, String>
        + Send
        + Sync,
>;

/// Builds a stateful DoFn from its fields in the plan.
pub type StatefulDoFnFactory = Arc<
    dyn Fn(
            &mut dyn erased_serde::Deserializer<'_>,
        ) -> Result<Box<dyn crate::exec::ErasedStatefulDoFn>, String>
        + Send
        + Sync,
>;

/// Builds a side input's view function from its fields.
pub type ViewFactory = Arc<
    dyn Fn(&mut dyn erased_serde::Deserializer<'_>) -> Result<Arc<dyn crate::exec::ViewOps>, String>
        + Send
        + Sync,
>;

#[derive(Default)]
struct Registry {
    views: HashMap<String, ViewFactory>,
    stateful_do_fns: HashMap<String, StatefulDoFnFactory>,
    sources: HashMap<String, SourceFactory>,
    sinks: HashMap<String, SinkFactory>,
    /// The Rust type behind each registered name, to catch two types with one name.
    owners: HashMap<String, TypeId>,
    /// Names claimed by more than one type.
    collisions: std::collections::BTreeSet<String>,
    window_fns: HashMap<String, WindowFnFactory>,
    do_fns: HashMap<String, DoFnFactory>,
    groupings: HashMap<String, GroupingFactory>,
    types: HashMap<String, Arc<dyn ElementType>>,
}

/// A factory's message for fields that do not decode.
pub(crate) fn fields_error(e: erased_serde::Error) -> String {
    crate::plan::without_position(e.to_string())
}

fn registry() -> &'static RwLock<Registry> {
    static R: OnceLock<RwLock<Registry>> = OnceLock::new();
    R.get_or_init(Default::default)
}

impl Registry {
    /// Records that `name` belongs to type `T`; a second type under the same name (two
    /// functions with one path, in sibling blocks say) is a collision that makes every
    /// plan using the name fail to build.
    fn claim<T: 'static>(&mut self, name: &str) {
        let id = TypeId::of::<T>();
        match self.owners.get(name) {
            Some(owner) if *owner != id => {
                self.collisions.insert(name.to_string());
            }
            Some(_) => {}
            None => {
                self.owners.insert(name.to_string(), id);
            }
        }
    }
}

/// Registered names that more than one Rust type claimed.
pub fn collisions() -> Vec<String> {
    read().collisions.iter().cloned().collect()
}

fn read() -> std::sync::RwLockReadGuard<'static, Registry> {
    registry().read().unwrap_or_else(|e| e.into_inner())
}

fn write() -> std::sync::RwLockWriteGuard<'static, Registry> {
    registry().write().unwrap_or_else(|e| e.into_inner())
}

/// Registers a DoFn struct whose fields deserialize with serde, under its type name.
/// Applying a [`ParDo`](crate::ParDo) does this; call it yourself only in a binary that
/// runs plans it did not construct.
///
/// ```
/// # use serde::{Deserialize, Serialize};
/// # use tidewater::{DoFn, ProcessContext, UserError};
/// #[derive(Serialize, Deserialize)]
/// struct Upper;
/// impl DoFn for Upper {
///     type In = String;
///     type Out = String;
///     fn process(&mut self, s: String, ctx: &mut ProcessContext<'_, String>) -> Result<(), UserError> {
///         ctx.output(s.to_uppercase());
///         Ok(())
///     }
/// }
/// let name = tidewater::registry::register_do_fn::<Upper>();
/// assert!(tidewater::registry::has_do_fn(&name));
/// ```
pub fn register_do_fn<F: DoFn + DeserializeOwned>() -> String {
    register_element_type::<F::In>();
    register_element_type::<F::Out>();
    let name = std::any::type_name::<F>().to_string();
    let factory: DoFnFactory = Arc::new(|fields| {
        let f: F = erased_serde::deserialize(fields).map_err(fields_error)?;
        Ok(Box::new(crate::exec::DoFnInvoker::new(f)) as Box<dyn ErasedDoFn>)
    });
    let mut r = write();
    r.claim::<F>(&name);
    r.do_fns.entry(name.clone()).or_insert(factory);
    name
}

/// Registers a DoFn factory under `name` (used for function items, which carry no
/// fields: the factory holds the function).
pub fn register_do_fn_factory<D: 'static>(name: &str, factory: DoFnFactory) {
    let mut r = write();
    r.claim::<D>(name);
    r.do_fns.entry(name.to_string()).or_insert(factory);
}

/// Registers a DoFn factory under `name` for the type `D`, unless another type already
/// holds the name (two closures of one function given at one place): then nothing is
/// registered and the caller reports it.
///
/// ```
/// use tidewater::registry::{has_do_fn, register_do_fn_factory_checked, DoFnFactory};
/// let refuse: DoFnFactory = std::sync::Arc::new(|_| Err("never built".into()));
/// assert!(register_do_fn_factory_checked::<u8>("doc::checked", refuse.clone()).is_ok());
/// assert!(register_do_fn_factory_checked::<u8>("doc::checked", refuse.clone()).is_ok());
/// assert!(register_do_fn_factory_checked::<u16>("doc::checked", refuse).is_err());
/// assert!(has_do_fn("doc::checked"));
/// ```
#[allow(clippy::result_unit_err)]
pub fn register_do_fn_factory_checked<D: 'static>(
    name: &str,
    factory: DoFnFactory,
) -> Result<(), ()> {
    let mut r = write();
    match r.owners.get(name) {
        Some(owner) if *owner != TypeId::of::<D>() => return Err(()),
        Some(_) => {}
        None => {
            r.owners.insert(name.to_string(), TypeId::of::<D>());
        }
    }
    r.do_fns.entry(name.to_string()).or_insert(factory);
    Ok(())
}

/// Registers typed grouping operations under `name`.
pub fn register_grouping<G: 'static>(name: &str, factory: GroupingFactory) {
    let mut r = write();
    r.claim::<G>(name);
    r.groupings.entry(name.to_string()).or_insert(factory);
}

/// Registers `T` as an element type, under its type name, and returns that name.
///
/// ```
/// assert_eq!(tidewater::registry::register_element_type::<u32>(), "u32");
/// ```
pub fn register_element_type<T: Element>() -> String {
    let name = std::any::type_name::<T>();
    let mut r = write();
    r.claim::<T>(name);
    if !r.types.contains_key(name) {
        r.types
            .insert(name.to_string(), Arc::new(TypedElementType::<T>::default()));
    }
    name.to_string()
}

/// Whether a DoFn named `name` is registered.
pub fn has_do_fn(name: &str) -> bool {
    read().do_fns.contains_key(name)
}

/// The DoFn factory named `name`.
pub fn do_fn(name: &str) -> Option<DoFnFactory> {
    read().do_fns.get(name).cloned()
}

/// The grouping factory named `name`.
pub fn grouping(name: &str) -> Option<GroupingFactory> {
    read().groupings.get(name).cloned()
}

/// The element type named `name`.
pub fn element_type(name: &str) -> Option<Arc<dyn ElementType>> {
    read().types.get(name).cloned()
}

/// Registers a user WindowFn's factory under `name`, claimed by the Rust type `Owner`
/// (two types under one name are a collision, as for DoFns). The WindowFn kinds'
/// registrations (`WindowFn::custom`, `WindowFn::by_element`, `register!`) call it.
pub fn add_window_fn<Owner: 'static>(name: &str, factory: WindowFnFactory) {
    let mut r = write();
    r.claim::<Owner>(name);
    r.window_fns.entry(name.to_string()).or_insert(factory);
}

/// Registers Combine.globally of the CombineFn `F` (its grouping, under the name a plan
/// gives it, and its element types) and returns that name. Applying the combine does
/// this; [`register!`](crate::register)`(CombineFn F)` does it at link time.
pub fn register_combine_fn_globally<F: crate::CombineFn + DeserializeOwned>() -> String {
    crate::primitives::register_combine::<crate::Globally, F>()
}

/// Registers Combine.perKey of the CombineFn `F` with keys of type `K` and returns the
/// grouping's name. The key type is a parameter of the grouping, so a linked CombineFn
/// names the key types it is applied with: `register!(CombineFn F keys: String)`.
pub fn register_combine_fn_per_key<K: Element, F: crate::CombineFn + DeserializeOwned>() -> String {
    crate::primitives::register_combine::<crate::PerKey<K>, F>()
}

/// The CombineFn a combine's grouping name holds, when it is a concrete type (its name
/// has no type parameters): what a linked CombineFn is registered under.
///
/// ```
/// let g = "tidewater::primitives::combine::CombineOps<tidewater::primitives::combine::PerKey<(u8, u16)>, my::Sum>";
/// assert_eq!(tidewater::registry::combine_fn_of(g), Some("my::Sum"));
/// assert_eq!(tidewater::registry::combine_fn_of("x::CountFn<()>"), None);
/// ```
pub fn combine_fn_of(grouping: &str) -> Option<&str> {
    let shapes = grouping
        .strip_prefix("tidewater::primitives::combine::CombineOps<")?
        .strip_suffix('>')?;
    let (_, f) = shapes.rsplit_once(", ")?;
    (!f.contains(['<', '>', ',', ' '])).then_some(f)
}

/// The user WindowFn factory named `name`.
pub fn window_fn(name: &str) -> Option<WindowFnFactory> {
    read().window_fns.get(name).cloned()
}

/// Registers a source whose fields deserialize with serde, under its type name.
/// [`Read::from`](crate::Read::from) does this.
pub fn register_source<S: crate::Source + DeserializeOwned>() -> String {
    register_source_with::<S>(|_| {})
}

/// Registers a source under its type name, whose decoded fields `finish` completes
/// with what does not travel in the plan (the function item a
/// [`Read::with_timestamps`](crate::Read::with_timestamps) source calls).
pub fn register_source_with<S: crate::Source + DeserializeOwned>(
    finish: impl Fn(&mut S) + Send + Sync + 'static,
) -> String {
    register_source_named::<S>(std::any::type_name::<S>(), finish)
}

/// [`register_source_with`] under `name` (a closure's name: its type and place).
///
/// ```
/// # use serde::{Deserialize, Serialize};
/// # use tidewater::{ReadStatus, Timestamp, UserError};
/// #[derive(Serialize, Deserialize)]
/// struct Nothing;
/// impl tidewater::Source for Nothing {
///     type Output = u8;
///     type Position = ();
///     fn is_bounded(&self) -> bool { true }
///     fn initial_position(&self, _: usize, _: usize) {}
///     fn read(&mut self, _: usize, _: usize, _: &mut (), _: usize, _: Timestamp,
///             _: &mut Vec<(u8, Timestamp)>) -> Result<ReadStatus, UserError> { Ok(ReadStatus::Done) }
///     fn watermark(&self, _: usize, _: usize, _: &()) -> Timestamp { Timestamp::MAX }
/// }
/// let name = tidewater::registry::register_source_named::<Nothing>("doc::nothing", |_| {});
/// assert!(tidewater::registry::source(&name).is_some());
/// ```
pub fn register_source_named<S: crate::Source + DeserializeOwned>(
    name: &str,
    finish: impl Fn(&mut S) + Send + Sync + 'static,
) -> String {
    register_element_type::<S::Output>();
    let name = name.to_string();
    let factory: SourceFactory = Arc::new(move |fields| {
        let mut s: S = erased_serde::deserialize(fields).map_err(fields_error)?;
        finish(&mut s);
        Ok(Box::new(crate::exec::SourceInvoker(s)) as Box<dyn crate::exec::ErasedSource>)
    });
    let mut r = write();
    r.claim::<S>(&name);
    r.sources.entry(name.clone()).or_insert(factory);
    name
}

/// The source factory named `name`.
pub fn source(name: &str) -> Option<SourceFactory> {
    read().sources.get(name).cloned()
}

/// Registers a sink whose fields deserialize with serde, under its type name.
/// [`WriteToSink`](crate::WriteToSink) does this.
pub fn register_sink<S: crate::Sink + DeserializeOwned>() -> String {
    register_element_type::<S::In>();
    let name = std::any::type_name::<S>().to_string();
    let factory: SinkFactory = Arc::new(|fields| {
        let s: S = erased_serde::deserialize(fields).map_err(fields_error)?;
        Ok(Box::new(crate::exec::SinkInvoker(s)) as Box<dyn crate::exec::ErasedSink>)
    });
    let mut r = write();
    r.claim::<S>(&name);
    r.sinks.entry(name.clone()).or_insert(factory);
    name
}

/// The sink factory named `name`.
pub fn sink(name: &str) -> Option<SinkFactory> {
    read().sinks.get(name).cloned()
}

/// Registers a stateful DoFn whose fields deserialize with serde, under its type name.
pub fn register_stateful_do_fn<F: crate::StatefulDoFn + DeserializeOwned>() -> String {
    register_element_type::<(F::Key, F::Value)>();
    register_element_type::<F::Out>();
    let name = std::any::type_name::<F>().to_string();
    let factory: StatefulDoFnFactory = Arc::new(|fields| {
        let f: F = erased_serde::deserialize(fields).map_err(fields_error)?;
        Ok(Box::new(crate::StatefulInvoker::new(f)) as Box<dyn crate::exec::ErasedStatefulDoFn>)
    });
    let mut r = write();
    r.claim::<F>(&name);
    r.stateful_do_fns.entry(name.clone()).or_insert(factory);
    name
}

/// The stateful DoFn factory named `name`.
pub fn stateful_do_fn(name: &str) -> Option<StatefulDoFnFactory> {
    read().stateful_do_fns.get(name).cloned()
}

/// Registers a side-input view function under `name`.
pub fn register_view<O: 'static>(name: &str, factory: ViewFactory) {
    let mut r = write();
    r.claim::<O>(name);
    r.views.entry(name.to_string()).or_insert(factory);
}

/// The view factory named `name`.
pub fn view(name: &str) -> Option<ViewFactory> {
    read().views.get(name).cloned()
}

// ---------------------------------------------------------------------------------------
// Link-time registration.
// ---------------------------------------------------------------------------------------

/// A concrete user function registered at link time by [`register!`](crate::register):
/// its impl is collected by typetag (through `inventory`, a constructor that runs when
/// the binary starts), so a binary that merely links it resolves its name in a plan it
/// did not construct.
///
/// Resolving a name this way deserializes the plan's fields into a value of the type
/// (straight from the plan's deserializer, through erased-serde) and calls
/// [`Linked::register`], which fills the run-time registry just as applying the
/// function in a pipeline would: its factory and its element types. From then on the
/// name resolves like any other.
///
/// Only concrete, non-generic types can be linked: typetag needs one constant name per
/// impl. Generic functions (`CountFn<T>`, `MapFn<F, A, B>`, groupings) register when
/// the pipeline that uses them is constructed.
#[typetag::deserialize]
pub trait Linked: Send + Sync {
    /// Registers the type in the run-time registry under its type name and returns
    /// that name.
    fn register(&self) -> String;
}

/// Whether `name` could be resolved at link time: `Ok(true)` when a linked function of
/// that name was found and registered (or already was), `Ok(false)` when no linked
/// function has that name, `Err` when one has it but `fields` do not decode into it.
///
/// The fields are read through `fields`, any serde deserializer (the plan's own).
///
/// ```
/// // No function is linked under this name.
/// let fields = serde_json::Value::Null;
/// assert_eq!(tidewater::registry::link(
///     "nobody::Nothing", &fields).unwrap(), false);
/// ```
pub fn link<'de, D: serde::Deserializer<'de>>(name: &str, fields: D) -> Result<bool, String> {
    use serde::de::{Deserialize, DeserializeSeed, MapAccess, value::MapAccessDeserializer};
    use std::cell::Cell;
    // Presents `{name: fields}` (typetag's externally tagged form) without building it:
    // the key is the name, the value is read from `fields` itself.
    struct One<'a, D> {
        name: Option<&'a str>,
        fields: Option<D>,
        unknown: &'a Cell<bool>,
    }
    impl<'de, D: serde::Deserializer<'de>> MapAccess<'de> for One<'_, D> {
        type Error = D::Error;
        fn next_key_seed<K: DeserializeSeed<'de>>(
            &mut self,
            seed: K,
        ) -> Result<Option<K::Value>, D::Error> {
            let Some(name) = self.name.take() else {
                return Ok(None);
            };
            let key = serde::de::value::StrDeserializer::<D::Error>::new(name);
            seed.deserialize(key).map(Some).inspect_err(|_| {
                self.unknown.set(true);
            })
        }
        fn next_value_seed<V: DeserializeSeed<'de>>(
            &mut self,
            seed: V,
        ) -> Result<V::Value, D::Error> {
            let fields = self.fields.take().expect("one value after one key");
            seed.deserialize(fields)
        }
    }
    if has_any(name) {
        return Ok(true);
    }
    let unknown = Cell::new(false);
    let one = One {
        name: Some(name),
        fields: Some(fields),
        unknown: &unknown,
    };
    match <Box<dyn Linked>>::deserialize(MapAccessDeserializer::new(one)) {
        Ok(f) => {
            let registered = f.register();
            if registered != name {
                return Err(format!(
                    "it is linked under '{name}' but its type is '{registered}': \
                     call tidewater::register! in the module that defines the type"
                ));
            }
            Ok(true)
        }
        Err(_) if unknown.get() => Ok(false),
        Err(e) => Err(e.to_string()),
    }
}

/// Whether any kind of function is registered at run time under `name`.
fn has_any(name: &str) -> bool {
    let r = read();
    r.do_fns.contains_key(name)
        || r.stateful_do_fns.contains_key(name)
        || r.sources.contains_key(name)
        || r.sinks.contains_key(name)
        || r.window_fns.contains_key(name)
}
