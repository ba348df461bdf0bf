//! `--policy FILE`: which rules an OIDC identity gets. One entry a line, `#` starts a comment:
//!
//! ```text
//! group:ml-team   org/*:write          # every member of ml-team (a value of --oidc-claim)
//! sub:alice       org/model:read other/x:write
//! ```
//!
//! `group:VALUE` matches a value of the configured claim (a string or a list of strings,
//! `groups` by default), `sub:VALUE` the token's subject. An identity gets the rules of every
//! line it matches. The file is read again when its modification time changes (checked at
//! most once a second) or on SIGHUP; a file that does not parse keeps the policy in force and
//! the reason is logged.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use crate::auth::Scope;
use crate::rules::Rule;

/// Largest policy file read.
const MAX_POLICY_BYTES: u64 = 1 << 20;
/// How often the file's modification time is looked at.
const CHECK_EVERY: Duration = Duration::from_secs(1);

/// What a policy file says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
    groups: HashMap<String, Vec<Rule>>,
    subjects: HashMap<String, Vec<Rule>>,
}

/// A policy file that does not parse: where and why.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("reading {0}: {1}")]
    Read(PathBuf, std::io::Error),
    #[error("{path}:{line}: {why}")]
    Line {
        path: PathBuf,
        line: usize,
        why: String,
    },
}

impl Policy {
    /// Parses the text of a policy file (`path` only names it in errors).
    pub fn parse(text: &str, path: &Path) -> Result<Policy, PolicyError> {
        let mut policy = Policy::default();
        for (n, raw) in text.lines().enumerate() {
            let bad = |why: String| PolicyError::Line {
                path: path.to_path_buf(),
                line: n + 1,
                why,
            };
            let line = raw.split('#').next().unwrap_or("").trim();
            let mut words = line.split_whitespace();
            let Some(who) = words.next() else { continue };
            let rules = words
                .map(|spec| Rule::parse(spec, Scope::Read, Scope::Admin))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| bad(format!("rule {e}")))?;
            if rules.is_empty() {
                return Err(bad(format!("{who} is given no rule (`{who} org/*:write`)")));
            }
            let (map, value) = if let Some(v) = who.strip_prefix("group:") {
                (&mut policy.groups, v)
            } else if let Some(v) = who.strip_prefix("sub:") {
                (&mut policy.subjects, v)
            } else {
                return Err(bad(format!(
                    "{who:?} is neither `group:NAME` nor `sub:NAME`"
                )));
            };
            if value.is_empty() {
                return Err(bad(format!("{who:?} names no one")));
            }
            map.entry(value.to_string()).or_default().extend(rules);
        }
        Ok(policy)
    }

    /// The rules of an identity with subject `sub` and claim values `groups`.
    pub fn rules_for(&self, sub: &str, groups: &[String]) -> Vec<Rule> {
        let mut out: Vec<Rule> = self.subjects.get(sub).cloned().unwrap_or_default();
        for g in groups {
            out.extend(self.groups.get(g).into_iter().flatten().cloned());
        }
        out
    }
}

/// A policy file and the policy last read from it.
pub struct PolicyFile {
    path: PathBuf,
    state: Mutex<Loaded>,
}

struct Loaded {
    policy: Policy,
    modified: Option<SystemTime>,
    checked: Instant,
}

fn read(path: &Path) -> Result<(Policy, Option<SystemTime>), PolicyError> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|e| PolicyError::Read(path.into(), e))?;
    let modified = file.metadata().and_then(|m| m.modified()).ok();
    let mut text = String::new();
    file.take(MAX_POLICY_BYTES)
        .read_to_string(&mut text)
        .map_err(|e| PolicyError::Read(path.into(), e))?;
    Ok((Policy::parse(&text, path)?, modified))
}

impl PolicyFile {
    /// Reads the file; at start-up a bad file is an error.
    pub fn open(path: &Path) -> Result<PolicyFile, PolicyError> {
        let (policy, modified) = read(path)?;
        Ok(PolicyFile {
            path: path.to_path_buf(),
            state: Mutex::new(Loaded {
                policy,
                modified,
                checked: git_xet_io::time::instant_now(),
            }),
        })
    }

    /// The policy in force, read again first when the file changed (see the module comment).
    pub fn current(&self) -> Policy {
        let mut state = self.state.lock().expect("policy");
        let now = git_xet_io::time::instant_now();
        if now.saturating_duration_since(state.checked) >= CHECK_EVERY {
            state.checked = now;
            let modified = std::fs::metadata(&self.path)
                .and_then(|m| m.modified())
                .ok();
            if modified != state.modified {
                self.reload_locked(&mut state);
            }
        }
        state.policy.clone()
    }

    /// Reads the file again now (SIGHUP).
    pub fn reload(&self) {
        let mut state = self.state.lock().expect("policy");
        self.reload_locked(&mut state);
    }

    fn reload_locked(&self, state: &mut Loaded) {
        match read(&self.path) {
            Ok((policy, modified)) => {
                tracing::info!(path = %self.path.display(), "policy file read again");
                state.policy = policy;
                state.modified = modified;
            }
            Err(e) => {
                // Keep what is in force; the next change is tried again.
                state.modified = std::fs::metadata(&self.path)
                    .and_then(|m| m.modified())
                    .ok();
                tracing::warn!("policy file not reloaded, the previous policy stays in force: {e}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_give_their_rules_and_bad_lines_say_where() {
        let text = "# team\ngroup:ml org/*:write   # all of org\n\nsub:alice  x/m:read y/*:admin\ngroup:ml z/q\n";
        let p = Policy::parse(text, Path::new("p")).unwrap();
        let specs = |rules: Vec<Rule>| rules.iter().map(Rule::spec).collect::<Vec<_>>();
        assert_eq!(
            specs(p.rules_for("bob", &["ml".into()])),
            ["org/*:write", "z/q:read"]
        );
        assert_eq!(
            specs(p.rules_for("alice", &["other".into()])),
            ["x/m:read", "y/*:admin"]
        );
        assert!(
            p.rules_for("ml", &[]).is_empty(),
            "a group is not a subject"
        );
        for (bad, why) in [
            ("group:ml", "no rule"),
            ("user:x org/a", "neither"),
            ("group: org/a", "names no one"),
            ("sub:x org/*/*", "rule"),
        ] {
            match Policy::parse(&format!("# c\n{bad}\n"), Path::new("p")) {
                Err(PolicyError::Line { line, why: w, .. }) => {
                    assert_eq!(line, 2);
                    assert!(w.contains(why), "{bad}: {w}");
                }
                other => panic!("{bad}: {other:?}"),
            }
        }
    }
}
