//! Which files a text input names, and the names of a text output's shards.

use std::path::{Path, PathBuf};

/// What `path` is if it exists and is not a regular file (a device, a FIFO, a
/// socket): reading one could block or never end.
pub(super) fn not_regular(path: &Path) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    let t = std::fs::metadata(path).ok()?.file_type();
    Some(if t.is_file() || t.is_dir() {
        return None;
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else {
        "a special file"
    })
}

pub(super) fn matches(pattern: &str) -> Result<Vec<PathBuf>, String> {
    let paths = glob::glob(pattern)
        .map_err(|e| format!("input pattern '{pattern}' is not a valid glob: {e}"))?;
    let mut files = Vec::new();
    for p in paths {
        let p = p.map_err(|e| {
            format!(
                "cannot read '{}' while matching '{pattern}': {}",
                e.path().display(),
                e.error()
            )
        })?;
        if p.is_file() {
            files.push(p);
        }
    }
    if files.is_empty() {
        if let Some(kind) = not_regular(Path::new(pattern)) {
            return Err(format!(
                "input '{pattern}' is {kind}, not a regular file: TextIO reads regular files (their length is fixed when the pipeline is built)"
            ));
        }
        if Path::new(pattern).is_dir() {
            return Err(format!(
                "input '{pattern}' is a directory: give a file or a pattern such as '{}'",
                Path::new(pattern).join("*").display()
            ));
        }
        return Err(format!("no input file matches '{pattern}'"));
    }
    files.sort();
    Ok(files)
}

/// The name of shard `i` of `n`.
pub fn shard_name(prefix: &str, i: u32, n: u32, suffix: &str) -> String {
    format!("{prefix}-{i:05}-of-{n:05}{suffix}")
}

pub(super) fn parent_dir(prefix: &str) -> PathBuf {
    match Path::new(prefix).parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}
