//! `git xet transfer`: the agent process git-lfs starts. Wires stdin/stdout to the protocol
//! state machine and gives the XET backend what it needs from git: repository paths and
//! credentials.

use std::process::ExitCode;
use std::sync::Arc;

use crate::git::credentials;
use crate::git::filter::store::LfsStore;
use crate::git::repo::Repo;
use crate::lfs::agent::{self, Ending};
use crate::lfs::progress::AnswerSink;
use crate::lfs::protocol::InitRequest;
use crate::lfs::xet_backend::{AgentEnv, AuthorizationFn, XetBackend};
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

/// The repository the agent runs in, and how to authenticate to its LFS server.
fn env_for_session(init: &InitRequest) -> Result<AgentEnv, LfsError> {
    let repo = Repo::current().map_err(|e| LfsError::Transfer(e.to_string()))?;
    Ok(agent_env(&repo, &init.remote))
}

/// The agent environment of `repo` talking to `remote` (a name or URL).
///
/// git-lfs starts its agents one after another, each waiting for the previous one's `init`
/// answer, so what this asks git costs eight times over: the remote's URL is looked up only
/// when credentials are first needed (token refresh), and `lfs.storage` once.
pub fn agent_env(repo: &Repo, remote: &str) -> AgentEnv {
    let lookup = (!remote.is_empty()).then(|| (repo.clone(), remote.to_string()));
    let remote_url = std::sync::OnceLock::new();
    let git = repo.git().clone();
    let authorization: AuthorizationFn = Arc::new(move |url: &str| {
        let remote_url: &Option<String> = remote_url.get_or_init(|| {
            let (repo, remote) = lookup.as_ref()?;
            repo.remote_url(remote).ok()
        });
        credentials::authorization(&git, remote_url.as_deref(), url).map_err(|e| e.to_string())
    });
    let store = LfsStore::of(repo);
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
