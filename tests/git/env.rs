//! An isolated git environment: temporary HOME, global and system config files, no
//! terminal prompts, and helpers to run git, git-lfs and git-xet in it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use crate::support;

pub struct GitEnv {
    pub root: tempfile::TempDir,
    pub home: PathBuf,
    pub global_config: PathBuf,
    pub system_config: PathBuf,
    /// Set on every command run in this environment.
    pub extra_env: Vec<(String, String)>,
}

impl GitEnv {
    pub fn new() -> GitEnv {
        let root = tempfile::tempdir().expect("temp dir");
        let home = root.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        let global_config = home.join(".gitconfig");
        let system_config = root.path().join("system-gitconfig");
        std::fs::write(
            &global_config,
            "[user]\n\tname = Test\n\temail = test@example.com\n[init]\n\tdefaultBranch = main\n",
        )
        .unwrap();
        std::fs::write(&system_config, "").unwrap();
        GitEnv {
            root,
            home,
            global_config,
            system_config,
            extra_env: Vec::new(),
        }
    }

    /// This environment with `key=value` set for every command.
    pub fn with_env(mut self, key: &str, value: &str) -> GitEnv {
        self.extra_env.push((key.into(), value.into()));
        self
    }

    /// This environment's per-user chunk store (`GIT_XET_STORE`).
    pub fn store_dir(&self) -> PathBuf {
        self.root.path().join("store")
    }

    /// A directory under this environment's root.
    pub fn dir(&self, name: &str) -> PathBuf {
        let d = self.root.path().join(name);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// A command with the isolated environment applied.
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>, dir: &Path) -> Command {
        let mut cmd = Command::new(program);
        cmd.current_dir(dir)
            .env("HOME", &self.home)
            .env("XDG_CONFIG_HOME", self.home.join(".config"))
            .env("GIT_CONFIG_GLOBAL", &self.global_config)
            .env("GIT_CONFIG_SYSTEM", &self.system_config)
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_ASKPASS", "/bin/false")
            .env_remove("GIT_DIR")
            .env_remove("GIT_WORK_TREE")
            .env_remove("GIT_TRACE")
            .env_remove("GIT_XET_LOG")
            // The per-user chunk store of this environment, never the real one.
            .env("GIT_XET_STORE", self.store_dir())
            .envs(self.extra_env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null());
        cmd
    }

    pub fn git_output(&self, dir: &Path, args: &[&str]) -> Output {
        self.command("git", dir)
            .args(args)
            .output()
            .expect("run git")
    }

    /// Runs git and returns stdout; panics with stderr on failure.
    pub fn git(&self, dir: &Path, args: &[&str]) -> String {
        let out = self.git_output(dir, args);
        assert!(
            out.status.success(),
            "git {args:?} in {} failed:\n{}{}",
            dir.display(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout)
            .unwrap()
            .trim_end()
            .to_string()
    }

    pub fn xet_output(&self, dir: &Path, args: &[&str]) -> Output {
        self.command(support::git_xet_bin(), dir)
            .args(args)
            .output()
            .expect("run git-xet")
    }

    /// Runs git-xet and returns stdout; panics with stderr on failure.
    pub fn xet(&self, dir: &Path, args: &[&str]) -> String {
        let out = self.xet_output(dir, args);
        assert!(
            out.status.success(),
            "git xet {args:?} failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// `git config -l` of one scope, sorted, as `key=value` lines.
    pub fn config_list(&self, dir: &Path, scope: &str) -> Vec<String> {
        let out = self.git_output(dir, &["config", scope, "-l"]);
        let mut lines: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_string)
            .collect();
        lines.sort();
        lines
    }

    /// A new repository with one commit.
    pub fn init_repo(&self, name: &str) -> PathBuf {
        let dir = self.dir(name);
        self.git(&dir, &["init", "-q"]);
        std::fs::write(dir.join("README"), "hello\n").unwrap();
        self.git(&dir, &["add", "README"]);
        self.git(&dir, &["commit", "-qm", "init"]);
        dir
    }
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

impl GitEnv {
    /// An environment with `git xet install --global` done (agent + git-lfs filters).
    pub fn with_agent(extra: &[&str]) -> GitEnv {
        let env = GitEnv::new();
        let dir = env.dir("install");
        let mut args = vec!["install", "--global"];
        args.extend_from_slice(extra);
        env.xet(&dir, &args);
        env.git(&dir, &["config", "--global", "lfs.locksverify", "false"]);
        env
    }

    /// An environment with plain git-lfs only (no agent).
    pub fn plain_lfs() -> GitEnv {
        let env = GitEnv::new();
        let dir = env.dir("install");
        env.git(&dir, &["lfs", "install", "--skip-repo"]);
        env.git(&dir, &["config", "--global", "lfs.locksverify", "false"]);
        env
    }

    /// A new repository tracking `*.bin` with git-lfs, with `origin` set to `remote`.
    pub fn lfs_repo(&self, name: &str, remote: &str) -> PathBuf {
        let dir = self.dir(name);
        self.git(&dir, &["init", "-q"]);
        self.git(&dir, &["lfs", "track", "*.bin"]);
        self.git(&dir, &["remote", "add", "origin", remote]);
        dir
    }

    /// Stages everything in `repo`, commits it as `message` and pushes `main` to origin.
    pub fn commit_all_and_push(&self, repo: &Path, message: &str) {
        self.git(repo, &["add", "."]);
        self.git(repo, &["commit", "-qm", message]);
        self.git(repo, &["push", "-q", "origin", "main"]);
    }

    /// Runs git with the agent logging to a file in this environment (for failure messages).
    pub fn git_logged(&self, dir: &Path, args: &[&str]) -> Output {
        self.command("git", dir)
            .args(args)
            .env("GIT_XET_LOG", self.root.path().join("agent.log"))
            .env("GIT_XET_LOG_LEVEL", "debug")
            .output()
            .expect("run git")
    }

    /// Clones `remote` into this environment's directory `name` (logging the agent and the
    /// filter), failing the test if git fails; returns the clone's path.
    pub fn clone_ok(&self, remote: &str, name: &str) -> PathBuf {
        let dir = self.dir(name);
        ok(
            self.git_logged(
                &self.dir("."),
                &["clone", "-q", remote, dir.to_str().unwrap()],
            ),
            "clone",
        );
        dir
    }

    /// `git lfs fsck`, as is: the checked-out objects stay whole in `.git/lfs/objects`
    /// (docs/store.md), where fsck reads them.
    pub fn lfs_fsck(&self, repo: &Path) {
        self.git(repo, &["lfs", "fsck"]);
    }

    pub fn agent_log(&self) -> String {
        std::fs::read_to_string(self.root.path().join("agent.log")).unwrap_or_default()
    }
}

/// `http://x:TOKEN@host/repo.git` for a repository on a test server.
pub fn remote_url(server: &support::TestServer, repo: &str, scope: &str) -> String {
    format!(
        "http://x:{}@{}/{repo}.git",
        server.token(repo, scope),
        server.addr()
    )
}

/// Asserts that two files have the same bytes (without printing megabytes on failure).
pub fn assert_same_file(a: &Path, b: &Path) {
    let (x, y) = (std::fs::read(a).unwrap(), std::fs::read(b).unwrap());
    assert!(
        x.len() == y.len() && x == y,
        "{} ({} bytes) differs from {} ({} bytes)",
        a.display(),
        x.len(),
        b.display(),
        y.len()
    );
}

pub fn assert_file_is(path: &Path, expected: &[u8]) {
    let got = std::fs::read(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    assert!(
        got.len() == expected.len() && got == expected,
        "{} has {} bytes, not the expected {}",
        path.display(),
        got.len(),
        expected.len()
    );
}

/// Output of a command that must have succeeded.
pub fn ok(out: Output, what: &str) -> Output {
    assert!(
        out.status.success(),
        "{what} failed:\n{}{}",
        stdout(&out),
        stderr(&out)
    );
    out
}
