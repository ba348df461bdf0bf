//! Hosted bare repositories under `DATA/repos/<org>/<name>.git`: created on first push,
//! with the pre-receive hook installed, and HEAD pointed at a branch that exists.

use std::path::{Path, PathBuf};

use tokio::process::Command;

use git_xet_index::repo_name::{RepoName, DATASETS};

/// What failed in a hosted repository.
#[derive(Debug, thiserror::Error)]
pub enum RepoError {
    /// A git command failed or did not start; the message names the command and git's
    /// stderr, never a path (it may reach a client).
    #[error("{0}")]
    Git(String),
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
    #[error("background task failed: {0}")]
    Task(#[from] tokio::task::JoinError),
}

pub type RepoResult<T> = Result<T, RepoError>;

/// git's fsync settings, given (`-c`) to every git the server runs in a hosted repository,
/// new or old: the objects and refs of a push are on disk before git reports the push
/// done (`committed` = loose objects, packs and refs; `fsync` = fsync(2), not just a
/// write-back request).
pub const FSYNC_CONFIG: [&str; 4] = ["-c", "core.fsync=committed", "-c", "core.fsyncMethod=fsync"];

/// The hook of this project for any git server: runs `git-xet pre-receive` from PATH.
pub const PRE_RECEIVE_HOOK: &str = include_str!("../../../hooks/pre-receive");

/// The pre-receive hook of hosted repositories. With `program` (the git-xet binary serving
/// them), a two-line script running that binary's built-in check, so that the hook runs
/// the server's own version. Without, hooks/pre-receive (the git-xet on PATH).
pub fn hook_script(program: Option<&Path>) -> String {
    match program.and_then(Path::to_str) {
        Some(exe) => format!(
            "#!/bin/sh\n\
             # Installed by `git xet server`: refuses pushes that reference LFS objects the\n\
             # XET server does not hold (the check of git-xet's hooks/pre-receive, built in).\n\
             exec {} pre-receive\n",
            shell_quote(exe)
        ),
        None => PRE_RECEIVE_HOOK.to_string(),
    }
}

/// `s` as one word for sh.
fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// git in the hosted bare repository `dir`, as every part of the server runs it there: the
/// repository named outright (`--git-dir`: no discovery, so a damaged repository is an error,
/// never a parent directory's repository), never prompting for credentials, pathspecs literal
/// (a path a user chose is never a glob), stdin closed. Commands that write add
/// [`FSYNC_CONFIG`]; async callers wrap it (`tokio::process::Command::from`).
pub fn git_command(dir: &Path) -> std::process::Command {
    let mut cmd = std::process::Command::new("git");
    cmd.arg("--git-dir")
        .arg(dir)
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_LITERAL_PATHSPECS", "1")
        .stdin(std::process::Stdio::null());
    cmd
}

/// Runs git in `dir` ([`git_command`], with [`FSYNC_CONFIG`]): its trimmed stdout, or
/// `error` of what failed (for a failed command: the command and git's stderr). The caller's
/// error type, so each layer keeps its own enum; the message names no path, as the server's
/// may reach a client.
pub async fn run_git<E>(
    dir: &Path,
    args: &[&str],
    error: impl FnOnce(String) -> E,
) -> Result<String, E> {
    let mut cmd = git_command(dir);
    cmd.args(FSYNC_CONFIG).args(args);
    output(Command::from(cmd), args, error).await
}

/// Creates a bare repository at `path` (`git init --bare`, in no repository).
async fn init_bare(path: &Path, initial_branch: Option<&str>) -> RepoResult<()> {
    let mut cmd = Command::new("git");
    cmd.args(FSYNC_CONFIG).args(["init", "--bare", "--quiet"]);
    if let Some(branch) = initial_branch {
        cmd.arg(format!("--initial-branch={branch}"));
    }
    cmd.arg(path).env("GIT_TERMINAL_PROMPT", "0");
    output(cmd, &["init", "--bare"], RepoError::Git).await?;
    Ok(())
}

async fn output<E>(
    mut cmd: Command,
    args: &[&str],
    error: impl FnOnce(String) -> E,
) -> Result<String, E> {
    let out = match cmd.output().await {
        Ok(out) => out,
        Err(e) => return Err(error(format!("running git: {e}"))),
    };
    if !out.status.success() {
        return Err(error(format!(
            "git {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

async fn git(dir: &Path, args: &[&str]) -> RepoResult<String> {
    run_git(dir, args, RepoError::Git).await
}

/// One hosted repository: its name and its bare repository's directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostedRepo {
    pub name: RepoName,
    pub dir: PathBuf,
}

/// The hosted repositories under `root` (`name.git`, `org/name.git`,
/// `datasets/org/name.git`), sorted by name: what every walk of them (backup, index
/// rebuild, check, the status page) lists. Passed over: hidden entries (`.new-*` being
/// created), anything but a directory (a symlink is not followed), and directories whose
/// path is not a valid repository name. A missing `root` holds none.
pub fn hosted(root: &Path) -> std::io::Result<Vec<HostedRepo>> {
    let mut found = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let Some(entries) = read_dir_if_exists(&dir)? else {
            continue;
        };
        for entry in entries {
            let entry = entry?;
            let file_name = entry.file_name();
            let name = file_name.to_string_lossy();
            if name.starts_with('.') || !entry.file_type()?.is_dir() {
                continue;
            }
            let path = entry.path();
            let relative = path.strip_prefix(root).unwrap_or(&path).to_string_lossy();
            if name.ends_with(".git") {
                if let Ok(repo) = RepoName::parse(&relative) {
                    // What parsing kept must name this very directory.
                    if repo.bare_dir(root) == path {
                        found.push(HostedRepo {
                            name: repo,
                            dir: path.clone(),
                        });
                    }
                }
            } else {
                // Organizations one level down; datasets' organizations one more.
                let depth = relative.matches('/').count();
                let in_datasets = relative
                    .strip_prefix(DATASETS)
                    .is_some_and(|r| r.starts_with('/'));
                if depth == 0 || (depth == 1 && in_datasets) {
                    dirs.push(path.clone());
                }
            }
        }
    }
    found.sort_by(|a, b| a.name.as_str().cmp(b.name.as_str()));
    Ok(found)
}

/// The bare repository's own record of whether it is private (`git config xet.private`),
/// kept beside the index's so that `git xet server index rebuild` can bring it back.
pub const PRIVATE_CONFIG: &str = "xet.private";

/// Records in the bare repository whether it is private (see [`PRIVATE_CONFIG`]).
pub async fn record_private(dir: &Path, private: bool) -> RepoResult<()> {
    git(
        dir,
        &[
            "config",
            PRIVATE_CONFIG,
            if private { "true" } else { "false" },
        ],
    )
    .await?;
    Ok(())
}

/// Creates the bare repository if it does not exist, recording whether it is `private`.
/// Built under a temporary name and renamed into place, so concurrent first pushes and
/// crashes never leave half a repo (nor one without its visibility recorded).
pub async fn ensure_repo(
    root: &Path,
    repo: &RepoName,
    hook: &str,
    private: bool,
) -> RepoResult<()> {
    let dir = repo.bare_dir(root);
    if dir.exists() {
        return Ok(());
    }
    let parent = dir.parent().expect("repository has a parent directory");
    tokio::fs::create_dir_all(parent).await?;
    let tmp = parent.join(format!(".new-{:016x}", rand::random::<u64>()));
    let result = async {
        init_bare(&tmp, Some("main")).await?;
        git(&tmp, &["config", "http.receivepack", "true"]).await?;
        git(&tmp, &["config", "uploadpack.allowFilter", "true"]).await?;
        record_private(&tmp, private).await?;
        install_hook(&tmp, hook).await?;
        // What `git init` wrote (config, HEAD, directories) is on disk before the name is.
        let synced = tmp.clone();
        tokio::task::spawn_blocking(move || sync_tree(&synced)).await??;
        match tokio::fs::rename(&tmp, &dir).await {
            Ok(()) => {}
            Err(_) if dir.exists() => return Ok(()), // someone else created it first
            Err(e) => return Err(RepoError::from(e)),
        }
        // The new name, and the directories made for it, survive a power loss.
        let (parent, root) = (parent.to_path_buf(), root.to_path_buf());
        tokio::task::spawn_blocking(move || {
            sync_dir(&parent)?;
            if parent != root {
                sync_dir(&root)?;
            }
            root.parent().map_or(Ok(()), sync_dir)
        })
        .await??;
        Ok(())
    }
    .await;
    if tmp.exists() {
        let _ = tokio::fs::remove_dir_all(&tmp).await;
    }
    if result.is_ok() {
        tracing::info!(%repo, "created repository");
    }
    result
}

/// The entries of `dir`, `None` when it does not exist (never made, or removed meanwhile).
fn read_dir_if_exists(dir: &Path) -> std::io::Result<Option<std::fs::ReadDir>> {
    match std::fs::read_dir(dir) {
        Ok(entries) => Ok(Some(entries)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

/// fsyncs every file and directory under `dir` (a new repository, a few dozen entries),
/// directories after their entries; returns how many it synced.
pub fn sync_tree(dir: &Path) -> std::io::Result<usize> {
    let mut synced = 0;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        if kind.is_dir() {
            synced += sync_tree(&entry.path())?;
        } else if kind.is_file() {
            std::fs::File::open(entry.path())?.sync_all()?;
            synced += 1;
        }
    }
    sync_dir(dir)?;
    Ok(synced + 1)
}

/// fsyncs the directories a push renamed files into, which git does not (it fsyncs the
/// files): those, among the repository (HEAD, packed-refs), the directories under `refs/`,
/// `objects/` and each directory in it (loose objects, packs), changed since `since` (a
/// second earlier, for coarse timestamps). Each fsync costs a disk flush (3.4 ms here),
/// which is why the unchanged are left out. Run after receive-pack has exited, before the
/// client is told the push is done; returns how many directories it synced.
pub fn sync_names(repo_dir: &Path, since: std::time::SystemTime) -> std::io::Result<usize> {
    let since = since - std::time::Duration::from_secs(1);
    let changed = |dir: &Path| -> std::io::Result<bool> {
        match std::fs::metadata(dir) {
            Ok(m) => Ok(m.modified()? >= since),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    };
    let mut synced = 0;
    let objects = repo_dir.join("objects");
    let mut dirs = vec![
        repo_dir.to_path_buf(),
        repo_dir.join("refs"),
        objects.clone(),
    ];
    while let Some(dir) = dirs.pop() {
        let deep = dir.starts_with(repo_dir.join("refs"));
        if deep || dir == objects {
            let Some(entries) = read_dir_if_exists(&dir)? else {
                continue;
            };
            for entry in entries {
                let entry = entry?;
                if entry.file_type()?.is_dir() {
                    dirs.push(entry.path());
                }
            }
        }
        if changed(&dir)? {
            sync_dir(&dir)?;
            synced += 1;
        }
    }
    Ok(synced)
}

/// An empty bare repository under `tmp` (made once), whose receive-pack advertisement stands
/// in for a repository that does not exist yet: push discovery creates nothing, the push
/// itself does.
pub async fn empty_repo(tmp: &Path) -> RepoResult<std::path::PathBuf> {
    let dir = tmp.join("empty.git");
    if dir.join("HEAD").exists() {
        return Ok(dir);
    }
    tokio::fs::create_dir_all(tmp).await?;
    let new = tmp.join(format!(".empty-{:016x}", rand::random::<u64>()));
    let result = async {
        init_bare(&new, None).await?;
        match tokio::fs::rename(&new, &dir).await {
            Ok(()) => Ok(()),
            Err(_) if dir.join("HEAD").exists() => Ok(()), // made by a concurrent request
            Err(e) => Err(RepoError::from(e)),
        }
    }
    .await;
    if new.exists() {
        let _ = tokio::fs::remove_dir_all(&new).await;
    }
    result.map(|()| dir)
}

/// Writes the pre-receive hook (see [`hook_script`]) unless it is already current.
pub async fn install_hook(repo_dir: &Path, hook: &str) -> RepoResult<()> {
    use std::os::unix::fs::PermissionsExt;
    let path = repo_dir.join("hooks").join("pre-receive");
    if tokio::fs::read_to_string(&path)
        .await
        .is_ok_and(|s| s == hook)
    {
        return Ok(());
    }
    tokio::fs::create_dir_all(path.parent().expect("hooks dir")).await?;
    let tmp = path.with_extension("tmp");
    tokio::fs::write(&tmp, hook).await?;
    tokio::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755)).await?;
    tokio::fs::rename(&tmp, &path).await?;
    Ok(())
}

/// Points HEAD at an existing branch when it names one that does not exist (a first push
/// of `master` into a repository created with `main`), so clones check something out.
pub async fn fix_head(repo_dir: &Path) {
    if head_branch_exists(repo_dir).await {
        return; // the usual case, seen without starting git twice after every push
    }
    let result = async {
        let head = git(repo_dir, &["symbolic-ref", "HEAD"]).await?;
        let branches = git(
            repo_dir,
            &["for-each-ref", "--format=%(refname)", "refs/heads/"],
        )
        .await?;
        let branches: Vec<&str> = branches.lines().collect();
        if branches.is_empty() || branches.contains(&head.as_str()) {
            return Ok(());
        }
        let pick = ["refs/heads/main", "refs/heads/master"]
            .into_iter()
            .find(|b| branches.contains(b))
            .unwrap_or(branches[0]);
        git(repo_dir, &["symbolic-ref", "HEAD", pick])
            .await
            .map(|_| ())
    }
    .await;
    if let Err(e) = result {
        tracing::warn!("updating HEAD of {}: {e}", repo_dir.display());
    }
}

/// Whether HEAD names a branch that exists, as far as the files of git's default ref
/// storage show it (a loose ref or a `packed-refs` line). `false` means "not sure": the
/// caller asks git.
async fn head_branch_exists(repo_dir: &Path) -> bool {
    let Ok(head) = tokio::fs::read_to_string(repo_dir.join("HEAD")).await else {
        return false;
    };
    let Some(branch) = head
        .strip_prefix("ref: ")
        .map(str::trim_end)
        .filter(|r| r.starts_with("refs/heads/") && !r.contains(".."))
    else {
        return false;
    };
    if tokio::fs::metadata(repo_dir.join(branch))
        .await
        .is_ok_and(|m| m.is_file())
    {
        return true;
    }
    tokio::fs::read_to_string(repo_dir.join("packed-refs"))
        .await
        .is_ok_and(|packed| {
            packed
                .lines()
                .any(|line| line.split_once(' ').is_some_and(|(_, name)| name == branch))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A new repository is synced whole: every file and directory git init wrote, and the
    /// hook; it is then in place under its name.
    #[tokio::test]
    async fn a_new_repository_is_synced_entry_by_entry() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("repos");
        let repo = RepoName::parse("org/new").unwrap();
        ensure_repo(&root, &repo, "#!/bin/sh\n", false)
            .await
            .unwrap();
        let bare = repo.bare_dir(&root);
        assert!(bare.join("hooks/pre-receive").is_file());
        fn count(dir: &Path) -> usize {
            1 + std::fs::read_dir(dir)
                .unwrap()
                .map(|e| e.unwrap().path())
                .map(|p| if p.is_dir() { count(&p) } else { 1 })
                .sum::<usize>()
        }
        let entries = count(&bare);
        assert!(entries > 10, "{entries}");
        assert_eq!(sync_tree(&bare).unwrap(), entries);
        // After a push: what changed among the repository, refs/ and its subdirectories,
        // objects/ and its. Every directory is first dated an hour back, so what counts as
        // changed does not depend on how long `git init` took on a loaded machine.
        fn age(dir: &Path, when: std::time::SystemTime) {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    age(&path, when);
                }
            }
            std::fs::File::open(dir)
                .unwrap()
                .set_modified(when)
                .unwrap();
        }
        let before = std::time::SystemTime::now();
        age(&bare, before - std::time::Duration::from_secs(3600));
        let fanout = bare.join("objects/ab");
        std::fs::create_dir_all(fanout.join("not-walked")).unwrap();
        std::fs::create_dir_all(bare.join("refs/heads/team")).unwrap();
        // objects (a new entry), objects/ab (new), refs/heads (a new entry), refs/heads/team
        assert_eq!(sync_names(&bare, before).unwrap(), 4);
        let later = before + std::time::Duration::from_secs(5);
        assert_eq!(
            sync_names(&bare, later).unwrap(),
            0,
            "nothing changed since"
        );
    }

    /// The one walk of the hosted repositories: models at the top and in organizations,
    /// datasets one level deeper; nothing hidden, half-made, linked or misnamed.
    #[test]
    fn the_walk_finds_hosted_repositories_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("repos");
        let hosted_here = [
            "top.git",
            "org/model.git",
            "datasets/org/data.git",
            "datasets/plain.git", // an organization named `datasets`
        ];
        let passed_over = [
            ".new-0123456789abcdef",          // being created
            "org/.new-0123456789abcdef",      // being created in an organization
            "datasets/org/.new-0123456789ab", // being created among datasets
            ".hidden.git",
            "org/.x.git",
            "-rf.git",                 // looks like an option
            "a b.git",                 // not a name
            "x.git.git",               // a segment may not end with .git
            "org/sub/deep.git",        // too deep for a model
            "datasets/org/sub/d.git",  // too deep for a dataset
            "org/model.git/inner.git", // inside a repository
            "name.lock.git",
        ];
        for d in hosted_here.iter().chain(&passed_over) {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        // A file and a symlink named like repositories: not directories of the root.
        std::fs::write(root.join("file.git"), "").unwrap();
        std::os::unix::fs::symlink(root.join("org/model.git"), root.join("org/link.git")).unwrap();
        std::os::unix::fs::symlink(dir.path(), root.join("elsewhere")).unwrap();
        std::fs::create_dir_all(dir.path().join("outside.git")).unwrap();
        let found = hosted(&root).unwrap();
        let names: Vec<&str> = found.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(
            names,
            ["datasets/org/data", "datasets/plain", "org/model", "top"]
        );
        for repo in &found {
            assert_eq!(repo.dir, repo.name.bare_dir(&root));
        }
        assert!(hosted(&dir.path().join("missing")).unwrap().is_empty());
    }

    /// The hosted hook runs the program it names with `pre-receive`, wherever it lives.
    #[test]
    fn the_hosted_hook_runs_its_program_even_from_an_awkward_path() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("it's a $HOME `dir`");
        std::fs::create_dir_all(&home).unwrap();
        let program = home.join("git-xet");
        std::fs::write(&program, "#!/bin/sh\necho \"ran with $*\"\n").unwrap();
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
        let hook = dir.path().join("pre-receive");
        std::fs::write(&hook, hook_script(Some(&program))).unwrap();
        let out = std::process::Command::new("sh")
            .arg(&hook)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "ran with pre-receive\n"
        );
        assert_eq!(hook_script(None), PRE_RECEIVE_HOOK);
    }
}
