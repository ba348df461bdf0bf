//! The object service's environment for a repository (`lfs/objects.rs`): git-lfs's store,
//! git-xet's directory, git's HTTP settings and the credentials of the LFS server, for the
//! transfer agent, the filter and migrate alike.

use std::sync::Arc;

use crate::endpoint;
use crate::http;
use crate::repo::Repo;
use crate::GitError;
use git_xet_client::transport::{Authenticator, HttpFactory};
use git_xet_lfs::objects::AgentEnv;
use git_xet_lfs::protocol::Operation;
use git_xet_lfs::store::LfsStore;

/// The agent environment of `repo` downloading from `remote` (a name or URL).
pub fn env(repo: &Repo, remote: &str) -> Result<AgentEnv, GitError> {
    env_with_store(repo, remote, Operation::Download, repo.lfs_store())
}

/// [`env`] for `operation` with git-lfs's store already found.
pub(crate) fn env_with_store(
    repo: &Repo,
    remote: &str,
    operation: Operation,
    store: LfsStore,
) -> Result<AgentEnv, GitError> {
    // For an ssh remote, `git-lfs-authenticate` (as git-lfs got the batch's authorization),
    // asked only when the token refresh needs it; for http, the URL's or git's credentials.
    let auth = match endpoint::authenticator(repo, remote, operation) {
        Ok(auth) => auth,
        // No remote to ask credentials for (a URL git-lfs was given...): git's HTTP
        // settings still apply; the token refresh goes without credentials. Configuration
        // the user must fix is reported instead.
        Err(e) if !e.is_misconfiguration() => {
            tracing::debug!("no LFS endpoint for {remote:?}: {e}");
            Arc::new(Authenticator::anonymous())
        }
        Err(e) => return Err(e),
    };
    Ok(env_for(repo, store, &http::factory(repo)?, auth))
}

/// The agent environment of `repo` with git's HTTP settings and `auth` for its requests.
pub fn env_for(
    repo: &Repo,
    store: LfsStore,
    http: &HttpFactory,
    auth: Arc<Authenticator>,
) -> AgentEnv {
    AgentEnv {
        store,
        xet_dir: repo.xet_dir(),
        auth,
        http: http.clone(),
        // The object store is the cache: with the reconstruction records under .git/xet,
        // a new version reuses the previous one from there. Writing every download a second
        // time into a chunk cache made a 1 GiB clone 15-25% slower (measured on this VM).
        chunk_cache: false,
        chunk_store: crate::store::chunk_store_of(repo),
        // Set by the transfer agent of a push (`transfer.rs`).
        outgoing: None,
    }
}
