//! Beam's `ToString` and `Regex`: text from elements, and regular expressions over
//! lines.

use serde::{Deserialize, Serialize};
use std::fmt::Display;
use tidewater::{DoFn, Element, PCollection, PTransform, ParDo, ProcessContext, UserError};

/// Elements as text, by their `Display` (Beam's `ToString`).
///
/// ```
/// use tidewater_transforms::ToString;
/// tidewater_runner_direct::register();
/// let p = tidewater::Pipeline::new(Default::default());
/// p.create("Kvs", vec![("a".to_string(), 1u8)]).apply("KvText", ToString::kvs(": ")).capture("kvs");
/// p.create("Xs", vec![2.5f64]).apply("XText", ToString::elements()).capture("xs");
/// p.create("Rows", vec![vec![1u8, 2, 3]]).apply("RowText", ToString::iterables(",")).capture("rows");
/// let r = p.run().unwrap();
/// assert_eq!(r.captured_values::<String>("kvs").unwrap(), vec!["a: 1"]);
/// assert_eq!(r.captured_values::<String>("xs").unwrap(), vec!["2.5"]);
/// assert_eq!(r.captured_values::<String>("rows").unwrap(), vec!["1,2,3"]);
/// ```
pub struct ToString;

impl ToString {
    /// Each element's `Display`.
    pub fn elements() -> ToStringElements {
        ToStringElements
    }
    /// Each `(K, V)` as key, `delimiter`, value (Beam's default delimiter is `,`).
    pub fn kvs(delimiter: &str) -> ToStringKvs {
        ToStringKvs(delimiter.to_string())
    }
    /// Each `Vec` as its items joined by `delimiter`.
    pub fn iterables(delimiter: &str) -> ToStringIterables {
        ToStringIterables(delimiter.to_string())
    }
}

/// See [`ToString::elements`].
pub struct ToStringElements;
/// See [`ToString::kvs`].
pub struct ToStringKvs(String);
/// See [`ToString::iterables`].
pub struct ToStringIterables(String);

fn display<T: Display>(x: T) -> String {
    x.to_string()
}

fn kv_text<K: Display, V: Display>(delimiter: &String, (k, v): (K, V)) -> String {
    format!("{k}{delimiter}{v}")
}

// `map_with` hands its parameters over by reference: here a `&String`.
#[allow(clippy::ptr_arg)]
fn joined<T: Display>(delimiter: &String, xs: Vec<T>) -> String {
    let items: Vec<String> = xs.iter().map(|x| x.to_string()).collect();
    items.join(delimiter)
}

impl<T: Element + Display> PTransform<PCollection<T>> for ToStringElements {
    type Output = PCollection<String>;
    fn expand(self, input: PCollection<T>) -> PCollection<String> {
        input.map("ToString", display::<T>)
    }
}

impl<K: Element + Display, V: Element + Display> PTransform<PCollection<(K, V)>> for ToStringKvs {
    type Output = PCollection<String>;
    fn expand(self, input: PCollection<(K, V)>) -> PCollection<String> {
        input.map_with("ToString", self.0, kv_text::<K, V>)
    }
}

impl<T: Element + Display> PTransform<PCollection<Vec<T>>> for ToStringIterables {
    type Output = PCollection<String>;
    fn expand(self, input: PCollection<Vec<T>>) -> PCollection<String> {
        input.map_with("ToString", self.0, joined::<T>)
    }
}

/// Regular expressions over lines (Beam's `Regex`), in the syntax of the `regex` crate
/// (no look-around or back-references; matching takes linear time). A pattern that does
/// not compile is an error when the pipeline is built, naming the pattern.
///
/// ```
/// use tidewater_transforms::Regex;
/// tidewater_runner_direct::register();
/// let p = tidewater::Pipeline::new(Default::default());
/// let lines = p.create("Lines", vec!["id=7 x".to_string(), "none".to_string(), "id=12 id=3".to_string()]);
/// lines.apply("Ids", Regex::find(r"id=(\d+)", 1)).capture("first");
/// lines.apply("AllIds", Regex::find_all(r"id=(\d+)", 1)).capture("all");
/// lines.apply("Whole", Regex::matches(r"id=\d+ x")).capture("whole");
/// lines.apply("Hide", Regex::replace_all(r"\d+", "#")).capture("hidden");
/// lines.apply("Words", Regex::split(r"\s+")).capture("words");
/// let r = p.run().unwrap();
/// let got = |name: &str| { let mut v = r.captured_values::<String>(name).unwrap(); v.sort(); v };
/// assert_eq!(got("first"), vec!["12", "7"]);
/// assert_eq!(got("all"), vec!["12", "3", "7"]);
/// assert_eq!(got("whole"), vec!["id=7 x"]);
/// assert_eq!(got("hidden"), vec!["id=# id=#", "id=# x", "none"]);
/// assert_eq!(got("words"), vec!["id=12", "id=3", "id=7", "none", "x"]);
/// ```
pub struct Regex;

/// What a [`Regex`] transform does with each line.
#[derive(Clone, Debug, Serialize, Deserialize)]
enum Op {
    /// Keeps lines the pattern matches as a whole.
    Matches,
    /// The given group of the first match (0: the whole match).
    Find(usize),
    /// The given group of every match.
    FindAll(usize),
    /// Every match replaced (`$1` names a group).
    ReplaceAll(String),
    /// The pieces between matches, empty ones dropped.
    Split,
}

impl Regex {
    /// The lines the pattern matches as a whole (Beam's `Regex.matches`).
    pub fn matches(pattern: &str) -> RegexTransform {
        RegexTransform::new(pattern, Op::Matches)
    }
    /// Group `group` of the first match in each line that has one (0: the whole
    /// match); lines without a match, or whose match leaves the group empty, give
    /// nothing (Beam's `Regex.find`).
    pub fn find(pattern: &str, group: usize) -> RegexTransform {
        RegexTransform::new(pattern, Op::Find(group))
    }
    /// Group `group` of every match in each line (Beam's `Regex.findAll`, one output
    /// per match).
    pub fn find_all(pattern: &str, group: usize) -> RegexTransform {
        RegexTransform::new(pattern, Op::FindAll(group))
    }
    /// Each line with every match replaced by `replacement`, in which `$1` or `${name}`
    /// stands for a group (Beam's `Regex.replaceAll`).
    pub fn replace_all(pattern: &str, replacement: &str) -> RegexTransform {
        RegexTransform::new(pattern, Op::ReplaceAll(replacement.to_string()))
    }
    /// The non-empty pieces of each line between matches (Beam's `Regex.split`).
    pub fn split(pattern: &str) -> RegexTransform {
        RegexTransform::new(pattern, Op::Split)
    }
}

/// See [`Regex`].
pub struct RegexTransform {
    pattern: String,
    op: Op,
}

impl RegexTransform {
    fn new(pattern: &str, op: Op) -> Self {
        RegexTransform {
            pattern: pattern.to_string(),
            op,
        }
    }
}

#[derive(Serialize, Deserialize)]
struct RegexFn {
    pattern: String,
    op: Op,
    #[serde(skip)]
    compiled: Option<regex::Regex>,
}

impl DoFn for RegexFn {
    type In = String;
    type Out = String;
    fn setup(&mut self) -> Result<(), UserError> {
        self.compiled = Some(
            regex::Regex::new(&self.pattern)
                .map_err(|e| UserError::from(format!("pattern {:?}: {e}", self.pattern)))?,
        );
        Ok(())
    }
    fn process(
        &mut self,
        line: String,
        ctx: &mut ProcessContext<'_, String>,
    ) -> Result<(), UserError> {
        let re = self
            .compiled
            .as_ref()
            .ok_or_else(|| UserError::from("the pattern was not compiled in setup"))?;
        match &self.op {
            Op::Matches => {
                if re
                    .find(&line)
                    .is_some_and(|m| m.start() == 0 && m.end() == line.len())
                {
                    ctx.output(line);
                }
            }
            Op::Find(g) => {
                if let Some(m) = re.captures(&line).and_then(|c| c.get(*g)) {
                    ctx.output(m.as_str().to_string());
                }
            }
            Op::FindAll(g) => {
                for c in re.captures_iter(&line) {
                    if let Some(m) = c.get(*g) {
                        ctx.output(m.as_str().to_string());
                    }
                }
            }
            Op::ReplaceAll(with) => ctx.output(re.replace_all(&line, with.as_str()).into_owned()),
            Op::Split => {
                for piece in re.split(&line).filter(|p| !p.is_empty()) {
                    ctx.output(piece.to_string());
                }
            }
        }
        Ok(())
    }
}

impl PTransform<PCollection<String>> for RegexTransform {
    type Output = PCollection<String>;
    fn expand(self, input: PCollection<String>) -> PCollection<String> {
        let p = input.pipeline().clone();
        match regex::Regex::new(&self.pattern) {
            Err(e) => p.record_error(format!(
                "Regex pattern {:?} does not compile: {e}",
                self.pattern
            )),
            Ok(re) => {
                let groups = re.captures_len();
                if let Op::Find(g) | Op::FindAll(g) = self.op
                    && g >= groups
                {
                    p.record_error(format!(
                        "Regex pattern {:?} has {} groups: there is no group {g}",
                        self.pattern,
                        groups - 1
                    ));
                }
            }
        }
        input.apply(
            "Regex",
            ParDo::of(RegexFn {
                pattern: self.pattern,
                op: self.op,
                compiled: None,
            }),
        )
    }
}
