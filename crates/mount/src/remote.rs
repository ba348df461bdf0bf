//! The blocks' source: LFS objects read in byte ranges through XET. The Batch API request,
//! credentials, TLS, proxies, ssh authentication and token refresh are the filter's own
//! ([`Fetcher`], one code path); each range is the client's download with a `range`
//! (reconstruction of that range only, chunks from the chunk cache when it has them).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use crate::blocks::RangeSource;
use crate::MountError;
use git_xet_client::{CasClient, DownloadOptions};
use git_xet_core::lfs::pointer::{Oid, Pointer};
use git_xet_core::MerkleHash;
use git_xet_git::filter::fetch::Fetcher;
use git_xet_git::repo::Repo;

/// LFS objects of one repository through its remote's XET server.
pub struct XetRemote {
    fetcher: Arc<Mutex<Option<Fetcher>>>,
    repo: Repo,
    cache: Option<(PathBuf, u64)>,
    located: Mutex<HashMap<Oid, (CasClient, MerkleHash)>>,
    runtime: tokio::runtime::Handle,
    /// Ranges land here before they are read back.
    scratch: tempfile::TempDir,
    counter: AtomicU64,
    timeout: Duration,
}

impl XetRemote {
    /// `cache`: the chunk cache (directory, size bound); `timeout`: how long one range
    /// may take, Batch API request included.
    pub fn new(
        repo: Repo,
        cache: Option<(PathBuf, u64)>,
        timeout: Duration,
    ) -> Result<XetRemote, MountError> {
        let runtime = git_xet_client::runtime::handle().map_err(MountError::Runtime)?;
        let xet_dir = repo.xet_dir();
        std::fs::create_dir_all(&xet_dir).map_err(|e| MountError::io(&xet_dir, e))?;
        let scratch = tempfile::Builder::new()
            .prefix("mount-")
            .tempdir_in(&xet_dir)
            .map_err(|e| MountError::io(&xet_dir, e))?;
        Ok(XetRemote {
            fetcher: Default::default(),
            repo,
            cache,
            located: Default::default(),
            runtime,
            scratch,
            counter: AtomicU64::new(0),
            timeout,
        })
    }

    /// The client and XET hash of `object`, asked once per object (the client refreshes
    /// its token by itself). The Batch API request runs on its own thread so that a
    /// server that does not answer costs the reader `timeout`, not a hang.
    fn locate(&self, object: &Pointer) -> Result<(CasClient, MerkleHash), MountError> {
        if let Some(found) = self.located.lock().expect("located").get(&object.oid) {
            return Ok(found.clone());
        }
        let (tx, rx) = mpsc::channel();
        let (fetcher, repo, cache, pointer) = (
            self.fetcher.clone(),
            self.repo.clone(),
            self.cache.clone(),
            object.clone(),
        );
        std::thread::spawn(move || {
            let mut guard = fetcher.lock().expect("fetcher");
            let result = (|| {
                if guard.is_none() {
                    let mut f = Fetcher::new(&repo)?;
                    if let Some((dir, max)) = cache {
                        f.set_chunk_cache(dir, max);
                    }
                    *guard = Some(f);
                }
                guard.as_mut().expect("set above").locate(&pointer)
            })();
            let _ = tx.send(result);
        });
        let found = match rx.recv_timeout(self.timeout) {
            Ok(Ok(Ok(found))) => found,
            Ok(Ok(Err(why))) => {
                return Err(MountError::Unavailable(format!(
                    "{} cannot be read through XET: {why}",
                    object.oid
                )))
            }
            Ok(Err(e)) => return Err(MountError::Git(Box::new(e))),
            Err(_) => {
                return Err(MountError::Timeout {
                    oid: object.oid.to_string(),
                    offset: 0,
                    seconds: self.timeout.as_secs(),
                })
            }
        };
        self.located
            .lock()
            .expect("located")
            .insert(object.oid, found.clone());
        Ok(found)
    }

    fn scratch_path(&self) -> PathBuf {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        self.scratch.path().join(format!("range-{n}"))
    }
}

impl RangeSource for XetRemote {
    fn fetch(&self, object: &Pointer, start: u64, len: u64) -> Result<Vec<u8>, MountError> {
        if len == 0 {
            return Ok(Vec::new());
        }
        let (client, hash) = self.locate(object)?;
        let output = self.scratch_path();
        let options = DownloadOptions {
            range: Some((start, start + len - 1)),
            ..Default::default()
        };
        let download = client.download(&hash, &output, options);
        let outcome = self
            .runtime
            .block_on(async { tokio::time::timeout(self.timeout, download).await });
        let result = match outcome {
            Err(_) => Err(MountError::Timeout {
                oid: object.oid.to_string(),
                offset: start,
                seconds: self.timeout.as_secs(),
            }),
            Ok(Err(e)) => Err(MountError::Client(e)),
            Ok(Ok(done)) => {
                tracing::debug!(
                    oid = %object.oid, start, len,
                    network = done.network_bytes, cache = done.cache_bytes,
                    "range read"
                );
                read_back(&output)
            }
        };
        let _ = std::fs::remove_file(&output);
        result
    }
}

fn read_back(path: &Path) -> Result<Vec<u8>, MountError> {
    std::fs::read(path).map_err(|e| MountError::io(path, e))
}
