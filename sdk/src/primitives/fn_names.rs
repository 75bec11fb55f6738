//! The plan names of light functions (closures and `fn` items given to `map`,
//! `filter`, `with_timestamps`, ...): their DoFn's type name, and for a closure the place
//! it was given; and why a function has none.

use std::panic::Location;

/// Whether the type name `name` is a closure's.
pub(crate) fn is_closure(name: &str) -> bool {
    last_segment(name).starts_with("{{closure}}")
}

/// The plan name of the light function `F`, run by the DoFn `D`, given to `method` at
/// `site`: `D`'s type name, and for a closure the place it was given. A closure that
/// captures, or a function pointer, is refused with a message saying what to write.
pub(crate) fn light_fn_name<D: 'static, F: 'static>(
    method: &str,
    with_form: Option<&str>,
    site: &'static Location<'static>,
) -> Result<String, String> {
    let f = std::any::type_name::<F>();
    let closure = is_closure(f);
    if std::mem::size_of::<F>() != 0 {
        let instead = match with_form {
            Some(w) => {
                let args = if w.starts_with("Partition") {
                    "n, params, |params, x, n| ..."
                } else {
                    "name, params, |params, x| ..."
                };
                format!(
                    "pass them as parameters instead, `{w}({args})`: params serialize with \
                     serde and travel in the plan"
                )
            }
            None => "implement DoFn on a struct with serde fields and use ParDo::of".into(),
        };
        if closure {
            return Err(format!(
                "{method}() was given a closure that captures values ({f}, at {site}). What a closure \
                 captures cannot travel in the plan: another process, a saved plan and the plan's hash \
                 would not see it. Capture nothing (constants and statics need no capture), or {instead}"
            ));
        }
        return Err(format!(
            "{method}() was given {f}, which is not a function item or a closure (a function pointer or a \
             value with state cannot travel in a plan). Pass a `fn` item by its name or a closure that \
             captures nothing, or {instead}"
        ));
    }
    let name = std::any::type_name::<D>();
    Ok(if closure {
        format!("{name}@{}:{}:{}", site.file(), site.line(), site.column())
    } else {
        name.to_string()
    })
}

/// The last path segment of a type name, generics aside: `a::b<c::d>::e` gives `e`.
fn last_segment(type_name: &str) -> &str {
    let (mut depth, mut start) = (0usize, 0usize);
    let bytes = type_name.as_bytes();
    for (i, c) in bytes.iter().enumerate() {
        match c {
            b'<' => depth += 1,
            b'>' => depth = depth.saturating_sub(1),
            b':' if depth == 0 && i + 1 < bytes.len() && bytes[i + 1] == b':' => start = i + 2,
            _ => {}
        }
    }
    &type_name[start.min(type_name.len())..]
}

/// Why two functions cannot share the plan name `name`.
pub(crate) fn same_place_message(name: &str) -> String {
    if !name.contains("{{closure}}") {
        return format!(
            "two different Rust types are both named '{name}' (for example two functions with the same \
             path in sibling blocks), so the plan cannot tell them apart: give one of them a distinct name"
        );
    }
    format!(
        "two different functions would both be named '{name}' in the plan: two closures of one \
         function reach this step from the same place. A helper that passes on its caller's closure \
         should be marked #[track_caller], so that each closure is named by its caller's line; or give \
         the functions names (`fn` items)"
    )
}
