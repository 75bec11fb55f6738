//! Reading and writing an object a piece at a time: a checkpoint's file may be
//! gigabytes, and neither its upload nor its download is held whole.

use super::{block, MULTIPART, RANGE};
use object_store::path::Path as ObjectPath;
use object_store::{MultipartUpload, ObjectStore, ObjectStoreExt, PutPayload};
use std::io::{Read, Write};
use std::sync::Arc;

/// An object read [`RANGE`] bytes at a time.
pub(super) struct ObjectReader {
    pub(super) store: Arc<dyn ObjectStore>,
    pub(super) path: ObjectPath,
    pub(super) size: u64,
    /// Where the next range begins.
    pub(super) at: u64,
    pub(super) chunk: Vec<u8>,
    /// How much of `chunk` was read.
    pub(super) used: usize,
}

impl Read for ObjectReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.used == self.chunk.len() {
            if self.at >= self.size {
                return Ok(0);
            }
            let range = self.at..self.size.min(self.at + RANGE);
            let (store, path) = (self.store.clone(), self.path.clone());
            let chunk = block(async move { store.get_range(&path, range).await })
                .map_err(|e| std::io::Error::other(e.to_string()))?;
            if chunk.is_empty() {
                return Err(std::io::Error::other(format!(
                    "the object ends at byte {} of the {} it had",
                    self.at, self.size
                )));
            }
            self.at += chunk.len() as u64;
            (self.chunk, self.used) = (chunk.to_vec(), 0);
        }
        let n = buf.len().min(self.chunk.len() - self.used);
        buf[..n].copy_from_slice(&self.chunk[self.used..self.used + n]);
        self.used += n;
        Ok(n)
    }
}

/// An object written as it comes: one put if it is at most [`MULTIPART`] bytes, else a
/// multipart upload of parts of that size (all but the last the same size, as some
/// stores require), each sent as it fills; the object appears whole at
/// [`Upload::finish`], or not at all.
pub(super) struct Upload {
    store: Arc<dyn ObjectStore>,
    path: ObjectPath,
    buf: Vec<u8>,
    upload: Option<Box<dyn MultipartUpload>>,
    /// The object store's answer that failed a write.
    pub(super) error: Option<object_store::Error>,
}

impl Upload {
    pub(super) fn new(store: Arc<dyn ObjectStore>, path: ObjectPath) -> Self {
        Upload {
            store,
            path,
            buf: Vec::new(),
            upload: None,
            error: None,
        }
    }

    /// Sends the first [`MULTIPART`] bytes of the buffer as the next part.
    fn send_part(&mut self) -> object_store::Result<()> {
        let part: Vec<u8> = self.buf.drain(..MULTIPART.min(self.buf.len())).collect();
        if self.upload.is_none() {
            let (store, path) = (self.store.clone(), self.path.clone());
            self.upload = Some(block(async move { store.put_multipart(&path).await })?);
        }
        let sent = self
            .upload
            .as_mut()
            .expect("started above")
            .put_part(PutPayload::from(part));
        block(sent)
    }

    /// Makes the object: what was written is all of it.
    pub(super) fn finish(mut self) -> object_store::Result<()> {
        let (store, path) = (self.store.clone(), self.path.clone());
        match self.upload.take() {
            None => {
                let bytes = std::mem::take(&mut self.buf);
                block(async move { store.put(&path, PutPayload::from(bytes)).await }).map(drop)
            }
            Some(upload) => {
                self.upload = Some(upload);
                if !self.buf.is_empty() {
                    self.send_part()?;
                }
                let mut upload = self.upload.take().expect("started");
                block(async move { upload.complete().await }).map(drop)
            }
        }
    }

    /// Gives up: the parts sent are dropped.
    pub(super) fn abort(mut self) {
        if let Some(mut upload) = self.upload.take() {
            if let Err(e) = block(async move { upload.abort().await }) {
                tracing::debug!("cannot abort an unfinished upload: {e}");
            }
        }
    }
}

impl Write for Upload {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        if self.error.is_some() {
            return Err(std::io::Error::other("the upload failed"));
        }
        self.buf.extend_from_slice(bytes);
        while self.buf.len() > MULTIPART {
            if let Err(e) = self.send_part() {
                let message = e.to_string();
                self.error = Some(e);
                return Err(std::io::Error::other(message));
            }
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
