//! The layering is checked: sdk <- runners/core <- runners/timely <- runners/native,
//! runners/microbatch; runners/core <- runners/direct; runners/core <- runners/status
//! (a running job's status) <- runners/timely, runners/direct; transforms and connectors depend
//! on the sdk only; examples and the conformance suite use the model and link runners
//! only to register them; the `tidewater` CLI (tools/cli) depends on runners/core only (its savepoint reader). A crate that gains a forbidden dependency (or dev-dependency),
//! or code that reaches into a runner for more than its registration, fails this test.

use std::path::{Path, PathBuf};

/// The `tidewater*` crates named in a manifest's `[section]` (`dependencies` or
/// `dev-dependencies`).
fn tidewater_dependencies(manifest: &Path, section: &str) -> Vec<String> {
    let text =
        std::fs::read_to_string(manifest).unwrap_or_else(|e| panic!("{}: {e}", manifest.display()));
    let header = format!("[{section}]");
    let mut inside = false;
    let mut deps = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            inside = line == header;
            continue;
        }
        if inside
            && let Some(name) = line.split(['=', '.']).next().map(str::trim)
            && name.starts_with("tidewater")
        {
            deps.push(name.to_string());
        }
    }
    deps
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

const DIRECT: &str = "tidewater-runner-direct";
const MICROBATCH: &str = "tidewater-runner-microbatch";
const NATIVE: &str = "tidewater-runner-native";
const CORE: &str = "tidewater-runners-core";
const TIMELY: &str = "tidewater-runners-timely";
const STATUS: &str = "tidewater-runners-status";
const ALL: &str = "tidewater-runners";

/// Per crate: the `tidewater*` crates its `[dependencies]` may name, then those its
/// `[dev-dependencies]` may add (its tests run pipelines, so they may link runners and
/// the transforms above it, never the reverse in `[dependencies]`).
const RULES: &[(&str, &[&str], &[&str])] = &[
    ("sdk", &[], &[DIRECT]),
    // Every runner for a job's binary: registration, flags, signals.
    (
        "runners/all",
        &["tidewater", DIRECT, MICROBATCH, NATIVE],
        &[],
    ),
    ("runners/core", &["tidewater"], &[]),
    ("runners/direct", &["tidewater", CORE, STATUS], &[NATIVE]),
    ("runners/status", &["tidewater", CORE], &[]),
    ("runners/timely", &["tidewater", CORE, STATUS], &[]),
    (
        "runners/microbatch",
        &["tidewater", CORE, TIMELY],
        &[NATIVE, "tidewater-transforms"],
    ),
    (
        "runners/native",
        &["tidewater", CORE, TIMELY],
        &["tidewater-transforms"],
    ),
    ("transforms", &["tidewater"], &[DIRECT]),
    // Connectors sit beside the transforms: the model only.
    (
        "connectors/postgres",
        &["tidewater"],
        &["tidewater-transforms", DIRECT, NATIVE, MICROBATCH],
    ),
    (
        "connectors/kafka",
        &["tidewater"],
        &[
            "tidewater-transforms",
            DIRECT,
            NATIVE,
            MICROBATCH,
            CORE,
            TIMELY,
        ],
    ),
    (
        "examples",
        &[
            "tidewater",
            "tidewater-transforms",
            "tidewater-postgres",
            "tidewater-kafka",
            ALL,
            DIRECT,
            MICROBATCH,
            NATIVE,
        ],
        // The engine's handshake: tests/tls.rs plays a crafted peer of a cluster; the
        // CLI: tests/control.rs drives a job with it.
        &[CORE, TIMELY, "tidewater-cli"],
    ),
    // The `tidewater` command speaks a job's JSON API over HTTP; it reads savepoints
    // offline with core's reader (`tidewater savepoint inspect`), and links no runner.
    ("tools/cli", &[CORE], &[]),
    (
        "examples/nexmark",
        &[
            "tidewater",
            "tidewater-transforms",
            // The example binaries' output helper: examples sit in one layer.
            "tidewater-examples",
            ALL,
            NATIVE,
        ],
        &[],
    ),
    (
        "conformance-tests",
        &[
            "tidewater",
            "tidewater-transforms",
            "tidewater-kafka",
            "tidewater-nexmark",
            DIRECT,
            MICROBATCH,
            NATIVE,
        ],
        &[],
    ),
];

#[test]
fn crates_depend_only_downward() {
    let mut violations = Vec::new();
    for (dir, allowed, dev_allowed) in RULES {
        let manifest = root().join(dir).join("Cargo.toml");
        assert!(
            manifest.exists(),
            "{} is gone: update RULES",
            manifest.display()
        );
        for dep in tidewater_dependencies(&manifest, "dependencies") {
            if !allowed.contains(&dep.as_str()) {
                violations.push(format!("{dir} depends on {dep}; allowed: {allowed:?}"));
            }
        }
        for dep in tidewater_dependencies(&manifest, "dev-dependencies") {
            if !allowed.contains(&dep.as_str()) && !dev_allowed.contains(&dep.as_str()) {
                violations.push(format!(
                    "{dir}'s tests depend on {dep}; allowed: {allowed:?} and {dev_allowed:?}"
                ));
            }
        }
    }
    assert!(
        violations.is_empty(),
        "forbidden dependencies:\n{}",
        violations.join("\n")
    );
}

#[test]
fn every_crate_of_the_workspace_has_a_rule() {
    let text = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    let members: Vec<&str> = text
        .split("members")
        .nth(1)
        .and_then(|s| s.split(']').next())
        .unwrap_or("")
        .split('"')
        .skip(1)
        .step_by(2)
        .collect();
    assert!(!members.is_empty(), "no workspace members found");
    for m in members {
        assert!(
            RULES.iter().any(|(dir, _, _)| *dir == m),
            "workspace member {m} has no layering rule"
        );
    }
}

/// Every `.rs` file under `dir`.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Examples, Nexmark and the conformance suite link the runners to register them (and
/// read the names a launched cluster process and the engine's metrics go by); anything
/// more would make them depend on a runner's insides.
#[test]
fn programs_use_runners_only_to_register_them() {
    let allowed = [
        "tidewater_runner_direct::register",
        "tidewater_runner_native::register",
        "tidewater_runner_microbatch::register",
        "tidewater_runner_native::CLUSTER_CHILD_ENV",
        "tidewater_runner_native::ENGINE_STEP",
        // The direct runner's type, to run a plan on it by name in the suite.
        "tidewater_runner_direct::DirectRunner",
    ];
    let mut violations = Vec::new();
    for dir in [
        "examples/src",
        "examples/nexmark/src",
        "conformance-tests/src",
    ] {
        let mut files = Vec::new();
        sources(&root().join(dir), &mut files);
        for f in files {
            let text = std::fs::read_to_string(&f).unwrap();
            for (i, line) in text.lines().enumerate() {
                for runner in [
                    "tidewater_runner_direct::",
                    "tidewater_runner_native::",
                    "tidewater_runner_microbatch::",
                    "tidewater_runners_core::",
                    "tidewater_runners_timely::",
                ] {
                    let mut rest = line;
                    while let Some(at) = rest.find(runner) {
                        let path: String = rest[at..]
                            .chars()
                            .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                            .collect();
                        if !allowed.contains(&path.as_str()) {
                            violations.push(format!("{}:{}: {path}", f.display(), i + 1));
                        }
                        rest = &rest[at + runner.len()..];
                    }
                }
            }
        }
    }
    assert!(
        violations.is_empty(),
        "programs reaching into runners beyond registration:\n{}",
        violations.join("\n")
    );
}

#[test]
fn the_parser_sees_dependencies() {
    assert_eq!(
        tidewater_dependencies(&root().join("runners/direct/Cargo.toml"), "dependencies"),
        vec!["tidewater", CORE, STATUS]
    );
    assert_eq!(
        tidewater_dependencies(
            &root().join("runners/direct/Cargo.toml"),
            "dev-dependencies"
        ),
        vec![NATIVE]
    );
}

/// The module a file is (`a::b` for `src/a/b.rs` or `src/a/b/mod.rs`; `` for the root).
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap();
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

/// The modules a file names through `crate::` or `super::` paths (in code, not
/// comments): each path resolved to the deepest module it goes through. The crate root
/// (a re-export hub) counts as no module.
fn imported_modules(
    text: &str,
    me: &[String],
    modules: &std::collections::BTreeSet<Vec<String>>,
) -> std::collections::BTreeSet<Vec<String>> {
    let mut out = std::collections::BTreeSet::new();
    let mut resolve = |base: Vec<String>, rest: &str| {
        let mut m = base;
        for seg in rest.split("::") {
            let seg: String = seg
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            let mut next = m.clone();
            next.push(seg);
            if !modules.contains(&next) {
                break;
            }
            m = next;
        }
        if !m.is_empty() && m != me {
            out.insert(m);
        }
    };
    for line in text.lines() {
        let code = line.split("//").next().unwrap_or("");
        for (at, _) in code.match_indices("crate::") {
            if at > 0 && code[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == '$')
            {
                continue;
            }
            resolve(Vec::new(), &code[at + "crate::".len()..]);
        }
        for (at, _) in code.match_indices("super::") {
            if at > 0 && code[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_') {
                continue;
            }
            // `super` of module a::b (`a/b.rs` or `a/b/mod.rs`) is a.
            let mut base = me.to_vec();
            base.pop();
            resolve(base, &code[at + "super::".len()..]);
        }
    }
    out
}

/// No module of a crate imports, through any chain, a module that imports it back: each
/// concept can be read on its own, from the bottom up. (A parent's `mod` declaration of
/// a child is not an import; a `use` of it is.) Test modules are left out.
#[test]
fn no_module_imports_a_module_that_imports_it_back() {
    use std::collections::{BTreeMap, BTreeSet};
    let mut cycles = Vec::new();
    for (dir, _, _) in RULES {
        let src = root().join(dir).join("src");
        let mut files = Vec::new();
        sources(&src, &mut files);
        files.retain(|f| !f.components().any(|c| c.as_os_str() == "bin"));
        let modules: BTreeSet<Vec<String>> = files.iter().map(|f| module_of(&src, f)).collect();
        let mut edges: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
        for f in &files {
            let text = std::fs::read_to_string(f).unwrap();
            // Unit tests may reach anywhere.
            let text = text.split("#[cfg(test)]").next().unwrap_or("");
            let me = module_of(&src, f);
            edges.insert(me.clone(), imported_modules(text, &me, &modules));
        }
        // A cycle: a module reachable from one it imports.
        for (m, targets) in &edges {
            for t in targets {
                let mut seen = BTreeSet::new();
                let mut stack = vec![t.clone()];
                while let Some(n) = stack.pop() {
                    if &n == m {
                        cycles.push(format!(
                            "{dir}: {} -> {} -> ... -> {}",
                            m.join("::"),
                            t.join("::"),
                            m.join("::")
                        ));
                        break;
                    }
                    if seen.insert(n.clone()) {
                        stack.extend(edges.get(&n).into_iter().flatten().cloned());
                    }
                }
            }
        }
    }
    cycles.sort();
    cycles.dedup();
    assert!(cycles.is_empty(), "import cycles:\n{}", cycles.join("\n"));
}
