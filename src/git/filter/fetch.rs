//! Objects the smudge side needs but the store lacks (a clone, a pull, a checkout of
//! another branch): asked for with the LFS Batch API offering `xet`, and reconstructed with
//! the same backend the transfer agent uses, so local data and the chunk cache are reused
//! and the sha256 is checked once, as the file is written. Small objects are fetched many at
//! a time ([`Fetcher::fetch_many`]); a large one alone, with its bytes handed to the filter
//! as they are written ([`Fetcher::fetch_tapped`]).
//!
//! One fetcher lives for the whole filter process: the batch client, the credentials, the
//! async runtime and the CAS client with its caches are set up on the first missing object
//! and reused for the rest of the checkout.

use std::collections::HashMap;
use std::path::PathBuf;

use crate::client::{ContentTap, ProgressFn};
use crate::git::filter::store::LfsStore;
use crate::git::http::RemoteHttp;
use crate::git::repo::Repo;
use crate::git::GitError;
use crate::lfs::agent::TransferBackend;
use crate::lfs::batch::{BatchClient, BatchObject, BATCH_SIZE};
use crate::lfs::pointer::{Oid, Pointer};
use crate::lfs::protocol::{InitRequest, Operation, TransferRequest};
use crate::lfs::xet_backend::XetBackend;

/// Objects downloaded at once when many are wanted (a large one is already fetched in
/// parallel ranges by the client).
const PARALLEL_DOWNLOADS: usize = 8;
/// ... and when all of them are small: each is then two round trips (reconstruction,
/// xorb range) and little else, so more at once hide the latency of a distant server.
const PARALLEL_SMALL_DOWNLOADS: usize = 32;
/// Objects up to this size count as small.
const SMALL_OBJECT: u64 = 1 << 20;
/// Batch API requests made at once; their objects are then downloaded as one stream, so
/// that the downloads do not pause for a batch request every [`BATCH_SIZE`] objects.
const BATCHES_AT_ONCE: usize = 10;

pub struct Fetcher {
    /// `None` when the endpoint is not HTTP(S): everything goes to git-lfs.
    batch: Option<BatchClient>,
    runtime: tokio::runtime::Runtime,
    backend: XetBackend,
}

/// What became of a fetch.
#[derive(Clone, Debug)]
pub enum Fetched {
    /// The object is now in the store, verified.
    Stored(PathBuf),
    /// The server does not offer `xet` for it (or is not an HTTP server, such as a local
    /// path git-lfs reads directly): git-lfs must fetch it the way it knows.
    NotXet,
}

impl Fetcher {
    pub fn new(repo: &Repo) -> Result<Fetcher, GitError> {
        let remote = repo.default_remote()?;
        let remote_http = RemoteHttp::of(repo, &remote)?;
        let batch = if remote_http.is_http() {
            Some(remote_http.batch_client()?)
        } else {
            None
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| GitError::Failed(format!("cannot start the async runtime: {e}")))?;
        let env = crate::git::transfer::agent_env_for(repo, LfsStore::of(repo), &remote_http);
        let mut backend = XetBackend::for_env(env);
        backend.init(&InitRequest {
            operation: Operation::Download,
            remote,
            concurrent: false,
            concurrent_transfers: 1,
        })?;
        Ok(Fetcher {
            batch,
            runtime,
            backend,
        })
    }

    /// Brings the objects of many files into `store`: one Batch API request per
    /// [`BATCH_SIZE`] objects (`BATCHES_AT_ONCE` of them at a time), each object
    /// downloaded once however many files share it. One result per file, in order.
    pub fn fetch_many(
        &mut self,
        files: &[(&str, &Pointer)],
        store: &LfsStore,
    ) -> Vec<Result<Fetched, GitError>> {
        let mut unique: Vec<(&str, &Pointer)> = Vec::new();
        for &(path, pointer) in files {
            if !unique.iter().any(|(_, p)| p.oid == pointer.oid) {
                unique.push((path, pointer));
            }
        }
        let mut outcome: HashMap<Oid, Result<Fetched, String>> = HashMap::new();
        for group in unique.chunks(BATCH_SIZE * BATCHES_AT_ONCE) {
            let mut requests = Vec::new();
            let mut requested = Vec::new();
            for (&(path, pointer), wanted) in group.iter().zip(self.requests_for(group)) {
                match wanted {
                    Ok(Some(r)) => {
                        requests.push(r);
                        requested.push((path, pointer));
                    }
                    Ok(None) => {
                        outcome.insert(pointer.oid, Ok(Fetched::NotXet));
                    }
                    Err(e) => {
                        outcome.insert(pointer.oid, Err(e));
                    }
                }
            }
            let parallel = if requested.iter().all(|(_, p)| p.size <= SMALL_OBJECT) {
                PARALLEL_SMALL_DOWNLOADS
            } else {
                PARALLEL_DOWNLOADS
            };
            let results = self.backend.download_many(&requests, parallel);
            for ((path, pointer), result) in requested.into_iter().zip(results) {
                outcome.insert(pointer.oid, stored(store, path, pointer, result));
            }
        }
        files
            .iter()
            .map(|(_, p)| match &outcome[&p.oid] {
                Ok(f) => Ok(f.clone()),
                Err(e) => Err(GitError::Failed(e.clone())),
            })
            .collect()
    }

    /// Brings `pointer`'s object into `store`, handing its bytes to `tap` while they are
    /// written, and how far it got to `progress`. Nothing passes through the tap unless the
    /// object comes through XET; what did is the object's content only if the result is
    /// `Stored`.
    pub fn fetch_tapped(
        &mut self,
        pointer: &Pointer,
        pathname: &str,
        store: &LfsStore,
        tap: ContentTap,
        progress: Option<ProgressFn>,
    ) -> Result<Fetched, GitError> {
        let group = [(pathname, pointer)];
        let wanted = self
            .requests_for(&group)
            .pop()
            .expect("one answer per object");
        let request = match wanted {
            Ok(Some(r)) => r,
            Ok(None) => return Ok(Fetched::NotXet),
            Err(e) => return Err(GitError::Failed(e)),
        };
        let result = self.backend.download_tapped(&request, tap, progress);
        stored(store, pathname, pointer, result).map_err(GitError::Failed)
    }

    /// One Batch API request per [`BATCH_SIZE`] objects of `group`, all at once; per
    /// object, its transfer request, `None` when the server does not offer `xet`, or why it
    /// cannot be fetched.
    fn requests_for(
        &self,
        group: &[(&str, &Pointer)],
    ) -> Vec<Result<Option<TransferRequest>, String>> {
        let parts: Vec<&[(&str, &Pointer)]> = group.chunks(BATCH_SIZE).collect();
        let answers = match &self.batch {
            None => parts.iter().map(|_| Ok(None)).collect(),
            Some(batch) => self
                .runtime
                .block_on(futures::future::join_all(parts.iter().map(
                    |part| async move {
                        let specs: Vec<(Oid, u64)> =
                            part.iter().map(|(_, p)| (p.oid, p.size)).collect();
                        batch
                            .batch(Operation::Download, &["xet", "basic"], &specs)
                            .await
                            .map(|a| (a.transfer == "xet").then_some(a))
                    },
                ))),
        };
        let mut requests = Vec::with_capacity(group.len());
        for (part, answer) in parts.iter().zip(answers) {
            for &(path, pointer) in part.iter() {
                requests.push(match &answer {
                    Err(e) => Err(e.to_string()),
                    Ok(None) => Ok(None),
                    Ok(Some(answer)) => {
                        let entry = answer.objects.iter().find(|o| o.oid == pointer.oid);
                        self.request(pointer, entry, path)
                            .map(Some)
                            .map_err(|e| e.to_string())
                    }
                });
            }
        }
        requests
    }

    /// The transfer request for one object of a batch answer.
    fn request(
        &self,
        pointer: &Pointer,
        entry: Option<&BatchObject>,
        pathname: &str,
    ) -> Result<TransferRequest, GitError> {
        let endpoint = self.batch.as_ref().map(|b| b.endpoint()).unwrap_or("");
        if let Some(err) = entry.and_then(|e| e.error.as_ref()) {
            return Err(GitError::Failed(format!(
                "the LFS server at {endpoint} cannot give {pathname} ({}): {} (code {})",
                pointer.oid, err.message, err.code
            )));
        }
        let action = entry.and_then(|e| e.action.clone()).ok_or_else(|| {
            GitError::Failed(format!(
                "the LFS server at {endpoint} gave no download for {pathname} ({})",
                pointer.oid
            ))
        })?;
        Ok(TransferRequest {
            operation: Operation::Download,
            oid: pointer.oid,
            size: pointer.size,
            path: None,
            action: Some(action),
        })
    }
}

/// A finished download moved into the store.
fn stored(
    store: &LfsStore,
    path: &str,
    pointer: &Pointer,
    result: Result<PathBuf, crate::lfs::LfsError>,
) -> Result<Fetched, String> {
    result
        .map_err(|e| GitError::Failed(format!("downloading {path}: {e}")))
        .and_then(|tmp| store.commit(&tmp, &pointer.oid))
        .map(Fetched::Stored)
        .map_err(|e| e.to_string())
}

impl Drop for Fetcher {
    fn drop(&mut self) {
        self.backend.terminate();
    }
}
