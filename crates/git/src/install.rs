//! `git xet install` / `git xet uninstall`: register git-xet as git-lfs's `xet` custom
//! transfer agent (and, unless `--no-filter`, as the `lfs` filter process in place of
//! `git-lfs filter-process`) at one config scope, and take back exactly what was added.
//!
//! Install records what it changed in the same config file, under `xet.install.*`:
//! `added` (keys it set, one value each) and `previous` (`key=value` it overwrote). Uninstall
//! unsets only recorded keys whose value is still the one install wrote, restores overwritten
//! values, and runs `git lfs uninstall` only if install ran `git lfs install`. So install is
//! idempotent and uninstall never removes a setting the user made.

use std::path::Path;

use crate::command::Git;
use crate::config::{Config, Scope};
use crate::GitError;

pub const KEY_PATH: &str = "lfs.customtransfer.xet.path";
pub const KEY_ARGS: &str = "lfs.customtransfer.xet.args";
pub const KEY_CONCURRENT: &str = "lfs.customtransfer.xet.concurrent";
/// Also registered for downloads under the name that tells servers our `xet` agent
/// downloads (crates/core/src/constants.rs, `XET_DOWNLOAD_TRANSFER`); git-lfs lists it in download
/// batches. The server still names `xet`, so git-lfs runs the agent above.
pub const KEY_DL_PATH: &str = "lfs.customtransfer.xet-download.path";
pub const KEY_DL_ARGS: &str = "lfs.customtransfer.xet-download.args";
pub const KEY_DL_DIRECTION: &str = "lfs.customtransfer.xet-download.direction";
pub const KEY_CONCURRENT_TRANSFERS: &str = "lfs.concurrenttransfers";
/// `lfs.concurrenttransfers` when install is not told (git-lfs's own default is 8). git-lfs
/// hands objects over in Batch API groups of 100 and waits for a group to finish before
/// asking for the next, and each agent holds one object until it is registered, so a group
/// takes at least 100 / agents round trips: 50 makes it two (34 made three, 100 one), for
/// about 5 ms per agent that git-lfs starts one after another at every push. See
/// docs/benchmarks.md for the measurements behind it.
pub const DEFAULT_CONCURRENCY: u32 = 50;
/// What earlier versions' install set: a re-install moves these to the default.
const EARLIER_DEFAULTS: [&str; 2] = ["32", "34"];
pub const KEY_FILTER_PROCESS: &str = "filter.lfs.process";
/// What follows the program in `filter.lfs.process`.
const FILTER_ARG: &str = "filter-process";
const RECORD_ADDED: &str = "xet.install.added";
const RECORD_PREVIOUS: &str = "xet.install.previous";
const RECORD_LFS: &str = "xet.install.ranlfsinstall";

/// What to install.
#[derive(Clone, Debug)]
pub struct InstallOptions {
    pub scope: Scope,
    /// Parallel transfers: 1 runs one agent process (`concurrent = false`); more also sets
    /// `lfs.concurrenttransfers`. `None` sets it to [`DEFAULT_CONCURRENCY`] unless it is
    /// set already.
    pub concurrency: Option<u32>,
    /// The agent program git-lfs runs.
    pub program: String,
    /// Also make git run `git-xet filter-process` for `filter=lfs` files.
    pub filter: bool,
}

/// One line of what install or uninstall did, for the user.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    Set { key: String, value: String },
    Unchanged { key: String },
    Removed { key: String },
    Restored { key: String, value: String },
    KeptUserValue { key: String, value: String },
    RanLfs(String),
}

impl std::fmt::Display for Change {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Change::Set { key, value } => write!(f, "set {key} = {value}"),
            Change::Unchanged { key } => write!(f, "{key} already set"),
            Change::Removed { key } => write!(f, "removed {key}"),
            Change::Restored { key, value } => write!(f, "restored {key} = {value}"),
            Change::KeptUserValue { key, value } => {
                write!(
                    f,
                    "kept {key} = {value} (changed since install; remove it by hand if unwanted)"
                )
            }
            Change::RanLfs(cmd) => write!(f, "ran `{cmd}`"),
        }
    }
}

/// The config to use for a scope: local needs a repository, the others run anywhere.
pub fn config_for(scope: Scope, dir: &Path) -> Result<Config, GitError> {
    if scope == Scope::Local {
        let repo = crate::repo::Repo::discover(dir)?;
        Ok(repo.config())
    } else {
        Ok(Config::new(Git::in_dir(dir)))
    }
}

/// Registers the agent. Idempotent.
pub fn install(config: &Config, opts: &InstallOptions) -> Result<Vec<Change>, GitError> {
    if opts.concurrency == Some(0) {
        return Err(GitError::BadOption {
            option: "--concurrency",
            requirement: "must be at least 1",
        });
    }
    let scope = opts.scope;
    let mut wanted = vec![
        (KEY_PATH, opts.program.clone()),
        (KEY_ARGS, "transfer".to_string()),
        (
            KEY_CONCURRENT,
            (opts.concurrency.unwrap_or(8) > 1).to_string(),
        ),
        (KEY_DL_PATH, opts.program.clone()),
        (KEY_DL_ARGS, "transfer".to_string()),
        (KEY_DL_DIRECTION, "download".to_string()),
    ];
    match opts.concurrency {
        Some(n) if n > 1 => wanted.push((KEY_CONCURRENT_TRANSFERS, n.to_string())),
        Some(_) => {}
        // git-lfs hands each agent one object at a time, so agents in flight bound a push
        // of small files; agents are cheap (small uploads of one push share one session:
        // the lfs crate's `coordinator`). A value the user set anywhere is kept; an earlier
        // default that an earlier install set in this scope (recorded as added) moves.
        None => {
            let earlier_default = config
                .get(Some(scope), KEY_CONCURRENT_TRANSFERS)?
                .is_some_and(|v| EARLIER_DEFAULTS.contains(&v.as_str()))
                && config
                    .get_all(Some(scope), RECORD_ADDED)?
                    .iter()
                    .any(|k| k == KEY_CONCURRENT_TRANSFERS);
            if earlier_default || config.get(None, KEY_CONCURRENT_TRANSFERS)?.is_none() {
                wanted.push((KEY_CONCURRENT_TRANSFERS, DEFAULT_CONCURRENCY.to_string()));
            }
        }
    }
    if opts.filter {
        // git runs the process through the shell.
        wanted.push((KEY_FILTER_PROCESS, filter_command(&opts.program)));
    }
    let mut changes = Vec::new();
    if !lfs_filters_present(config, scope)? {
        let args = lfs_args("install", scope);
        config.git().run(&args)?;
        config.set(scope, RECORD_LFS, "true")?;
        changes.push(Change::RanLfs(format!("git {}", args.join(" "))));
    }
    let recorded = config.get_all(Some(scope), RECORD_ADDED)?;
    for (key, value) in wanted {
        let current = config.get(Some(scope), key)?;
        if current.as_deref() == Some(value.as_str()) {
            changes.push(Change::Unchanged {
                key: key.to_string(),
            });
            continue;
        }
        if let Some(previous) = current {
            // Keep the first overwritten value: that is the user's, not an earlier install's.
            if !recorded.iter().any(|k| k == key) {
                config.add(scope, RECORD_PREVIOUS, &format!("{key}={previous}"))?;
            }
        }
        config.set(scope, key, &value)?;
        if !recorded.iter().any(|k| k == key) {
            config.add(scope, RECORD_ADDED, key)?;
        }
        changes.push(Change::Set {
            key: key.to_string(),
            value,
        });
    }
    // A value recorded by an earlier install that this one no longer wants (e.g. a
    // concurrency setting dropped) stays recorded, so uninstall still cleans it up.
    Ok(changes)
}

/// Removes what install added at this scope.
pub fn uninstall(config: &Config, scope: Scope, program: &str) -> Result<Vec<Change>, GitError> {
    let added = config.get_all(Some(scope), RECORD_ADDED)?;
    let previous: Vec<(String, String)> = config
        .get_all(Some(scope), RECORD_PREVIOUS)?
        .into_iter()
        .filter_map(|kv| {
            kv.split_once('=')
                .map(|(k, v)| (k.to_string(), v.to_string()))
        })
        .collect();
    let mut changes = Vec::new();
    for key in &added {
        let Some(current) = config.get(Some(scope), key)? else {
            continue;
        };
        if !value_is_ours(key, &current, program) {
            changes.push(Change::KeptUserValue {
                key: key.clone(),
                value: current,
            });
            continue;
        }
        config.unset_all(scope, key)?;
        match previous.iter().find(|(k, _)| k == key) {
            Some((_, value)) => {
                config.set(scope, key, value)?;
                changes.push(Change::Restored {
                    key: key.clone(),
                    value: value.clone(),
                });
            }
            None => changes.push(Change::Removed { key: key.clone() }),
        }
    }
    if config.get_bool(Some(scope), RECORD_LFS)? == Some(true) {
        let args = lfs_args("uninstall", scope);
        config.git().run(&args)?;
        changes.push(Change::RanLfs(format!("git {}", args.join(" "))));
    }
    config.unset_all(scope, RECORD_ADDED)?;
    config.unset_all(scope, RECORD_PREVIOUS)?;
    config.unset_all(scope, RECORD_LFS)?;
    config.remove_section_if_empty(scope, "xet.install")?;
    config.remove_section_if_empty(scope, "lfs.customtransfer.xet")?;
    config.remove_section_if_empty(scope, "lfs.customtransfer.xet-download")?;
    config.remove_section_if_empty(scope, "lfs")?;
    Ok(changes)
}

/// Whether a recorded key still has a value install could have written. The program path
/// may differ between versions, so any git-xet program counts as ours.
fn value_is_ours(key: &str, value: &str, program: &str) -> bool {
    match key {
        KEY_PATH | KEY_DL_PATH => value == program || value.ends_with("git-xet"),
        KEY_ARGS | KEY_DL_ARGS => value == "transfer",
        KEY_DL_DIRECTION => value == "download",
        KEY_CONCURRENT => value == "true" || value == "false",
        KEY_CONCURRENT_TRANSFERS => value.parse::<u32>().is_ok(),
        KEY_FILTER_PROCESS => {
            value.ends_with(&format!(" {FILTER_ARG}"))
                && (value.starts_with(&shell_quote(program)) || value.contains("git-xet"))
        }
        _ => false,
    }
}

/// The `filter.lfs.process` value that runs `program`'s filter (git runs it through the
/// shell).
pub fn filter_command(program: &str) -> String {
    format!("{} {FILTER_ARG}", shell_quote(program))
}

/// `s` as one shell word.
fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-+=:,@".contains(&b))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// Whether git-lfs's filters are configured where `scope`'s settings apply.
fn lfs_filters_present(config: &Config, scope: Scope) -> Result<bool, GitError> {
    let scopes: &[Option<Scope>] = match scope {
        Scope::Local => &[None],
        Scope::Global => &[Some(Scope::Global), Some(Scope::System)],
        Scope::System => &[Some(Scope::System)],
    };
    for s in scopes {
        if config.get(*s, "filter.lfs.process")?.is_some()
            || config.get(*s, "filter.lfs.smudge")?.is_some()
        {
            return Ok(true);
        }
    }
    Ok(false)
}

/// `git lfs install|uninstall` at a scope. Outside local scope `--skip-repo` keeps it from
/// touching the hooks of whatever repository the command happens to run in.
fn lfs_args(verb: &str, scope: Scope) -> Vec<String> {
    let mut args = vec!["lfs".to_string(), verb.to_string()];
    match scope {
        Scope::Local => args.push("--local".into()),
        Scope::Global => args.push("--skip-repo".into()),
        Scope::System => {
            args.push("--system".into());
            args.push("--skip-repo".into());
        }
    }
    args
}

/// Whether git runs git-xet as the `lfs` filter process where the repository sees it.
pub fn filter_is_ours(config: &Config) -> Result<bool, GitError> {
    Ok(config
        .get(None, KEY_FILTER_PROCESS)?
        .is_some_and(|v| v.ends_with(&format!(" {FILTER_ARG}")) && v.contains("git-xet")))
}

/// Whether the agent is configured where the repository (or `dir`) sees it, and how.
pub fn configured_agent(config: &Config) -> Result<Option<(String, String)>, GitError> {
    let path = config.get(None, KEY_PATH)?;
    let args = config.get(None, KEY_ARGS)?.unwrap_or_default();
    Ok(path.map(|p| (p, args)))
}
