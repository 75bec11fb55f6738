//! Files that hold a credential (the cluster's secret, the control token): read only if
//! they are regular files their owner alone can read, as ssh does with a private key; and
//! files only their owner may read, written without following a symlink.

use std::path::Path;
use tidewater::{Error, Result};

/// The text of `path`, given as `option` (for messages), refused unless it is a regular
/// file that only its owner can read or write (mode 600 or 400).
pub fn read_owner_only(path: &Path, option: &str) -> Result<String> {
    use std::os::unix::fs::PermissionsExt;
    let invalid = |message: String| Error::InvalidOption {
        option: option.to_string(),
        message,
    };
    let meta = std::fs::metadata(path).map_err(|err| invalid(format!("cannot read it: {err}")))?;
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 || !meta.is_file() {
        return Err(invalid(format!(
            "it must be a regular file only its owner can read (mode {mode:o}): chmod 600 {}",
            path.display()
        )));
    }
    std::fs::read_to_string(path).map_err(|err| invalid(format!("cannot read it: {err}")))
}

/// Writes a new file `path` readable and writable by its owner only (0600), never
/// through a symlink or over an existing file.
pub fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(bytes)?;
    f.sync_all()
}
