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
        }
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
