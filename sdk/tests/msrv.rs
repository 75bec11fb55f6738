//! The workspace's declared `rust-version` is at least what every locked dependency
//! declares it needs: the declared minimum is the real one.

#[test]
fn the_declared_rust_version_covers_every_dependency() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap();
    // The packages this machine builds: other platforms' (Windows-only crates) may be
    // missing from an offline registry cache that a build on this machine filled.
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let info = std::process::Command::new(rustc)
        .arg("-vV")
        .output()
        .expect("rustc -vV runs");
    let info = String::from_utf8_lossy(&info.stdout);
    let host = info
        .lines()
        .find_map(|l| l.strip_prefix("host: "))
        .expect("rustc names its host")
        .trim()
        .to_string();
    let out = std::process::Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--locked", "--offline"])
        .args(["--filter-platform", &host])
        .current_dir(root)
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let version = |s: &str| -> Vec<u32> { s.split('.').map(|p| p.parse().unwrap_or(0)).collect() };
    let packages = meta["packages"].as_array().expect("packages");
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).expect("workspace manifest");
    let ours = manifest
        .lines()
        .find_map(|l| l.trim().strip_prefix("rust-version = \""))
        .and_then(|v| v.strip_suffix('"'))
        .expect("the workspace declares a rust-version");
    let needs: Vec<(String, String)> = packages
        .iter()
        .filter_map(|p| {
            let v = p["rust_version"].as_str()?;
            (version(v) > version(ours))
                .then(|| (p["name"].as_str().unwrap_or("?").to_string(), v.to_string()))
        })
        .collect();
    assert!(
        needs.is_empty(),
        "rust-version {ours} is below what these dependencies need: {needs:?}"
    );
}
