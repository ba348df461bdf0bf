//! `git-lfs-authenticate <repo> <operation>`: where this repository's LFS API is and a
//! short-lived token for it, as git-lfs reads it from stdout.

use crate::server::auth::{self, Scope};
use crate::server::keys::Keys;
use crate::server::repo_name::RepoName;

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
pub fn answer(keys: &Keys, base_url: &str, repo: &RepoName, scope: Scope, ttl: u64) -> Answer {
    let (token, _) = auth::issue(keys, repo, scope, ttl);
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
        let a = answer(&keys, "https://x.example", &repo, Scope::Read, 600);
        assert_eq!(a.href, "https://x.example/org/m.git/info/lfs");
        assert_eq!(a.expires_in, 600);
        let token = a.header.authorization.strip_prefix("Bearer ").unwrap();
        let claims = auth::verify(&keys, token, auth::now_secs()).unwrap();
        assert_eq!((claims.repo.as_str(), claims.scope), ("org/m", Scope::Read));
        assert!(!claims.transfer);
        let json = serde_json::to_value(&a).unwrap();
        assert!(json["header"]["Authorization"].is_string());
    }
}
