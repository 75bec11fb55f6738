//! Where a checkpoint store's files live: a local directory (the default), or a prefix
//! in an object store — `s3://bucket/prefix`, `gs://bucket/prefix`,
//! `az://container/prefix` (or `abfs://`, `https://`...), and `memory:///prefix` (one
//! in-memory store per process, for tests) — through the `object_store` crate.
//!
//! The store sees both as a flat set of named files (`parts/NAME`,
//! `checkpoint-E.manifest`, `offsets/NAME`), each written whole or not at all:
//!
//! - local files are written to a temporary file, synced, renamed into place, and the
//!   directory synced; a file that must not exist yet (a manifest) is linked into place,
//!   which fails if one is there;
//! - objects are put in one request (a multipart upload above [`MULTIPART`]), which
//!   object stores make visible whole or not at all; one that must not exist yet is put
//!   with the store's conditional put (`If-None-Match: *` on S3).
//!
//! Credentials and endpoints come from the standard environment of each service:
//! `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_REGION`,
//! `AWS_ENDPOINT` (an S3-compatible server), `AWS_ALLOW_HTTP`, web identity tokens
//! (`AWS_WEB_IDENTITY_TOKEN_FILE`, as on EKS) and the instance metadata service;
//! `GOOGLE_SERVICE_ACCOUNT` / `GOOGLE_APPLICATION_CREDENTIALS` and the metadata server;
//! `AZURE_STORAGE_ACCOUNT_NAME`, `AZURE_STORAGE_ACCOUNT_KEY` and the other `AZURE_`
//! variables. Requests are retried by the client (with backoff, for at most three
//! minutes); an error that remains fails the checkpoint, never a fallback to an older
//! one as a corrupt file does.

use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use tidewater::{Error, Result};

mod objects_io;
use objects_io::{ObjectReader, Upload};

/// Objects larger than this are uploaded in parts of this size.
const MULTIPART: usize = 32 << 20;

/// An object is read in ranges of this many bytes.
pub(crate) const RANGE: u64 = 8 << 20;

/// A store's files.
pub(crate) trait Blobs: Send + Sync + std::fmt::Debug {
    /// Writes what `write` writes as file `key`, whole or not at all, durably.
    fn put(
        &self,
        key: &str,
        write: &mut dyn FnMut(&mut dyn Write) -> std::io::Result<()>,
    ) -> Result<()>;

    /// Writes `bytes` as file `key` only if there is none: `false` if there is.
    fn put_new(&self, key: &str, bytes: &[u8]) -> Result<bool>;

    /// File `key`'s bytes, `None` if there is none; a checkpoint error if it holds
    /// more than `limit` bytes (it was not written so).
    fn get(&self, key: &str, limit: u64) -> Result<Option<Vec<u8>>>;

    /// What a failed read of file `key` from [`Blobs::open`]'s reader is: a file that
    /// cannot be read is a checkpoint that cannot be restored; an object store's
    /// answer after its retries fails the run instead.
    fn read_error(&self, key: &str, e: std::io::Error) -> Error;

    /// A reader of file `key`'s bytes in order, `None` if there is none (an object is
    /// fetched [`RANGE`] bytes at a time).
    fn open(&self, key: &str) -> Result<Option<Box<dyn Read + Send>>>;

    /// The `len` bytes of file `key` from `offset`: a checkpoint error if it has
    /// fewer.
    fn read_range(&self, key: &str, offset: u64, len: u64) -> Result<Vec<u8>>;

    /// The names of the files in `dir` (`""`: the top), not recursively.
    fn list(&self, dir: &str) -> Result<Vec<String>>;

    /// Removes file `key`, if there.
    fn delete(&self, key: &str) -> Result<()>;

    /// File `key` as the user names it.
    fn show(&self, key: &str) -> String;
}

/// Whether `location` names an object store (it has a URL scheme) rather than a local
/// directory.
pub fn is_object_store(location: &Path) -> bool {
    location
        .to_str()
        .and_then(|s| s.split_once("://"))
        .is_some_and(|(scheme, _)| {
            !scheme.is_empty()
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        })
}

/// The files at `location`: a local directory (created if missing) or an object store
/// prefix.
pub(crate) fn open(location: &Path) -> Result<Arc<dyn Blobs>> {
    if is_object_store(location) {
        return Ok(Arc::new(Objects::open(
            location.to_str().expect("a URL is text"),
        )?));
    }
    let parts = location.join("parts");
    // Not a checkpoint that cannot be restored: a directory that cannot be made.
    std::fs::create_dir_all(&parts).map_err(|e| Error::Io {
        what: "cannot create the directory".into(),
        path: parts.clone(),
        cause: e,
    })?;
    Ok(Arc::new(Local {
        dir: location.to_path_buf(),
    }))
}

fn io_error(what: &str, path: &Path, e: std::io::Error) -> Error {
    Error::Checkpoint {
        message: format!("{what} {}: {e}", path.display()),
    }
}

/// A local directory.
#[derive(Debug)]
struct Local {
    dir: PathBuf,
}

impl Local {
    fn path(&self, key: &str) -> PathBuf {
        self.dir.join(key)
    }

    /// A temporary file beside `path`, written by `write` and synced.
    fn write_temp(
        path: &Path,
        write: &mut dyn FnMut(&mut dyn Write) -> std::io::Result<()>,
    ) -> Result<PathBuf> {
        let dir = path.parent().unwrap_or(Path::new("."));
        if !dir.is_dir() {
            std::fs::create_dir_all(dir).map_err(|e| io_error("cannot create", dir, e))?;
        }
        let tmp = dir.join(format!(
            ".{}.tmp",
            path.file_name().and_then(|n| n.to_str()).unwrap_or("file")
        ));
        let f = std::fs::File::create(&tmp).map_err(|e| io_error("cannot create", &tmp, e))?;
        let mut w = std::io::BufWriter::with_capacity(1 << 16, f);
        write(&mut w)
            .and_then(|()| w.into_inner().map_err(|e| e.into_error()))
            .and_then(|f| f.sync_all())
            .map_err(|e| io_error("cannot write", &tmp, e))?;
        Ok(tmp)
    }

    fn sync_dir(path: &Path) {
        if let Ok(d) = std::fs::File::open(path.parent().unwrap_or(Path::new("."))) {
            let _ = d.sync_all();
        }
    }
}

/// The bytes of the regular file `path`, at most `limit` + 1 of them; `None` if there
/// is no such file.
fn read_bounded(path: &Path, limit: u64) -> Result<Option<Vec<u8>>> {
    use std::io::Read;
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_error("cannot read", path, e)),
    };
    let meta = file
        .metadata()
        .map_err(|e| io_error("cannot read", path, e))?;
    if !meta.is_file() {
        return Err(Error::Checkpoint {
            message: format!("{} is not a regular file", path.display()),
        });
    }
    let mut bytes = Vec::with_capacity(meta.len().min(limit.saturating_add(1)) as usize);
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| io_error("cannot read", path, e))?;
    Ok(Some(bytes))
}

fn short(what: String, offset: u64, len: u64, size: u64) -> Error {
    Error::Checkpoint {
        message: format!("{what} holds {size} bytes, not {len} from byte {offset}"),
    }
}

fn too_long(what: String, limit: u64) -> Error {
    Error::Checkpoint {
        message: format!("{what} holds more than the {limit} bytes it was written with"),
    }
}

impl Blobs for Local {
    fn put(
        &self,
        key: &str,
        write: &mut dyn FnMut(&mut dyn Write) -> std::io::Result<()>,
    ) -> Result<()> {
        let path = self.path(key);
        let tmp = Self::write_temp(&path, write)?;
        std::fs::rename(&tmp, &path).map_err(|e| io_error("cannot rename into", &path, e))?;
        Self::sync_dir(&path);
        Ok(())
    }

    fn put_new(&self, key: &str, bytes: &[u8]) -> Result<bool> {
        let path = self.path(key);
        let tmp = Self::write_temp(&path, &mut |w| w.write_all(bytes))?;
        // A hard link is made only where no file is: the atomic create-if-absent.
        let linked = std::fs::hard_link(&tmp, &path);
        let _ = std::fs::remove_file(&tmp);
        match linked {
            Ok(()) => {
                Self::sync_dir(&path);
                Ok(true)
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
            Err(e) => Err(io_error("cannot link into", &path, e)),
        }
    }

    fn get(&self, key: &str, limit: u64) -> Result<Option<Vec<u8>>> {
        let path = self.path(key);
        match read_bounded(&path, limit)? {
            Some(b) if b.len() as u64 > limit => Err(too_long(self.show(key), limit)),
            other => Ok(other),
        }
    }

    fn open(&self, key: &str) -> Result<Option<Box<dyn Read + Send>>> {
        let path = self.path(key);
        match std::fs::File::open(&path) {
            Ok(file) => Ok(Some(Box::new(file))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io_error("cannot read", &path, e)),
        }
    }

    fn read_error(&self, key: &str, e: std::io::Error) -> Error {
        io_error("cannot read", &self.path(key), e)
    }

    fn read_range(&self, key: &str, offset: u64, len: u64) -> Result<Vec<u8>> {
        use std::io::{Seek, SeekFrom};
        let path = self.path(key);
        let mut file = std::fs::File::open(&path).map_err(|e| io_error("cannot read", &path, e))?;
        let size = file
            .metadata()
            .map_err(|e| io_error("cannot read", &path, e))?
            .len();
        if offset.checked_add(len).is_none_or(|end| end > size) {
            return Err(short(self.show(key), offset, len, size));
        }
        let mut bytes = vec![0; usize::try_from(len).expect("within the file's length")];
        file.seek(SeekFrom::Start(offset))
            .and_then(|_| file.read_exact(&mut bytes))
            .map_err(|e| io_error("cannot read", &path, e))?;
        Ok(bytes)
    }

    fn list(&self, dir: &str) -> Result<Vec<String>> {
        let path = self.path(dir);
        let listing = match std::fs::read_dir(&path) {
            Ok(l) => l,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io_error("cannot list", &path, e)),
        };
        let mut out = Vec::new();
        for entry in listing {
            let entry = entry.map_err(|e| io_error("cannot list", &path, e))?;
            out.push(entry.file_name().to_string_lossy().into_owned());
        }
        Ok(out)
    }

    fn delete(&self, key: &str) -> Result<()> {
        let path = self.path(key);
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(io_error("cannot remove", &path, e))
            }
            _ => Ok(()),
        }
    }

    fn show(&self, key: &str) -> String {
        self.path(key).display().to_string()
    }
}

/// A prefix in an object store.
#[derive(Debug)]
pub(crate) struct Objects {
    store: Arc<dyn ObjectStore>,
    prefix: ObjectPath,
    /// The location as the user gave it, without a trailing `/`.
    url: String,
}

/// The object stores opened so far, by scheme and bucket: their clients (and
/// connections) are shared by every store on them; `memory://` is one store per
/// process.
fn clients() -> &'static Mutex<HashMap<String, Arc<dyn ObjectStore>>> {
    static CLIENTS: OnceLock<Mutex<HashMap<String, Arc<dyn ObjectStore>>>> = OnceLock::new();
    CLIENTS.get_or_init(Default::default)
}

impl Objects {
    pub(crate) fn open(location: &str) -> Result<Self> {
        use object_store::ObjectStoreScheme as Scheme;
        let refused = |why: String| Error::Checkpoint {
            message: format!("cannot use the object store at {location}: {why}"),
        };
        let url = url::Url::parse(location).map_err(|e| refused(format!("not a URL ({e})")))?;
        let (scheme, prefix) = Scheme::parse(&url).map_err(|e| refused(e.to_string()))?;
        let bucket = format!("{}://{}", url.scheme(), url.host_str().unwrap_or(""));
        let mut clients = clients().lock().unwrap_or_else(|p| p.into_inner());
        let store = match clients.get(&bucket) {
            Some(s) => s.clone(),
            None => {
                let store: Arc<dyn ObjectStore> = match scheme {
                    Scheme::Memory => Arc::new(object_store::memory::InMemory::new()),
                    Scheme::AmazonS3 => Arc::new(
                        super::aws_profile::apply(object_store::aws::AmazonS3Builder::from_env())
                            .map_err(&refused)?
                            .with_url(location)
                            .build()
                            .map_err(|e| refused(e.to_string()))?,
                    ),
                    Scheme::GoogleCloudStorage => Arc::new(
                        object_store::gcp::GoogleCloudStorageBuilder::from_env()
                            .with_url(location)
                            .build()
                            .map_err(|e| refused(e.to_string()))?,
                    ),
                    Scheme::MicrosoftAzure => Arc::new(
                        object_store::azure::MicrosoftAzureBuilder::from_env()
                            .with_url(location)
                            .build()
                            .map_err(|e| refused(e.to_string()))?,
                    ),
                    other => {
                        return Err(refused(format!(
                            "{other:?} is not a checkpoint store (use a local path, s3://, gs:// or az://)"
                        )))
                    }
                };
                clients.insert(bucket, store.clone());
                store
            }
        };
        Ok(Objects {
            store,
            prefix,
            url: location.trim_end_matches('/').to_string(),
        })
    }

    fn path(&self, key: &str) -> ObjectPath {
        let mut path = self.prefix.clone();
        for part in key.split('/').filter(|p| !p.is_empty()) {
            path = path.join(part);
        }
        path
    }

    /// An error the object store answered (not a missing object).
    fn failed(&self, what: &str, key: &str, e: object_store::Error) -> Error {
        Error::Io {
            what: format!("cannot {what} the object"),
            path: PathBuf::from(self.show(key)),
            cause: std::io::Error::other(e.to_string()),
        }
    }
}

/// An object's version, for a write that must not replace a newer one.
pub(crate) type Version = object_store::UpdateVersion;

impl Objects {
    /// Object `key`'s bytes and version, `None` if there is none.
    pub(crate) fn get_versioned(&self, key: &str) -> Result<Option<(Vec<u8>, Version)>> {
        let (store, path) = (self.store.clone(), self.path(key));
        let got = block(async move {
            let result = store.get(&path).await?;
            let version = Version {
                e_tag: result.meta.e_tag.clone(),
                version: result.meta.version.clone(),
            };
            Ok((result.bytes().await?.to_vec(), version))
        });
        match got {
            Ok(got) => Ok(Some(got)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(self.failed("read", key, e)),
        }
    }

    /// Writes `bytes` as object `key` if it is absent (`over` is `None`) or still at
    /// version `over`: its new version, or `None` if another write came first.
    pub(crate) fn put_versioned(
        &self,
        key: &str,
        bytes: &[u8],
        over: Option<&Version>,
    ) -> Result<Option<Version>> {
        let (store, path) = (self.store.clone(), self.path(key));
        let payload = PutPayload::from(bytes.to_vec());
        let mode = match over {
            Some(v) => PutMode::Update(v.clone()),
            None => PutMode::Create,
        };
        let put = block(async move {
            let opts = PutOptions {
                mode,
                ..Default::default()
            };
            store.put_opts(&path, payload, opts).await
        });
        match put {
            Ok(r) => Ok(Some(Version {
                e_tag: r.e_tag,
                version: r.version,
            })),
            Err(
                object_store::Error::AlreadyExists { .. }
                | object_store::Error::Precondition { .. },
            ) => Ok(None),
            Err(e @ object_store::Error::NotImplemented { .. }) => Err(Error::Checkpoint {
                message: format!(
                    "{} cannot be written only if absent or unchanged ({e}); for S3 set AWS_CONDITIONAL_PUT=etag (AWS S3 and most S3-compatible servers support it)",
                    self.show(key)
                ),
            }),
            Err(e) => Err(self.failed("write", key, e)),
        }
    }

    /// Removes object `key`, if there.
    pub(crate) fn remove(&self, key: &str) -> Result<()> {
        Blobs::delete(self, key)
    }

    /// Object `key` as the user names it.
    pub(crate) fn name(&self, key: &str) -> String {
        self.show(key)
    }
}

/// Runs `fut` on the connector runtime and waits for it, from any thread (a runtime
/// thread included: the future runs on another).
fn block<T: Send + 'static>(fut: impl std::future::Future<Output = T> + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    tidewater::io::runtime().spawn(async move {
        let _ = tx.send(fut.await);
    });
    rx.recv()
        .expect("the connector runtime runs an object store request to its end")
}

impl Blobs for Objects {
    fn put(
        &self,
        key: &str,
        write: &mut dyn FnMut(&mut dyn Write) -> std::io::Result<()>,
    ) -> Result<()> {
        let mut upload = Upload::new(self.store.clone(), self.path(key));
        let written = write(&mut upload);
        match (written, upload.error.take()) {
            (_, Some(e)) => {
                upload.abort();
                Err(self.failed("write", key, e))
            }
            (Err(e), None) => {
                upload.abort();
                Err(Error::Checkpoint {
                    message: format!("cannot write {}: {e}", self.show(key)),
                })
            }
            (Ok(()), None) => upload.finish().map_err(|e| self.failed("write", key, e)),
        }
    }

    fn put_new(&self, key: &str, bytes: &[u8]) -> Result<bool> {
        Ok(self.put_versioned(key, bytes, None)?.is_some())
    }

    fn get(&self, key: &str, limit: u64) -> Result<Option<Vec<u8>>> {
        let (store, path) = (self.store.clone(), self.path(key));
        let got = block(async move {
            let result = store.get(&path).await?;
            if result.meta.size > limit {
                return Ok(Err(result.meta.size));
            }
            result.bytes().await.map(|b| Ok(b.to_vec()))
        });
        match got {
            Ok(Ok(bytes)) if bytes.len() as u64 <= limit => Ok(Some(bytes)),
            Ok(_) => Err(too_long(self.show(key), limit)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(self.failed("read", key, e)),
        }
    }

    fn open(&self, key: &str) -> Result<Option<Box<dyn Read + Send>>> {
        let (store, path) = (self.store.clone(), self.path(key));
        let head = block({
            let (store, path) = (store.clone(), path.clone());
            async move { store.head(&path).await }
        });
        match head {
            Ok(meta) => Ok(Some(Box::new(ObjectReader {
                store,
                path,
                size: meta.size,
                at: 0,
                chunk: Default::default(),
                used: 0,
            }))),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(self.failed("read", key, e)),
        }
    }

    fn read_error(&self, key: &str, e: std::io::Error) -> Error {
        Error::Io {
            what: "cannot read the object".into(),
            path: PathBuf::from(self.show(key)),
            cause: e,
        }
    }

    fn read_range(&self, key: &str, offset: u64, len: u64) -> Result<Vec<u8>> {
        let (store, path) = (self.store.clone(), self.path(key));
        let Some(end) = offset.checked_add(len) else {
            return Err(short(self.show(key), offset, len, 0));
        };
        let got = block(async move { store.get_range(&path, offset..end).await });
        match got {
            Ok(bytes) if bytes.len() as u64 == len => Ok(bytes.to_vec()),
            Ok(bytes) => Err(short(
                self.show(key),
                offset,
                len,
                offset + bytes.len() as u64,
            )),
            Err(e) => Err(self.failed("read", key, e)),
        }
    }

    fn list(&self, dir: &str) -> Result<Vec<String>> {
        let (store, path) = (self.store.clone(), self.path(dir));
        let listed = block(async move { store.list_with_delimiter(Some(&path)).await });
        let listed = listed.map_err(|e| self.failed("list", dir, e))?;
        Ok(listed
            .objects
            .into_iter()
            .filter_map(|o| o.location.filename().map(str::to_string))
            .collect())
    }

    fn delete(&self, key: &str) -> Result<()> {
        let (store, path) = (self.store.clone(), self.path(key));
        match block(async move { store.delete(&path).await }) {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(self.failed("remove", key, e)),
        }
    }

    fn show(&self, key: &str) -> String {
        if key.is_empty() {
            self.url.clone()
        } else {
            format!("{}/{key}", self.url)
        }
    }
}
