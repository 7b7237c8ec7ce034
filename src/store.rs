//! Where lockfiles live. The protocol sees one lockfile through [`LockStore`]: read it with its
//! version, create it if absent, update it if its version still matches, or overwrite it.
//! [`open`] turns a lock URI and its options into a store bound to `<uri>/lock.json`:
//! object_store's S3, Azure, GCS and in-memory stores (which have conditional writes), and
//! our own local file store (see `fs_store`, which adds the update-if-match that
//! object_store's local store lacks).

use crate::errors::{Error, Result, StoreErrorKind};
use crate::fs_store::FileStore;
use crate::lockfile::{LOCKFILE_NAME, MAX_LOCKFILE_BYTES};
use crate::timing::Timing;
use async_trait::async_trait;
use bytes::Bytes;
use chrono::{DateTime, Utc};
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{
    BackoffConfig, GetOptions, ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload,
    RetryConfig, UpdateVersion,
};
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// An opaque version of the lockfile: changes at every write.
#[derive(Debug, PartialEq, Eq)]
pub struct Version {
    /// The ETag (or our own digest for local files).
    pub e_tag: Option<String>,
    /// The store's version id, where it has one (GCS generation, S3 version).
    pub version: Option<String>,
}

impl Clone for Version {
    fn clone(&self) -> Self {
        Version {
            e_tag: self.e_tag.clone(),
            version: self.version.clone(),
        }
    }

    /// Into the strings already there (see `LockFile::clone_from`).
    fn clone_from(&mut self, source: &Self) {
        self.e_tag.clone_from(&source.e_tag);
        self.version.clone_from(&source.version);
    }
}

/// The lockfile as read.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// Its bytes.
    pub bytes: Bytes,
    /// Its version.
    pub version: Version,
    /// When the store says it was last written, by the store's clock.
    pub last_modified: DateTime<Utc>,
}

/// The outcome of a conditional write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Write {
    /// It landed; this is the new version.
    Done(Version),
    /// The condition failed: the lockfile exists (create) or changed (update). The caller
    /// reads to find out by whom: a retried write of our own may have landed.
    Conflict,
}

/// One lockfile in one store.
#[async_trait]
pub trait LockStore: Send + Sync + fmt::Debug + 'static {
    /// Reads the lockfile; `None` when there is none.
    async fn read(&self) -> Result<Option<Snapshot>>;
    /// Writes `body` only if there is no lockfile yet.
    async fn create(&self, body: Bytes) -> Result<Write>;
    /// Writes `body` only if the lockfile is still at `expected`.
    async fn update(&self, body: Bytes, expected: &Version) -> Result<Write>;
    /// Writes `body` unconditionally (the lww protocol).
    async fn overwrite(&self, body: Bytes) -> Result<Version>;
    /// The lockfile's URI, for messages.
    fn uri(&self) -> &str;
    /// Deletes the lockfile (and what the store keeps beside it). Locks never do this (a
    /// release keeps the token); only `doctor` cleans up its scratch lockfile with it.
    async fn delete(&self) -> Result<()> {
        Err(Error::InvalidArgument(format!(
            "{} cannot be deleted through this store",
            self.uri()
        )))
    }
}

/// A lock URI taken apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// `memory://NAME/path`
    Memory {
        /// The store's name: one store per name in the process.
        name: String,
        /// The lock's path inside it.
        path: String,
    },
    /// `file:///path` or a plain path.
    File(std::path::PathBuf),
    /// `s3://`, `az://`, `gs://` and their aliases; the URL as object_store takes it.
    Cloud {
        /// Which cloud.
        kind: Cloud,
        /// The full URL.
        url: url::Url,
        /// The lock's path inside the bucket.
        path: String,
    },
}

/// The cloud stores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cloud {
    /// Amazon S3 and S3-compatible stores.
    S3,
    /// Azure Blob Storage.
    Azure,
    /// Google Cloud Storage.
    Gcs,
}

const SCHEMES: &str = "s3://, az://, gs://, file:// (or a plain path) and memory://";

impl Location {
    /// Parses a lock URI. The lockfile will be `<uri>/lock.json`.
    pub fn parse(uri: &str) -> Result<Location> {
        let bad = |why: &str| Error::InvalidArgument(format!("invalid lock URI {uri:?}: {why}"));
        if uri.trim().is_empty() {
            return Err(bad("it is empty"));
        }
        if uri.contains('\0') {
            return Err(bad("it contains a NUL byte"));
        }
        let Some((scheme, _)) = uri.split_once("://") else {
            // A plain path, relative or absolute.
            let p = std::path::Path::new(uri);
            let abs = if p.is_absolute() {
                p.to_path_buf()
            } else {
                std::env::current_dir()
                    .map_err(|e| bad(&format!("cannot resolve a relative path: {e}")))?
                    .join(p)
            };
            return Ok(Location::File(abs));
        };
        let url = url::Url::parse(uri).map_err(|e| bad(&e.to_string()))?;
        let path = url.path().trim_matches('/').to_string();
        let host = url.host_str().unwrap_or("").to_string();
        let cloud = |kind: Cloud, what: &str| {
            if host.is_empty() {
                return Err(bad(&format!(
                    "no {what} name; write it as {}://{what}/path/to/lock",
                    url.scheme()
                )));
            }
            Ok(Location::Cloud {
                kind,
                url: url.clone(),
                path: path.clone(),
            })
        };
        match scheme.to_ascii_lowercase().as_str() {
            "memory" => {
                if host.is_empty() {
                    return Err(bad("no store name; write it as memory://NAME/path/to/lock"));
                }
                Ok(Location::Memory { name: host, path })
            }
            "file" => {
                if !host.is_empty() && host != "localhost" {
                    return Err(bad(
                        "a file URI names no host; write file:///absolute/path (three slashes)",
                    ));
                }
                let p = url
                    .to_file_path()
                    .map_err(|_| bad("not an absolute file path"))?;
                Ok(Location::File(p))
            }
            "s3" | "s3a" => cloud(Cloud::S3, "bucket"),
            "az" | "azure" | "abfs" | "abfss" | "adl" => cloud(Cloud::Azure, "container"),
            "gs" => cloud(Cloud::Gcs, "bucket"),
            other => Err(bad(&format!(
                "unknown scheme {other:?}; supported are {SCHEMES}"
            ))),
        }
    }
}

/// Opens the store that holds `<uri>/lock.json`. `options` are object_store configuration
/// keys (`aws_endpoint`, `azure_storage_account_name`, ...) on top of the environment.
pub fn open(
    uri: &str,
    options: &HashMap<String, String>,
    timing: &Timing,
) -> Result<Arc<dyn LockStore>> {
    let location = Location::parse(uri)?;
    let lock_uri = format!("{}/{LOCKFILE_NAME}", uri.trim_end_matches('/'));
    match location {
        Location::Memory { name, path } => {
            refuse_options(uri, "memory://", options)?;
            let store = memory_store(&name);
            Ok(Arc::new(ObjectLockStore::new(store, &path, lock_uri)?))
        }
        Location::File(dir) => {
            refuse_options(uri, "file://", options)?;
            Ok(Arc::new(FileStore::new(
                dir.join(LOCKFILE_NAME),
                lock_uri,
                request_timeout(timing),
            )))
        }
        Location::Cloud { kind, url, path } => {
            let store = cloud_store(kind, &url, options, timing)?;
            Ok(Arc::new(ObjectLockStore::new(store, &path, lock_uri)?))
        }
    }
}

fn refuse_options(uri: &str, scheme: &str, options: &HashMap<String, String>) -> Result<()> {
    if let Some(key) = options.keys().next() {
        return Err(Error::InvalidArgument(format!(
            "storage option {key:?} given for {uri}, but {scheme} stores take no options"
        )));
    }
    Ok(())
}

/// One in-memory store per name, shared by the whole process.
fn memory_store(name: &str) -> Arc<dyn ObjectStore> {
    static STORES: OnceLock<Mutex<HashMap<String, Arc<InMemory>>>> = OnceLock::new();
    let mut stores = STORES
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    stores
        .entry(name.to_string())
        .or_insert_with(|| Arc::new(InMemory::new()))
        .clone()
}

/// How long one request may take: half a heartbeat, from 1 to 30 s.
fn request_timeout(timing: &Timing) -> Duration {
    (timing.heartbeat / 2).clamp(Duration::from_secs(1), Duration::from_secs(30))
}

fn cloud_store(
    kind: Cloud,
    url: &url::Url,
    options: &HashMap<String, String>,
    timing: &Timing,
) -> Result<Arc<dyn ObjectStore>> {
    // object_store's defaults retry for three minutes; a lock must fail or succeed well within
    // its own lifetime. A request lost in a partition hangs until its timeout, so the timeout
    // is half a heartbeat: a renewal that hangs is retried in time to land before the lease
    // deadline (which comes `heartbeat + margin` or more after it was due).
    let request = request_timeout(timing);
    let retry = RetryConfig {
        backoff: BackoffConfig {
            init_backoff: Duration::from_millis(50),
            max_backoff: (request / 4).min(Duration::from_secs(2)),
            base: 2.0,
        },
        max_retries: 5,
        retry_timeout: request,
    };
    // Set as configuration keys, not with `with_client_options`, which would replace the
    // client options read from the environment (AWS_ALLOW_HTTP, proxies, CA bundles).
    let timeouts = [
        ("timeout", format!("{}ms", request.as_millis())),
        (
            "connect_timeout",
            format!("{}ms", (request / 2).as_millis()),
        ),
    ];
    let bad_key = |key: &str, store: &str| {
        Error::InvalidArgument(format!(
            "unknown storage option {key:?} for {store}; see object_store's configuration keys for {store}"
        ))
    };
    let built = match kind {
        Cloud::S3 => {
            let mut b = object_store::aws::AmazonS3Builder::from_env()
                .with_url(url.as_str())
                .with_retry(retry);
            for (k, v) in &timeouts {
                b = b.with_config(k.parse().expect("a client key"), v);
            }
            for (k, v) in options {
                let key = k
                    .to_ascii_lowercase()
                    .parse()
                    .map_err(|_| bad_key(k, "S3"))?;
                b = b.with_config(key, v);
            }
            b.build().map(|s| Arc::new(s) as Arc<dyn ObjectStore>)
        }
        Cloud::Azure => {
            let mut b = object_store::azure::MicrosoftAzureBuilder::from_env()
                .with_url(url.as_str())
                .with_retry(retry);
            for (k, v) in &timeouts {
                b = b.with_config(k.parse().expect("a client key"), v);
            }
            for (k, v) in options {
                let key = k
                    .to_ascii_lowercase()
                    .parse()
                    .map_err(|_| bad_key(k, "Azure"))?;
                b = b.with_config(key, v);
            }
            b.build().map(|s| Arc::new(s) as Arc<dyn ObjectStore>)
        }
        Cloud::Gcs => {
            let mut b = object_store::gcp::GoogleCloudStorageBuilder::from_env()
                .with_url(url.as_str())
                .with_retry(retry);
            for (k, v) in &timeouts {
                b = b.with_config(k.parse().expect("a client key"), v);
            }
            for (k, v) in options {
                let key = k
                    .to_ascii_lowercase()
                    .parse()
                    .map_err(|_| bad_key(k, "GCS"))?;
                b = b.with_config(key, v);
            }
            b.build().map(|s| Arc::new(s) as Arc<dyn ObjectStore>)
        }
    };
    built.map_err(|e| {
        Error::InvalidArgument(format!(
            "cannot configure the store for {url}: {e} (set it in the environment or in storage_options)"
        ))
    })
}

/// A lockfile in an object_store store with conditional writes.
pub struct ObjectLockStore {
    store: Arc<dyn ObjectStore>,
    path: Path,
    uri: String,
}

impl fmt::Debug for ObjectLockStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ObjectLockStore({})", self.uri)
    }
}

impl ObjectLockStore {
    /// The lockfile `<prefix>/lock.json` in `store`; `uri` is used in messages.
    pub fn new(store: Arc<dyn ObjectStore>, prefix: &str, uri: String) -> Result<Self> {
        let dir = Path::parse(prefix).map_err(|e| {
            Error::InvalidArgument(format!("invalid lock path {prefix:?} in {uri}: {e}"))
        })?;
        Ok(ObjectLockStore {
            store,
            path: dir.clone().join(LOCKFILE_NAME),
            uri,
        })
    }

    fn error(&self, e: object_store::Error, during: &str) -> Error {
        store_error(&self.uri, e, during)
    }

    async fn put(&self, body: Bytes, mode: PutMode) -> Result<Write> {
        let opts = PutOptions {
            mode,
            ..Default::default()
        };
        match self
            .store
            .put_opts(&self.path, PutPayload::from(body), opts)
            .await
        {
            Ok(r) => Ok(Write::Done(Version {
                e_tag: r.e_tag,
                version: r.version,
            })),
            Err(object_store::Error::AlreadyExists { .. })
            | Err(object_store::Error::Precondition { .. }) => Ok(Write::Conflict),
            Err(object_store::Error::NotFound { source, .. }) => Err(Error::Store {
                uri: self.uri.clone(),
                message: format!(
                    "the bucket or container does not exist ({source}); create it first"
                ),
                kind: StoreErrorKind::Permanent,
            }),
            Err(e) => Err(self.error(e, "writing")),
        }
    }
}

#[async_trait]
impl LockStore for ObjectLockStore {
    async fn read(&self) -> Result<Option<Snapshot>> {
        let got = match self.store.get_opts(&self.path, GetOptions::default()).await {
            Ok(got) => got,
            Err(object_store::Error::NotFound { source, .. }) => {
                let msg = source.to_string();
                // A missing bucket answers 404 too; tell it apart by the store's error code.
                if ["NoSuchBucket", "ContainerNotFound", "bucket does not exist"]
                    .iter()
                    .any(|c| msg.contains(c))
                {
                    return Err(Error::Store {
                        uri: self.uri.clone(),
                        message: format!(
                            "the bucket or container does not exist ({msg}); create it first"
                        ),
                        kind: StoreErrorKind::Permanent,
                    });
                }
                return Ok(None);
            }
            Err(e) => return Err(self.error(e, "reading")),
        };
        if got.meta.size > MAX_LOCKFILE_BYTES as u64 {
            // Refuse before downloading: the decoder reports the size.
            return Ok(Some(Snapshot {
                bytes: Bytes::from(vec![b' '; MAX_LOCKFILE_BYTES + 1]),
                version: Version {
                    e_tag: got.meta.e_tag.clone(),
                    version: got.meta.version.clone(),
                },
                last_modified: got.meta.last_modified,
            }));
        }
        let meta = got.meta.clone();
        let bytes = got.bytes().await.map_err(|e| self.error(e, "reading"))?;
        Ok(Some(Snapshot {
            bytes,
            version: Version {
                e_tag: meta.e_tag,
                version: meta.version,
            },
            last_modified: meta.last_modified,
        }))
    }

    async fn create(&self, body: Bytes) -> Result<Write> {
        self.put(body, PutMode::Create).await
    }

    async fn update(&self, body: Bytes, expected: &Version) -> Result<Write> {
        self.put(
            body,
            PutMode::Update(UpdateVersion {
                e_tag: expected.e_tag.clone(),
                version: expected.version.clone(),
            }),
        )
        .await
    }

    async fn overwrite(&self, body: Bytes) -> Result<Version> {
        match self.put(body, PutMode::Overwrite).await? {
            Write::Done(v) => Ok(v),
            Write::Conflict => Err(Error::Store {
                uri: self.uri.clone(),
                message: "the store refused an unconditional write with a conflict".into(),
                kind: StoreErrorKind::Transient,
            }),
        }
    }

    fn uri(&self) -> &str {
        &self.uri
    }

    async fn delete(&self) -> Result<()> {
        match self.store.delete(&self.path).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(self.error(e, "deleting")),
        }
    }
}

/// A store that counts the requests made through it, by kind: the instrument of the
/// request-count tests and benchmarks.
#[derive(Debug)]
pub struct Counted {
    inner: Arc<dyn LockStore>,
    counts: [std::sync::atomic::AtomicU64; 5],
}

/// Request counts of a [`Counted`] store.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Requests {
    /// Reads.
    pub reads: u64,
    /// Create-if-absent writes.
    pub creates: u64,
    /// Update-if-match writes.
    pub updates: u64,
    /// Unconditional writes.
    pub overwrites: u64,
    /// Deletes.
    pub deletes: u64,
}

impl Requests {
    /// All requests.
    pub fn total(&self) -> u64 {
        self.reads + self.creates + self.updates + self.overwrites + self.deletes
    }
}

impl Counted {
    /// Counts the requests to `inner`.
    pub fn new(inner: Arc<dyn LockStore>) -> Self {
        Counted {
            inner,
            counts: Default::default(),
        }
    }

    fn count(&self, kind: usize) {
        self.counts[kind].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// The counts so far.
    pub fn requests(&self) -> Requests {
        let n = |i: usize| self.counts[i].load(std::sync::atomic::Ordering::Relaxed);
        Requests {
            reads: n(0),
            creates: n(1),
            updates: n(2),
            overwrites: n(3),
            deletes: n(4),
        }
    }
}

#[async_trait]
impl LockStore for Counted {
    async fn read(&self) -> Result<Option<Snapshot>> {
        self.count(0);
        self.inner.read().await
    }

    async fn create(&self, body: Bytes) -> Result<Write> {
        self.count(1);
        self.inner.create(body).await
    }

    async fn update(&self, body: Bytes, expected: &Version) -> Result<Write> {
        self.count(2);
        self.inner.update(body, expected).await
    }

    async fn overwrite(&self, body: Bytes) -> Result<Version> {
        self.count(3);
        self.inner.overwrite(body).await
    }

    fn uri(&self) -> &str {
        self.inner.uri()
    }

    async fn delete(&self) -> Result<()> {
        self.count(4);
        self.inner.delete().await
    }
}

/// Maps an object_store error to ours, deciding whether a retry can help.
pub(crate) fn store_error(uri: &str, e: object_store::Error, during: &str) -> Error {
    use object_store::Error as E;
    let (kind, hint) = match &e {
        E::PermissionDenied { .. } | E::Unauthenticated { .. } => (
            StoreErrorKind::Permanent,
            "; check the credentials (environment or storage_options)",
        ),
        E::NotSupported { .. } | E::NotImplemented { .. } | E::UnknownConfigurationKey { .. } => {
            (StoreErrorKind::Permanent, "")
        }
        E::InvalidPath { .. } => (StoreErrorKind::Permanent, ""),
        // The HTTP client refused to build the request: its configuration is wrong, and
        // every retry would fail alike. Most often an http:// endpoint without allow_http.
        _ if e.to_string().contains("builder error") => (
            StoreErrorKind::Permanent,
            "; the HTTP client cannot make this request: for an http:// endpoint set \
             aws_allow_http / azure_allow_http / google_allow_http (or ALLOW_HTTP) to true",
        ),
        _ => (classify_message(&e.to_string()), ""),
    };
    Error::Store {
        uri: uri.to_string(),
        message: format!("{during} failed: {e}{hint}"),
        kind,
    }
}

/// object_store keeps its HTTP status private; its message carries it. A 4xx other than
/// 408 and 429 is the caller's fault and will not change on retry.
fn classify_message(msg: &str) -> StoreErrorKind {
    if let Some(i) = msg.find("status code: ") {
        let code: String = msg[i + 13..].chars().take(3).collect();
        if let Ok(code) = code.parse::<u16>() {
            if (400..500).contains(&code) && code != 408 && code != 429 {
                return StoreErrorKind::Permanent;
            }
        }
    }
    StoreErrorKind::Transient
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_uris() {
        assert!(matches!(
            Location::parse("memory://a/b/c").unwrap(),
            Location::Memory { ref name, ref path } if name == "a" && path == "b/c"
        ));
        assert_eq!(
            Location::parse("/tmp/x").unwrap(),
            Location::File("/tmp/x".into())
        );
        assert_eq!(
            Location::parse("file:///tmp/x").unwrap(),
            Location::File("/tmp/x".into())
        );
        assert!(matches!(
            Location::parse("s3://bucket/k").unwrap(),
            Location::Cloud { kind: Cloud::S3, ref path, .. } if path == "k"
        ));
        for (bad, why) in [
            ("", "empty"),
            ("ftp://x/y", "unknown scheme"),
            ("s3:///key", "no bucket"),
            ("memory:///x", "no store name"),
            ("file://host/x", "three slashes"),
        ] {
            let e = Location::parse(bad).unwrap_err().to_string();
            assert!(e.contains(why), "{e} should say {why}");
        }
    }

    #[test]
    fn client_timeouts_are_configuration_keys_of_every_store() {
        let timing = Timing::with_expire(30.0).unwrap();
        let none = HashMap::new();
        for uri in ["s3://b/k", "az://c/k", "gs://b/k"] {
            let Location::Cloud { kind, url, .. } = Location::parse(uri).unwrap() else {
                unreachable!()
            };
            // Building must not panic on the timeout keys; credentials are not needed yet.
            let _ = cloud_store(kind, &url, &none, &timing);
        }
    }

    #[test]
    fn classifies_status_codes() {
        assert_eq!(
            classify_message("Server returned non-2xx status code: 400 Bad Request"),
            StoreErrorKind::Permanent
        );
        assert_eq!(
            classify_message("Server returned non-2xx status code: 503 Slow Down"),
            StoreErrorKind::Transient
        );
        assert_eq!(
            classify_message("status code: 429 Too Many"),
            StoreErrorKind::Transient
        );
        assert_eq!(
            classify_message("connection refused"),
            StoreErrorKind::Transient
        );
    }
}
