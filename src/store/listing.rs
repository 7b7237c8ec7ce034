//! Every lockfile under a prefix, page by page (`blob-lock ls`, `list_locks`, `prune`): the
//! URIs of the locks whose `lock.json` lies anywhere below it. A page is read when asked
//! for, so a prefix with millions of objects costs memory for one page, not for all.

use super::open::{Place, Sharing};
use super::request::answers::{missing_bucket, names_a_missing_bucket};
use super::request::client;
use super::request::gate::{self, Gate};
use crate::errors::{Error, Result};
use crate::lockfile::LOCKFILE_NAME;
use futures_util::stream::{BoxStream, StreamExt};
use object_store::path::Path;
use object_store::ObjectMeta;
use std::path::PathBuf;
use std::time::Duration;

/// The lock URIs under one prefix, read a page at a time.
pub struct Listing {
    /// The prefix as given, without a trailing `/`: found locks are named below it.
    prefix: String,
    source: Source,
    /// Why an earlier page failed: a listing cut short is never taken for a whole one.
    failed: Option<String>,
}

enum Source {
    Objects {
        gate: Gate,
        /// The prefix's key in the bucket (empty for the whole bucket).
        key: String,
        /// `None` once it has ended: a stream must not be polled after its end.
        stream: Option<BoxStream<'static, object_store::Result<ObjectMeta>>>,
    },
    Files {
        root: PathBuf,
        /// Folders still to read, depth first; `None` once the walk is done.
        pending: Option<Vec<PathBuf>>,
    },
}

impl std::fmt::Debug for Listing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Listing({})", self.prefix)
    }
}

/// A lock URI's error as the error of a listing's prefix, which is written alike.
pub fn as_prefix_error(e: Error) -> Error {
    match e {
        Error::InvalidArgument(why) => {
            Error::InvalidArgument(why.replacen("invalid lock URI", "invalid prefix", 1))
        }
        other => other,
    }
}

impl Listing {
    /// Lists below `prefix` (a URI or a path, as a lock URI is written), with `options` as
    /// a lock takes them; each listing request may take `request_timeout`. Makes no request
    /// yet, but a local folder that does not exist is refused at once.
    pub fn new(
        prefix: &str,
        options: &super::Access,
        request_timeout: Duration,
    ) -> Result<Listing> {
        let place = Place::of(prefix, options, Sharing::Shared).map_err(as_prefix_error)?;
        let mut shown = prefix.trim_end_matches('/').to_string();
        if shown.ends_with(':') {
            shown.push_str("//"); // `file:///`: the root, named `file://` + `/name`
        }
        let source = match place {
            Place::Folder(root) => {
                if !root.is_dir() {
                    return Err(Error::InvalidArgument(format!(
                        "prefix {prefix}: no folder at {}; check the path",
                        root.display()
                    )));
                }
                Source::Files {
                    pending: Some(vec![root.clone()]),
                    root,
                }
            }
            Place::Objects { client, key } => objects(client, key, &shown, request_timeout)?,
        };
        Ok(Listing {
            prefix: shown,
            source,
            failed: None,
        })
    }

    /// The prefix as given, without a trailing `/`.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// Up to about `max` more lock URIs (a folder read whole may add a few more); empty
    /// once every one has been listed.
    pub async fn next_page(&mut self, max: usize) -> Result<Vec<String>> {
        if let Some(why) = &self.failed {
            return Err(Error::Store {
                uri: self.prefix.clone(),
                message: format!("the listing failed earlier ({why}); start it again"),
                kind: crate::errors::StoreErrorKind::Permanent,
            });
        }
        let page = self.read_page(max).await;
        if let Err(e) = &page {
            self.failed = Some(e.to_string());
        }
        page
    }

    async fn read_page(&mut self, max: usize) -> Result<Vec<String>> {
        match &mut self.source {
            Source::Objects { gate, key, stream } => {
                let mut page = Vec::new();
                while page.len() < max {
                    let Some(listed) = stream else { break };
                    let next = gate
                        .call_once("listing", async { listed.next().await.transpose() })
                        .await;
                    let meta = match next {
                        Ok(Some(meta)) => meta,
                        Ok(None) => {
                            *stream = None;
                            break;
                        }
                        Err(gate::Failure::Store(e))
                            if names_a_missing_bucket(&e.to_string()).is_some() =>
                        {
                            let msg = e.to_string();
                            let what = names_a_missing_bucket(&msg).unwrap_or("");
                            return Err(missing_bucket(&self.prefix, what, &msg));
                        }
                        Err(failure) => return Err(gate.error(failure, "listing")),
                    };
                    if meta.location.filename() != Some(LOCKFILE_NAME) {
                        continue;
                    }
                    let full = meta.location.as_ref();
                    let dir = full
                        .strip_suffix(LOCKFILE_NAME)
                        .unwrap_or(full)
                        .trim_end_matches('/');
                    let below = dir.strip_prefix(key.as_str()).unwrap_or(dir);
                    page.push(join(&self.prefix, below.trim_start_matches('/')));
                }
                Ok(page)
            }
            Source::Files { root, pending } => {
                let Some(mut dirs) = pending.take() else {
                    return Ok(Vec::new());
                };
                let root = root.clone();
                let (found, dirs) = tokio::task::spawn_blocking(move || {
                    let found = walk(&root, &mut dirs, max);
                    (found, dirs)
                })
                .await
                .map_err(|e| Error::Store {
                    uri: self.prefix.clone(),
                    message: format!("listing the folder failed: {e}"),
                    kind: crate::errors::StoreErrorKind::Permanent,
                })?;
                let found = found.map_err(|(dir, e)| Error::Store {
                    uri: self.prefix.clone(),
                    message: format!("listing {} failed: {e}", dir.display()),
                    kind: crate::errors::StoreErrorKind::Permanent,
                })?;
                if !dirs.is_empty() {
                    *pending = Some(dirs);
                }
                Ok(found
                    .into_iter()
                    .map(|rel| join(&self.prefix, &rel))
                    .collect())
            }
        }
    }
}

fn objects(
    client: std::sync::Arc<client::Client>,
    key: String,
    shown: &str,
    request_timeout: Duration,
) -> Result<Source> {
    let path = Path::parse(&key)
        .map_err(|e| Error::InvalidArgument(format!("invalid prefix {shown}: {e}")))?;
    let stream = client
        .store()
        .list((!key.is_empty()).then_some(&path))
        .boxed();
    let gate = Gate::new(
        client,
        shown.to_string(),
        gate::Timeouts::at_least(request_timeout),
    );
    Ok(Source::Objects {
        gate,
        key,
        stream: Some(stream),
    })
}

fn join(prefix: &str, below: &str) -> String {
    if below.is_empty() {
        prefix.to_string()
    } else {
        format!("{prefix}/{below}")
    }
}

/// Reads folders off `dirs` (depth first, names in order) until `max` lockfiles are found;
/// their folders relative to `root`, with `/` between names. Links are not followed, so a
/// link to a parent folder cannot loop.
fn walk(
    root: &std::path::Path,
    dirs: &mut Vec<PathBuf>,
    max: usize,
) -> std::result::Result<Vec<String>, (PathBuf, std::io::Error)> {
    let mut found = Vec::new();
    while found.len() < max {
        let Some(dir) = dirs.pop() else { break };
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            // Removed since its parent was read (a lock folder pruned, a probe's scratch).
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && dir != root => continue,
            // Someone else's folder below the prefix (`lost+found`): no lock of ours there.
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied && dir != root => {
                log::warn!("{}: not listed: {e}", dir.display());
                continue;
            }
            Err(e) => return Err((dir, e)),
        };
        let mut subdirs = Vec::new();
        let mut has_lockfile = false;
        for entry in entries {
            let entry = entry.map_err(|e| (dir.clone(), e))?;
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                subdirs.push(entry.path());
            } else if kind.is_file() && entry.file_name() == LOCKFILE_NAME {
                has_lockfile = true;
            }
        }
        if has_lockfile {
            let rel = dir.strip_prefix(root).unwrap_or(&dir);
            let names: Vec<_> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy())
                .collect();
            found.push(names.join("/"));
        }
        // Popped from the end: reversed, so that names come out in order.
        subdirs.sort();
        dirs.extend(subdirs.into_iter().rev());
    }
    Ok(found)
}
