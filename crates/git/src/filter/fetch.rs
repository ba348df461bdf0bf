//! Objects the smudge side needs but the store lacks (a clone, a pull, a checkout of
//! another branch): asked for with the LFS Batch API offering `xet`, and reconstructed with
//! the same backend the transfer agent uses, so local data and the chunk cache are reused
//! and the sha256 is checked once, as the file is written. Small objects are fetched many at
//! a time, each answered as it finishes ([`Fetcher::fetch_each`]); a large one alone, with
//! its bytes handed to the filter as they are written ([`Fetcher::fetch_tapped`]).
//!
//! One fetcher lives for the whole filter process: the batch client, the credentials, the
//! async runtime and the CAS client with its caches are set up on the first missing object
//! and reused for the rest of the checkout.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use crate::endpoint;
use crate::repo::Repo;
use crate::ssh::SshFailure;
use crate::GitError;
use git_xet_client::{CasClient, ContentTap, ProgressFn};
use git_xet_core::MerkleHash;
use git_xet_lfs::batch::{BatchClient, BatchResponse, BATCH_SIZE};
use git_xet_lfs::objects::{ObjectDownload, ObjectService};
use git_xet_lfs::pointer::{Oid, Pointer};
use git_xet_lfs::protocol::Operation;
use git_xet_lfs::store::LfsStore;
use git_xet_lfs::LfsError;

/// Objects downloaded at once when many are wanted (a large one is already fetched in
/// parallel ranges by the client).
const PARALLEL_DOWNLOADS: usize = 8;
/// ... and when all of them are small: each is then one round trip (its xorb range; the
/// reconstructions come 100 to a query) and little else, so more at once hide the latency
/// of a distant server (a server takes 256 connections from one address by default). Files
/// pushed together share their xorb bytes (one GET per run, the others wait for it), so
/// two hundred at once fetch a pull of 200 changed files in one round of round trips, not
/// four.
const PARALLEL_SMALL_DOWNLOADS: usize = 200;
/// Objects up to this size count as small.
const SMALL_OBJECT: u64 = 1 << 20;
/// Batch API requests made at once; their objects are then downloaded as one stream, so
/// that the downloads do not pause for a batch request every [`BATCH_SIZE`] objects.
const BATCHES_AT_ONCE: usize = 10;

pub struct Fetcher {
    /// `Err` when no Batch API request can be made (not an HTTP server, ssh authenticate
    /// failed): everything goes to git-lfs, for this reason.
    batch: Result<BatchClient, Handoff>,
    runtime: tokio::runtime::Handle,
    service: ObjectService,
}

/// What became of a fetch.
#[derive(Clone, Debug)]
pub enum Fetched {
    /// The object is now in the store, verified.
    Stored(PathBuf),
    /// XET cannot bring it (the reason says why): git-lfs must fetch it the way it knows.
    GitLfs(Handoff),
}

/// Why an object is handed to git-lfs rather than fetched through XET. Decided from typed
/// errors; shown in the debug log.
#[derive(Clone, Debug)]
pub enum Handoff {
    /// The LFS server is not an HTTP server (a local path git-lfs reads directly).
    NotHttp,
    /// The server chose another transfer than `xet` (it named this one).
    NoXet(String),
    /// `git-lfs-authenticate` over ssh failed (a `git-lfs-transfer`-only server, a refused
    /// login, ...).
    SshAuthenticate(SshFailure),
    /// The Batch API request failed before any byte came (after its retries): TLS,
    /// proxy, unreachable, credentials, an error status, an answer that is not one. The
    /// error is one [`hands_off`] accepts.
    Batch(Arc<LfsError>),
}

impl std::fmt::Display for Handoff {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Handoff::NotHttp => write!(f, "the LFS endpoint is not an HTTP server"),
            Handoff::NoXet(t) => write!(f, "the server chose the `{t}` transfer, not xet"),
            Handoff::SshAuthenticate(kind) => write!(f, "ssh authentication: {kind}"),
            Handoff::Batch(e) => write!(f, "Batch API: {e}"),
        }
    }
}

/// Whether a failed Batch API request is one git-lfs may get past (its own settings,
/// credentials, retries, transfers): every transport failure and error status, and an
/// answer that is not a Batch API answer.
fn hands_off(e: &LfsError) -> bool {
    matches!(
        e,
        LfsError::Http(_) | LfsError::Status(_) | LfsError::BadAnswer { .. }
    )
}

impl Fetcher {
    pub fn new(repo: &Repo) -> Result<Fetcher, GitError> {
        let remote = repo.default_remote()?;
        let resolved = match endpoint::resolve(repo, &remote, Operation::Download) {
            Ok(Some(r)) => Ok(r),
            Ok(None) => Err(Handoff::NotHttp),
            Err(GitError::SshAuthenticate { kind, .. }) => Err(Handoff::SshAuthenticate(kind)),
            Err(e) => return Err(e),
        };
        let batch = match &resolved {
            Ok(r) => match r.batch_client() {
                Ok(b) => Ok(b),
                // Settings that cannot be used (a CA file that is not there...): git-lfs
                // reads the same settings and says what is wrong with them.
                Err(GitError::Lfs(e)) if hands_off(&e) => Err(Handoff::Batch(Arc::new(e))),
                Err(e) => return Err(e),
            },
            Err(why) => Err(why.clone()),
        };
        // The process's runtime, which the object service blocks on too.
        let runtime = git_xet_io::runtime::handle().map_err(GitError::Runtime)?;
        // The requests of the objects' downloads (token refresh) authenticate as the
        // batch's did, with the same credentials.
        let env = match resolved {
            Ok(r) => crate::objects::env_for(repo, repo.lfs_store(), &r.http, r.auth),
            Err(_) => crate::objects::env(repo, &remote)?,
        };
        env.store.create_tmp_dir()?;
        Ok(Fetcher {
            batch,
            runtime,
            service: ObjectService::new(env),
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
        let mut results: Vec<Option<Result<Fetched, GitError>>> =
            files.iter().map(|_| None).collect();
        self.fetch_each(files, store, &mut |i, result| results[i] = Some(result));
        results
            .into_iter()
            .map(|r| r.expect("fetch_each answers every file"))
            .collect()
    }

    /// [`Self::fetch_many`], handing each file's result to `done` (with the file's index)
    /// as soon as its object is settled: the filter lists delayed files to git as they
    /// finish. Every file gets exactly one answer.
    pub fn fetch_each(
        &mut self,
        files: &[(&str, &Pointer)],
        store: &LfsStore,
        done: &mut dyn FnMut(usize, Result<Fetched, GitError>),
    ) {
        let mut unique: Vec<(&str, &Pointer)> = Vec::new();
        let mut sharing: HashMap<Oid, Vec<usize>> = HashMap::new();
        for (i, &(path, pointer)) in files.iter().enumerate() {
            let same = sharing.entry(pointer.oid).or_default();
            if same.is_empty() {
                unique.push((path, pointer));
            }
            same.push(i);
        }
        // An object's result, to every file that has it.
        let mut settle = |oid: &Oid, result: Result<Fetched, GitError>| {
            let result = result.map_err(Arc::new);
            for &i in sharing.get(oid).into_iter().flatten() {
                done(
                    i,
                    match &result {
                        Ok(f) => Ok(f.clone()),
                        Err(e) => Err(GitError::Shared(e.clone())),
                    },
                );
            }
        };
        for group in unique.chunks(BATCH_SIZE * BATCHES_AT_ONCE) {
            let mut requests = Vec::new();
            let mut requested = Vec::new();
            for (&(path, pointer), wanted) in group.iter().zip(self.requests_for(group)) {
                match wanted {
                    Ok(Ok(r)) => {
                        requests.push(r);
                        requested.push((path, pointer));
                    }
                    Ok(Err(why)) => settle(&pointer.oid, Ok(Fetched::GitLfs(why))),
                    Err(e) => settle(&pointer.oid, Err(GitError::Shared(e))),
                }
            }
            let mut finished = |j: usize, result: Result<PathBuf, LfsError>| {
                let (path, pointer) = requested[j];
                settle(&pointer.oid, stored(store, path, pointer, result));
            };
            // Small objects: more at once, and no local objects offered as chunk sources.
            let small = requested.iter().all(|(_, p)| p.size <= SMALL_OBJECT);
            let parallel = if small {
                PARALLEL_SMALL_DOWNLOADS
            } else {
                PARALLEL_DOWNLOADS
            };
            self.service
                .download_each(&requests, parallel, !small, &mut finished);
        }
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
        let request = match self.request_for(pathname, pointer)? {
            Ok(r) => r,
            Err(why) => return Ok(Fetched::GitLfs(why)),
        };
        let result = self.service.download_tapped(&request, tap, progress);
        stored(store, pathname, pointer, result)
    }

    /// Clients created from now on keep a chunk cache in `dir` of at most `max_bytes`.
    pub fn set_chunk_cache(&mut self, dir: PathBuf, max_bytes: u64) {
        self.service.set_chunk_cache(dir, max_bytes);
    }

    /// The CAS client and XET file hash through which `pointer`'s object is read in ranges
    /// (`git xet mount`), found with the Batch API exactly as for a download; or why XET
    /// cannot serve it.
    pub fn locate(
        &mut self,
        pointer: &Pointer,
    ) -> Result<Result<(CasClient, MerkleHash), Handoff>, GitError> {
        let request = match self.request_for("", pointer)? {
            Ok(r) => r,
            Err(why) => return Ok(Err(why)),
        };
        let hash = request
            .access
            .file_hash
            .ok_or_else(|| LfsError::Action("download action without X-Xet-Hash".into()))?;
        let client = self.service.client(&request.access)?;
        Ok(Ok((client, hash)))
    }

    /// [`Self::requests_for`] of one object.
    fn request_for(
        &self,
        pathname: &str,
        pointer: &Pointer,
    ) -> Result<Result<ObjectDownload, Handoff>, GitError> {
        let wanted = self
            .requests_for(&[(pathname, pointer)])
            .pop()
            .expect("one answer per object");
        wanted.map_err(GitError::Shared)
    }

    /// One Batch API request per [`BATCH_SIZE`] objects of `group`, all at once; per
    /// object, its transfer request, why git-lfs must fetch it instead, or why it cannot be
    /// fetched.
    fn requests_for(&self, group: &[(&str, &Pointer)]) -> Vec<Wanted> {
        let parts: Vec<&[(&str, &Pointer)]> = group.chunks(BATCH_SIZE).collect();
        let answers: Vec<Result<BatchAnswer, LfsError>> = match &self.batch {
            Err(why) => parts.iter().map(|_| Ok(Err(why.clone()))).collect(),
            Ok(batch) => self
                .runtime
                .block_on(futures::future::join_all(parts.iter().map(
                    |part| async move {
                        let specs: Vec<(Oid, u64)> =
                            part.iter().map(|(_, p)| (p.oid, p.size)).collect();
                        match batch
                            .batch(Operation::Download, &["xet", "basic"], &specs)
                            .await
                        {
                            Ok(a) if a.transfer == "xet" => Ok(Ok(a)),
                            Ok(a) => Ok(Err(Handoff::NoXet(a.transfer))),
                            Err(e) if hands_off(&e) => Ok(Err(Handoff::Batch(Arc::new(e)))),
                            Err(e) => Err(e),
                        }
                    },
                ))),
        };
        let mut requests = Vec::with_capacity(group.len());
        for (part, answer) in parts.iter().zip(answers) {
            // A failed request fails each of its objects alike.
            let answer = answer.map_err(|e| Arc::new(GitError::Lfs(e)));
            for &(path, pointer) in part.iter() {
                requests.push(match &answer {
                    Err(e) => Err(e.clone()),
                    Ok(Err(why)) => Ok(Err(why.clone())),
                    Ok(Ok(answer)) => self
                        .request(pointer, answer, path)
                        .map(Ok)
                        .map_err(Arc::new),
                });
            }
        }
        requests
    }

    /// The download of one object of a batch answer.
    fn request(
        &self,
        pointer: &Pointer,
        answer: &BatchResponse,
        pathname: &str,
    ) -> Result<ObjectDownload, GitError> {
        let endpoint = self.batch.as_ref().map(|b| b.endpoint()).unwrap_or("");
        ObjectDownload::from_batch(answer, endpoint, pointer.oid, pointer.size).map_err(|e| {
            GitError::Fetch {
                path: pathname.to_string(),
                source: Box::new(e),
            }
        })
    }
}

/// One object of a batch: its download, or why git-lfs gets it; `Err` when it
/// cannot be fetched.
type Wanted = Result<Result<ObjectDownload, Handoff>, Arc<GitError>>;
/// A batch answer offering `xet`, or why git-lfs gets its objects.
type BatchAnswer = Result<BatchResponse, Handoff>;

/// A finished download moved into the store.
fn stored(
    store: &LfsStore,
    path: &str,
    pointer: &Pointer,
    result: Result<PathBuf, LfsError>,
) -> Result<Fetched, GitError> {
    let tmp = result.map_err(|source| GitError::Fetch {
        path: path.to_string(),
        source: Box::new(source),
    })?;
    Ok(Fetched::Stored(store.commit(&tmp, &pointer.oid)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use git_xet_client::TransportError;

    /// Every failure of the Batch API request that git-lfs may get past is handed to it,
    /// by kind; a failure of ours (a bug, the local engine) is not hidden behind git-lfs.
    #[test]
    fn batch_failures_hand_off_by_kind() {
        let url = || "https://h/info/lfs/objects/batch".to_string();
        let transport = [
            TransportError::Tls {
                url: url(),
                detail: "unknown issuer".into(),
            },
            TransportError::Proxy {
                url: url(),
                proxy: "http://p:3128".into(),
                detail: "refused".into(),
            },
            TransportError::Unreachable {
                url: url(),
                detail: "refused".into(),
            },
            TransportError::AuthRefused {
                url: url(),
                status: 401,
            },
            TransportError::Settings {
                setting: "http.sslCAInfo".into(),
                detail: "no such file".into(),
            },
        ];
        for e in transport {
            let e = LfsError::from(e);
            assert!(hands_off(&e), "{e}");
        }
        for status in [403, 404, 500, 503] {
            let e = LfsError::status("LFS batch request", url(), status, "no".into());
            assert!(hands_off(&e), "{e}");
        }
        let bad = LfsError::BadAnswer {
            url: url(),
            detail: "expected value".into(),
        };
        assert!(hands_off(&bad));
        assert!(!hands_off(&LfsError::Internal("a bug".into())));
        assert!(!hands_off(&LfsError::WrongSize {
            oid: Oid([7; 32]),
            got: 1,
            expected: 2,
        }));
        // The debug log's reason names the failure.
        let why = Handoff::Batch(Arc::new(LfsError::from(TransportError::Tls {
            url: url(),
            detail: "unknown issuer".into(),
        })));
        assert!(why.to_string().contains("TLS failed"), "{why}");
    }
}
