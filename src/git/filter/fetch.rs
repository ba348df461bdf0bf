//! Objects the smudge side needs but the store lacks (a clone, a pull, a checkout of
//! another branch): asked for with the LFS Batch API offering `xet`, and reconstructed with
//! the same backend the transfer agent uses, so local data and the chunk cache are reused
//! and the sha256 is checked once, as the file is written.
//!
//! One fetcher lives for the whole filter process: the batch client, the credentials, the
//! async runtime and the CAS client with its caches are set up on the first missing object
//! and reused for the rest of the checkout.

use std::path::PathBuf;

use crate::git::credentials;
use crate::git::filter::store::LfsStore;
use crate::git::repo::Repo;
use crate::git::GitError;
use crate::lfs::agent::TransferBackend;
use crate::lfs::batch::BatchClient;
use crate::lfs::pointer::Pointer;
use crate::lfs::progress::{AnswerSink, Progress};
use crate::lfs::protocol::{InitRequest, Operation, TransferRequest};
use crate::lfs::xet_backend::XetBackend;

pub struct Fetcher {
    /// `None` when the endpoint is not HTTP(S): everything goes to git-lfs.
    batch: Option<BatchClient>,
    runtime: tokio::runtime::Runtime,
    backend: XetBackend,
}

/// What became of a fetch.
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
        let endpoint = repo.lfs_endpoint(&remote)?;
        let http = endpoint.starts_with("http://") || endpoint.starts_with("https://");
        let batch = if http {
            let remote_url = repo.remote_url(&remote).ok();
            let authorization =
                credentials::authorization(repo.git(), remote_url.as_deref(), &endpoint).ok();
            Some(BatchClient::new(&endpoint, authorization)?)
        } else {
            None
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| GitError::Failed(format!("cannot start the async runtime: {e}")))?;
        let env = crate::git::transfer::agent_env(repo, &remote);
        let mut backend = XetBackend::new(Box::new(move |_: &InitRequest| Ok(env.clone())));
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

    /// Brings `pointer`'s object into `store`.
    pub fn fetch(
        &mut self,
        pointer: &Pointer,
        pathname: &str,
        store: &LfsStore,
    ) -> Result<Fetched, GitError> {
        let Some(batch) = &self.batch else {
            return Ok(Fetched::NotXet);
        };
        let answer = self.runtime.block_on(batch.batch(
            Operation::Download,
            &["xet", "basic"],
            &[(pointer.oid, pointer.size)],
        ))?;
        if answer.transfer != "xet" {
            return Ok(Fetched::NotXet);
        }
        let entry = answer.objects.iter().find(|o| o.oid == pointer.oid);
        if let Some(err) = entry.and_then(|e| e.error.as_ref()) {
            return Err(GitError::Failed(format!(
                "the LFS server at {} cannot give {pathname} ({}): {} (code {})",
                batch.endpoint(),
                pointer.oid,
                err.message,
                err.code
            )));
        }
        let action = entry.and_then(|e| e.action.clone()).ok_or_else(|| {
            GitError::Failed(format!(
                "the LFS server at {} gave no download for {pathname} ({})",
                batch.endpoint(),
                pointer.oid
            ))
        })?;
        let request = TransferRequest {
            operation: Operation::Download,
            oid: pointer.oid,
            size: pointer.size,
            path: None,
            action: Some(action),
        };
        let progress = Progress::new(
            AnswerSink::new(std::io::sink()),
            &pointer.oid.to_hex(),
            pointer.size,
        );
        let downloaded = self
            .backend
            .download(&request, &progress)
            .map_err(|e| GitError::Failed(format!("downloading {pathname}: {e}")))?;
        Ok(Fetched::Stored(store.commit(&downloaded, &pointer.oid)?))
    }
}

impl Drop for Fetcher {
    fn drop(&mut self) {
        self.backend.terminate();
    }
}
