//! `git xet transfer`: the agent process git-lfs starts. Wires stdin/stdout to the protocol
//! state machine and gives the XET backend what it needs from git: repository paths and
//! credentials.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use crate::command::Git;
use crate::outgoing::OutgoingBlobs;
use crate::repo::Repo;
use crate::GitError;
use git_xet_lfs::agent::{self, Ending};
use git_xet_lfs::coordinator::{self, Follower};
use git_xet_lfs::objects::{OutgoingObjects, PushContents};
use git_xet_lfs::progress::AnswerSink;
use git_xet_lfs::protocol::{InitRequest, Operation};
use git_xet_lfs::xet_backend::{EnvStart, XetBackend};
use git_xet_lfs::LfsError;

/// Runs the agent on stdin/stdout until git-lfs sends `terminate`.
pub fn run_stdio() -> anyhow::Result<ExitCode> {
    let mut backend =
        XetBackend::new(Box::new(env_for_session)).with_quick_follow(Box::new(quick_follow));
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
        // The configuration (lfs.storage, remotes, http.*) is read once, as git-lfs does.
        let repo = Repo::discover_with_config(&Git::in_dir(&cwd)).map_err(setup_failed)?;
        let store = repo.lfs_store();
        let mut env = crate::objects::env_with_store(&repo, &remote, operation, store)
            .map_err(setup_failed)?;
        if operation == Operation::Upload {
            env.outgoing = Some(outgoing_objects(repo, remote));
        }
        Ok(env)
    };
    if quick {
        Ok(EnvStart::Later(Box::new(discover)))
    } else {
        discover().map(EnvStart::Ready)
    }
}

/// Works out what a push to `remote` from `repo` may contain, for its coordinator's
/// read-ahead (once, when a Batch API answer first lists objects to read ahead).
fn outgoing_objects(repo: Repo, remote: String) -> OutgoingObjects {
    Arc::new(move || {
        let blobs =
            OutgoingBlobs::list(&repo, &remote).map_err(|e| LfsError::Outgoing(Arc::new(e)))?;
        tracing::debug!("{} blobs and commits this push may send", blobs.len());
        Ok(Box::new(blobs) as Box<dyn PushContents>)
    })
}

/// Joins the push's coordinator for `remote` when the current directory's repository plainly
/// has its git directory at `.git` here (see [`plain_xet_dir`]), without running git.
fn quick_follow(remote: &str) -> Option<Follower> {
    let cwd = std::env::current_dir().ok()?;
    let xet_dir = plain_xet_dir(&cwd)?;
    coordinator::follow(&xet_dir, remote)
}

/// The xet directory of the repository in `dir`, when it is beyond doubt without asking git:
/// no environment variable moves the git directory, and `dir/.git` is a directory owned by
/// this user (git refuses another's) that is not a worktree's (no `commondir`). Then git's
/// `--git-common-dir` is `dir/.git` and [`Repo::xet_dir`] is `dir/.git/xet` (no setting
/// moves it). Anything else: `None`, and git is asked as usual.
fn plain_xet_dir(dir: &Path) -> Option<PathBuf> {
    if ["GIT_DIR", "GIT_COMMON_DIR", "GIT_WORK_TREE"]
        .iter()
        .any(|v| std::env::var_os(v).is_some())
    {
        return None;
    }
    let git_dir = dir.join(".git");
    let meta = std::fs::symlink_metadata(&git_dir).ok()?;
    if !meta.is_dir() || !git_xet_io::platform::file::owned_by_this_user(&meta) {
        return None;
    }
    if std::fs::symlink_metadata(git_dir.join("commondir")).is_ok() {
        return None;
    }
    Some(git_dir.join("xet"))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Where the quick path answers, it names the xet directory git's discovery finds (the
    /// socket the coordinator listens on); a linked worktree, a gitfile or a subdirectory
    /// leave it to git.
    #[test]
    fn a_plain_xet_dir_is_the_one_git_finds() {
        if ["GIT_DIR", "GIT_COMMON_DIR", "GIT_WORK_TREE"]
            .iter()
            .any(|v| std::env::var_os(v).is_some())
        {
            return; // the quick path is off, as it should be
        }
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let top = root.join("r");
        let git = |at: &Path, args: &[&str]| {
            let out = std::process::Command::new("git")
                .current_dir(at)
                .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
                .args(args)
                .output()
                .unwrap();
            assert!(out.status.success(), "git {args:?}");
        };
        git(&root, &["init", "-q", "r"]);
        git(&top, &["commit", "-q", "--allow-empty", "-m", "x"]);
        let quick = plain_xet_dir(&top).expect("a plain repository");
        assert_eq!(quick, Repo::discover(&top).unwrap().xet_dir());
        std::fs::create_dir(top.join("sub")).unwrap();
        assert_eq!(plain_xet_dir(&top.join("sub")), None);
        git(&top, &["worktree", "add", "-q", "../wt"]);
        assert_eq!(plain_xet_dir(&root.join("wt")), None);
        // A `.git` directory with a `commondir` (a worktree's layout) is not plain either.
        let odd = root.join("odd");
        std::fs::create_dir_all(odd.join(".git")).unwrap();
        std::fs::write(odd.join(".git/commondir"), "../r/.git\n").unwrap();
        assert_eq!(plain_xet_dir(&odd), None);
    }
}
