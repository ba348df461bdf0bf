//! `git-lfs-authenticate <repo> <operation>`: where this repository's LFS API is and a
//! short-lived token for it, as git-lfs reads it from stdout.

use git_xet_identity::auth::{self, Scope};
use git_xet_identity::keys::Keys;
use git_xet_index::RepoName;

/// git-lfs's answer: `{"href", "header": {"Authorization"}, "expires_in"}`.
#[derive(Debug, serde::Serialize)]
pub struct Answer {
    pub href: String,
    pub header: Header,
    pub expires_in: u64,
}

#[derive(Debug, serde::Serialize)]
pub struct Header {
    #[serde(rename = "Authorization")]
    pub authorization: String,
}

/// The answer for `repo` with `scope`, on the server at `base_url`. The token is an
/// ordinary user token (the Batch API refuses the server's transfer tokens), valid for
/// `ttl` seconds: git-lfs asks again when `expires_in` has passed.
pub fn answer(
    keys: &Keys,
    base_url: &str,
    repo: &RepoName,
    scope: Scope,
    ttl: u64,
    holder: &auth::Holder,
) -> Answer {
    let (token, _) = auth::issue_for(keys, repo, scope, ttl, holder);
    Answer {
        href: format!("{base_url}/{repo}.git/info/lfs"),
        header: Header {
            authorization: format!("Bearer {token}"),
        },
        expires_in: ttl,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_answer_carries_a_token_for_the_repository_and_scope() {
        let keys = Keys::from_secret(&[3; 32]);
        let repo = RepoName::parse("org/m").unwrap();
        let holder = auth::Holder {
            id: "0123456789abcdef".into(),
            user: "alice".into(),
        };
        let a = answer(&keys, "https://x.example", &repo, Scope::Read, 600, &holder);
        assert_eq!(a.href, "https://x.example/org/m.git/info/lfs");
        assert_eq!(a.expires_in, 600);
        let token = a.header.authorization.strip_prefix("Bearer ").unwrap();
        let claims = auth::verify(&keys, token, git_xet_io::time::now_secs()).unwrap();
        assert_eq!((claims.repo.as_str(), claims.scope), ("org/m", Scope::Read));
        assert!(!claims.transfer);
        assert_eq!(claims.user, "alice");
        let json = serde_json::to_value(&a).unwrap();
        assert!(json["header"]["Authorization"].is_string());
    }
}
