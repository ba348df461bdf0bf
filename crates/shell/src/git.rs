//! `git-upload-pack` / `git-receive-pack` over ssh: git's own services on the hosted bare
//! repository, speaking to the client through the ssh channel (this process's stdin and
//! stdout). Pushes get what HTTP pushes get: the repository created on first push with
//! the pre-receive hook, the hook's callback to the running server, HEAD fixed afterwards.

use std::path::Path;
use std::process::{Command, ExitStatus};

use crate::{Settings, ShellError};
use git_xet_deployment::repos;
use git_xet_deployment::writers::{self, WriterLock};
use git_xet_identity::auth::{self, Scope};
use git_xet_index::RepoName;

/// Lifetime of the read token a push hands its pre-receive hook (as over HTTP).
const HOOK_TOKEN_TTL: u64 = 15 * 60;

/// Runs `git upload-pack` (`push == false`) or `git receive-pack` on `repo`.
pub fn serve(settings: &Settings, repo: &RepoName, push: bool) -> Result<ExitStatus, ShellError> {
    let root = git_xet_deployment::running::repos_dir(&settings.data_dir);
    let dir = repo.bare_dir(&root);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| ShellError::Io("starting the async runtime".into(), e))?;
    let mut hook_env = Vec::new();
    if push {
        // Without the running server the hook could not check the push: say so now.
        let urls = git_xet_deployment::running::read(&settings.data_dir)?;
        let keys = settings.keys()?;
        let hook = repos::hook_script(settings.program.as_deref());
        runtime
            .block_on(async {
                repos::ensure_repo(&root, repo, &hook, false).await?;
                repos::install_hook(&dir, &hook).await
            })
            .map_err(|e| ShellError::Git(format!("preparing {repo}: {e}")))?;
        // As over HTTP: the hook acts as the pusher, which is how it tells the pusher's
        // locks from other users'.
        let holder = settings.holder();
        let (token, _) = auth::issue_for(&keys, repo, Scope::Read, HOOK_TOKEN_TTL, &holder);
        hook_env = vec![
            ("GIT_XET_SERVER_URL", urls.internal_url),
            ("GIT_XET_REPO", repo.to_string()),
            ("GIT_XET_TOKEN", token),
            ("GIT_XET_USER", holder.user),
            ("GIT_XET_CHECK_LOCKS", "1".into()),
        ];
    } else if !dir.exists() {
        return Err(ShellError::NoRepo(repo.to_string()));
    }
    // A push holds the repository's writer lock, which git inherits, and recovers what a
    // crashed writer left (git_xet_deployment::writers).
    let writer = match push {
        true => Some(
            WriterLock::acquire(&dir)
                .map_err(|e| ShellError::Io(format!("locking {repo} for writing"), e))?,
        ),
        false => None,
    };
    let started = std::time::SystemTime::now();
    let status = run_git(settings, &dir, writer.as_ref(), &hook_env)?;
    if push {
        runtime.block_on(repos::fix_head(&dir));
        // git has answered the client already: this only narrows the window (see
        // docs/server-operations.md, Durability).
        if let Err(e) = repos::sync_names(&dir, started) {
            tracing::warn!("fsyncing the directories of {}: {e}", dir.display());
        }
    }
    drop(writer);
    Ok(status)
}

fn run_git(
    settings: &Settings,
    dir: &Path,
    writer: Option<&WriterLock>,
    hook_env: &[(&str, String)],
) -> Result<ExitStatus, ShellError> {
    use std::os::unix::process::CommandExt;
    let user = &settings.rules.user;
    let service = match writer {
        Some(_) => "receive-pack",
        None => "upload-pack",
    };
    let mut cmd = Command::new("git");
    cmd.args(repos::FSYNC_CONFIG)
        .arg(service)
        .arg(dir)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", &settings.data_dir)
        .env("GIT_COMMITTER_NAME", user)
        .env("GIT_COMMITTER_EMAIL", format!("{user}@ssh"));
    // Protocol v2, when sshd passes the client's GIT_PROTOCOL (AcceptEnv GIT_PROTOCOL).
    if let Some(protocol) = std::env::var("GIT_PROTOCOL")
        .ok()
        .filter(|p| p.len() < 256 && p.bytes().all(|b| b.is_ascii_graphic()))
    {
        cmd.env("GIT_PROTOCOL", protocol);
    }
    for (k, v) in hook_env {
        cmd.env(k, v);
    }
    if let Some(writer) = writer {
        // SAFETY: keep_open only calls fcntl, which is async-signal-safe.
        unsafe { cmd.pre_exec(writers::keep_open(writer.fd())) };
    }
    cmd.status()
        .map_err(|e| ShellError::Io(format!("running git {service}"), e))
}
