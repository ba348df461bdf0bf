//! `git xet transfer`: the agent process git-lfs starts. Wires stdin/stdout to the protocol
//! state machine and gives the XET backend what it needs from git: repository paths and
//! credentials.

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use crate::client::transport::{Authenticator, HttpFactory};
use crate::git::command::Git;
use crate::git::config::ConfigSnapshot;
use crate::git::endpoint;
use crate::git::filter::store::LfsStore;
use crate::git::http;
use crate::git::repo::Repo;
use crate::git::GitError;
use crate::lfs::agent::{self, Ending};
use crate::lfs::progress::AnswerSink;
use crate::lfs::protocol::{InitRequest, Operation};
use crate::lfs::xet_backend::{AgentEnv, EnvStart, XetBackend};
use crate::lfs::LfsError;

/// Runs the agent on stdin/stdout until git-lfs sends `terminate`.
pub fn run_stdio() -> anyhow::Result<ExitCode> {
    let mut backend = XetBackend::new(Box::new(env_for_session));
    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    let sink = AnswerSink::new(std::io::stdout());
    let (ending, stats) = agent::run(&mut backend, &mut input, &sink)?;
    tracing::debug!(?stats, "session over");
    Ok(match ending {
        Ending::Terminated => ExitCode::SUCCESS,
        Ending::InputClosed => ExitCode::FAILURE,
    })
}

/// The repository the agent runs in, and how to authenticate to its LFS server. When the
/// directory plainly is a repository, git is asked only when a transfer needs it and `init`
/// is answered at once; otherwise the answer waits for git, the authority on what a
/// repository is, so that outside one `init` fails with code 32.
fn env_for_session(init: &InitRequest) -> Result<EnvStart, LfsError> {
    let cwd = std::env::current_dir()
        .map_err(|e| setup_failed(GitError::io("cannot read the current directory", e)))?;
    let quick = looks_like_repository(&cwd);
    let remote = init.remote.clone();
    let operation = init.operation;
    let discover = move || {
        // The first transfer waits for both answers: git is asked both at once. The
        // configuration (lfs.storage, remotes, http.*) is read once, as git-lfs does.
        let snapshot = {
            let cwd = cwd.clone();
            std::thread::spawn(move || ConfigSnapshot::load(&Git::in_dir(cwd)))
        };
        let repo = Repo::discover(&cwd).map_err(setup_failed)?;
        let (repo, store) = match snapshot.join() {
            Ok(Ok(snapshot)) => {
                let storage = snapshot.get("lfs.storage").map(str::to_string);
                let store = LfsStore::in_dir(&repo.lfs_dir_from(storage.as_deref()));
                (repo.with_config_snapshot(Arc::new(snapshot)), store)
            }
            _ => {
                let store = LfsStore::of(&repo); // asked again, the usual way
                (repo, store)
            }
        };
        agent_env_with_store(&repo, &remote, operation, store).map_err(setup_failed)
    };
    if quick {
        Ok(EnvStart::Later(Box::new(discover)))
    } else {
        discover().map(EnvStart::Ready)
    }
}

/// What git said when the agent's environment was worked out, as the lfs layer carries it
/// (an lfs error git passed on stays itself).
fn setup_failed(e: GitError) -> LfsError {
    match e {
        GitError::Lfs(e) => e,
        other => LfsError::Setup(Arc::new(other)),
    }
}

/// Whether `dir` is inside a repository by the signs git itself looks for first (`GIT_DIR`,
/// a `.git` here or above, a bare repository's layout), without running git.
fn looks_like_repository(dir: &Path) -> bool {
    std::env::var_os("GIT_DIR").is_some()
        || (dir.join("HEAD").is_file() && dir.join("objects").is_dir())
        || dir.ancestors().any(|d| d.join(".git").exists())
}

/// The agent environment of `repo` downloading from `remote` (a name or URL).
pub fn agent_env(repo: &Repo, remote: &str) -> Result<AgentEnv, GitError> {
    agent_env_with_store(repo, remote, Operation::Download, LfsStore::of(repo))
}

/// [`agent_env`] for `operation` with git-lfs's store already found.
fn agent_env_with_store(
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
        // settings still apply; the token refresh goes without credentials.
        Err(e) if !matches!(e, GitError::Config(_)) => {
            tracing::debug!("no LFS endpoint for {remote:?}: {e}");
            Arc::new(Authenticator::anonymous())
        }
        Err(e) => return Err(e),
    };
    Ok(agent_env_for(repo, store, &http::factory(repo)?, auth))
}

/// The agent environment of `repo` with git's HTTP settings and `auth` for its requests.
pub fn agent_env_for(
    repo: &Repo,
    store: LfsStore,
    http: &HttpFactory,
    auth: Arc<Authenticator>,
) -> AgentEnv {
    AgentEnv {
        lfs_tmp_dir: store.tmp_dir().to_path_buf(),
        lfs_objects_dir: store.objects_dir().to_path_buf(),
        xet_dir: repo.xet_dir(),
        auth,
        http: http.clone(),
        // The object store is the cache: with the reconstruction records under .git/xet,
        // a new version reuses the previous one from there. Writing every download a second
        // time into a chunk cache made a 1 GiB clone 15-25% slower (measured on this VM).
        chunk_cache: false,
    }
}
