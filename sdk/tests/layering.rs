//! The layering is checked: sdk <- runners/core <- runners/*; transforms depend on the
//! sdk only; examples and the conformance suite use the model and link runners only to
//! register them. A crate that gains a forbidden dependency fails this test.

use std::path::Path;

/// The `tidewater*` crates named in the `[dependencies]` section of a manifest.
fn tidewater_dependencies(manifest: &Path) -> Vec<String> {
    let text =
        std::fs::read_to_string(manifest).unwrap_or_else(|e| panic!("{}: {e}", manifest.display()));
    let mut in_deps = false;
    let mut deps = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            in_deps = line == "[dependencies]";
            continue;
        }
        if in_deps {
            if let Some(name) = line.split(['=', '.']).next().map(str::trim) {
                if name.starts_with("tidewater") {
                    deps.push(name.to_string());
                }
            }
        }
    }
    deps
}

#[test]
fn crates_depend_only_downward() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let runners = [
        "tidewater-runner-direct",
        "tidewater-runner-microbatch",
        "tidewater-runner-native",
    ];
    let rules: &[(&str, &[&str])] = &[
        ("sdk", &[]),
        ("runners/core", &["tidewater"]),
        ("runners/direct", &["tidewater", "tidewater-runners-core"]),
        (
            "runners/microbatch",
            &[
                "tidewater",
                "tidewater-runners-core",
                "tidewater-runners-timely",
            ],
        ),
        (
            "runners/native",
            &[
                "tidewater",
                "tidewater-runners-core",
                "tidewater-runners-timely",
            ],
        ),
        ("transforms", &["tidewater"]),
        // Connectors sit beside the transforms: the model only.
        ("connectors/postgres", &["tidewater"]),
        ("connectors/kafka", &["tidewater"]),
        (
            "examples",
            &[
                "tidewater",
                "tidewater-transforms",
                "tidewater-postgres",
                "tidewater-kafka",
                runners[0],
                runners[1],
                runners[2],
            ],
        ),
        (
            "examples/nexmark",
            &[
                "tidewater",
                "tidewater-transforms",
                // The example binaries' output helper: examples sit in one layer.
                "tidewater-examples",
                runners[0],
                runners[1],
                runners[2],
            ],
        ),
        (
            "conformance-tests",
            &[
                "tidewater",
                "tidewater-transforms",
                "tidewater-kafka",
                "tidewater-nexmark",
                runners[0],
                runners[1],
                runners[2],
            ],
        ),
    ];
    let mut violations = Vec::new();
    for (dir, allowed) in rules {
        let manifest = root.join(dir).join("Cargo.toml");
        if !manifest.exists() {
            continue;
        }
        for dep in tidewater_dependencies(&manifest) {
            if !allowed.contains(&dep.as_str()) {
                violations.push(format!("{dir} depends on {dep}; allowed: {allowed:?}"));
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
fn the_parser_sees_dependencies() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    assert_eq!(
        tidewater_dependencies(&root.join("runners/direct/Cargo.toml")),
        vec!["tidewater", "tidewater-runners-core"]
    );
}
