//! Running `git` (and `git lfs`) as child processes. git's own CLI is the one authority on
//! configuration scopes, includes, credential helpers and repository layout, so we ask it
//! rather than parse files ourselves.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::GitError;

/// A git invocation context: working directory and extra environment.
#[derive(Clone, Debug, Default)]
pub struct Git {
    dir: Option<PathBuf>,
    env: Vec<(String, String)>,
    /// Let git prompt on the terminal (`git credential fill` with nobody else to ask).
    prompt: bool,
}

impl Git {
    /// git in the current directory.
    pub fn new() -> Git {
        Git::default()
    }

    /// git run in `dir`.
    pub fn in_dir(dir: impl Into<PathBuf>) -> Git {
        Git {
            dir: Some(dir.into()),
            env: Vec::new(),
            prompt: false,
        }
    }

    /// This git (its environment and prompting) run in `dir` instead.
    pub fn moved_to(&self, dir: impl Into<PathBuf>) -> Git {
        Git {
            dir: Some(dir.into()),
            ..self.clone()
        }
    }

    pub fn with_env(mut self, key: &str, value: &str) -> Git {
        self.env.push((key.to_string(), value.to_string()));
        self
    }

    /// This git allowed to prompt on the terminal, as the user's environment says.
    pub fn allowing_prompt(mut self) -> Git {
        self.prompt = true;
        self
    }

    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    fn command<I, S>(&self, args: I) -> (Command, String)
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut cmd = Command::new("git");
        let mut shown = String::from("git");
        for a in args {
            shown.push(' ');
            shown.push_str(&a.as_ref().to_string_lossy());
            cmd.arg(a);
        }
        if let Some(dir) = &self.dir {
            cmd.current_dir(dir);
        }
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        // Never let a child git wait for a password on a terminal nobody watches.
        if !self.prompt {
            cmd.env("GIT_TERMINAL_PROMPT", "0");
        }
        (cmd, shown)
    }

    /// Runs git, returning stdout (trailing newline removed) or an error with its stderr.
    pub fn run<I, S>(&self, args: I) -> Result<String, GitError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.run_with_input(args, None)
    }

    /// Runs git with `input` on stdin.
    pub fn run_with_input<I, S>(&self, args: I, input: Option<&[u8]>) -> Result<String, GitError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut out = self.run_bytes(args, input)?;
        if out.last() == Some(&b'\n') {
            out.pop();
        }
        Ok(String::from_utf8_lossy(&out).into_owned())
    }

    /// Runs git with optional stdin, returning stdout as bytes (e.g. `cat-file --batch`).
    pub fn run_bytes<I, S>(&self, args: I, input: Option<&[u8]>) -> Result<Vec<u8>, GitError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        use git_xet_io::platform::process::{self, RunError};
        let (mut cmd, shown) = self.command(args);
        tracing::debug!(command = %shown, "running");
        let out = process::run_with_input(&mut cmd, input).map_err(|e| match e {
            RunError::Spawn(source) => GitError::Spawn {
                program: "git".into(),
                source,
            },
            RunError::Wait(e) => GitError::io(format!("waiting for `{shown}`"), e),
        })?;
        if !out.status.success() {
            return Err(GitError::Command {
                stderr: process::failure_text(&out),
                command: shown,
            });
        }
        Ok(out.stdout)
    }

    /// Starts git with `stdin`, stdout piped to the caller and stderr passed through: for
    /// output too large to hold, read as it comes (`cat-file --batch` on a big push).
    pub fn spawn<I, S>(&self, args: I, stdin: Stdio) -> Result<std::process::Child, GitError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let (mut cmd, shown) = self.command(args);
        tracing::debug!(command = %shown, "starting");
        cmd.stdin(stdin)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|source| GitError::Spawn {
                program: "git".into(),
                source,
            })
    }

    /// Runs git and returns whether it succeeded, with stdout; for commands whose failure
    /// is an answer (`git config --get` of an absent key exits 1).
    pub fn try_run<I, S>(&self, args: I) -> Result<Option<String>, GitError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.run_allowing(args, &[1])
    }

    /// Runs git; exit codes in `answers` mean `None` rather than an error.
    pub fn run_allowing<I, S>(&self, args: I, answers: &[i32]) -> Result<Option<String>, GitError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let (mut cmd, shown) = self.command(args);
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let out = cmd.output().map_err(|source| GitError::Spawn {
            program: "git".into(),
            source,
        })?;
        match out.status.code() {
            Some(0) => {
                let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
                if text.ends_with('\n') {
                    text.pop();
                }
                Ok(Some(text))
            }
            Some(code) if answers.contains(&code) => Ok(None),
            _ => Err(GitError::Command {
                command: shown,
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            }),
        }
    }

    /// Runs git with stdout and stderr passed through to ours (for user-visible steps).
    pub fn run_visible<I, S>(&self, args: I) -> Result<(), GitError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let (mut cmd, shown) = self.command(args);
        // Our stdout may be a protocol channel or command output: child output goes to stderr.
        let stderr = std::io::stderr();
        let status = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::from(
                stderr
                    .as_fd()
                    .try_clone_to_owned()
                    .map_err(|e| GitError::io("dup stderr", e))?,
            ))
            .status()
            .map_err(|source| GitError::Spawn {
                program: "git".into(),
                source,
            })?;
        if !status.success() {
            return Err(GitError::Command {
                command: shown,
                stderr: format!("exit status {status} (see its output above)"),
            });
        }
        Ok(())
    }
}

use std::os::fd::AsFd;
