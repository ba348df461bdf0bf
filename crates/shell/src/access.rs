//! Who may do what over ssh. The rules live in the forced command's own arguments
//! (`--user alice --repo org/model:write ...`), written by `git xet server user add`: the
//! shell decides from its command line alone, needing neither the index nor a running
//! server, and an admin reads a key's rights in authorized_keys itself.

use crate::ShellError;
use git_xet_identity::auth::Scope;
use git_xet_identity::rules::{Rule, RuleSet};
use git_xet_index::RepoName;

const MAX_USER_LEN: usize = 64;

/// A user name: `[A-Za-z0-9._-]`, starting with a letter or digit, at most 64 characters
/// (it is written into authorized_keys and into reflogs).
pub fn check_user(name: &str) -> Result<(), ShellError> {
    let ok = !name.is_empty()
        && name.len() <= MAX_USER_LEN
        && name.as_bytes()[0].is_ascii_alphanumeric()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    match ok {
        true => Ok(()),
        false => Err(ShellError::BadSetting(format!(
            "invalid user name {name:?}: use letters, digits, `.`, `_` and `-` (at most {MAX_USER_LEN})"
        ))),
    }
}

/// One `--repo` argument: a rule of the shared language (`git_xet_identity::rules`), read or write.
pub type Grant = Rule;

/// Parses one `--repo` argument; `default` is the scope when it names none. ssh keys read or
/// write: forcing others' unlocks stays with tokens.
pub fn parse_grant(spec: &str, default: Scope) -> Result<Grant, ShellError> {
    Rule::parse(spec, default, Scope::Write)
        .map_err(|e| ShellError::BadSetting(format!("--repo {e}")))
}

/// A user's rules: the widest scope any grant gives on a repository.
#[derive(Debug, Clone)]
pub struct Rules {
    pub user: String,
    grants: RuleSet,
}

impl Rules {
    pub fn new(user: &str, grants: Vec<Grant>) -> Result<Rules, ShellError> {
        check_user(user)?;
        Ok(Rules {
            user: user.to_string(),
            grants: RuleSet::new(grants),
        })
    }

    /// The scope granted on `repo`, if any.
    pub fn scope(&self, repo: &RepoName) -> Option<Scope> {
        self.grants.scope(repo)
    }

    /// Allowed, or the refusal the user sees (which does not say whether `repo` exists).
    pub fn require(&self, repo: &RepoName, need: Scope) -> Result<Scope, ShellError> {
        match self.scope(repo) {
            Some(have) if have >= need => Ok(have),
            have => Err(ShellError::Denied {
                user: self.user.clone(),
                repo: repo.to_string(),
                need,
                have,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo(s: &str) -> RepoName {
        RepoName::parse(s).unwrap()
    }

    #[test]
    fn grants_give_their_scope_on_their_repositories_only() {
        let rules = Rules::new(
            "alice",
            vec![
                parse_grant("org/a:write", Scope::Read).unwrap(),
                parse_grant("org/b", Scope::Read).unwrap(),
                parse_grant("team/*:read", Scope::Read).unwrap(),
            ],
        )
        .unwrap();
        assert_eq!(rules.scope(&repo("org/a")), Some(Scope::Write));
        assert_eq!(rules.scope(&repo("org/b")), Some(Scope::Read));
        assert_eq!(rules.scope(&repo("team/x")), Some(Scope::Read));
        assert_eq!(rules.scope(&repo("org/c")), None);
        assert_eq!(rules.scope(&repo("team")), None);
        assert!(rules.require(&repo("org/b"), Scope::Write).is_err());
        assert!(rules.require(&repo("org/a"), Scope::Write).is_ok());
        assert_eq!(
            parse_grant("team/*:write", Scope::Read).unwrap().spec(),
            "team/*:write"
        );
    }

    #[test]
    fn bad_grants_and_users_are_refused() {
        for bad in [
            "",
            "../x",
            "org/a:admin",
            "a/b/c",
            "org/*/*",
            "*",
            "-x:read",
            "o g/a",
        ] {
            assert!(parse_grant(bad, Scope::Read).is_err(), "{bad:?}");
        }
        for bad in ["", "-alice", "al ice", "a\"b", "a\nb", &"a".repeat(65)] {
            assert!(check_user(bad).is_err(), "{bad:?}");
        }
        assert!(check_user("alice.b-c_d").is_ok());
    }
}
