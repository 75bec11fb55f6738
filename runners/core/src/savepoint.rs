//! Reading a savepoint's (or a checkpoint directory's) state offline, as Flink's State
//! Processor API does: every stateful DoFn's cells and timers per key and window, every
//! grouping's open windows per key (contents, panes, timers), and the other steps'
//! parts raw. Cell values are JSON without the pipeline's types (they
//! are written self-describing, [`tidewater::coder::encode_state_into`]); keys are
//! shown as their type's `Debug` when the pipeline's plan is given (a binary that has
//! its registered code), else decoded as text where they are text, else as hex.
//!
//! A job binary prints them with `--inspect-savepoint DIR` (`--inspect-id`,
//! `--inspect-key`, `--inspect-format json|csv`); a pipeline can read them as a bounded
//! input: `p.create("State", Reader::open(dir)?.entries(None, &Filter::default())?)`.

use crate::compat::{StateId, StateKind};
use crate::snapshot::{Scope, Snapshot};
use crate::store::{Manifest, Store};
use crate::translate::{ExecutablePlan, NodeKind};
use serde::{Deserialize, Serialize};
use std::path::Path;
use tidewater::exec::TimeDomain;
use tidewater::{BoundedWindow, Error, Result};

/// One piece of state: a cell (or timer) of a key in a window of a step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// The step's state id.
    pub id: String,
    /// The key: its `Debug` form, text, or hex; for a step's raw part, the part's scope.
    pub key: String,
    /// The window: `global` or `[start, end)` in milliseconds.
    pub window: String,
    /// The cell's name, `timer NAME`; a grouping's `contents`, `panes` or `timer`; or
    /// `(raw)`.
    pub cell: String,
    /// The value as JSON text (a bag: an array; a map: an object; a set: an array of
    /// its members; a timer: its time and clock; a raw part: its size).
    pub value: String,
}

/// Which entries to read.
#[derive(Clone, Debug, Default)]
pub struct Filter {
    /// Only this state id.
    pub id: Option<String>,
    /// Only this key (as [`Entry::key`] shows it, with or without its quotes).
    pub key: Option<String>,
}

/// A savepoint or checkpoint directory's newest complete checkpoint, read as written.
pub struct Reader {
    manifest: Manifest,
    snapshot: Snapshot,
}

impl Reader {
    /// The newest complete checkpoint in `dir`; the directory is only read.
    pub fn open(dir: &Path) -> Result<Reader> {
        let Some(store) = Store::existing(dir)? else {
            return Err(Error::Checkpoint {
                message: format!("{}: no savepoint or checkpoint there", dir.display()),
            });
        };
        let (manifest, snapshot) = store
            .latest_as_written()?
            .ok_or_else(|| Error::Checkpoint {
                message: format!("{}: it holds no complete checkpoint", dir.display()),
            })?;
        if manifest.state.is_none() {
            return Err(Error::Checkpoint {
                message: format!(
                    "checkpoint {} in {} was written before checkpoints recorded their state ids: it cannot be read offline",
                    manifest.epoch,
                    dir.display()
                ),
            });
        }
        Ok(Reader { manifest, snapshot })
    }

    /// The checkpoint's epoch.
    pub fn epoch(&self) -> u64 {
        self.manifest.epoch
    }

    /// Its stateful steps.
    pub fn state_ids(&self) -> &[StateId] {
        self.manifest.state.as_deref().unwrap_or_default()
    }

    /// The entries `filter` selects, in id order, then key group, key, window and
    /// cell. With `plan` (the pipeline's), keys show as their type's `Debug`.
    pub fn entries(&self, plan: Option<&ExecutablePlan>, filter: &Filter) -> Result<Vec<Entry>> {
        let mut ids: Vec<&StateId> = self
            .state_ids()
            .iter()
            .filter(|s| filter.id.as_ref().is_none_or(|id| *id == s.id))
            .collect();
        ids.sort_by(|a, b| a.id.cmp(&b.id));
        let mut out = Vec::new();
        for s in ids {
            let show_key = key_shower(plan, &s.transform);
            let mut typed = reduce_state(plan, &s.transform);
            let all = |_| true;
            self.snapshot
                .for_each_part_of(&s.transform, &all, &mut |scope, bytes| {
                    match (s.kind, scope) {
                        (StateKind::StatefulDoFn, Scope::KeyGroup(_)) => {
                            dofn_entries(&s.id, bytes, &show_key, &mut out)?
                        }
                        (StateKind::Grouping, Scope::KeyGroup(_)) => {
                            grouping_entries(&s.id, bytes, typed.as_mut(), &mut out)?
                        }
                        // A keyed step's clocks are not state of a key.
                        (StateKind::StatefulDoFn | StateKind::Grouping, _) => {}
                        _ => out.push(Entry {
                            id: s.id.clone(),
                            key: format!("{scope:?}"),
                            window: String::new(),
                            cell: "(raw)".into(),
                            value: serde_json::json!({ "bytes": bytes.len() }).to_string(),
                        }),
                    }
                    Ok(())
                })?;
        }
        if let Some(key) = &filter.key {
            let quoted = format!("{key:?}");
            out.retain(|e| e.key == *key || e.key == quoted);
        }
        Ok(out)
    }
}

/// Shows an encoded key.
type ShowKey<'a> = Box<dyn Fn(&[u8]) -> String + 'a>;

/// How the keys of the step stored under `transform` are shown.
fn key_shower<'a>(plan: Option<&'a ExecutablePlan>, transform: &str) -> ShowKey<'a> {
    let dofn = plan
        .and_then(|p| p.nodes.iter().find(|n| n.name == transform))
        .filter(|n| matches!(n.kind, NodeKind::Stateful { .. }))
        .and_then(|n| n.instantiate_stateful().ok());
    match dofn {
        Some(f) => Box::new(move |k| f.key_debug(k)),
        None => Box::new(guess),
    }
}

/// The typed state of the grouping stored under `transform`, to read its keys and
/// contents with, when the pipeline's plan is given.
fn reduce_state(
    plan: Option<&ExecutablePlan>,
    transform: &str,
) -> Option<Box<dyn tidewater::exec::ReduceFnState>> {
    let node = plan?.nodes.iter().find(|n| n.name == transform)?;
    match &node.kind {
        // Whole or after a lifted combine's shuffle, it holds the same accumulators.
        NodeKind::Grouping { ops } => {
            Some(ops.new_reduce_state(tidewater::exec::GroupingPhase::Full))
        }
        _ => None,
    }
}

/// The windows of a grouping's key group part: per key and window its contents (the
/// values a GroupByKey buffers, a Combine's accumulator: as JSON with `state`, the
/// pipeline's typed state, else their size), the panes it fired, and its timers.
fn grouping_entries(
    id: &str,
    bytes: &[u8],
    mut state: Option<&mut Box<dyn tidewater::exec::ReduceFnState>>,
    out: &mut Vec<Entry>,
) -> Result<()> {
    let corrupt = |e: tidewater::exec::ExecError| Error::Checkpoint {
        message: format!("the state of '{id}': {e:?}"),
    };
    for w in crate::keyed::reduce::decode_key_group(bytes).map_err(corrupt)? {
        let window = window_text(&w.window);
        let (key, contents) = match state.as_deref_mut() {
            Some(state) => {
                let k = state.intern_key(&w.key).map_err(corrupt)?;
                let contents = match &w.contents {
                    Some(c) => {
                        state
                            .restore_contents(k, w.window.clone(), c)
                            .map_err(corrupt)?;
                        let json = state.contents_json(k, w.window.clone());
                        state.clear(k, w.window.clone());
                        json.unwrap_or_else(|| serde_json::json!({ "bytes": c.len() }))
                    }
                    None => serde_json::Value::Null,
                };
                (state.key_debug(k), contents)
            }
            None => (
                guess(&w.key),
                w.contents.as_ref().map_or(
                    serde_json::Value::Null,
                    |c| serde_json::json!({ "bytes": c.len() }),
                ),
            ),
        };
        let entry = |cell: String, value: serde_json::Value| Entry {
            id: id.to_string(),
            key: key.clone(),
            window: window.clone(),
            cell,
            value: value.to_string(),
        };
        out.push(entry("contents".into(), contents));
        out.push(entry(
            "panes".into(),
            serde_json::json!({ "fired": w.panes, "closed": w.closed }),
        ));
        for (domain, at) in w.timers {
            out.push(entry(
                "timer".into(),
                serde_json::json!({ "at": at.millis(), "clock": clock_name(domain) }),
            ));
        }
    }
    Ok(())
}

fn clock_name(domain: TimeDomain) -> &'static str {
    match domain {
        TimeDomain::EventTime => "event time",
        _ => "processing time",
    }
}

/// Encoded bytes without their type: text if they are a string's encoding, else hex.
fn guess(bytes: &[u8]) -> String {
    match tidewater::coder::decode::<String>(bytes) {
        Ok(s) => format!("{s:?}"),
        Err(_) => bytes.iter().map(|b| format!("{b:02x}")).collect(),
    }
}

fn window_text(w: &BoundedWindow) -> String {
    match w {
        BoundedWindow::Global => "global".into(),
        other => {
            let (start, end) = (other.start().millis(), other.end().millis());
            format!("[{start}, {end})")
        }
    }
}

/// A state value as JSON; bytes that are not a self-describing value show as hex.
fn value_json(bytes: &[u8]) -> serde_json::Value {
    tidewater::coder::state_to_json(bytes)
        .unwrap_or_else(|| serde_json::json!({ "raw": guess(bytes) }))
}

/// The cells and timers of a stateful DoFn's key group part.
fn dofn_entries(
    id: &str,
    bytes: &[u8],
    show_key: &dyn Fn(&[u8]) -> String,
    out: &mut Vec<Entry>,
) -> Result<()> {
    let corrupt = |message: String| Error::Checkpoint {
        message: format!("the state of '{id}': {message}"),
    };
    let (cells, timers) =
        crate::keyed::stateful::decode_key_group(bytes).map_err(|e| corrupt(format!("{e:?}")))?;
    use crate::state::CellContents;
    for c in cells {
        let value = match &c.contents {
            CellContents::Value(v) => value_json(v),
            CellContents::Bag(items) => items.iter().map(|b| value_json(b)).collect(),
            CellContents::Map(entries) if entries.iter().all(|(_, v)| v.is_empty()) => entries
                .iter()
                .map(|(k, _)| serde_json::Value::String(guess(k)))
                .collect(),
            CellContents::Map(entries) => serde_json::Value::Object(
                entries
                    .iter()
                    .map(|(k, v)| (guess(k), value_json(v)))
                    .collect(),
            ),
        };
        out.push(Entry {
            id: id.to_string(),
            key: show_key(&c.key),
            window: window_text(&c.window),
            cell: c.name,
            value: value.to_string(),
        });
    }
    for t in timers {
        let clock = clock_name(t.domain);
        out.push(Entry {
            id: id.to_string(),
            key: show_key(&t.key),
            window: window_text(&t.window),
            cell: format!("timer {}", t.name),
            value: serde_json::json!({ "at": t.at.millis(), "clock": clock }).to_string(),
        });
    }
    Ok(())
}

/// The state step `id` holds for `key` in the newest complete checkpoint in `dir`:
/// `{"checkpoint": EPOCH, "id": ID, "key": KEY, "entries": [{"window", "cell",
/// "value"}...]}`, keys matched as [`Reader::entries`] shows them with `plan`'s code.
pub fn query(
    dir: &Path,
    plan: &tidewater::plan::Plan,
    id: &str,
    key: &str,
) -> Result<serde_json::Value> {
    let reader = Reader::open(dir)?;
    if !reader.state_ids().iter().any(|s| s.id == id) {
        let ids: Vec<&str> = reader.state_ids().iter().map(|s| s.id.as_str()).collect();
        return Err(Error::InvalidOption {
            option: format!("id={id}"),
            message: format!(
                "no step keeps state under that id; the ids are {}",
                ids.join(", ")
            ),
        });
    }
    let exec = crate::translate(plan)?;
    let filter = Filter {
        id: Some(id.to_string()),
        key: Some(key.to_string()),
    };
    let entries: Vec<serde_json::Value> = reader
        .entries(Some(&exec), &filter)?
        .into_iter()
        .map(|e| {
            let value: serde_json::Value = serde_json::from_str(&e.value).unwrap_or_default();
            serde_json::json!({ "window": e.window, "cell": e.cell, "value": value })
        })
        .collect();
    Ok(
        serde_json::json!({ "checkpoint": reader.epoch(), "id": id, "key": key, "entries": entries }),
    )
}

/// `entries` as text: one JSON object per line, or CSV with a header
/// (`id,key,window,cell,value`, the value as JSON).
pub fn render(entries: &[Entry], format: &str) -> Result<String> {
    match format {
        "json" => Ok(entries
            .iter()
            .map(|e| {
                let value: serde_json::Value =
                    serde_json::from_str(&e.value).unwrap_or(serde_json::Value::Null);
                let line = serde_json::json!({
                    "id": e.id, "key": e.key, "window": e.window, "cell": e.cell, "value": value,
                });
                line.to_string() + "\n"
            })
            .collect()),
        "csv" => {
            let field = |s: &str| {
                if s.contains([',', '"', '\n']) {
                    format!("\"{}\"", s.replace('"', "\"\""))
                } else {
                    s.to_string()
                }
            };
            let mut out = String::from("id,key,window,cell,value\n");
            for e in entries {
                let row = [
                    field(&e.id),
                    field(&e.key),
                    field(&e.window),
                    field(&e.cell),
                    field(&e.value),
                ];
                out.push_str(&row.join(","));
                out.push('\n');
            }
            Ok(out)
        }
        other => Err(Error::InvalidOption {
            option: format!("--inspect-format {other}"),
            message: "the formats are json and csv".into(),
        }),
    }
}
