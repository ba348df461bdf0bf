//! The rule language of every credential: `org/name[:read|:write|:admin]` for one repository,
//! `org/*[:...]` for every repository of an organization, its models and its datasets
//! (`datasets/org/name`) alike, as on the Hub where an organization owns both;
//! `datasets/org/*[:...]` for its datasets only. ssh keys' forced commands
//! (`git xet shell --repo ...`), tokens (`token create --repo ...`) and the OIDC policy file
//! all speak it, through this one parser.

use crate::auth::Scope;
use git_xet_index::repo_name::{RepoName, DATASETS};

/// A rule that does not parse: the spec and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{spec:?}: {why}")]
pub struct RuleError {
    pub spec: String,
    pub why: String,
}

/// Which repositories a rule covers: one, every repository of an organization (models and
/// datasets), or every dataset of an organization.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Target {
    Repo(RepoName),
    Org(String),
    OrgDatasets(String),
}

/// One rule: a target and the scope it gives there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    target: Target,
    scope: Scope,
}

/// Longest rule accepted (an `org/name` is at most 201 characters, `:admin` 6 more).
const MAX_SPEC_LEN: usize = 256;

impl Rule {
    /// Parses `spec`; `default` is the scope when it names none, `max` the widest allowed
    /// (ssh keys stop at write: forcing others' unlocks stays with tokens).
    pub fn parse(spec: &str, default: Scope, max: Scope) -> Result<Rule, RuleError> {
        let bad = |why: String| RuleError {
            spec: spec.chars().take(MAX_SPEC_LEN).collect(),
            why,
        };
        if spec.len() > MAX_SPEC_LEN {
            return Err(bad("too long".into()));
        }
        let allowed = || match max {
            Scope::Read => "read",
            Scope::Write => "read or write",
            Scope::Admin => "read, write or admin",
        };
        let (name, scope) = match spec.rsplit_once(':') {
            Some((name, scope)) => (
                name,
                Scope::parse(scope)
                    .filter(|s| *s <= max)
                    .ok_or_else(|| bad(format!("scope {scope:?} is not {}", allowed())))?,
            ),
            None => (spec, default.min(max)),
        };
        let target = match name.strip_suffix("/*") {
            Some(DATASETS) => {
                return Err(bad(
                    "`datasets/*` is not a rule: `org/*` covers an organization's models and \
                     datasets, `datasets/org/*` its datasets only"
                        .into(),
                ))
            }
            Some(org) => {
                let (org, datasets) =
                    match org.strip_prefix(DATASETS).and_then(|o| o.strip_prefix('/')) {
                        Some(org) => (org, true),
                        None => (org, false),
                    };
                if org.contains('/') {
                    return Err(bad(
                        "use `org/*` for every repository of an organization, `datasets/org/*` \
                         for its datasets"
                            .into(),
                    ));
                }
                // The organization must be a valid first segment of a repository name.
                RepoName::parse(&format!("{org}/x")).map_err(|e| bad(e.to_string()))?;
                match datasets {
                    true => Target::OrgDatasets(org.to_string()),
                    false => Target::Org(org.to_string()),
                }
            }
            None => Target::Repo(RepoName::parse(name).map_err(|e| bad(e.to_string()))?),
        };
        Ok(Rule { target, scope })
    }

    /// A rule for one repository.
    pub fn repo(repo: &RepoName, scope: Scope) -> Rule {
        Rule {
            target: Target::Repo(repo.clone()),
            scope,
        }
    }

    /// The scope this rule gives.
    pub fn scope_granted(&self) -> Scope {
        self.scope
    }

    /// The repository it names, when it names one (not an organization).
    pub fn single_repo(&self) -> Option<&RepoName> {
        match &self.target {
            Target::Repo(r) => Some(r),
            Target::Org(_) | Target::OrgDatasets(_) => None,
        }
    }

    /// The form `parse` reads back.
    pub fn spec(&self) -> String {
        let name = match &self.target {
            Target::Repo(r) => r.to_string(),
            Target::Org(o) => format!("{o}/*"),
            Target::OrgDatasets(o) => format!("{DATASETS}/{o}/*"),
        };
        format!("{name}:{}", self.scope.as_str())
    }

    pub fn covers(&self, repo: &RepoName) -> bool {
        match &self.target {
            Target::Repo(r) => r == repo,
            Target::Org(o) => org_of(repo) == Some(o.as_str()),
            Target::OrgDatasets(o) => repo.is_dataset() && org_of(repo) == Some(o.as_str()),
        }
    }

    /// Whether this rule gives `need` on every repository of `org` (creating one there).
    pub fn covers_org(&self, org: &str, need: Scope) -> bool {
        matches!(&self.target, Target::Org(o) if o == org) && self.scope >= need
    }
}

/// The organization of `org/name` and of the dataset `datasets/org/name`.
fn org_of(repo: &RepoName) -> Option<&str> {
    let id = repo.dataset_id().unwrap_or(repo.as_str());
    id.split_once('/').map(|(org, _)| org)
}

/// What a credential grants: the widest scope any of its rules gives on a repository.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RuleSet(Vec<Rule>);

impl RuleSet {
    pub fn new(rules: Vec<Rule>) -> RuleSet {
        RuleSet(rules)
    }

    pub fn rules(&self) -> &[Rule] {
        &self.0
    }

    /// The scope granted on `repo`, if any.
    pub fn scope(&self, repo: &RepoName) -> Option<Scope> {
        self.0
            .iter()
            .filter(|r| r.covers(repo))
            .map(|r| r.scope)
            .max()
    }

    /// Whether some rule gives `need` on the whole organization `org`.
    pub fn covers_org(&self, org: &str, need: Scope) -> bool {
        self.0.iter().any(|r| r.covers_org(org, need))
    }

    /// The rules, as `parse` reads them, comma-separated (what refusals and listings show).
    pub fn describe(&self) -> String {
        match self.0.is_empty() {
            true => "no repository".into(),
            false => {
                let specs: Vec<String> = self.0.iter().map(Rule::spec).collect();
                specs.join(", ")
            }
        }
    }

    /// The repository when the rules name exactly one (the CAS API acts on it).
    pub fn only_repo(&self) -> Option<&RepoName> {
        match self.0.as_slice() {
            [rule] => rule.single_repo(),
            _ => None,
        }
    }

    /// Why `need` on `repo` is refused, naming the rule that is missing; `None` when allowed.
    pub fn refusal(&self, repo: &RepoName, need: Scope) -> Option<String> {
        let have = self.scope(repo);
        if have.is_some_and(|h| h >= need) {
            return None;
        }
        let wanted = match org_of(repo) {
            Some(org) => format!("`{repo}:{n}` or `{org}/*:{n}`", n = need.as_str()),
            None => format!("`{repo}:{}`", need.as_str()),
        };
        Some(match have {
            Some(have) => format!(
                "only {} access to {repo}: {} access needs a rule {wanted} (this credential has {})",
                have.as_str(),
                need.as_str(),
                self.describe()
            ),
            None => format!(
                "no access to {repo}: {} access needs a rule {wanted} (this credential has {})",
                need.as_str(),
                self.describe()
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo(s: &str) -> RepoName {
        RepoName::parse(s).unwrap()
    }

    fn rule(s: &str) -> Rule {
        Rule::parse(s, Scope::Read, Scope::Admin).unwrap()
    }

    #[test]
    fn rules_give_their_scope_on_their_repositories_only() {
        let set = RuleSet::new(vec![
            rule("org/a:write"),
            rule("org/b"),
            rule("team/*:admin"),
        ]);
        assert_eq!(set.scope(&repo("org/a")), Some(Scope::Write));
        assert_eq!(set.scope(&repo("org/b")), Some(Scope::Read));
        assert_eq!(set.scope(&repo("team/x")), Some(Scope::Admin));
        assert_eq!(set.scope(&repo("org/c")), None);
        assert_eq!(set.scope(&repo("team")), None, "a bare name is in no org");
        assert!(set.covers_org("team", Scope::Write));
        assert!(
            !set.covers_org("org", Scope::Read),
            "repo rules are not org rules"
        );
        assert_eq!(set.only_repo(), None);
        assert_eq!(
            RuleSet::new(vec![rule("org/a")]).only_repo(),
            Some(&repo("org/a"))
        );
        assert_eq!(set.describe(), "org/a:write, org/b:read, team/*:admin");
        assert!(set.refusal(&repo("org/a"), Scope::Write).is_none());
        let no = set.refusal(&repo("org/c"), Scope::Read).unwrap();
        assert!(no.contains("`org/c:read` or `org/*:read`"), "{no}");
        let small = set.refusal(&repo("org/b"), Scope::Write).unwrap();
        assert!(small.starts_with("only read access to org/b"), "{small}");
    }

    #[test]
    fn bad_rules_are_refused_and_scopes_capped() {
        for bad in [
            "",
            "../x",
            "a/b/c",
            "org/*/*",
            "*",
            "-x:read",
            "o g/a",
            "org/a:root",
            "datasets/*",
            "datasets/*:write",
            "datasets/org/x/*",
        ] {
            assert!(
                Rule::parse(bad, Scope::Read, Scope::Admin).is_err(),
                "{bad:?}"
            );
        }
        assert!(Rule::parse(&"a".repeat(300), Scope::Read, Scope::Admin).is_err());
        assert!(Rule::parse("org/a:admin", Scope::Read, Scope::Write).is_err());
        let r = Rule::parse("org/*", Scope::Admin, Scope::Write).unwrap();
        assert_eq!(r.spec(), "org/*:write");
        assert_eq!(rule("team/*:write").spec(), "team/*:write");
    }

    #[test]
    fn an_org_rule_covers_its_datasets_and_a_datasets_rule_only_those() {
        let set = RuleSet::new(vec![rule("org/*:write"), rule("datasets/team/*")]);
        assert_eq!(set.scope(&repo("org/m")), Some(Scope::Write));
        assert_eq!(set.scope(&repo("datasets/org/d")), Some(Scope::Write));
        assert_eq!(set.scope(&repo("datasets/team/d")), Some(Scope::Read));
        assert_eq!(set.scope(&repo("team/m")), None, "datasets only");
        assert_eq!(set.scope(&repo("datasets/other/d")), None);
        // A model of an organization named `datasets` is not any org's dataset.
        assert_eq!(set.scope(&repo("datasets/org")), None);
        assert_eq!(
            set.describe(),
            "org/*:write, datasets/team/*:read",
            "specs read back"
        );
        assert_eq!(
            rule("datasets/team/*:read"),
            rule(&rule("datasets/team/*").spec())
        );
        assert!(set.covers_org("org", Scope::Write));
        assert!(!set.covers_org("team", Scope::Read));
        let no = set.refusal(&repo("datasets/x/d"), Scope::Read).unwrap();
        assert!(no.contains("`datasets/x/d:read` or `x/*:read`"), "{no}");
    }
}
