//! Access tokens and request authorization.
//!
//! A token is `xet1.<payload>.<mac>`: the payload is base64url JSON `{repo, scope, iat, exp,
//! nonce, id, user, transfer?, rules?}` and the MAC is keyed BLAKE3 over `xet1.<payload>` with a key derived from the
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
//!
//! A token grants one repository (`repo` and `scope`, the only kind before rules existed, so
//! such tokens still verify) or, with `rules`, up to [`MAX_RULES`] rules of the language the
//! ssh shell speaks (rules.rs: `org/*:write`, `org/name:read`); such a token has an
//! empty `repo`, which servers from before rules refuse as invalid rather than misread.

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine;
use http::HeaderMap;

use crate::error::AuthError;
use crate::keys::Keys;
use crate::rules::{Rule, RuleSet};
use git_xet_index::RepoName;

const PREFIX: &str = "xet1.";
/// Longest credential considered; anything longer is refused before decoding.
const MAX_TOKEN_LEN: usize = 4096;
/// Most rules one token carries (each is at most 256 bytes; the token stays under
/// [`MAX_TOKEN_LEN`] for ordinary names, which `issue_rules` checks).
pub const MAX_RULES: usize = 16;

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
    /// Several repositories or whole organizations (see the module comment); empty for a
    /// token of one repository.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<String>,
}

impl Claims {
    /// What the token grants: its rules, or its one repository with its scope.
    pub fn rule_set(&self) -> Result<RuleSet, AuthError> {
        let invalid = || AuthError::Unauthenticated("invalid access token".into());
        if self.rules.is_empty() {
            let repo = RepoName::parse(&self.repo).map_err(|_| invalid())?;
            return Ok(RuleSet::new(vec![Rule::repo(&repo, self.scope)]));
        }
        if self.rules.len() > MAX_RULES {
            return Err(invalid());
        }
        let rules = self
            .rules
            .iter()
            .map(|spec| Rule::parse(spec, Scope::Read, Scope::Admin).map_err(|_| invalid()))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(RuleSet::new(rules))
    }
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

use git_xet_io::time::now_secs;

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

/// A new token granting `rules` (1 to [`MAX_RULES`]) held by `holder`, valid for `ttl_secs`.
/// One rule for one repository makes the same token as [`issue_for`]. Errors say what to
/// change when there are too many rules or the token would be too long.
pub fn issue_rules(
    keys: &Keys,
    rules: &[Rule],
    ttl_secs: u64,
    holder: &Holder,
) -> Result<(String, u64), String> {
    if let [rule] = rules {
        if let Some(repo) = rule.single_repo() {
            return Ok(issue_for(
                keys,
                repo,
                rule.scope_granted(),
                ttl_secs,
                holder,
            ));
        }
    }
    if rules.is_empty() || rules.len() > MAX_RULES {
        return Err(format!(
            "a token carries 1 to {MAX_RULES} rules, not {}",
            rules.len()
        ));
    }
    let iat = now_secs();
    let claims = Claims {
        repo: String::new(),
        scope: rules
            .iter()
            .map(Rule::scope_granted)
            .max()
            .unwrap_or(Scope::Read),
        iat,
        exp: iat.saturating_add(ttl_secs),
        nonce: format!("{:016x}", rand::random::<u64>()),
        transfer: false,
        id: holder.id.clone(),
        user: holder.user.clone(),
        rules: rules.iter().map(Rule::spec).collect(),
    };
    let token = seal(keys, &claims);
    if token.len() > MAX_TOKEN_LEN {
        return Err(format!(
            "the token would be {} bytes, over the {MAX_TOKEN_LEN} a server accepts: use fewer rules (an `org/*` rule covers a whole organization)",
            token.len()
        ));
    }
    Ok((token, claims.exp))
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
        rules: Vec::new(),
    };
    (seal(keys, &claims), exp)
}

/// The token text of `claims`: payload and MAC.
fn seal(keys: &Keys, claims: &Claims) -> String {
    let payload = URL_SAFE_NO_PAD.encode(serde_json::to_vec(claims).expect("claims serialize"));
    let signed = format!("{PREFIX}{payload}");
    let mac = URL_SAFE_NO_PAD.encode(keys.token_mac(signed.as_bytes()).as_bytes());
    format!("{signed}.{mac}")
}

/// Checks a token's signature and expiry. Every failure is a 401.
pub fn verify(keys: &Keys, token: &str, now: u64) -> Result<Claims, AuthError> {
    let invalid = || AuthError::Unauthenticated("invalid access token".into());
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
        return Err(AuthError::Unauthenticated(
            "this access token was made by an older git-xet server (tokens now carry an id and a user name): re-create it with `git xet server token create`".into(),
        ));
    }
    if claims.exp <= now {
        return Err(AuthError::Unauthenticated(
            "access token expired; get a new one (git-lfs does this on its own, or run `git xet server token create`)".into(),
        ));
    }
    Ok(claims)
}

/// The credential a request carries: a Bearer token, or the password of HTTP Basic.
pub fn credential(headers: &HeaderMap) -> Option<String> {
    let value = headers
        .get(http::header::AUTHORIZATION)?
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
    /// Everything the credential grants (empty for anonymous access).
    pub rules: RuleSet,
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

/// A credential that verified: what it grants, until when, to whom.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    pub rules: RuleSet,
    pub exp: u64,
    pub holder: Option<Holder>,
}

/// Verifies one of this server's tokens for a route that `accepts` it.
pub fn verify_token(keys: &Keys, token: &str, accepts: Accepts) -> Result<Verified, AuthError> {
    let claims = verify(keys, token, now_secs())?;
    if claims.transfer && accepts == Accepts::UserTokens {
        return Err(AuthError::Forbidden(
            "this token was handed out for LFS/XET transfers only; use the token from `git xet server token create` (your credential helper's password)".into(),
        ));
    }
    Ok(Verified {
        rules: claims.rule_set()?,
        exp: claims.exp,
        holder: (!claims.id.is_empty()).then_some(Holder {
            id: claims.id,
            user: claims.user,
        }),
    })
}

/// The credential a request must carry, as refused when it carries none.
pub fn required() -> AuthError {
    AuthError::Unauthenticated(
        "authentication required: send a token from `git xet server token create` (or your identity provider's, where the server accepts one) as a Bearer token or as the HTTP Basic password".into(),
    )
}

/// Authorizes a request for `need` on `repo` (or, for CAS routes, on the token's own
/// repository when `repo` is `None`). 401 without a valid token, 404 for a repository the
/// token does not reach, 403 for too small a scope. Signature, expiry, repository and scope only: handlers go
/// through `AppState::authorize_*`, which add the revocation check, so that no route can
/// forget it.
#[cfg(test)]
pub fn authorize(
    keys: &Keys,
    headers: &HeaderMap,
    repo: Option<&RepoName>,
    need: Scope,
    anonymous_read: bool,
    accepts: Accepts,
) -> Result<Access, AuthError> {
    let verify = |token: &str| verify_token(keys, token, accepts);
    authorize_with(headers, repo, need, anonymous_read, &verify)
}

/// [`authorize`] with the credential verified by `verify` (tokens, or JWTs too).
pub fn authorize_with(
    headers: &HeaderMap,
    repo: Option<&RepoName>,
    need: Scope,
    anonymous_read: bool,
    verify: &dyn Fn(&str) -> Result<Verified, AuthError>,
) -> Result<Access, AuthError> {
    let Some(token) = credential(headers) else {
        if let (Some(repo), Scope::Read, true) = (repo, need, anonymous_read) {
            return Ok(Access {
                repo: repo.clone(),
                scope: Scope::Read,
                anonymous: true,
                exp: None,
                holder: None,
                rules: RuleSet::default(),
            });
        }
        return Err(required());
    };
    let Verified { rules, exp, holder } = verify(&token)?;
    let repo = match repo {
        Some(repo) => repo.clone(),
        // The CAS API acts on the credential's one repository.
        None => rules.only_repo().cloned().ok_or_else(|| {
            AuthError::Forbidden(format!(
                "this credential grants {}: the CAS API needs a token for one repository (the transfer token of a Batch answer, which git-lfs uses on its own)",
                rules.describe()
            ))
        })?,
    };
    if let Some(why) = rules.refusal(&repo, need) {
        let why = format!("this credential has {why}");
        // A repository the credential does not reach at all is not found, whether it exists
        // or not (a 403 would confirm that it does); too small a scope is forbidden.
        return Err(match rules.scope(&repo) {
            None => AuthError::NotReached(why),
            Some(_) => AuthError::Forbidden(why),
        });
    }
    Ok(Access {
        scope: rules.scope(&repo).unwrap_or(need),
        repo,
        anonymous: false,
        exp: Some(exp),
        holder,
        rules,
    })
}

#[cfg(test)]
#[path = "auth_tests.rs"]
mod tests;
