//! Who may do what over ssh. The rules live in the forced command's own arguments
//! (`--user alice --repo org/model:write ...`), written by `git xet server user add`: the
//! shell decides from its command line alone, needing neither the index nor a running
//! server, and an admin reads a key's rights in authorized_keys itself.

use crate::auth::Scope;
use crate::repo_name::RepoName;
use crate::ssh::ShellError;

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

/// Which repositories a grant covers: one, or every repository of an organization.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Target {
    Repo(RepoName),
    Org(String),
}

/// One `--repo` argument: `org/name[:read|:write]` or `org/*[:read|:write]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    target: Target,
    scope: Scope,
}

impl Grant {
    /// Parses `spec`; `default` is the scope when it names none.
    pub fn parse(spec: &str, default: Scope) -> Result<Grant, ShellError> {
        let bad = |why: String| ShellError::BadSetting(format!("--repo {spec:?}: {why}"));
        let (name, scope) = match spec.rsplit_once(':') {
            Some((name, scope)) => (
                name,
                // ssh keys read or write; admin (forcing others' unlocks) stays with tokens.
                Scope::parse(scope)
                    .filter(|s| *s <= Scope::Write)
                    .ok_or_else(|| bad(format!("scope {scope:?} is not read or write")))?,
            ),
            None => (spec, default),
        };
        let target = match name.strip_suffix("/*") {
            Some(org) => {
                // The organization must be a valid first segment of a repository name.
                RepoName::parse(&format!("{org}/x")).map_err(|e| bad(e.to_string()))?;
                if org.contains('/') {
                    return Err(bad(
                        "use `org/*` for every repository of an organization".into()
                    ));
                }
                Target::Org(org.to_string())
            }
            None => Target::Repo(RepoName::parse(name).map_err(|e| bad(e.to_string()))?),
        };
        Ok(Grant { target, scope })
    }

    /// The form `parse` reads back.
    /// The scope this grant gives.
    pub fn scope_granted(&self) -> Scope {
        self.scope
    }

    pub fn spec(&self) -> String {
        let name = match &self.target {
            Target::Repo(r) => r.to_string(),
            Target::Org(o) => format!("{o}/*"),
        };
        format!("{name}:{}", self.scope.as_str())
    }

    fn covers(&self, repo: &RepoName) -> bool {
        match &self.target {
            Target::Repo(r) => r == repo,
            Target::Org(o) => repo
                .as_str()
                .split_once('/')
                .is_some_and(|(org, _)| org == o),
        }
    }
}

/// A user's rules: the widest scope any grant gives on a repository.
#[derive(Debug, Clone)]
pub struct Rules {
    pub user: String,
    grants: Vec<Grant>,
}

impl Rules {
    pub fn new(user: &str, grants: Vec<Grant>) -> Result<Rules, ShellError> {
        check_user(user)?;
        Ok(Rules {
            user: user.to_string(),
            grants,
        })
    }

    /// The scope granted on `repo`, if any.
    pub fn scope(&self, repo: &RepoName) -> Option<Scope> {
        self.grants
            .iter()
            .filter(|g| g.covers(repo))
            .map(|g| g.scope)
            .max()
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
                Grant::parse("org/a:write", Scope::Read).unwrap(),
                Grant::parse("org/b", Scope::Read).unwrap(),
                Grant::parse("team/*:read", Scope::Read).unwrap(),
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
            Grant::parse("team/*:write", Scope::Read).unwrap().spec(),
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
            assert!(Grant::parse(bad, Scope::Read).is_err(), "{bad:?}");
        }
        for bad in ["", "-alice", "al ice", "a\"b", "a\nb", &"a".repeat(65)] {
            assert!(check_user(bad).is_err(), "{bad:?}");
        }
        assert!(check_user("alice.b-c_d").is_ok());
    }
}
