//! The filter's and the agent's way of reading the repository ([`Repo::discover_with_config`]:
//! one `rev-parse` and one `config --list`, then no git process per key) against the git
//! CLI asked per key, the oracle: includes, includeIf gitdir: and onbranch:, linked
//! worktrees, GIT_DIR/GIT_WORK_TREE, `git -c` (GIT_CONFIG_PARAMETERS, as git hands it to
//! filters and hooks) and GIT_CONFIG_COUNT. GIT_TRACE counts the git processes started.

use std::path::{Path, PathBuf};

use super::*;

/// Keys the fixture sets, one per way a value can reach git.
const KEYS: [&str; 7] = [
    "xet.local",
    "xet.included",
    "xet.gitdir",
    "xet.onbranch",
    "xet.param",
    "xet.count",
    "xet.multi",
];

struct Fixture {
    root: tempfile::TempDir,
    /// git with an isolated HOME and global configuration, run at the main work tree.
    git: Git,
    repo: PathBuf,
    /// A linked worktree (on branch `wt`) with a subdirectory.
    worktree: PathBuf,
}

impl Fixture {
    fn new() -> Fixture {
        let root = tempfile::tempdir().unwrap();
        let top = std::fs::canonicalize(root.path()).unwrap();
        let home = top.join("home");
        std::fs::create_dir_all(&home).unwrap();
        let repo = top.join("repo");
        let worktree = top.join("wt");
        let global = home.join(".gitconfig");
        let include = |name: &str, body: &str| {
            let path = top.join(name);
            std::fs::write(&path, body).unwrap();
            path.display().to_string()
        };
        let included = include("included.cfg", "[xet]\n\tincluded = yes\n\tmulti = 2\n");
        let gitdir = include("gitdir.cfg", "[xet]\n\tgitdir = repo\n");
        let main = include("main.cfg", "[xet]\n\tonbranch = main\n");
        let wt = include("wt.cfg", "[xet]\n\tonbranch = wt\n");
        std::fs::write(
            &global,
            format!(
                "[user]\n\tname = t\n\temail = t@localhost\n[init]\n\tdefaultBranch = main\n\
                 [xet]\n\tmulti = 1\n[include]\n\tpath = {included}\n\
                 [includeIf \"gitdir:{}/\"]\n\tpath = {gitdir}\n\
                 [includeIf \"onbranch:main\"]\n\tpath = {main}\n\
                 [includeIf \"onbranch:wt\"]\n\tpath = {wt}\n",
                repo.display()
            ),
        )
        .unwrap();
        let git = Git::in_dir(&top)
            .with_env("HOME", home.to_str().unwrap())
            .with_env("XDG_CONFIG_HOME", home.join(".config").to_str().unwrap())
            .with_env("GIT_CONFIG_GLOBAL", global.to_str().unwrap())
            .with_env("GIT_CONFIG_NOSYSTEM", "1");
        git.run(["init", "-q", "repo"]).unwrap();
        let git = git.moved_to(&repo);
        git.run(["config", "xet.local", "yes"]).unwrap();
        git.run(["commit", "-q", "--allow-empty", "-m", "one"])
            .unwrap();
        git.run([
            "worktree",
            "add",
            "-q",
            "-b",
            "wt",
            worktree.to_str().unwrap(),
        ])
        .unwrap();
        std::fs::create_dir_all(repo.join("a/b")).unwrap();
        std::fs::create_dir_all(worktree.join("sub")).unwrap();
        Fixture {
            root,
            git,
            repo,
            worktree,
        }
    }

    /// git with GIT_TRACE writing to a new file, whose lines [`started`] counts.
    fn traced(&self, git: &Git, name: &str) -> (Git, PathBuf) {
        let trace = self.root.path().join(format!("{name}.trace"));
        (
            git.clone().with_env("GIT_TRACE", trace.to_str().unwrap()),
            trace,
        )
    }
}

/// The git commands started since `trace` was last read (one `built-in` line each).
fn started(trace: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(trace).unwrap_or_default();
    std::fs::remove_file(trace).ok();
    text.lines()
        .filter_map(|l| {
            l.split_once("trace: built-in: ")
                .map(|(_, c)| c.to_string())
        })
        .collect()
}

/// Values a case must read, besides agreeing with git.
type Expected = &'static [(&'static str, &'static str)];

/// A change to the repository's configuration, run before a step.
type Setup<'a> = Box<dyn Fn() + 'a>;

/// Discovery and configuration read once agree with git asked per key, wherever the
/// process starts and however the configuration reaches it.
#[test]
fn read_once_agrees_with_git_per_key() {
    let f = Fixture::new();
    let elsewhere = f.root.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let params = "'xet.param'='from -c' 'xet.local'='overridden'";
    let cases: Vec<(&str, Git, Expected)> = vec![
        ("top", f.git.moved_to(&f.repo), &[("xet.onbranch", "main")]),
        (
            "subdirectory",
            f.git.moved_to(f.repo.join("a/b")),
            &[("xet.gitdir", "repo"), ("xet.included", "yes")],
        ),
        (
            "linked worktree",
            f.git.moved_to(f.worktree.join("sub")),
            &[("xet.onbranch", "wt"), ("xet.local", "yes")],
        ),
        (
            "GIT_DIR and GIT_WORK_TREE",
            f.git
                .moved_to(&elsewhere)
                .with_env("GIT_DIR", f.repo.join(".git").to_str().unwrap())
                .with_env("GIT_WORK_TREE", f.repo.to_str().unwrap()),
            &[("xet.onbranch", "main")],
        ),
        (
            "git -c",
            f.git
                .moved_to(&f.repo)
                .with_env("GIT_CONFIG_PARAMETERS", params),
            &[("xet.param", "from -c"), ("xet.local", "overridden")],
        ),
        (
            "GIT_CONFIG_COUNT",
            f.git
                .moved_to(f.worktree.join("sub"))
                .with_env("GIT_CONFIG_COUNT", "1")
                .with_env("GIT_CONFIG_KEY_0", "xet.count")
                .with_env("GIT_CONFIG_VALUE_0", "3"),
            &[("xet.count", "3"), ("xet.onbranch", "wt")],
        ),
    ];
    for (name, git, expected) in cases {
        let (traced, trace) = f.traced(&git, "read-once");
        let repo = Repo::discover_with_config(&traced).unwrap();
        let mut commands = started(&trace);
        commands.sort();
        assert_eq!(
            commands,
            [
                "git config --list -z",
                "git rev-parse --path-format=absolute --is-bare-repository \
                 --is-inside-work-tree --git-dir --git-common-dir --show-cdup"
            ],
            "{name}: the git processes of a start"
        );
        let oracle = |args: &[&str]| git.run(args).unwrap();
        assert_eq!(
            repo.git_dir,
            PathBuf::from(oracle(&["rev-parse", "--absolute-git-dir"])),
            "{name}"
        );
        assert_eq!(
            repo.common_dir,
            PathBuf::from(oracle(&[
                "rev-parse",
                "--path-format=absolute",
                "--git-common-dir"
            ])),
            "{name}"
        );
        if oracle(&["rev-parse", "--is-inside-work-tree"]) == "true" {
            assert_eq!(
                repo.work_tree,
                Some(PathBuf::from(oracle(&["rev-parse", "--show-toplevel"]))),
                "{name}"
            );
        }
        let per_key = Config::new(git.clone());
        let once = repo.config();
        for key in KEYS {
            assert_eq!(
                once.get(None, key).unwrap(),
                per_key.get(None, key).unwrap(),
                "{name}: {key}"
            );
            assert_eq!(
                once.get_all(None, key).unwrap(),
                per_key.get_all(None, key).unwrap(),
                "{name}: every {key}"
            );
        }
        assert!(
            started(&trace).is_empty(),
            "{name}: reads after the start ran git"
        );
        for (key, value) in expected {
            assert_eq!(
                once.get(None, key).unwrap().as_deref(),
                Some(*value),
                "{name}: {key}"
            );
        }
    }
}

/// The remote the filter fetches from: read from configuration alone when every branch
/// that names a remote names `origin`, else from git as before; the same answer both ways.
#[test]
fn default_remote_read_once_agrees_with_git() {
    let f = Fixture::new();
    let git = f.git.moved_to(&f.repo);
    let set = |key: &str, value: &str| {
        git.run(["config", key, value]).unwrap();
    };
    let unset = |key: &str| {
        git.run_allowing(["config", "--unset-all", key], &[5])
            .unwrap();
    };
    // (setup, answer, whether git must be asked)
    let steps: Vec<(Setup, Result<&str, ()>, bool)> = vec![
        (
            Box::new(|| set("remote.fork.url", "http://127.0.0.1:9/f")),
            Ok("fork"),
            true,
        ),
        (
            Box::new(|| set("remote.origin.url", "http://127.0.0.1:9/o")),
            Ok("origin"),
            false,
        ),
        (
            Box::new(|| set("branch.main.remote", "origin")),
            Ok("origin"),
            false,
        ),
        (
            Box::new(|| set("branch.main.remote", "fork")),
            Ok("fork"),
            true,
        ),
        (
            // The current branch names none; another one names `fork`.
            Box::new(|| {
                unset("branch.main.remote");
                set("branch.wt.remote", "fork");
            }),
            Ok("origin"),
            true,
        ),
        (
            Box::new(|| set("branch.wt.remote", ".")),
            Ok("origin"),
            false,
        ),
        (
            Box::new(|| {
                git.run(["checkout", "-q", "--detach"]).unwrap();
                set("branch.main.remote", "fork");
            }),
            Ok("origin"),
            true,
        ),
        (
            Box::new(|| {
                git.run(["remote", "remove", "origin"]).unwrap();
                git.run(["remote", "remove", "fork"]).unwrap();
            }),
            Err(()),
            true,
        ),
    ];
    for (i, (setup, answer, asks_git)) in steps.into_iter().enumerate() {
        setup();
        let per_key = Repo::discover_with(&git).unwrap().default_remote();
        let (traced, trace) = f.traced(&git, "remote");
        let repo = Repo::discover_with_config(&traced).unwrap();
        started(&trace);
        let once = repo.default_remote();
        let asked = started(&trace);
        match answer {
            Ok(remote) => {
                assert_eq!(once.unwrap(), remote, "step {i}");
                assert_eq!(per_key.unwrap(), remote, "step {i}");
            }
            Err(()) => {
                let no_choice = |r: &Result<String, GitError>| {
                    matches!(r, Err(GitError::NoRemotes | GitError::SeveralRemotes(_)))
                };
                assert!(no_choice(&once), "step {i}: {once:?}");
                assert!(no_choice(&per_key), "step {i}: {per_key:?}");
            }
        }
        assert_eq!(!asked.is_empty(), asks_git, "step {i}: {asked:?}");
    }
}

/// `.lfsconfig` is read with one git process when configuration is read once, with the
/// answers of a `git config --file` per key.
#[test]
fn lfsconfig_read_once_agrees_with_git() {
    let f = Fixture::new();
    let git = f.git.moved_to(&f.repo);
    git.run(["remote", "add", "origin", "http://127.0.0.1:9/org/r"])
        .unwrap();
    std::fs::write(
        f.repo.join(".lfsconfig"),
        "[lfs]\n\tpushurl = http://127.0.0.1:9/push/\n\
         [remote \"origin\"]\n\tlfsUrl = http://127.0.0.1:9/one\n\tlfsurl = http://127.0.0.1:9/two\n",
    )
    .unwrap();
    let per_key = Repo::discover_with(&git).unwrap();
    let (traced, trace) = f.traced(&git, "lfsconfig");
    let once = Repo::discover_with_config(&traced).unwrap();
    started(&trace);
    for upload in [false, true] {
        assert_eq!(
            once.configured_lfs_url("origin", upload).unwrap(),
            per_key.configured_lfs_url("origin", upload).unwrap(),
            "upload {upload}"
        );
    }
    assert_eq!(
        once.configured_lfs_url("origin", false).unwrap().as_deref(),
        Some("http://127.0.0.1:9/two")
    );
    assert_eq!(
        once.configured_lfs_url("origin", true).unwrap().as_deref(),
        Some("http://127.0.0.1:9/push")
    );
    assert_eq!(
        once.own_lfs_endpoint("other-remote-name").ok(),
        per_key.own_lfs_endpoint("other-remote-name").ok()
    );
    let files: Vec<_> = started(&trace)
        .into_iter()
        .filter(|c| c.contains("--file"))
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
}

/// A repository owned by another user is git's to refuse (safe.directory), and so ours:
/// discovery is git's own. Listed in safe.directory (here by GIT_CONFIG_COUNT, command-line
/// scope, which git honours for it), it is found, and read as git reads it.
#[test]
fn another_users_repository_only_when_safe() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        assert!(
            std::env::var_os("CI").is_none(),
            "this test chowns a repository: CI runs it as root"
        );
        eprintln!("skipped: giving a repository to another user needs root");
        return;
    }
    let f = Fixture::new();
    let foreign = std::fs::canonicalize(f.root.path())
        .unwrap()
        .join("foreign");
    f.git
        .run(["init", "-q", foreign.to_str().unwrap()])
        .unwrap();
    let chown = std::process::Command::new("chown")
        .args(["-R", "65534:65534"])
        .arg(&foreign)
        .status()
        .unwrap();
    assert!(chown.success());
    let git = f.git.moved_to(&foreign);
    assert!(
        git.run(["rev-parse", "--git-dir"]).is_err(),
        "git refuses it"
    );
    assert!(matches!(
        Repo::discover_with_config(&git),
        Err(GitError::NotARepository(_))
    ));
    let safe = git
        .clone()
        .with_env("GIT_CONFIG_COUNT", "2")
        .with_env("GIT_CONFIG_KEY_0", "safe.directory")
        .with_env("GIT_CONFIG_VALUE_0", foreign.to_str().unwrap())
        .with_env("GIT_CONFIG_KEY_1", "xet.count")
        .with_env("GIT_CONFIG_VALUE_1", "safe");
    let repo = Repo::discover_with_config(&safe).unwrap();
    assert_eq!(repo.git_dir, foreign.join(".git"));
    assert_eq!(repo.work_tree.as_deref(), Some(foreign.as_path()));
    let per_key = Config::new(safe.clone());
    for key in KEYS {
        assert_eq!(
            repo.config().get(None, key).unwrap(),
            per_key.get(None, key).unwrap(),
            "{key}"
        );
    }
    assert_eq!(
        repo.config().get(None, "xet.count").unwrap().as_deref(),
        Some("safe")
    );
}

/// URL aliases reach every way a remote's URL is read (the filter's and agent's endpoint,
/// migrate's `remote_url`, `lfs_endpoint` and `own_lfs_endpoint`), read once as per key,
/// from any scope and `git -c` (a base keeps its case), with no git process once listed.
#[test]
fn url_aliases_read_once_agree_with_git_and_start_no_git() {
    let f = Fixture::new();
    let git = f.git.moved_to(&f.repo);
    git.run(["remote", "add", "origin", "xet:org/r"]).unwrap();
    git.run(["config", "remote.origin.pushurl", "XET:org/w"])
        .unwrap();
    git.run(["config", "url.http://127.0.0.1:9/Down/.insteadOf", "xet:"])
        .unwrap();
    let git = git.with_env(
        "GIT_CONFIG_PARAMETERS",
        "'url.http://127.0.0.1:9/Up/.insteadof'='XET:'",
    );
    let per_key = Repo::discover_with(&git).unwrap();
    let (traced, trace) = f.traced(&git, "aliases");
    let once = Repo::discover_with_config(&traced).unwrap();
    started(&trace);
    for repo in [&once, &per_key] {
        assert_eq!(
            repo.remote_url("origin").unwrap(),
            "http://127.0.0.1:9/Down/org/r"
        );
        assert_eq!(
            repo.remote_url_for("origin", true).unwrap(),
            "http://127.0.0.1:9/Up/org/w"
        );
        assert_eq!(
            repo.lfs_endpoint("origin").unwrap(),
            "http://127.0.0.1:9/Down/org/r.git/info/lfs"
        );
        assert_eq!(
            repo.own_lfs_endpoint("origin").unwrap(),
            "http://127.0.0.1:9/Down/org/r.git/info/lfs"
        );
        // A URL given as the remote is rewritten too.
        assert_eq!(
            repo.remote_url("xet://h/r").unwrap(),
            "http://127.0.0.1:9/Down///h/r"
        );
    }
    assert_eq!(
        started(&trace),
        Vec::<String>::new(),
        "no git process once listed"
    );
}
