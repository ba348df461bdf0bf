//! git configuration through `git config`, at an explicit scope.
//!
//! A long-running process that only reads (the filter) can take a [`ConfigSnapshot`]: one
//! `git config --list` at start instead of a git process per key, as git-lfs does.

use std::sync::Arc;

use crate::command::Git;
use crate::GitError;

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

/// Reads and writes configuration; `scope` `None` reads the effective value (from the
/// snapshot, when there is one).
#[derive(Clone, Debug)]
pub struct Config {
    git: Git,
    snapshot: Option<Arc<ConfigSnapshot>>,
}

impl Config {
    pub fn new(git: Git) -> Config {
        Config {
            git,
            snapshot: None,
        }
    }

    /// Effective values are read from `snapshot`; scoped reads and writes still go to git.
    pub fn with_snapshot(git: Git, snapshot: Arc<ConfigSnapshot>) -> Config {
        Config {
            git,
            snapshot: Some(snapshot),
        }
    }

    fn snapshot_for(&self, scope: Option<Scope>) -> Option<&ConfigSnapshot> {
        self.snapshot.as_deref().filter(|_| scope.is_none())
    }

    pub fn git(&self) -> &Git {
        &self.git
    }

    /// The last value of `key` (git's rule for single-valued keys), if set.
    pub fn get(&self, scope: Option<Scope>, key: &str) -> Result<Option<String>, GitError> {
        if let Some(snapshot) = self.snapshot_for(scope) {
            return Ok(snapshot.get(key).map(str::to_string));
        }
        let mut args = vec!["config"];
        if let Some(s) = scope {
            args.push(s.flag());
        }
        args.extend(["--get", key]);
        self.git.try_run(args)
    }

    /// Every value of a multi-valued key.
    pub fn get_all(&self, scope: Option<Scope>, key: &str) -> Result<Vec<String>, GitError> {
        if let Some(snapshot) = self.snapshot_for(scope) {
            return Ok(snapshot.get_all(key).map(str::to_string).collect());
        }
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
        if let Some(snapshot) = self.snapshot_for(scope) {
            return snapshot.get_bool(key);
        }
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

    /// `key value` pairs of the effective keys starting with `prefix` (a literal).
    pub fn with_prefix(&self, prefix: &str) -> Result<Vec<(String, String)>, GitError> {
        if let Some(snapshot) = &self.snapshot {
            let prefix = normalize_key(prefix);
            return Ok(snapshot
                .entries
                .iter()
                .filter(|(k, _)| k.starts_with(&prefix))
                .map(|(k, v)| (k.clone(), v.clone().unwrap_or_default()))
                .collect());
        }
        self.get_regexp(None, &format!("^{}", regex_escape(prefix)))
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

/// Every effective configuration entry, in git's order (later entries win), read once.
#[derive(Debug, Default)]
pub struct ConfigSnapshot {
    /// Keys as git lists them: section and name lowercased, subsection as written. A key
    /// written without `= value` has no value (true, as a boolean).
    entries: Vec<(String, Option<String>)>,
}

impl ConfigSnapshot {
    /// `git config --list -z` (all scopes, includes followed).
    pub fn load(git: &Git) -> Result<ConfigSnapshot, GitError> {
        let out = git.run_bytes(["config", "--list", "-z"], None)?;
        Ok(ConfigSnapshot::parse(&out))
    }

    /// Parses `--list -z` output: entries end in NUL; the key ends at the first newline,
    /// and an entry without one is a key without a value.
    pub fn parse(out: &[u8]) -> ConfigSnapshot {
        let entries = out
            .split(|&b| b == 0)
            .filter(|e| !e.is_empty())
            .map(|entry| {
                let text = String::from_utf8_lossy(entry);
                match text.split_once('\n') {
                    Some((k, v)) => (k.to_string(), Some(v.to_string())),
                    None => (text.into_owned(), None),
                }
            })
            .collect();
        ConfigSnapshot { entries }
    }

    fn values<'a>(&'a self, key: &str) -> impl Iterator<Item = Option<&'a str>> + 'a {
        let key = normalize_key(key);
        self.entries
            .iter()
            .filter(move |(k, _)| *k == key)
            .map(|(_, v)| v.as_deref())
    }

    /// The last value of `key`, as `git config --get` answers it (a key without a value
    /// reads as empty).
    pub fn get(&self, key: &str) -> Option<&str> {
        self.values(key).last().map(|v| v.unwrap_or(""))
    }

    pub fn get_all<'a>(&'a self, key: &str) -> impl Iterator<Item = &'a str> + 'a {
        self.values(key).map(|v| v.unwrap_or(""))
    }

    /// A boolean by git's rules: no value, `true`, `yes`, `on` or a non-zero integer is true;
    /// `false`, `no`, `off`, empty or zero is false; anything else is an error, as in git.
    pub fn get_bool(&self, key: &str) -> Result<Option<bool>, GitError> {
        let Some(value) = self.values(key).last() else {
            return Ok(None);
        };
        let Some(value) = value else {
            return Ok(Some(true));
        };
        match value.to_ascii_lowercase().as_str() {
            "true" | "yes" | "on" => Ok(Some(true)),
            "false" | "no" | "off" | "" => Ok(Some(false)),
            other => {
                other
                    .parse::<i64>()
                    .map(|n| Some(n != 0))
                    .map_err(|_| GitError::BadConfigValue {
                        key: key.to_string(),
                        value: value.to_string(),
                        expected: "boolean",
                    })
            }
        }
    }
}

/// A key as `git config --list` prints it: section and name are case-insensitive (so
/// lowercased), a subsection is not.
fn normalize_key(key: &str) -> String {
    match (key.find('.'), key.rfind('.')) {
        (Some(first), Some(last)) if first < last => format!(
            "{}{}{}",
            key[..first].to_ascii_lowercase(),
            &key[first..last],
            key[last..].to_ascii_lowercase()
        ),
        _ => key.to_ascii_lowercase(),
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The snapshot answers exactly as a `git config` process per key does, with git as the
    /// oracle: case rules, subsections, includes, keys without values, booleans.
    #[test]
    fn snapshot_reads_agree_with_git_config() {
        let dir = tempfile::tempdir().unwrap();
        let git = Git::in_dir(dir.path())
            .with_env(
                "GIT_CONFIG_GLOBAL",
                dir.path().join("global").to_str().unwrap(),
            )
            .with_env("GIT_CONFIG_NOSYSTEM", "1");
        git.run(["init", "-q"]).unwrap();
        std::fs::write(
            dir.path().join("global"),
            "[multi]\n\tv = 0\n[lfs]\n\turl = g\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("inc.cfg"),
            "[lfs \"extension.foo\"]\n\tclean = foo %f\n[multi]\n\tv = 3\n",
        )
        .unwrap();
        let mut local = std::fs::OpenOptions::new()
            .append(true)
            .open(dir.path().join(".git/config"))
            .unwrap();
        std::io::Write::write_all(
            &mut local,
            b"[LFS]\n\tFetchInclude = a,b\n\turl = http://x\n\
              [remote \"Origin\"]\n\turl = http://o\n\tlfsUrl = http://lfs\n\
              [branch \"Main\"]\n\tremote = Origin\n\
              [xet]\n\tflagNoValue\n\tyes1 = yes\n\tzero = 0\n\ttwo = 2\n\toff = off\n\tempty =\n\
              [multi]\n\tv = 1\n\tv = 2\n[include]\n\tpath = ../inc.cfg\n",
        )
        .unwrap();
        drop(local);

        let per_key = Config::new(git.clone());
        let snapshot =
            Config::with_snapshot(git.clone(), Arc::new(ConfigSnapshot::load(&git).unwrap()));
        for key in [
            "lfs.fetchinclude",
            "LFS.FetchInclude",
            "lfs.url",
            "remote.Origin.url",
            "remote.origin.url",
            "remote.Origin.LFSURL",
            "branch.Main.remote",
            "xet.flagnovalue",
            "multi.v",
            "lfs.extension.foo.clean",
            "missing.key",
        ] {
            assert_eq!(
                snapshot.get(None, key).unwrap(),
                per_key.get(None, key).unwrap(),
                "get {key}"
            );
        }
        // (get_all of a key without a value differs: git prints an empty line, which the
        // per-key reader drops; only scoped reads use get_all.)
        for key in [
            "multi.v",
            "LFS.FetchInclude",
            "remote.origin.url",
            "missing.key",
        ] {
            assert_eq!(
                snapshot.get_all(None, key).unwrap(),
                per_key.get_all(None, key).unwrap(),
                "get_all {key}"
            );
        }
        assert_eq!(
            snapshot.get_all(None, "multi.v").unwrap(),
            ["0", "1", "2", "3"]
        );
        for key in [
            "xet.flagnovalue",
            "xet.yes1",
            "xet.zero",
            "xet.two",
            "xet.off",
            "xet.empty",
            "missing.key",
        ] {
            assert_eq!(
                snapshot.get_bool(None, key).unwrap(),
                per_key.get_bool(None, key).unwrap(),
                "get_bool {key}"
            );
        }
        assert!(per_key.get_bool(None, "lfs.url").is_err());
        assert!(snapshot.get_bool(None, "lfs.url").is_err());
        assert_eq!(
            snapshot.with_prefix("lfs.extension.").unwrap(),
            per_key.with_prefix("lfs.extension.").unwrap()
        );
        assert_eq!(snapshot.with_prefix("lfs.extension.").unwrap().len(), 1);
        // Scoped reads still ask git.
        assert_eq!(
            snapshot
                .get(Some(Scope::Global), "lfs.url")
                .unwrap()
                .as_deref(),
            Some("g")
        );
    }
}
