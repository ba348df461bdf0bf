//! Dedup scope (`--dedup-scope server|org|repo`): which repositories' xorbs a request may
//! find, be told about, or reference (docs/server-api.md, "Dedup scope").
//!
//! The index always records which repositories hold each xorb (`xorb_repos`: a repository
//! uploaded it in full, or registered files that reference it), whatever the setting, so
//! that the setting can change at any time. A scoped server then answers dedup queries,
//! upload grants and xorb uploads, and accepts shard references, only for xorbs some
//! repository of the caller's scope holds.
//!
//! File records: `files` holds the whole server's record of each file (the first
//! registration's terms). A repository registering a file in a scoped domain keeps its own
//! terms where they differ (`repo_files.terms`; NULL means the server's record), so it is
//! never served, nor told of, another scope's xorbs for a file it uploaded itself.
//! `Index::repo_file` gives a repository its record; `Index::file` a domain's.

use std::fmt;

use crate::repo_name::RepoName;

/// The first segment of a scoped CAS path (`cas_path`); no repository name starts with `_`,
/// so it never shadows a hosted repository's path.
pub const SCOPED_CAS_PREFIX: &str = "/_scope";

/// The setting: how far deduplication reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DedupScope {
    /// Every repository dedups against every other (one team).
    #[default]
    Server,
    /// Repositories dedup within their org, the first component of their name (the first
    /// two of a dataset's, `datasets/ORG`).
    Org,
    /// Each repository dedups only against itself.
    Repo,
}

impl DedupScope {
    /// The domain a request on `repo` acts in.
    pub fn domain(self, repo: &RepoName) -> DedupDomain {
        match self {
            DedupScope::Server => DedupDomain::Server,
            DedupScope::Org => {
                let first = |name: &str| name.split('/').next().unwrap_or(name).to_string();
                DedupDomain::Org(match repo.dataset_id() {
                    Some(id) => format!("{}/{}", crate::repo_name::DATASETS, first(id)),
                    None => first(repo.as_str()),
                })
            }
            DedupScope::Repo => DedupDomain::Repo(repo.clone()),
        }
    }
}

/// The repositories whose xorbs one request may see: all, one org's, or one repository's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DedupDomain {
    Server,
    /// Repositories named `ORG` or `ORG/...`.
    Org(String),
    Repo(RepoName),
}

/// A domain as a condition on a repository name: `repo = exact OR (repo >= lo AND repo <
/// hi)`, so that an index on the name serves it (`/` is followed by `0` in ASCII, so
/// `[ORG/, ORG0)` holds exactly the names under `ORG/`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepoBounds {
    pub exact: String,
    pub lo: String,
    pub hi: String,
}

impl DedupDomain {
    /// `None` for the whole server (no condition).
    pub fn bounds(&self) -> Option<RepoBounds> {
        match self {
            DedupDomain::Server => None,
            DedupDomain::Org(org) => Some(RepoBounds {
                exact: org.clone(),
                lo: format!("{org}/"),
                hi: format!("{org}0"),
            }),
            // An empty range: the exact name only.
            DedupDomain::Repo(repo) => Some(RepoBounds {
                exact: repo.as_str().to_string(),
                lo: String::new(),
                hi: String::new(),
            }),
        }
    }

    /// The path under which the CAS API is handed out to the domain's clients (`casUrl`):
    /// empty for the whole server, `/_scope/ORG` or `/_scope/ORG+NAME` otherwise (`+` is not
    /// in repository names). Clients that key their caches by endpoint (hf-xet) so keep
    /// one cache per scope, and never dedup locally against another scope's xorbs.
    pub fn cas_path(&self) -> String {
        match self {
            DedupDomain::Server => String::new(),
            DedupDomain::Org(org) => format!("{SCOPED_CAS_PREFIX}/{}", org.replace('/', "+")),
            DedupDomain::Repo(repo) => {
                format!("{SCOPED_CAS_PREFIX}/{}", repo.as_str().replace('/', "+"))
            }
        }
    }

    /// Whether `repo` is inside the domain.
    pub fn contains(&self, repo: &str) -> bool {
        match self.bounds() {
            None => true,
            Some(b) => repo == b.exact || (repo >= b.lo.as_str() && repo < b.hi.as_str()),
        }
    }
}

/// Where a xorb is (not) stored, for messages: "on this server", "in the dedup scope of ...".
impl fmt::Display for DedupDomain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DedupDomain::Server => f.write_str("on this server"),
            DedupDomain::Org(org) => {
                write!(f, "in the dedup scope of org {org} (--dedup-scope org)")
            }
            DedupDomain::Repo(repo) => {
                write!(
                    f,
                    "in the dedup scope of repository {repo} (--dedup-scope repo)"
                )
            }
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
    fn domains_hold_what_their_setting_says() {
        let org = DedupScope::Org.domain(&repo("org1/a"));
        assert_eq!(org, DedupDomain::Org("org1".into()));
        for (name, inside) in [
            ("org1/a", true),
            ("org1/c", true),
            ("org1", true),
            ("org10/a", false),
            ("org1-x/a", false),
            ("org2/b", false),
            ("org", false),
        ] {
            assert_eq!(org.contains(name), inside, "{name}");
        }
        let one = DedupScope::Repo.domain(&repo("org1/a"));
        assert!(one.contains("org1/a"));
        assert!(!one.contains("org1/c") && !one.contains("org1"));
        assert!(DedupScope::Server.domain(&repo("x")).contains("y/z"));
        assert_eq!(one.cas_path(), "/_scope/org1+a");
        assert_eq!(org.cas_path(), "/_scope/org1");
        assert_eq!(DedupDomain::Server.cas_path(), "");
        // A dataset's org is `datasets/ORG`: not every dataset's, not the models' of ORG.
        let data = DedupScope::Org.domain(&repo("datasets/org1/d"));
        assert_eq!(data, DedupDomain::Org("datasets/org1".into()));
        assert!(data.contains("datasets/org1/e") && !data.contains("datasets/org2/e"));
        assert!(!data.contains("org1/a"));
        assert_eq!(data.cas_path(), "/_scope/datasets+org1");
        // A repository without an org is its own org.
        assert_eq!(
            DedupScope::Org.domain(&repo("model")),
            DedupDomain::Org("model".into())
        );
    }
}
