//! git configuration through `git config`, at an explicit scope.

use crate::git::command::Git;
use crate::git::GitError;

/// Which configuration file a change goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// The repository's `.git/config`.
    Local,
    /// The user's `~/.gitconfig` (or `$GIT_CONFIG_GLOBAL`).
    Global,
    /// The machine's `/etc/gitconfig` (or `$GIT_CONFIG_SYSTEM`).
    System,
}

impl Scope {
    pub fn flag(self) -> &'static str {
        match self {
            Scope::Local => "--local",
            Scope::Global => "--global",
            Scope::System => "--system",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Scope::Local => "local",
            Scope::Global => "global",
            Scope::System => "system",
        }
    }
}

/// Reads and writes configuration; `scope` `None` reads the effective value.
#[derive(Clone, Debug)]
pub struct Config {
    git: Git,
}

impl Config {
    pub fn new(git: Git) -> Config {
        Config { git }
    }

    pub fn git(&self) -> &Git {
        &self.git
    }

    /// The last value of `key` (git's rule for single-valued keys), if set.
    pub fn get(&self, scope: Option<Scope>, key: &str) -> Result<Option<String>, GitError> {
        let mut args = vec!["config"];
        if let Some(s) = scope {
            args.push(s.flag());
        }
        args.extend(["--get", key]);
        self.git.try_run(args)
    }

    /// Every value of a multi-valued key.
    pub fn get_all(&self, scope: Option<Scope>, key: &str) -> Result<Vec<String>, GitError> {
        let mut args = vec!["config"];
        if let Some(s) = scope {
            args.push(s.flag());
        }
        args.extend(["--get-all", key]);
        Ok(self
            .git
            .try_run(args)?
            .map(|s| s.lines().map(str::to_string).collect())
            .unwrap_or_default())
    }

    /// A boolean as git interprets it (`yes`, `on`, `1`, ...).
    pub fn get_bool(&self, scope: Option<Scope>, key: &str) -> Result<Option<bool>, GitError> {
        let mut args = vec!["config", "--type=bool"];
        if let Some(s) = scope {
            args.push(s.flag());
        }
        args.extend(["--get", key]);
        Ok(self.git.try_run(args)?.map(|v| v == "true"))
    }

    /// `key value` pairs of keys matching a regular expression.
    pub fn get_regexp(
        &self,
        scope: Option<Scope>,
        pattern: &str,
    ) -> Result<Vec<(String, String)>, GitError> {
        let mut args = vec!["config"];
        if let Some(s) = scope {
            args.push(s.flag());
        }
        args.extend(["--get-regexp", pattern]);
        Ok(self
            .git
            .try_run(args)?
            .map(|s| {
                s.lines()
                    .map(|l| match l.split_once(' ') {
                        Some((k, v)) => (k.to_string(), v.to_string()),
                        None => (l.to_string(), String::new()),
                    })
                    .collect()
            })
            .unwrap_or_default())
    }

    pub fn set(&self, scope: Scope, key: &str, value: &str) -> Result<(), GitError> {
        self.git.run(["config", scope.flag(), key, value]).map(drop)
    }

    pub fn add(&self, scope: Scope, key: &str, value: &str) -> Result<(), GitError> {
        self.git
            .run(["config", scope.flag(), "--add", key, value])
            .map(drop)
    }

    /// Removes every value of `key`; absent keys are not an error.
    pub fn unset_all(&self, scope: Scope, key: &str) -> Result<(), GitError> {
        // Exit status 5 means "no such key".
        self.git
            .run_allowing(["config", scope.flag(), "--unset-all", key], &[5])
            .map(drop)
    }

    /// Removes a section when no key is left in it (git keeps empty section headers).
    pub fn remove_section_if_empty(&self, scope: Scope, section: &str) -> Result<(), GitError> {
        let pattern = format!("^{}\\.", regex_escape(section));
        if self.get_regexp(Some(scope), &pattern)?.is_empty() {
            // Fails when the header is already gone: nothing to do then.
            let _ = self
                .git
                .run(["config", scope.flag(), "--remove-section", section]);
        }
        Ok(())
    }
}

/// Escapes a literal for git's (POSIX extended) regular expressions.
pub fn regex_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if "\\.^$|()[]{}*+?".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}
