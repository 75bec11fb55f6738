//! A stateful ParDo's snapshot as the table files of the embedded store that keeps its
//! cells and timers (`state::tables`; Flink's incremental RocksDB checkpoints): taken
//! when the job's state choice names a directory of tables, instead of its cells
//! copied into parts. One [`Scope::Files`] part per instance says which files hold its
//! cells and its timers; a restore reads the key groups it owns from every old
//! instance's files, at any parallelism.

use super::{state_failed, StatefulRunner};
use crate::keyed::snapshot::LaterParts;
use crate::snapshot::Scope;
use crate::state::tables::{
    decode_files_part, encode_files_part, group_range, restore_cells, KeyspaceFiles, TableDir,
    TableReader,
};
use crate::state::{restore_timers, timer_range};
use tidewater::exec::ExecError;

fn checkpoint(message: String) -> ExecError {
    ExecError::Downstream(Box::new(tidewater::Error::Checkpoint { message }))
}

impl StatefulRunner {
    /// The instance's state as its store's files, to be put into `dir` off the
    /// operator's thread; `None` where a backend keeps its cells or timers in memory.
    /// The caller synced the cells and flushed the timers.
    pub(super) fn files_later(&self, dir: &TableDir, instance: u32) -> Option<LaterParts> {
        let (cells, timers) = (self.state.freeze_files()?, self.timers.freeze_files()?);
        let dir = dir.clone();
        Some(LaterParts::new(move |emit| {
            let cells = cells.capture(&dir).map_err(state_failed)?;
            let timers = timers.capture(&dir).map_err(state_failed)?;
            // Its cells' keyspace, then its timers'.
            emit(Scope::Files(instance), encode_files_part(&[cells, timers])).map_err(state_failed)
        }))
    }

    /// Restores the key groups this instance owns from an old instance's files.
    pub(super) fn restore_files(&mut self, bytes: &[u8]) -> Result<(), ExecError> {
        let [cells, timers]: [KeyspaceFiles; 2] = decode_files_part(bytes)
            .and_then(|k| {
                k.try_into()
                    .map_err(|k: Vec<_>| format!("{} keyspaces' files, not 2", k.len()))
            })
            .map_err(|e| checkpoint(format!("a stateful ParDo's table files: {e}")))?;
        let Some(dir) = self.restore_tables.clone() else {
            return Err(checkpoint(
                "the checkpoint keeps a stateful ParDo's state as the embedded store's table files, and no directory of them was given: restore it from its local checkpoint directory"
                    .to_string(),
            ));
        };
        let groups = self.owned.clone();
        let (from, to) = group_range(&groups);
        let cells =
            TableReader::open_range(dir.path(), &cells, &from, Some(&to)).map_err(checkpoint)?;
        restore_cells(&cells, &groups, self.state.as_mut()).map_err(checkpoint)?;
        drop(cells);
        let (from, to) = timer_range(&groups);
        let timers =
            TableReader::open_range(dir.path(), &timers, &from, Some(&to)).map_err(checkpoint)?;
        let mut restored = 0usize;
        restore_timers(&timers, &groups, &mut |t| {
            self.restore_timer(t);
            restored += 1;
            // Written out as a bundle's are (the store's memtables).
            if restored.is_multiple_of(65_536) {
                self.timers.flush()?;
            }
            Ok(())
        })
        .map_err(checkpoint)?;
        self.timers.flush().map_err(checkpoint)
    }
}
