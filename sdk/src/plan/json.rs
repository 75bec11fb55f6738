//! A JSON value of the plan kept as its text: payloads and function fields are read
//! straight from that text by the deserializer of the type that owns them (through
//! erased-serde for user functions), never through a `serde_json::Value` tree.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// A JSON value kept as compact text (whitespace outside strings removed, so that
/// equal plans compare and hash equal however they were formatted).
///
/// ```
/// use tidewater::plan::Json;
/// let j: Json = serde_json::from_str("{ \"a\" : [1, 2] }").unwrap();
/// assert_eq!(j.get(), r#"{"a":[1,2]}"#);
/// assert_eq!(j.parse::<std::collections::BTreeMap<String, Vec<u8>>>().unwrap()["a"], vec![1, 2]);
/// assert!(Json::null().is_null());
/// ```
#[derive(Clone)]
pub struct Json(Box<RawValue>);

impl Json {
    /// `null`.
    pub fn null() -> Json {
        Json(RawValue::from_string("null".into()).expect("null is JSON"))
    }

    /// Whether it is `null`.
    pub fn is_null(&self) -> bool {
        self.0.get() == "null"
    }

    /// The compact text.
    pub fn get(&self) -> &str {
        self.0.get()
    }

    /// `v` as JSON, object keys sorted (as a `serde_json::Value` writes them, so that
    /// the same pipeline gives the same plan bytes).
    pub fn of<T: Serialize + ?Sized>(v: &T) -> serde_json::Result<Json> {
        Ok(serde_json::to_value(v)?.into())
    }

    /// Deserializes a `T` from the text.
    pub fn parse<'a, T: Deserialize<'a>>(&'a self) -> serde_json::Result<T> {
        serde_json::from_str(self.0.get())
    }

    /// Calls `f` with an erased deserializer reading the text, for a function whose
    /// type only the registry knows.
    pub fn with_deserializer<R>(
        &self,
        f: impl FnOnce(&mut dyn erased_serde::Deserializer<'_>) -> R,
    ) -> R {
        let mut de = serde_json::Deserializer::from_str(self.0.get());
        let mut erased = <dyn erased_serde::Deserializer>::erase(&mut de);
        f(&mut erased)
    }

    /// The value as a tree, for tools and tests that edit plans.
    pub fn to_value(&self) -> serde_json::Value {
        self.parse().expect("a Json holds valid JSON")
    }
}

impl Default for Json {
    fn default() -> Json {
        Json::null()
    }
}

impl From<serde_json::Value> for Json {
    fn from(v: serde_json::Value) -> Json {
        Json(serde_json::value::to_raw_value(&v).expect("a Value is JSON"))
    }
}

impl PartialEq for Json {
    fn eq(&self, other: &Json) -> bool {
        self.get() == other.get()
    }
}

impl Eq for Json {}

impl std::hash::Hash for Json {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.get().hash(state)
    }
}

impl std::fmt::Debug for Json {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.get())
    }
}

impl Serialize for Json {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl<'de> Deserialize<'de> for Json {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Json, D::Error> {
        let raw = Box::<RawValue>::deserialize(d)?;
        Ok(Json(minify(raw)))
    }
}

/// `raw` without whitespace outside strings.
fn minify(raw: Box<RawValue>) -> Box<RawValue> {
    let text = raw.get();
    if !text.bytes().any(|b| b.is_ascii_whitespace()) {
        return raw;
    }
    let mut out = String::with_capacity(text.len());
    let (mut in_string, mut escaped) = (false, false);
    for c in text.chars() {
        if in_string {
            out.push(c);
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
        } else if c == '"' {
            in_string = true;
            out.push(c);
        } else if !c.is_ascii_whitespace() {
            out.push(c);
        }
    }
    RawValue::from_string(out).expect("removing whitespace keeps JSON valid")
}

/// A decoder's message without serde_json's position (` at line 1 column 19`), which
/// points into a payload's compact text rather than the plan file.
///
/// ```
/// let e = serde_json::from_str::<u8>("300").unwrap_err().to_string();
/// assert_eq!(tidewater::plan::without_position(e), "invalid value: integer `300`, expected u8");
/// ```
pub fn without_position(message: String) -> String {
    if let Some(at) = message.rfind(" at line ") {
        let tail = &message[at + " at line ".len()..];
        let mut parts = tail.splitn(3, ' ');
        let line = parts.next().unwrap_or("");
        let word = parts.next().unwrap_or("");
        let column = parts.next().unwrap_or("");
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        if digits(line) && word == "column" && digits(column) {
            return message[..at].to_string();
        }
    }
    message
}

/// A pretty printer that indents the raw fragments ([`Json`]) at their depth, so that
/// a plan with kept payloads prints as if they were values.
pub(super) struct Pretty {
    inner: serde_json::ser::PrettyFormatter<'static>,
    depth: usize,
}

impl Pretty {
    pub(super) fn new() -> Pretty {
        Pretty {
            inner: serde_json::ser::PrettyFormatter::new(),
            depth: 0,
        }
    }
}

impl serde_json::ser::Formatter for Pretty {
    fn begin_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.depth += 1;
        self.inner.begin_array(w)
    }
    fn end_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.depth -= 1;
        self.inner.end_array(w)
    }
    fn begin_array_value<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        self.inner.begin_array_value(w, first)
    }
    fn end_array_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.inner.end_array_value(w)
    }
    fn begin_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.depth += 1;
        self.inner.begin_object(w)
    }
    fn end_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.depth -= 1;
        self.inner.end_object(w)
    }
    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        self.inner.begin_object_key(w, first)
    }
    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.inner.begin_object_value(w)
    }
    fn end_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.inner.end_object_value(w)
    }
    fn write_raw_fragment<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        fragment: &str,
    ) -> std::io::Result<()> {
        w.write_all(indent_compact(fragment, self.depth).as_bytes())
    }
}

/// Compact JSON (no whitespace outside strings, as [`Json`] holds it) laid out as
/// serde_json's pretty printer lays out a value at `depth`: two spaces a level, `{}` and
/// `[]` when empty, `": "` after keys. Key order is kept.
fn indent_compact(compact: &str, depth: usize) -> String {
    let mut out = String::with_capacity(compact.len() * 2);
    let mut level = depth;
    let newline = |out: &mut String, level: usize| {
        out.push('\n');
        for _ in 0..level {
            out.push_str("  ");
        }
    };
    let (mut in_string, mut escaped) = (false, false);
    let mut chars = compact.chars().peekable();
    while let Some(c) = chars.next() {
        if in_string {
            out.push(c);
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => {
                in_string = true;
                out.push(c);
            }
            '{' | '[' => {
                out.push(c);
                let close = if c == '{' { '}' } else { ']' };
                if chars.peek() == Some(&close) {
                    out.push(chars.next().expect("peeked"));
                } else {
                    level += 1;
                    newline(&mut out, level);
                }
            }
            '}' | ']' => {
                level -= 1;
                newline(&mut out, level);
                out.push(c);
            }
            ',' => {
                out.push(c);
                newline(&mut out, level);
            }
            ':' => out.push_str(": "),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indenting_compact_text_is_serde_json_pretty() {
        let v = serde_json::json!({
            "a": [1, {"b": "x,y:{}[]\\\"", "c": []}, {}],
            "d": {"e": null, "f": [true, -1.5e3]},
            "g": "",
        });
        let compact = serde_json::to_string(&v).unwrap();
        assert_eq!(
            indent_compact(&compact, 0),
            serde_json::to_string_pretty(&v).unwrap()
        );
        let nested = serde_json::json!({ "outer": { "inner": v.clone() } });
        let pretty = serde_json::to_string_pretty(&nested).unwrap();
        let inner = indent_compact(&compact, 2);
        assert!(
            pretty.contains(&format!("\"inner\": {inner}")),
            "{pretty}\n{inner}"
        );
    }
}
