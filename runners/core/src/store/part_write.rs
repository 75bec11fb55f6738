//! A task's snapshot file written into the store, its parts encoded as they are
//! written ([`Store::write_part_streamed`]), counted and checksummed on the way.

use super::{part_file_name, FileEntry, Store};
use crate::checkpoint::LaterPartsOf;
use crate::snapshot::{BaseRef, Scope, Snapshot};
use std::io::Write;
use tidewater::{Error, Result};

/// A writer that counts and checksums what goes through it.
struct Checksummed<'a> {
    inner: &'a mut dyn Write,
    crc: &'a mut crc32fast::Hasher,
    len: &'a mut u64,
}

impl Write for Checksummed<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.crc.update(&buf[..n]);
        *self.len += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

impl Store {
    /// Writes a task's snapshot for epochs `first..=last`; how a delta names it.
    pub fn write_part(
        &self,
        node: usize,
        worker: usize,
        first: u64,
        last: u64,
        snapshot: &Snapshot,
    ) -> Result<BaseRef> {
        self.write_part_streamed(node, worker, first, last, snapshot, None)
    }

    /// [`Store::write_part`] with parts still to encode from frozen state (`later`:
    /// they come first): each is written as soon as it is encoded, so that a large
    /// state is never whole in memory. An error encoding them is the one returned.
    pub fn write_part_streamed(
        &self,
        node: usize,
        worker: usize,
        first: u64,
        last: u64,
        snapshot: &Snapshot,
        later: Option<LaterPartsOf>,
    ) -> Result<BaseRef> {
        let name = part_file_name(node, worker, first, last);
        let (mut crc, mut len) = (crc32fast::Hasher::new(), 0u64);
        let streamed = later.is_some();
        let mut later = later;
        let mut encode_failed = None;
        // The table files its parts name, for its manifest entry.
        let mut tables = std::collections::BTreeSet::new();
        let put = self.blobs.put(&format!("parts/{name}"), &mut |w| {
            (crc, len) = (crc32fast::Hasher::new(), 0);
            let mut w = Checksummed {
                inner: w,
                crc: &mut crc,
                len: &mut len,
            };
            let mut out = snapshot.begin(&mut w)?;
            tables.clear();
            match later.take() {
                Some(later) => {
                    let mut write_failed = None;
                    let encoded = later(&mut |p| {
                        if matches!(p.scope, Scope::Files(_)) {
                            tables.extend(super::read::table_names(&p.bytes)?);
                        }
                        out.part(&p).map_err(|e| {
                            let message = e.to_string();
                            write_failed = Some(e);
                            Error::Checkpoint { message }
                        })
                    });
                    if let Some(e) = write_failed {
                        return Err(e);
                    }
                    if let Err(e) = encoded {
                        let message = e.to_string();
                        encode_failed = Some(e);
                        return Err(std::io::Error::other(message));
                    }
                }
                // Frozen state is encoded once, as it is written: a store cannot
                // call again for the same file.
                None if streamed => {
                    return Err(std::io::Error::other(
                        "a snapshot encoded as it is written cannot be written again",
                    ))
                }
                None => {}
            }
            for p in &snapshot.parts {
                if matches!(p.scope, Scope::Files(_)) {
                    let names = super::read::table_names(&p.bytes)
                        .map_err(|e| std::io::Error::other(e.to_string()))?;
                    tables.extend(names);
                }
                out.part(p)?;
            }
            out.finish()
        });
        if let Some(e) = encode_failed {
            return Err(e);
        }
        put?;
        let written = BaseRef {
            name,
            len,
            crc: crc.finalize(),
        };
        // Its manifest entry is known: a manifest written here needs no read of it.
        self.checked
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(
                written.name.clone(),
                FileEntry {
                    name: written.name.clone(),
                    len: written.len,
                    crc: written.crc,
                    base: snapshot.base.clone(),
                    tables: tables.into_iter().collect(),
                },
            );
        Ok(written)
    }
}
