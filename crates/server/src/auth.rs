//! Access tokens and request authorization.
//!
//! A token is `xet1.<payload>.<mac>`: the payload is base64url JSON `{repo, scope, iat, exp,
//! nonce, id, user, transfer?}` and the MAC is keyed BLAKE3 over `xet1.<payload>` with a key derived from the
//! server secret. Tokens are opaque to clients; they are accepted as `Authorization: Bearer`
//! or as the password of HTTP Basic (any user name), which is how git and git-lfs send what
//! a credential helper returns.
//!
//! Tokens the server hands out itself (Batch answers, the token-refresh route) are
//! *transfer* tokens: they allow the CAS API and basic object transfers only, not git, the
//! Batch API or another refresh, and they never outlive the credential they were minted
//! for. So an expired or revoked credential cannot be extended by refreshing.
//!
//! Every token names its holder: `id` (what `token list` shows and `token revoke` takes) and
//! `user` (the owner of the locks it takes). Transfer tokens carry their parent's, so
//! revoking a token revokes what was minted from it. Tokens made before ids existed are
//! refused with a request to re-create them.

use axum::http::HeaderMap;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine;

use crate::error::ServerError;
use crate::keys::Keys;
use crate::repo_name::RepoName;

const PREFIX: &str = "xet1.";
/// Longest credential considered; anything longer is refused before decoding.
const MAX_TOKEN_LEN: usize = 4096;

/// What a token allows. `Write` includes `Read`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    Read,
    Write,
    /// Write, and force-unlocking other users' locks.
    Admin,
}

impl Scope {
    pub fn parse(s: &str) -> Option<Scope> {
        match s {
            "read" => Some(Scope::Read),
            "write" => Some(Scope::Write),
            "admin" => Some(Scope::Admin),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Read => "read",
            Scope::Write => "write",
            Scope::Admin => "admin",
        }
    }
}

/// The signed contents of a token.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Claims {
    pub repo: String,
    pub scope: Scope,
    pub iat: u64,
    pub exp: u64,
    pub nonce: String,
    /// Minted by the server for transfers (see the module comment). Absent in tokens from
    /// `token create`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub transfer: bool,
    /// The token's id; a transfer token carries its parent's. Empty only in old tokens
    /// (refused) and in transfer tokens minted for anonymous reads.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub id: String,
    /// Who holds it (lock owner name); like `id`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub user: String,
}

/// Who a token belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    pub id: String,
    pub user: String,
}

/// A new random token id (16 hex digits).
pub fn new_token_id() -> String {
    format!("{:016x}", rand::random::<u64>())
}

/// Longest user name a token may carry.
pub const MAX_USER_LEN: usize = 128;

/// Whether `user` can name a token's holder: 1 to 128 printable characters, no control
/// characters (it is shown in lock listings and push rejections).
pub fn valid_user(user: &str) -> bool {
    !user.trim().is_empty() && user.len() <= MAX_USER_LEN && !user.chars().any(char::is_control)
}

pub use crate::time::now_secs;

/// A new token for `repo` with `scope`, valid for `ttl_secs`, with a new id that is also its
/// user name. Returns it and its expiry.
pub fn issue(keys: &Keys, repo: &RepoName, scope: Scope, ttl_secs: u64) -> (String, u64) {
    let id = new_token_id();
    let holder = Holder {
        user: id.clone(),
        id,
    };
    issue_for(keys, repo, scope, ttl_secs, &holder)
}

/// A new token for `repo` with `scope` held by `holder`, valid for `ttl_secs`.
pub fn issue_for(
    keys: &Keys,
    repo: &RepoName,
    scope: Scope,
    ttl_secs: u64,
    holder: &Holder,
) -> (String, u64) {
    let iat = now_secs();
    let exp = iat.saturating_add(ttl_secs);
    sign(keys, repo, scope, iat, exp, false, Some(holder))
}

/// A transfer token for `repo` with `scope`, valid for `ttl_secs` but never past
/// `not_after` (the expiry of the credential it is minted for, if it has one), held by the
/// parent's holder (`None` for anonymous reads).
pub fn issue_transfer(
    keys: &Keys,
    repo: &RepoName,
    scope: Scope,
    ttl_secs: u64,
    not_after: Option<u64>,
    holder: Option<&Holder>,
) -> (String, u64) {
    let iat = now_secs();
    let exp = iat.saturating_add(ttl_secs);
    let exp = not_after.map_or(exp, |cap| exp.min(cap));
    sign(keys, repo, scope, iat, exp, true, holder)
}

fn sign(
    keys: &Keys,
    repo: &RepoName,
    scope: Scope,
    iat: u64,
    exp: u64,
    transfer: bool,
    holder: Option<&Holder>,
) -> (String, u64) {
    let claims = Claims {
        repo: repo.as_str().to_string(),
        scope,
        iat,
        exp,
        nonce: format!("{:016x}", rand::random::<u64>()),
        transfer,
        id: holder.map(|h| h.id.clone()).unwrap_or_default(),
        user: holder.map(|h| h.user.clone()).unwrap_or_default(),
    };
    let payload = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&claims).expect("claims serialize"));
    let signed = format!("{PREFIX}{payload}");
    let mac = URL_SAFE_NO_PAD.encode(keys.token_mac(signed.as_bytes()).as_bytes());
    (format!("{signed}.{mac}"), exp)
}

/// Checks a token's signature and expiry. Every failure is a 401.
pub fn verify(keys: &Keys, token: &str, now: u64) -> Result<Claims, ServerError> {
    let invalid = || ServerError::Unauthorized("invalid access token".into());
    if token.len() > MAX_TOKEN_LEN {
        return Err(invalid());
    }
    let (signed, mac) = token.rsplit_once('.').ok_or_else(invalid)?;
    let payload = signed.strip_prefix(PREFIX).ok_or_else(invalid)?;
    let mac: [u8; 32] = URL_SAFE_NO_PAD
        .decode(mac)
        .ok()
        .and_then(|m| m.try_into().ok())
        .ok_or_else(invalid)?;
    // blake3::Hash compares in constant time.
    if keys.token_mac(signed.as_bytes()) != blake3::Hash::from(mac) {
        return Err(invalid());
    }
    let json = URL_SAFE_NO_PAD.decode(payload).map_err(|_| invalid())?;
    let claims: Claims = serde_json::from_slice(&json).map_err(|_| invalid())?;
    if !claims.transfer && (claims.id.is_empty() || claims.user.is_empty()) {
        return Err(ServerError::Unauthorized(
            "this access token was made by an older git-xet server (tokens now carry an id and a user name): re-create it with `git xet server token create`".into(),
        ));
    }
    if claims.exp <= now {
        return Err(ServerError::Unauthorized(
            "access token expired; get a new one (git-lfs does this on its own, or run `git xet server token create`)".into(),
        ));
    }
    Ok(claims)
}

/// The credential a request carries: a Bearer token, or the password of HTTP Basic.
pub fn credential(headers: &HeaderMap) -> Option<String> {
    let value = headers
        .get(axum::http::header::AUTHORIZATION)?
        .to_str()
        .ok()?
        .trim();
    let (kind, rest) = value.split_once(' ')?;
    let rest = rest.trim();
    if kind.eq_ignore_ascii_case("bearer") {
        return Some(rest.to_string());
    }
    if kind.eq_ignore_ascii_case("basic") && rest.len() <= MAX_TOKEN_LEN * 2 {
        let decoded = STANDARD.decode(rest).ok()?;
        let text = String::from_utf8(decoded).ok()?;
        let (_user, password) = text.split_once(':')?;
        return Some(password.to_string());
    }
    None
}

/// Who is asking, once authorized.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Access {
    pub repo: RepoName,
    pub scope: Scope,
    /// Allowed without a credential because of `--anonymous-read`.
    pub anonymous: bool,
    /// When the credential expires (`None` for anonymous access).
    pub exp: Option<u64>,
    /// Whose credential it is (`None` for anonymous access and anonymous transfer tokens).
    pub holder: Option<Holder>,
}

impl Access {
    /// The holder's user name, if known.
    pub fn user(&self) -> Option<&str> {
        self.holder.as_ref().map(|h| h.user.as_str())
    }
}

/// Which tokens a route accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accepts {
    /// Tokens from `token create` only: git, the Batch API, token refresh.
    UserTokens,
    /// Also the server's transfer tokens: the CAS API, basic object transfers, verify.
    TransferTokens,
}

/// Authorizes a request for `need` on `repo` (or, for CAS routes, on the token's own
/// repository when `repo` is `None`). 401 without a valid token, 403 for the wrong
/// repository or too small a scope. Signature, expiry, repository and scope only: handlers go
/// through `AppState::authorize_*`, which add the revocation check, so that no route can
/// forget it.
pub(crate) fn authorize(
    keys: &Keys,
    headers: &HeaderMap,
    repo: Option<&RepoName>,
    need: Scope,
    anonymous_read: bool,
    accepts: Accepts,
) -> Result<Access, ServerError> {
    let Some(token) = credential(headers) else {
        if let (Some(repo), Scope::Read, true) = (repo, need, anonymous_read) {
            return Ok(Access {
                repo: repo.clone(),
                scope: Scope::Read,
                anonymous: true,
                exp: None,
                holder: None,
            });
        }
        return Err(ServerError::Unauthorized(
            "authentication required: send a token from `git xet server token create` as a Bearer token or as the HTTP Basic password".into(),
        ));
    };
    let claims = verify(keys, &token, now_secs())?;
    if claims.transfer && accepts == Accepts::UserTokens {
        return Err(ServerError::Forbidden(
            "this token was handed out for LFS/XET transfers only; use the token from `git xet server token create` (your credential helper's password)".into(),
        ));
    }
    let token_repo = RepoName::parse(&claims.repo)
        .map_err(|_| ServerError::Unauthorized("invalid access token".into()))?;
    if let Some(repo) = repo {
        if &token_repo != repo {
            return Err(ServerError::Forbidden(format!(
                "this token is for repository {token_repo}, not {repo}"
            )));
        }
    }
    if claims.scope < need {
        return Err(ServerError::Forbidden(format!(
            "this token only allows {} access; {} access is needed",
            claims.scope.as_str(),
            need.as_str()
        )));
    }
    Ok(Access {
        repo: token_repo,
        scope: claims.scope,
        anonymous: false,
        exp: Some(claims.exp),
        holder: (!claims.id.is_empty()).then_some(Holder {
            id: claims.id,
            user: claims.user,
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys() -> Keys {
        Keys::from_secret(&[7; 32])
    }

    fn repo(s: &str) -> RepoName {
        RepoName::parse(s).unwrap()
    }

    #[test]
    fn issued_tokens_verify_and_carry_claims() {
        let (token, exp) = issue(&keys(), &repo("org/m"), Scope::Write, 60);
        let claims = verify(&keys(), &token, now_secs()).unwrap();
        assert_eq!(
            (claims.repo.as_str(), claims.scope, claims.exp),
            ("org/m", Scope::Write, exp)
        );
    }

    #[test]
    fn tampered_foreign_and_expired_tokens_are_refused() {
        let (token, exp) = issue(&keys(), &repo("org/m"), Scope::Read, 60);
        let other = Keys::from_secret(&[8; 32]);
        assert!(matches!(
            verify(&other, &token, now_secs()),
            Err(ServerError::Unauthorized(_))
        ));
        let mut bytes = token.clone().into_bytes();
        bytes[10] ^= 1;
        let tampered = String::from_utf8(bytes).unwrap();
        assert!(verify(&keys(), &tampered, now_secs()).is_err());
        assert!(verify(&keys(), &token, exp).is_err(), "expired at exp");
        assert!(verify(&keys(), "garbage", 0).is_err());
    }

    const U: Accepts = Accepts::UserTokens;

    #[test]
    fn transfer_tokens_are_capped_by_their_parent_and_refused_where_users_are_needed() {
        let parent_exp = now_secs() + 20;
        let (token, exp) = issue_transfer(
            &keys(),
            &repo("org/m"),
            Scope::Write,
            3600,
            Some(parent_exp),
            None,
        );
        assert_eq!(exp, parent_exp);
        let claims = verify(&keys(), &token, now_secs()).unwrap();
        assert!(claims.transfer);
        let mut headers = HeaderMap::new();
        headers.insert("authorization", format!("Bearer {token}").parse().unwrap());
        let r = Some(&repo("org/m"));
        assert!(matches!(
            authorize(&keys(), &headers, r, Scope::Read, false, U),
            Err(ServerError::Forbidden(_))
        ));
        let ok = authorize(
            &keys(),
            &headers,
            r,
            Scope::Write,
            false,
            Accepts::TransferTokens,
        );
        assert_eq!(ok.unwrap().exp, Some(parent_exp));
        let (_, uncapped) = issue_transfer(&keys(), &repo("org/m"), Scope::Read, 60, None, None);
        assert!(uncapped <= now_secs() + 60);
    }

    #[test]
    fn scopes_and_repositories_are_enforced() {
        let (token, _) = issue(&keys(), &repo("org/m"), Scope::Read, 60);
        let mut headers = HeaderMap::new();
        headers.insert("authorization", format!("Bearer {token}").parse().unwrap());
        assert!(authorize(
            &keys(),
            &headers,
            Some(&repo("org/m")),
            Scope::Read,
            false,
            U
        )
        .is_ok());
        let wrong_scope = authorize(
            &keys(),
            &headers,
            Some(&repo("org/m")),
            Scope::Write,
            false,
            U,
        );
        assert!(matches!(wrong_scope, Err(ServerError::Forbidden(_))));
        let wrong_repo = authorize(
            &keys(),
            &headers,
            Some(&repo("org/x")),
            Scope::Read,
            false,
            U,
        );
        assert!(matches!(wrong_repo, Err(ServerError::Forbidden(_))));
        let basic = STANDARD.encode(format!("anyone:{token}"));
        headers.insert("authorization", format!("Basic {basic}").parse().unwrap());
        assert!(authorize(&keys(), &headers, None, Scope::Read, false, U).is_ok());
        let none = HeaderMap::new();
        assert!(matches!(
            authorize(&keys(), &none, None, Scope::Read, true, U),
            Err(ServerError::Unauthorized(_))
        ));
        assert!(
            authorize(&keys(), &none, Some(&repo("a")), Scope::Read, true, U)
                .unwrap()
                .anonymous
        );
        assert!(authorize(&keys(), &none, Some(&repo("a")), Scope::Write, true, U).is_err());
    }

    #[test]
    fn tokens_carry_their_holder_to_what_is_minted_from_them() {
        let alice = Holder {
            id: "t1".into(),
            user: "alice".into(),
        };
        let (token, exp) = issue_for(&keys(), &repo("org/m"), Scope::Admin, 60, &alice);
        let mut headers = HeaderMap::new();
        headers.insert("authorization", format!("Bearer {token}").parse().unwrap());
        let access = authorize(&keys(), &headers, None, Scope::Write, false, U).unwrap();
        assert_eq!(
            (access.holder.as_ref(), access.scope),
            (Some(&alice), Scope::Admin)
        );
        assert_eq!(access.user(), Some("alice"));
        let (child, _) = issue_transfer(
            &keys(),
            &repo("org/m"),
            Scope::Read,
            60,
            Some(exp),
            access.holder.as_ref(),
        );
        let claims = verify(&keys(), &child, now_secs()).unwrap();
        assert_eq!((claims.id.as_str(), claims.user.as_str()), ("t1", "alice"));
        let (default, _) = issue(&keys(), &repo("org/m"), Scope::Read, 60);
        let claims = verify(&keys(), &default, now_secs()).unwrap();
        assert_eq!(claims.user, claims.id, "the user defaults to the id");
        assert!(Scope::Admin > Scope::Write && Scope::parse("admin") == Some(Scope::Admin));
    }

    #[test]
    fn tokens_from_before_ids_are_refused_with_a_request_to_recreate_them() {
        // The payload an older server signed: no id, no user.
        let payload = URL_SAFE_NO_PAD
            .encode(br#"{"repo":"org/m","scope":"write","iat":1,"exp":99999999999,"nonce":"00"}"#);
        let signed = format!("{PREFIX}{payload}");
        let mac = URL_SAFE_NO_PAD.encode(keys().token_mac(signed.as_bytes()).as_bytes());
        match verify(&keys(), &format!("{signed}.{mac}"), now_secs()) {
            Err(ServerError::Unauthorized(m)) => assert!(m.contains("re-create"), "{m}"),
            other => panic!("old token accepted or wrongly refused: {other:?}"),
        }
        assert!(valid_user("Jane Doe") && !valid_user("") && !valid_user("a\nb"));
        assert!(!valid_user(&"x".repeat(MAX_USER_LEN + 1)));
    }
}
