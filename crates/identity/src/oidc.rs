//! OpenID Connect: JWTs from an identity provider (`--oidc-issuer`, `--oidc-audience`),
//! accepted as a Bearer token or as the HTTP Basic password, verified against the issuer's
//! JWKS (found through `/.well-known/openid-configuration`, cached, fetched again for an
//! unknown `kid`, at most every [`MIN_REFETCH`]), `exp`/`nbf`/`aud`/`iss` checked. Only
//! asymmetric algorithms are accepted: `alg: none` does not even parse, and HMAC is refused
//! outright (an HS256 token "signed" with the issuer's public key must not pass). What the
//! holder may do comes from the policy file (policy.rs).

use std::sync::Mutex;
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};

use crate::auth::{Holder, Verified, MAX_RULES};
use crate::error::AuthError;
use crate::policy::{PolicyError, PolicyFile};
use crate::rules::RuleSet;

/// An unknown `kid` fetches the JWKS again at most this often (a flood of forged kids costs
/// the issuer one request per period).
pub const MIN_REFETCH: Duration = Duration::from_secs(5);
/// Keys are fetched again after this long even when every `kid` is known.
const MAX_AGE: Duration = Duration::from_secs(3600);
/// Accepted clock difference with the issuer, in seconds.
const LEEWAY: u64 = 30;
/// Largest discovery document or JWKS read.
const MAX_DOCUMENT: usize = 1 << 20;
/// Longest JWT considered.
const MAX_JWT_LEN: usize = 16 * 1024;

/// Settings from the command line.
#[derive(Debug, Clone)]
pub struct OidcSettings {
    /// The issuer URL, exactly as tokens' `iss` says it.
    pub issuer: String,
    pub audience: String,
    /// The claim whose values `group:` lines of the policy match.
    pub claim: String,
    pub policy: std::path::PathBuf,
}

/// Why an issuer URL is refused.
pub fn check_issuer(url: &str) -> Result<(), String> {
    let parsed = reqwest::Url::parse(url).map_err(|e| format!("--oidc-issuer {url:?}: {e}"))?;
    let host = parsed.host_str().unwrap_or("");
    let ip = host.trim_start_matches('[').trim_end_matches(']');
    let loopback = host == "localhost"
        || ip
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    match parsed.scheme() {
        "https" => Ok(()),
        "http" if loopback => Ok(()),
        _ => Err(format!(
            "--oidc-issuer {url:?}: use https (plain http only on a loopback address, for tests)"
        )),
    }
}

pub struct Oidc {
    settings: OidcSettings,
    policy: PolicyFile,
    http: reqwest::Client,
    keys: Mutex<Keys>,
}

impl std::fmt::Debug for Oidc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Oidc")
            .field("settings", &self.settings)
            .finish()
    }
}

#[derive(Default)]
struct Keys {
    set: Option<JwkSet>,
    fetched: Option<Instant>,
}

/// Whether a credential looks like a JWT rather than one of the server's own tokens.
pub fn looks_like_jwt(credential: &str) -> bool {
    credential.starts_with("eyJ") && credential.split('.').count() == 3
}

/// Why OIDC cannot be set up as configured (found at start, before serving).
#[derive(Debug, thiserror::Error)]
pub enum OidcSetupError {
    /// The issuer URL cannot be one (not https, say).
    #[error("{0}")]
    Issuer(String),
    /// The policy file cannot be read or has a bad line.
    #[error(transparent)]
    Policy(#[from] PolicyError),
    /// The HTTP client for the issuer's keys cannot be built (TLS roots, say).
    #[error("the HTTP client for the OIDC issuer: {0}")]
    Http(#[from] reqwest::Error),
}

impl Oidc {
    pub fn new(settings: OidcSettings) -> Result<Oidc, OidcSetupError> {
        check_issuer(&settings.issuer).map_err(OidcSetupError::Issuer)?;
        let policy = PolicyFile::open(&settings.policy)?;
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()?;
        Ok(Oidc {
            settings,
            policy,
            http,
            keys: Mutex::new(Keys::default()),
        })
    }

    /// Reads the policy file again now (SIGHUP).
    pub fn reload_policy(&self) {
        self.policy.reload();
    }

    /// Verifies a JWT and maps its holder to rules. Every failure is a 401 saying why,
    /// except an identity the policy gives nothing (403).
    pub fn verify(&self, jwt: &str) -> Result<Verified, AuthError> {
        let refuse = |why: String| AuthError::Unauthenticated(format!("OIDC token refused: {why}"));
        if jwt.len() > MAX_JWT_LEN {
            return Err(refuse("too long".into()));
        }
        let header = jsonwebtoken::decode_header(jwt).map_err(|e| {
            refuse(format!(
                "malformed header ({e}); `alg: none` is never accepted"
            ))
        })?;
        let alg = header.alg;
        if matches!(alg, Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512) {
            return Err(refuse(format!(
                "{alg:?} (HMAC) is not accepted: the issuer must sign with its private key"
            )));
        }
        let kid = header.kid.unwrap_or_default();
        let key = self.key_for(&kid).map_err(refuse)?;
        let mut validation = Validation::new(alg);
        validation.leeway = LEEWAY;
        validation.validate_nbf = true;
        validation.set_audience(&[&self.settings.audience]);
        validation.set_issuer(&[&self.settings.issuer]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        let data = jsonwebtoken::decode::<serde_json::Map<String, serde_json::Value>>(
            jwt,
            &key,
            &validation,
        )
        .map_err(|e| refuse(e.to_string()))?;
        let claims = data.claims;
        let sub = claims
            .get("sub")
            .and_then(|v| v.as_str())
            .filter(|s| crate::auth::valid_user(s))
            .ok_or_else(|| refuse("no usable `sub` claim".into()))?
            .to_string();
        let exp = claims.get("exp").and_then(|v| v.as_u64()).unwrap_or(0);
        let groups: Vec<String> = match claims.get(&self.settings.claim) {
            Some(serde_json::Value::String(s)) => vec![s.clone()],
            Some(serde_json::Value::Array(values)) => values
                .iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect(),
            _ => Vec::new(),
        };
        let mut rules = self.policy.current().rules_for(&sub, &groups);
        rules.truncate(MAX_RULES * 4);
        if rules.is_empty() {
            return Err(AuthError::Forbidden(format!(
                "OIDC identity {sub} is given no repository by the server's policy file (no `sub:{sub}` line, and no `group:` line for its {} claim)",
                self.settings.claim
            )));
        }
        Ok(Verified {
            rules: RuleSet::new(rules),
            exp,
            holder: Some(Holder {
                id: format!("oidc:{sub}"),
                user: sub,
            }),
        })
    }

    /// The key `kid` names, fetching the JWKS when it is not cached, too old, or (at most
    /// every MIN_REFETCH) lacks `kid`.
    fn key_for(&self, kid: &str) -> Result<DecodingKey, String> {
        let fetch_now = {
            let mut keys = self.keys.lock().expect("oidc keys");
            let now = git_xet_io::time::instant_now();
            let age = keys.fetched.map(|t| now.saturating_duration_since(t));
            let known = keys.set.as_ref().and_then(|s| s.find(kid)).is_some();
            let stale = age.is_none_or(|a| a >= MAX_AGE);
            let may_refetch = age.is_none_or(|a| a >= MIN_REFETCH);
            let fetch_now = stale || (!known && may_refetch);
            if fetch_now {
                keys.fetched = Some(now);
            }
            fetch_now
        };
        // Fetched without the lock held: other tokens are verified with the keys already
        // known meanwhile, however slow the issuer is.
        if fetch_now {
            match fetch_blocking(&self.http, &self.settings.issuer) {
                Ok(set) => self.keys.lock().expect("oidc keys").set = Some(set),
                Err(e) => tracing::warn!("fetching the OIDC issuer's keys: {e}"),
            }
        }
        let keys = self.keys.lock().expect("oidc keys");
        let set = keys
            .set
            .as_ref()
            .ok_or("the issuer's keys could not be fetched (see the server's log)")?;
        let jwk = match kid.is_empty() {
            // Without a kid, only a JWKS of one key is unambiguous.
            true if set.keys.len() == 1 => &set.keys[0],
            _ => set
                .find(kid)
                .ok_or_else(|| format!("no key {kid:?} in the issuer's JWKS"))?,
        };
        DecodingKey::from_jwk(jwk).map_err(|e| format!("the issuer's key {kid:?}: {e}"))
    }
}

/// Runs the async fetch from the synchronous authorization path, on the process's one
/// runtime (git_xet_io::runtime).
fn fetch_blocking(http: &reqwest::Client, issuer: &str) -> Result<JwkSet, String> {
    git_xet_io::runtime::wait(fetch(http, issuer))
}

async fn get_json<T: serde::de::DeserializeOwned>(
    http: &reqwest::Client,
    url: &str,
) -> Result<T, String> {
    let response = http
        .get(url)
        .send()
        .await
        .map_err(|e| format!("{url}: {e}"))?;
    if !response.status().is_success() {
        return Err(format!("{url}: {}", response.status()));
    }
    if response
        .content_length()
        .is_some_and(|n| n > MAX_DOCUMENT as u64)
    {
        return Err(format!("{url}: larger than {MAX_DOCUMENT} bytes"));
    }
    let body = response.bytes().await.map_err(|e| format!("{url}: {e}"))?;
    if body.len() > MAX_DOCUMENT {
        return Err(format!("{url}: larger than {MAX_DOCUMENT} bytes"));
    }
    serde_json::from_slice(&body).map_err(|e| format!("{url}: {e}"))
}

/// The issuer's JWKS, through its discovery document.
async fn fetch(http: &reqwest::Client, issuer: &str) -> Result<JwkSet, String> {
    #[derive(serde::Deserialize)]
    struct Discovery {
        issuer: String,
        jwks_uri: String,
    }
    let discovery_url = format!(
        "{}/.well-known/openid-configuration",
        issuer.trim_end_matches('/')
    );
    let found: Discovery = get_json(http, &discovery_url).await?;
    if found.issuer != issuer {
        return Err(format!(
            "{discovery_url} names the issuer {:?}, not {issuer:?}",
            found.issuer
        ));
    }
    check_issuer(&found.jwks_uri).map_err(|e| format!("jwks_uri: {e}"))?;
    get_json(http, &found.jwks_uri).await
}
