//! `git xet transfer`: the agent process git-lfs starts. Wires stdin/stdout to the protocol
//! state machine and gives the XET backend what it needs from git: repository paths and
//! credentials.

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use crate::git::command::Git;
use crate::git::endpoint;
use crate::git::filter::store::LfsStore;
use crate::git::repo::Repo;
use crate::lfs::agent::{self, Ending};
use crate::lfs::progress::AnswerSink;
use crate::lfs::protocol::{InitRequest, Operation};
use crate::lfs::xet_backend::{AgentEnv, AuthorizationFn, EnvStart, XetBackend};
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
        .map_err(|e| LfsError::Transfer(format!("cannot read the current directory: {e}")))?;
    let quick = looks_like_repository(&cwd);
    let remote = init.remote.clone();
    let operation = init.operation;
    let discover = move || {
        // The first transfer waits for both answers: git is asked both at once.
        let storage = {
            let cwd = cwd.clone();
            std::thread::spawn(move || Git::in_dir(cwd).try_run(["config", "--get", "lfs.storage"]))
        };
        let repo = Repo::discover(&cwd).map_err(|e| LfsError::Transfer(e.to_string()))?;
        let store = match storage.join() {
            Ok(Ok(value)) => LfsStore::in_dir(&repo.lfs_dir_from(value.as_deref())),
            _ => LfsStore::of(&repo), // asked again, the usual way
        };
        Ok(agent_env_with_store(&repo, &remote, operation, store))
    };
    if quick {
        Ok(EnvStart::Later(Box::new(discover)))
    } else {
        discover().map(EnvStart::Ready)
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
///
/// Every agent that gets an object asks this of git, so it asks little: the remote and its
/// credentials are looked up only when first needed (token refresh), and `lfs.storage` once.
pub fn agent_env(repo: &Repo, remote: &str) -> AgentEnv {
    agent_env_with_store(repo, remote, Operation::Download, LfsStore::of(repo))
}

/// [`agent_env`] for `operation` with git-lfs's store already found.
fn agent_env_with_store(
    repo: &Repo,
    remote: &str,
    operation: Operation,
    store: LfsStore,
) -> AgentEnv {
    let repo_for_auth = repo.clone();
    let remote = remote.to_string();
    // For an ssh remote, `git-lfs-authenticate` (as git-lfs got the batch's authorization);
    // for http, the URL's or git's credentials.
    let authorization: AuthorizationFn = Arc::new(move |url: &str| {
        endpoint::authorization(&repo_for_auth, &remote, operation, url).map_err(|e| e.to_string())
    });
    AgentEnv {
        lfs_tmp_dir: store.tmp_dir().to_path_buf(),
        lfs_objects_dir: store.objects_dir().to_path_buf(),
        xet_dir: repo.xet_dir(),
        authorization,
        // The object store is the cache: with the reconstruction records under .git/xet,
        // a new version reuses the previous one from there. Writing every download a second
        // time into a chunk cache made a 1 GiB clone 15-25% slower (measured on this VM).
        chunk_cache: false,
    }
}
